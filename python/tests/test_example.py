"""The README's Python example and the Python guide's scenario
(docs/python.md, from examples/custom_op.py) run and say what the docs say
they do."""

from __future__ import annotations

import pathlib

from conftest import run_python

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "custom_op.py"


def test_custom_op_example():
    rc, out, err, took = run_python(EXAMPLE.read_text(), timeout=60)
    assert rc == 0, (out, err)
    assert "forward: [11.0, 22.0, 33.0]" in out
    assert "backward: [1.0, 1.0, 1.0] [1.0, 1.0, 1.0]" in out
    assert "forked children ok; parent ops all ran: True" in out
    assert "exiting with" in out


def doc_block(doc: pathlib.Path, after: str) -> str:
    """The first ```python block after `after` in `doc`."""
    text = doc.read_text()
    section = text[text.index(after):]
    block = section[section.index("```python\n") + 10:]
    return block[: block.index("```")]


def test_readme_first_example_runs_and_prints_what_it_says():
    readme = EXAMPLE.parents[2] / "README.md"
    if not readme.exists():  # an installed copy of the tests
        return
    block = doc_block(readme, "## Python")
    rc, out, err, _ = run_python(block, timeout=60)
    assert rc == 0, (out, err)
    assert out.strip() == "60.0 [ 0. 10. 20. 30.]", out


def test_guide_snippet_is_the_example():
    """Every line of the Python guide's scenario is in the example file
    (comments after `#` aside), so the guide shows code that runs."""
    guide = EXAMPLE.parents[2] / "docs" / "python.md"
    if not guide.exists():  # an installed copy of the tests
        return
    block = doc_block(guide, "## The custom-operator scenario")
    example = {line.split("  # ")[0].strip() for line in EXAMPLE.read_text().splitlines()}
    missing = []
    for line in block.splitlines():
        code = line.split("  # ")[0].strip()
        if code and code not in example:
            missing.append(code)
    assert not missing, missing
