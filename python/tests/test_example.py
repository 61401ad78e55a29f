"""The README's example (examples/custom_op.py) runs and says what the
README says it does."""

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


def readme_block(readme: pathlib.Path, after: str) -> str:
    """The first ```python block after `after` in the README's Python section."""
    text = readme.read_text()
    section = text[text.index("## Python"):]
    section = section[section.index(after):]
    block = section[section.index("```python\n") + 10:]
    return block[: block.index("```")]


def test_readme_first_example_runs_and_prints_what_it_says():
    readme = EXAMPLE.parents[2] / "README.md"
    if not readme.exists():  # an installed copy of the tests
        return
    block = readme_block(readme, "## Python")
    rc, out, err, _ = run_python(block, timeout=60)
    assert rc == 0, (out, err)
    assert out.strip() == "60.0 [ 0. 10. 20. 30.]", out


def test_readme_snippet_is_the_example():
    """Every line of the README's Python example is in the example file
    (comments after `#` aside), so the README shows code that runs."""
    readme = EXAMPLE.parents[2] / "README.md"
    if not readme.exists():  # an installed copy of the tests
        return
    block = readme_block(readme, "The seed's scenario")
    example = {line.split("  # ")[0].strip() for line in EXAMPLE.read_text().splitlines()}
    missing = []
    for line in block.splitlines():
        code = line.split("  # ")[0].strip()
        if code and code not in example:
            missing.append(code)
    assert not missing, missing
