#!/usr/bin/env bash
# fuzz-smoke.sh — a short cargo-fuzz run of each fuzz target (CI calls it).
#
#   bash scripts/fuzz-smoke.sh                  each target for 60 s
#   FUZZ_SECONDS=600 bash scripts/fuzz-smoke.sh each target for 10 min
#   bash scripts/fuzz-smoke.sh program          only the named targets
#
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`);
# without either it says so and exits 0 (the stable corpus replay,
# `cargo test -p forksafe-proptests --test fuzz_corpus_replay`, runs in the
# plain test stage regardless). Runs start from the checked-in corpus
# (fuzz/corpus/<target>, read only) and write new inputs to a temporary
# directory, so the checkout is not touched; crashes land in
# fuzz/artifacts/<target>/ (gitignored) and fail the script.
#
# Flags: -timeout=30 (an input running 30 s is a hang; every wait inside is
# bounded well below); -len_control=0 with -max_len at the decoders' limits
# (programs and lifecycles are dense: short inputs say little); leak
# detection off (worker and helper threads still alive when an input ends,
# or at exit, are reported as leaks; the engine also leaks payloads on
# purpose in fork children).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../fuzz"

SECONDS_EACH="${FUZZ_SECONDS:-60}"
TARGETS=("$@")
if [ "${#TARGETS[@]}" -eq 0 ]; then
    TARGETS=(program lifecycle)
fi

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz-smoke: SKIPPED: no nightly toolchain (rustup toolchain install nightly)"
    exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz-smoke: SKIPPED: cargo-fuzz is not installed (cargo install cargo-fuzz)"
    exit 0
fi
rustup run nightly rustc --version
cargo fuzz --version

max_len() {
    case "$1" in
        program) echo 200 ;;   # 1 + 64 statements of at most 3 bytes
        lifecycle) echo 73 ;;  # 1 + 3 threads x 24 actions
        *) echo 256 ;;
    esac
}

cargo +nightly fuzz build
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
for t in "${TARGETS[@]}"; do
    echo
    echo "== fuzz-smoke: $t for ${SECONDS_EACH}s"
    mkdir -p "$WORK/$t" "corpus/$t"
    log="$WORK/$t.log"
    status=0
    ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
        cargo +nightly fuzz run "$t" "$WORK/$t" "corpus/$t" -- \
        -max_total_time="$SECONDS_EACH" -timeout=30 -max_len="$(max_len "$t")" \
        -len_control=0 -detect_leaks=0 -print_final_stats=1 >"$log" 2>&1 || status=$?
    grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" || true
    if [ "$status" -ne 0 ]; then
        tail -n 60 "$log"
        echo "fuzz-smoke: $t FAILED (exit $status); the input is in fuzz/artifacts/$t/"
        exit 1
    fi
    echo "fuzz-smoke: $t ok"
done
