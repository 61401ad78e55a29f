#!/usr/bin/env bash
# test-python-versions.sh — the abi3 wheel on every CPython it claims:
# builds the wheel once (maturin, release), then for each interpreter found
# (python3.9 .. python3.13 on PATH, or pyenv's) makes a fresh venv, installs
# the wheel with numpy, pytest and pytest-timeout, and runs the pytest suite.
# Not part of CI (which runs scripts/test-python.sh on python3.11): a
# separate, documented command.
#
#   bash scripts/test-python-versions.sh            every version found
#   bash scripts/test-python-versions.sh 3.9 3.13   just these
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
VERSIONS=("$@")
[ ${#VERSIONS[@]} -gt 0 ] || VERSIONS=(3.9 3.10 3.11 3.12 3.13)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target/python}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
WORK="$ROOT/target/python-versions"
rm -rf "$WORK" && mkdir -p "$WORK/wheels"

find_python() {
    local v="$1" p
    for p in "$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$v".*/bin/python 2>/dev/null | tail -1)" \
        "$(command -v "python$v" 2>/dev/null || true)"; do
        # A pyenv shim exists for every version but may refuse to run.
        if [ -n "$p" ] && "$p" -c '' 2>/dev/null; then
            echo "$p"
            return
        fi
    done
}

BUILD_PY="$(find_python 3.11)"
[ -n "$BUILD_PY" ] || BUILD_PY=python3
"$BUILD_PY" -m venv "$WORK/build"
"$WORK/build/bin/pip" install -q "maturin>=1.5,<2"
"$WORK/build/bin/maturin" build --release -m python/Cargo.toml -o "$WORK/wheels"
WHEEL="$(ls "$WORK"/wheels/*.whl)"
echo "test-python-versions: $(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB)"

declare -A RESULT
for v in "${VERSIONS[@]}"; do
    py="$(find_python "$v")"
    if [ -z "$py" ]; then
        RESULT[$v]="not found"
        continue
    fi
    "$py" -m venv "$WORK/venv$v"
    "$WORK/venv$v/bin/pip" install -q "$WHEEL" pytest pytest-timeout
    if "$WORK/venv$v/bin/python" -m pytest -c python/pyproject.toml --rootdir python \
        -p no:cacheprovider -q python/tests; then
        RESULT[$v]="passed"
    else
        RESULT[$v]="FAILED"
    fi
done
status=0
for v in "${VERSIONS[@]}"; do
    echo "test-python-versions: CPython $v: ${RESULT[$v]}"
    [ "${RESULT[$v]}" != "FAILED" ] || status=1
done
exit $status
