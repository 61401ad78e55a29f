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

# shellcheck source=lib/demo-extension.sh
source scripts/lib/demo-extension.sh
demo_extension_stage tokio-extension "" "$@"
