#!/usr/bin/env bash
# check-downstream-lock.sh — a crate that depends on `forksafe` gets a
# Cargo.lock without the model checkers (loom, shuttle) or what only they
# pull in (tracing-subscriber): forksafe-core declares them optional, and
# only forksafe-models turns them on. Exit 1 naming any that appear.
#
#   bash scripts/check-downstream-lock.sh              the check
#   bash scripts/check-downstream-lock.sh --self-test  the verdict on a lock
#                                                      that lists loom must
#                                                      be a failure
set -euo pipefail

# Prints the model-checker packages a lock file lists.
listed() {
    grep -E '^name = "(loom|shuttle|tracing-subscriber|generator|proptest)"' "$1" || true
}

if [ "${1:-}" = "--self-test" ]; then
    t="$(mktemp)"
    printf '[[package]]\nname = "smallvec"\n\n[[package]]\nname = "loom"\n' >"$t"
    if [ -z "$(listed "$t")" ]; then
        echo "check-downstream-lock --self-test: FAILED: a lock listing loom passed"
        rm -f "$t"
        exit 1
    fi
    printf '[[package]]\nname = "smallvec"\n' >"$t"
    if [ -n "$(listed "$t")" ]; then
        echo "check-downstream-lock --self-test: FAILED: a clean lock failed"
        rm -f "$t"
        exit 1
    fi
    rm -f "$t"
    echo "check-downstream-lock --self-test: ok"
    exit 0
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/src"
cat >"$dir/Cargo.toml" <<TOML
[package]
name = "downstream-check"
version = "0.1.0"
edition = "2021"

[dependencies]
forksafe = { path = "$ROOT/engine" }

[workspace]
TOML
echo 'fn main() {}' >"$dir/src/main.rs"
(cd "$dir" && cargo generate-lockfile -q)
bad=$(listed "$dir/Cargo.lock")
if [ -n "$bad" ]; then
    echo "check-downstream-lock: a user's Cargo.lock would list:"
    echo "$bad"
    exit 1
fi
echo "check-downstream-lock: ok — $(grep -c '^name = ' "$dir/Cargo.lock") packages, none of them a model checker"
