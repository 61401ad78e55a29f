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

# shellcheck source=lib/demo-extension.sh
source scripts/lib/demo-extension.sh
demo_extension_stage rayon-extension "numpy" "$@"
