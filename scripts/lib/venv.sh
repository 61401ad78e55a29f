# venv.sh — sourced by test-python.sh and lib/demo-extension.sh: the
# interpreter their venvs are built from, and a fresh venv with the test
# tools.

export PIP_DISABLE_PIP_VERSION_CHECK=1

# The interpreter to build venvs from: $PYTHON, else python3.11, else
# python3 (CI's is python3.11).
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
    if command -v python3.11 >/dev/null 2>&1; then PY=python3.11; else PY=python3; fi
fi

# fresh_venv VENV PACKAGE...: VENV recreated from $PY, with the packages.
fresh_venv() {
    local venv="$1"
    shift
    rm -rf "$venv"
    "$PY" -m venv "$venv"
    "$venv/bin/python" -m pip install -q "$@"
}
