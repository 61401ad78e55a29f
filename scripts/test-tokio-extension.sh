#!/usr/bin/env bash
# test-tokio-extension.sh — the tokio demo extension's stage
# (docs/extensions.md, "A tokio runtime"): a fresh venv; maturin builds the
# two builds of examples/tokio-extension (a plain static tokio runtime, and
# forksafe-tokio + forksafe-pyo3) as wheels, which pip installs; then its
# pytest suite: the plain build's fork child hangs after the parent used
# the runtime (killed at the test's deadline, asserted as the expected
# failure); the forksafe build passes 100 multiprocessing-fork tasks and 100
# os.fork children with correct results, a fork while another thread is
# inside block_on, an asyncio await in a child, and a clean exit with tasks
# pending; the parent keeps working after its children did I/O.
#
#   bash scripts/test-tokio-extension.sh           the whole stage
#   bash scripts/test-tokio-extension.sh -k plain  extra arguments go to pytest
#
# Environment:
#   PYTHON            the interpreter to build the venv from (default:
#                     python3.11, else python3)
#   FORKSAFE_EXT_VENV where the venv goes (default: target/tokio-ext-venv;
#                     recreated on every run)
#   CARGO_TARGET_DIR  the Rust build dir (default: target/tokio-ext)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

# shellcheck source=lib/venv.sh
source scripts/lib/venv.sh
VENV="${FORKSAFE_EXT_VENV:-$ROOT/target/tokio-ext-venv}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target/tokio-ext}"
DIST="$CARGO_TARGET_DIR/wheels-demo"

echo "test-tokio-extension: $("$PY" --version) -> venv $VENV, cargo target $CARGO_TARGET_DIR"
rm -rf "$DIST"
fresh_venv "$VENV" "maturin>=1.5,<2" "pytest>=7" "pytest-timeout>=2"

start=$SECONDS
for build in plain forksafe; do
    "$VENV/bin/maturin" build --release -q -i "$VENV/bin/python" \
        --manifest-path "examples/tokio-extension/$build/Cargo.toml" -o "$DIST"
done
"$VENV/bin/python" -m pip install -q "$DIST"/*.whl
echo "test-tokio-extension: both builds took $((SECONDS - start))s"

cd examples/tokio-extension
"$VENV/bin/pytest" -p no:cacheprovider -v -rxX --durations=0 tests "$@"
