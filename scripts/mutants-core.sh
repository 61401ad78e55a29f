#!/usr/bin/env bash
# scripts/mutants-core.sh — mutation testing of forksafe-core in two passes
# (FORK-SAFETY.md, "Mutation testing of forksafe-core").
#
#   pass 1 (plain build): core's unit tests, integration tests (core/tests)
#          and doctests, as configured in .cargo/mutants.toml.
#   pass 2 (--cfg shuttle): the shuttle models and negative controls
#          (models/tests/shuttle_*.rs) at FORKSAFE_SHUTTLE_ITERS schedules per
#          model and scheduler, on the mutants pass 1 missed only
#          (cargo-mutants --iterate; pass 1's timeouts are carried over as
#          detected and not re-run).
#
# Usage:
#   bash scripts/mutants-core.sh [cargo-mutants args]
#   bash scripts/mutants-core.sh --file core/src/gate.rs --file core/src/domain.rs
#   bash scripts/mutants-core.sh --shard 1/4
#
# Environment: MUTANTS_OUT (default mutants.out.core), MUTANTS_JOBS (default
# 2), FORKSAFE_SHUTTLE_ITERS (default 200 here; the model suite's default is
# 3000), MUTANTS_SHUTTLE_TIMEOUT (seconds per mutant, default 240),
# MUTANTS_PLAIN_OPT_LEVEL and MUTANTS_SHUTTLE_OPT_LEVEL (each pass's test
# opt-level; default 0 and 1),
# MUTANTS_PASSES ("plain shuttle", the default, or one of them; a
# shuttle pass alone iterates on an earlier plain pass in the same
# MUTANTS_OUT).
#
# loom is not a pass: one loom build of the models takes minutes on two
# cores and the default loom run about 1.5 min more, per mutant.
#
# Prints the table (total, caught, missed, unviable, timeouts, kill rate)
# and lists the surviving mutants. Exit status: 0 when it ran, whatever the
# score; 1 when cargo-mutants itself failed (for example a failing baseline).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

out="${MUTANTS_OUT:-mutants.out.core}"
jobs="${MUTANTS_JOBS:-2}"
iters="${FORKSAFE_SHUTTLE_ITERS:-200}"
passes="${MUTANTS_PASSES:-plain shuttle}"
# cargo-mutants creates its output folder but not that folder's parent.
mkdir -p "$out"

# cargo-mutants exit codes: 0 all caught, 2 some missed, 3 some timed out.
run_mutants() {
    local rc=0
    "$@" || rc=$?
    case "$rc" in
    0 | 2 | 3) return 0 ;;
    *)
        echo "mutants-core: cargo-mutants failed (exit $rc)" >&2
        return 1
        ;;
    esac
}

# Lines in a result file; 0 when it is missing or empty (grep -c prints 0
# and fails then, so its status is ignored rather than answered with a
# second 0).
count() {
    if [ -f "$1" ]; then
        grep -c . "$1" || true
    else
        echo 0
    fi
}

if [[ " $passes " == *" plain "* ]]; then
    echo "== pass 1: core's tests, plain build"
    # Unoptimised: core is generic, so each mutant recompiles the whole
    # engine into the test binary, which at the workspace's test opt-level
    # (2, for loom) takes about 5 times longer than the tests then run.
    CARGO_PROFILE_TEST_OPT_LEVEL="${MUTANTS_PLAIN_OPT_LEVEL:-0}" CARGO_PROFILE_TEST_DEBUG=0 \
        run_mutants cargo mutants -j "$jobs" -o "$out/plain" "$@"
fi

if [[ " $passes " == *" shuttle "* ]]; then
    echo "== pass 2: shuttle models (FORKSAFE_SHUTTLE_ITERS=$iters) on pass 1's survivors"
    p1="$out/plain/mutants.out"
    mkdir -p "$out/shuttle/mutants.out"
    cat "$p1/caught.txt" "$p1/unviable.txt" "$p1/timeout.txt" \
        >"$out/shuttle/mutants.out/previously_caught.txt"
    # Only the previously-caught list is read back; drop a stale result.
    rm -f "$out/shuttle/mutants.out/"{caught,unviable,missed,timeout}.txt
    if [ "$(count "$p1/missed.txt")" -eq 0 ]; then
        echo "no survivors: pass 2 skipped"
        : >"$out/shuttle/mutants.out/missed.txt"
    else
        # cargo-mutants' own baseline always tests the mutated package
        # (forksafe-core), whose plain tests do not build under --cfg
        # shuttle; so the unmutated shuttle suite is the baseline, run here,
        # and cargo-mutants skips its own (with an explicit timeout).
        # opt-level 1: builds almost as fast as 0, and the models run about
        # 10 times faster than unoptimised.
        export CARGO_PROFILE_TEST_OPT_LEVEL="${MUTANTS_SHUTTLE_OPT_LEVEL:-1}" CARGO_PROFILE_TEST_DEBUG=0
        RUSTFLAGS="--cfg shuttle" FORKSAFE_SHUTTLE_ITERS="$iters" \
            cargo test -p forksafe-models --target-dir target/mutants-shuttle \
            --test shuttle_invariants --test shuttle_host --test shuttle_fork --test shuttle_controls
        RUSTFLAGS="--cfg shuttle" FORKSAFE_SHUTTLE_ITERS="$iters" \
            run_mutants cargo mutants --iterate -j "$jobs" -o "$out/shuttle" \
            --baseline=skip --timeout "${MUTANTS_SHUTTLE_TIMEOUT:-240}" \
            --test-package forksafe-models \
            --cargo-test-arg=--test=shuttle_invariants \
            --cargo-test-arg=--test=shuttle_host \
            --cargo-test-arg=--test=shuttle_fork \
            --cargo-test-arg=--test=shuttle_controls \
            "$@"
    fi
fi

p1="$out/plain/mutants.out"
p2="$out/shuttle/mutants.out"
caught=$(($(count "$p1/caught.txt") + $(count "$p2/caught.txt")))
unviable=$(($(count "$p1/unviable.txt") + $(count "$p2/unviable.txt")))
timeouts=$(($(count "$p1/timeout.txt") + $(count "$p2/timeout.txt")))
if [ -f "$p2/missed.txt" ]; then
    missed=$(count "$p2/missed.txt")
    survivors="$p2/missed.txt"
else
    missed=$(count "$p1/missed.txt")
    survivors="$p1/missed.txt"
fi
total=$((caught + missed + unviable + timeouts))
viable=$((caught + missed + timeouts))
echo
echo "| mutants | caught | missed | unviable | timeouts | kill rate (caught + timeouts) / viable |"
echo "|---|---|---|---|---|---|"
if [ "$viable" -gt 0 ]; then
    rate=$(awk -v k=$((caught + timeouts)) -v v="$viable" 'BEGIN { printf "%.1f %%", 100 * k / v }')
else
    rate="n/a"
fi
echo "| $total | $caught | $missed | $unviable | $timeouts | $rate |"
echo
echo "surviving mutants ($survivors):"
cat "$survivors" 2>/dev/null || true
