#!/usr/bin/env bash
# test-python.sh — the Python binding's stage: a fresh venv, the package
# installed the way the README says (`pip install ./python`, which builds the
# PyO3 extension with maturin and pulls numpy), mypy on the package's type
# stubs and the examples, then its pytest suite with per-test timings.
#
#   bash scripts/test-python.sh              the whole stage
#   bash scripts/test-python.sh -k fork      extra arguments go to pytest
#
# Environment:
#   PYTHON              the interpreter to build the venv from (default:
#                       python3.11, else python3)
#   FORKSAFE_VENV       where the venv goes (default: target/python-venv;
#                       recreated on every run)
#   CARGO_TARGET_DIR    the Rust build dir (default: target/python, kept
#                       between runs so rebuilds are incremental)
#
# Every test runs under pytest-timeout (python/pyproject.toml: 60 s), and the
# tests that start processes give them their own deadlines: a hang fails.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

# shellcheck source=lib/venv.sh
source scripts/lib/venv.sh
VENV="${FORKSAFE_VENV:-$ROOT/target/python-venv}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target/python}"

echo "test-python: $("$PY" --version) -> venv $VENV, cargo target $CARGO_TARGET_DIR"
fresh_venv "$VENV" "maturin>=1.5,<2" "pytest>=7" "pytest-timeout>=2" "mypy>=1.5" "hypothesis>=6.100"

start=$SECONDS
"$VENV/bin/python" -m pip install -q ./python
echo "test-python: pip install ./python took $((SECONDS - start))s"

# From the repository root, so that `import forksafe` (here and in the
# subprocesses the tests start) is the installed package, not python/forksafe.
"$VENV/bin/python" -I -c 'import forksafe, sys; print("test-python: forksafe from", forksafe.__file__)'
# The type stubs (forksafe/_forksafe.pyi, py.typed) against the package
# and the examples, as a user's type checker sees the installed package.
"$VENV/bin/mypy" --no-incremental -p forksafe
"$VENV/bin/mypy" --no-incremental --strict python/examples/quickstart.py
"$VENV/bin/mypy" --no-incremental python/examples/custom_op.py
echo "test-python: mypy passed"

"$VENV/bin/pytest" -c python/pyproject.toml --rootdir python -p no:cacheprovider \
    -v --durations=0 python/tests "$@"
