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
    assert took < 20


def test_readme_snippet_is_the_example():
    """Every line of the README's Python example is in the example file
    (comments after `#` aside), so the README shows code that runs."""
    readme = EXAMPLE.parents[2] / "README.md"
    if not readme.exists():  # an installed copy of the tests
        return
    text = readme.read_text()
    section = text[text.index("## Python"):]
    block = section[section.index("```python\n") + 10:]
    block = block[: block.index("```")]
    example = {line.split("  # ")[0].strip() for line in EXAMPLE.read_text().splitlines()}
    missing = []
    for line in block.splitlines():
        code = line.split("  # ")[0].strip()
        if code and code not in example:
            missing.append(code)
    assert not missing, missing
