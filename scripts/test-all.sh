#!/usr/bin/env bash
# test-all.sh — the whole forksafe test suite, the one command the README names.
#
#   bash scripts/test-all.sh                 default run (fits CI: 2 cores)
#   DEEP=1 bash scripts/test-all.sh          deep run: loom preemption bound 3,
#                                            100000 shuttle iterations per model
#   bash scripts/test-all.sh loom shuttle    only the named stages
#
# Stages, in order (each prints a header and its wall time):
#   plain    cargo nextest run --workspace, then cargo test --doc (unit,
#            integration, doc tests,
#                                               real-fork tests; [profile.test]
#                                               is opt-level 2)
#   loom     RUSTFLAGS="--cfg loom" cargo test -p forksafe-models --tests
#              --target-dir target/loom -- --test-threads=2
#            loom models live in models/tests/loom_*.rs, gated #![cfg(loom)].
#   shuttle  RUSTFLAGS="--cfg shuttle" cargo test -p forksafe-models --tests
#              --target-dir target/shuttle
#            shuttle models live in models/tests/shuttle_*.rs, gated #![cfg(shuttle)].
#   demo     cargo run --release -p forksafe --example fork_demo, then
#            --example pipeline (data vars, values out of ops, a failing
#            stage, a panic, a fork with ops queued)
#   python   bash scripts/test-python.sh: a fresh venv, `pip install ./python`
#            (the PyO3 binding, built by maturin into target/python), pytest
#            with per-test timings
#   extension  bash scripts/test-rayon-extension.sh, then
#            scripts/test-tokio-extension.sh: the two demo extensions
#            (examples/rayon-extension, examples/tokio-extension), each
#            built twice by maturin in a fresh venv (plain rayon or a plain
#            static tokio runtime; forksafe-rayon or forksafe-tokio, with
#            forksafe-pyo3), and their pytest suites (the plain build's
#            fork hang, the forksafe build's 100 + 100 forks and clean exit)
#
# Each model build has its own target dir, so the three builds never
# invalidate each other's artefacts.
#
# Environment:
#   LOOM_MAX_PREEMPTIONS    loom's preemption bound (default 2; 3 with DEEP=1).
#                           Read by loom itself.
#   FORKSAFE_SHUTTLE_ITERS  iterations per shuttle model (the models' own
#                           default; 100000 with DEEP=1). Read by the models.
#   DEEP=1                  sets both of the above to their deep values, unless
#                           they are set explicitly.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "${DEEP:-0}" = 1 ]; then
    export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
    export FORKSAFE_SHUTTLE_ITERS="${FORKSAFE_SHUTTLE_ITERS:-100000}"
else
    export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
fi

ALL_STAGES=(plain loom shuttle demo python extension)
if [ "$#" -gt 0 ]; then
    STAGES=("$@")
    for s in "${STAGES[@]}"; do
        case " ${ALL_STAGES[*]} " in
            *" $s "*) ;;
            *) echo "test-all: unknown stage '$s' (stages: ${ALL_STAGES[*]})" >&2; exit 2 ;;
        esac
    done
else
    STAGES=("${ALL_STAGES[@]}")
fi

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fs", b - a }'; }

LOG_DIR="$(mktemp -d)"
SUMMARY=()
stage=""
start=""
# set -e stops the script at the first failing stage; say which.
on_exit() {
    local rc=$?
    rm -rf "$LOG_DIR"
    if [ "$rc" -ne 0 ] && [ -n "$stage" ]; then
        echo >&2
        echo "test-all: FAILED in stage '$stage' (exit $rc) after $(elapsed "$start" "$(now)")" >&2
    fi
}
trap on_exit EXIT

header() {
    echo
    echo "================================================================"
    echo "== test-all: $1"
    echo "================================================================"
}

# Sums the "N passed" of every libtest summary in a log.
passed_in() {
    { grep -Eo 'test result: ok\. [0-9]+ passed' "$1" || true; } | awk '{ n += $4 } END { print n + 0 }'
}

# Fails a model stage that ran nothing although model files exist: a model
# suite that cannot fail proves nothing.
require_tests() {
    local stage="$1" log="$2" pattern="$3" passed
    passed="$(passed_in "$log")"
    if compgen -G "$pattern" >/dev/null; then
        if [ "$passed" -eq 0 ]; then
            echo "test-all: $stage stage ran no tests although $pattern exists — is the cfg gate right?" >&2
            return 1
        fi
    else
        echo "test-all: WARNING: no $pattern yet; the $stage stage checked nothing" >&2
    fi
    echo "test-all: $stage stage: $passed tests passed"
}

stage_plain() {
    # cargo-nextest runs each test in a process of its own and kills one
    # that runs too long, naming it (.config/nextest.toml); doc tests run
    # through cargo test, which nextest does not run.
    if ! cargo nextest --version >/dev/null 2>&1; then
        cargo install cargo-nextest --locked
    fi
    cargo nextest run --workspace --no-fail-fast
    cargo test --workspace --doc --no-fail-fast
}

stage_loom() {
    local log="$LOG_DIR/loom.log"
    echo "LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS"
    RUSTFLAGS="--cfg loom" cargo test -p forksafe-models --tests --target-dir target/loom \
        -- --test-threads=2 2>&1 | tee "$log"
    require_tests loom "$log" 'models/tests/loom_*.rs'
}

stage_shuttle() {
    local log="$LOG_DIR/shuttle.log"
    echo "FORKSAFE_SHUTTLE_ITERS=${FORKSAFE_SHUTTLE_ITERS:-unset (each model uses its own default)}"
    RUSTFLAGS="--cfg shuttle" cargo test -p forksafe-models --tests --target-dir target/shuttle \
        2>&1 | tee "$log"
    require_tests shuttle "$log" 'models/tests/shuttle_*.rs'
}

stage_demo() {
    if [ -f engine/examples/fork_demo.rs ]; then
        cargo run --release -p forksafe --example fork_demo
        cargo run --release -p forksafe --example pipeline
    else
        echo "test-all: WARNING: engine/examples/fork_demo.rs does not exist yet; demo skipped" >&2
    fi
}

stage_python() {
    bash scripts/test-python.sh
}

stage_extension() {
    bash scripts/test-rayon-extension.sh
    bash scripts/test-tokio-extension.sh
}

TOTAL_START="$(now)"
for next in "${STAGES[@]}"; do
    stage="$next"
    header "$stage"
    start="$(now)"
    "stage_$stage"
    took="$(elapsed "$start" "$(now)")"
    echo "== test-all: $stage done in $took"
    SUMMARY+=("$(printf '%-8s %s' "$stage" "$took")")
done

stage=""
echo
echo "================================================================"
echo "== test-all: summary (LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS, FORKSAFE_SHUTTLE_ITERS=${FORKSAFE_SHUTTLE_ITERS:-default})"
printf '==   %s\n' "${SUMMARY[@]}"
echo "== test-all: all stages passed in $(elapsed "$TOTAL_START" "$(now)")"
