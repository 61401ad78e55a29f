#!/usr/bin/env bash
# scripts/mutants-ci.sh — the CI-sized subset of the mutation run of
# forksafe-core (FORK-SAFETY.md, "Mutation testing"): the plain pass of
# scripts/mutants-core.sh on a few small files, failing if any mutant
# survives that is not a documented equivalent one
# (scripts/mutants-equivalent.txt, each explained in FORK-SAFETY.md).
#
# The full run (every file, both passes) takes hours on two cores; this
# subset takes a few minutes once cargo-mutants is installed (installed
# here if missing: `cargo install cargo-mutants --locked --version 27.1.0`).
#
# Usage: bash scripts/mutants-ci.sh
# Exit status: 0 when every viable mutant of the subset was caught, timed
# out, or is a listed equivalent; 1 otherwise (or when cargo-mutants failed).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

FILES=(
    core/src/lifecycle.rs
    core/src/global.rs
    core/src/trace.rs
    core/src/error.rs
)

if ! cargo mutants --version >/dev/null 2>&1; then
    cargo install cargo-mutants --locked --version 27.1.0
fi

out=target/mutants-ci
rm -rf "$out"
args=()
for f in "${FILES[@]}"; do
    args+=(--file "$f")
done
# 120 s per test run: core's unoptimised tests take about a minute on two
# cores (the unmutated baseline too is held to it), and a mutant that hangs
# still fails within two.
MUTANTS_OUT="$out" MUTANTS_PASSES=plain bash scripts/mutants-core.sh "${args[@]}" --timeout 120

missed="$out/plain/mutants.out/missed.txt"
allowed=scripts/mutants-equivalent.txt
new=$(grep -v -x -F -f <(grep -v '^#' "$allowed" | grep .) "$missed" || true)
if [ -n "$new" ]; then
    echo
    echo "mutants-ci: surviving mutants that are not documented equivalents:"
    echo "$new"
    echo "Kill each with a test or model, or explain it in FORK-SAFETY.md and"
    echo "list it in $allowed."
    exit 1
fi
echo "mutants-ci: every surviving mutant of the subset is a documented equivalent"
