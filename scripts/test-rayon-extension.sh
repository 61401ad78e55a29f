#!/usr/bin/env bash
# test-rayon-extension.sh — the demo extension's stage (README: "Making your
# PyO3 extension fork-safe"): a fresh venv; maturin builds the two builds of
# examples/rayon-extension (plain rayon, and forksafe-rayon + forksafe-pyo3)
# as wheels, which pip installs with numpy; then its pytest suite: the plain
# build's fork child hangs (killed by the test's deadline, asserted as the
# expected failure) and it aborts at exit with a call running; the forksafe
# build passes 100 forks through multiprocessing and 100 through os.fork,
# forks while a thread is inside a parallel call, and exits cleanly.
#
#   bash scripts/test-rayon-extension.sh           the whole stage
#   bash scripts/test-rayon-extension.sh -k plain  extra arguments go to pytest
#
# Environment:
#   PYTHON            the interpreter to build the venv from (default:
#                     python3.11, else python3)
#   FORKSAFE_EXT_VENV where the venv goes (default: target/rayon-ext-venv;
#                     recreated on every run)
#   CARGO_TARGET_DIR  the Rust build dir (default: target/rayon-ext)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

# shellcheck source=lib/venv.sh
source scripts/lib/venv.sh
VENV="${FORKSAFE_EXT_VENV:-$ROOT/target/rayon-ext-venv}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target/rayon-ext}"
DIST="$CARGO_TARGET_DIR/wheels-demo"

echo "test-rayon-extension: $("$PY" --version) -> venv $VENV, cargo target $CARGO_TARGET_DIR"
rm -rf "$DIST"
fresh_venv "$VENV" "maturin>=1.5,<2" "pytest>=7" "pytest-timeout>=2" numpy

start=$SECONDS
for build in plain forksafe; do
    "$VENV/bin/maturin" build --release -q -i "$VENV/bin/python" \
        --manifest-path "examples/rayon-extension/$build/Cargo.toml" -o "$DIST"
done
"$VENV/bin/python" -m pip install -q "$DIST"/*.whl
echo "test-rayon-extension: both builds took $((SECONDS - start))s"

cd examples/rayon-extension
"$VENV/bin/pytest" -p no:cacheprovider -v -rxX --durations=0 tests "$@"
