#!/usr/bin/env bash
# bench-vs-peers.sh — forksafe beside the runtimes people pick for
# fine-grained dependent tasks: LLVM libomp and GNU libgomp (OpenMP tasks
# with `depend` clauses, bench/peers/omp.c), StarPU (data handles with R/RW
# modes, bench/peers/starpu.c) and MXNet 1.9.1's engine (bench/mxnet). One
# run, interleaved, ratios.
#
#   bash scripts/bench-vs-peers.sh [ROUNDS]          (default 5 rounds)
#   PEERS="libomp libgomp" bash scripts/bench-vs-peers.sh 3   (a subset)
#
# 1. Installs what it needs: clang, libomp-dev, libstarpu-dev and
#    pkg-config through apt-get when missing (as root); MXNet from PyPI into
#    a throwaway venv (scripts/lib/bench-build.sh).
# 2. Builds forksafe-bench (--release), omp.c twice (gcc → libgomp, clang →
#    libomp), starpu.c, the MXNet harness. Each peer harness first runs every
#    workload once with a checking body and exits 1 if any op saw its vars
#    out of dependency order.
# 3. ROUNDS rounds; in each, every system runs every workload once, in a
#    fresh process, the order of systems rotated by one each round. Then the
#    same rounds pinned to one core (taskset -c 0) on indep, chain and dag.
# 4. Then forksafe-bench's split, mem and queue-held figures, and
#    python/bench/bench_push.py (Python callbacks beside
#    ThreadPoolExecutor; memory per pending Python op) on a release build
#    of the Python package (PYTHON_BENCH=0 skips it).
# 5. Prints the command, date, machine and load average (before and after),
#    medians with min..max, forksafe ÷ peer ratios, each per-op target (met
#    or not, BENCHMARKS.md "Targets"), and the figures of step 4.
#
# forksafe runs twice: as configured by default (`forksafe`), and with
# `Config::run_inline_from = Some($INLINE)` (`forksafe-inline`: a pusher
# runs a ready op itself once its ready queue holds INLINE ops, like
# OpenMP's undeferred tasks; INLINE defaults to 0, see BENCHMARKS.md).
#
# Same worker count everywhere: forksafe's compute workers, OpenMP's team
# size (the pushing thread is one of the team, as in any OpenMP program),
# STARPU_NCPU, MXNET_CPU_WORKER_NTHREADS; all = cores unless WORKERS is set.
# Not part of the default test command (it takes minutes and installs
# packages).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-5}"
WORK="${BENCH_WORK:-/tmp/forksafe-bench-vs-peers}"
WORKERS="${WORKERS:-$(nproc)}"
PEERS="${PEERS:-libomp libgomp starpu mxnet}"
INLINE="${INLINE:-0}"
WORKLOADS=(indep chain dag dag-2us indep-2t queue-10k queue-1m indep-batch)
PYTHON_BENCH="${PYTHON_BENCH:-1}"
PINNED=(indep chain dag)
mkdir -p "$WORK"
COMMAND="bash scripts/bench-vs-peers.sh $ROUNDS (PEERS=\"$PEERS\", WORKERS=$WORKERS, INLINE=$INLINE)"
LOAD_BEFORE="$(cat /proc/loadavg)"
STARTED="$(date -u '+%Y-%m-%d %H:%M UTC')"

has() { [[ " $PEERS " == *" $1 "* ]]; }

# -- 1. what the peers need
need=()
if has libomp && ! { command -v clang >/dev/null && ls /usr/lib/llvm-*/lib/libomp.so* >/dev/null 2>&1; }; then
    need+=(clang libomp-dev)
fi
if has starpu && ! pkg-config --exists starpu-1.3 2>/dev/null; then
    need+=(libstarpu-dev pkg-config)
fi
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "bench-vs-peers: needs ${need[*]}: run as root or apt-get install them" >&2
        exit 1
    fi
    echo "== apt-get install ${need[*]}" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi

# -- 2. builds
# shellcheck source=lib/bench-build.sh
source "$ROOT/scripts/lib/bench-build.sh"
OURS="$(build_forksafe_bench)"
declare -A CMD
CMD[forksafe]="$OURS --raw --reps 1 --workers $WORKERS"
CMD[forksafe-inline]="$OURS --raw --reps 1 --workers $WORKERS --inline $INLINE"
if has libgomp; then
    echo "== building omp.c with gcc (libgomp)" >&2
    gcc -O2 -Wall -Wextra -fopenmp -o "$WORK/omp-libgomp" "$ROOT/bench/peers/omp.c"
    CMD[libgomp]="$WORK/omp-libgomp --reps 1 --workers $WORKERS"
fi
if has libomp; then
    echo "== building omp.c with clang (LLVM libomp)" >&2
    clang -O2 -Wall -Wextra -fopenmp -o "$WORK/omp-libomp" "$ROOT/bench/peers/omp.c"
    CMD[libomp]="$WORK/omp-libomp --reps 1 --workers $WORKERS"
fi
if has starpu; then
    echo "== building starpu.c" >&2
    # shellcheck disable=SC2046
    gcc -O2 -Wall -Wextra -o "$WORK/starpu" "$ROOT/bench/peers/starpu.c" \
        $(pkg-config --cflags --libs starpu-1.3) -lpthread
    CMD[starpu]="$WORK/starpu --reps 1 --workers $WORKERS"
fi
if has mxnet; then
    CMD[mxnet]="$(build_mxnet_harness) --reps 1"
fi
export STARPU_NCPU="$WORKERS" STARPU_NCUDA=0 STARPU_NOPENCL=0 STARPU_SILENT=1
export MXNET_ENGINE_TYPE=ThreadedEnginePerDevice MXNET_CPU_WORKER_NTHREADS="$WORKERS"
# MXNet as bench-vs-mxnet.sh sets it up; omp.c sizes its team with num_threads(),
# which overrides OMP_NUM_THREADS.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 MXNET_USE_OPERATOR_TUNING=0

SYSTEMS=(forksafe forksafe-inline)
for p in libomp libgomp starpu mxnet; do has "$p" && SYSTEMS+=("$p"); done

# -- 3. interleaved rounds
RAW="$WORK/raw.txt"
: > "$RAW"
# run SYSTEM SUFFIX PREFIX WORKLOAD...: one fresh process; RESULT lines
# (workload renamed WORKLOAD@SUFFIX when SUFFIX is set) appended to RAW.
run() {
    local sys="$1" suffix="$2" prefix="$3"
    shift 3
    local wl=("$@")
    if [[ "$sys" != forksafe* ]]; then
        # indep-batch is forksafe's push_batch; the MXNet harness has the
        # five original workloads only.
        local keep=()
        for w in "${wl[@]}"; do
            [ "$w" = indep-batch ] && continue
            [ "$sys" = mxnet ] && [[ "$w" == queue-* ]] && continue
            keep+=("$w")
        done
        wl=("${keep[@]}")
    fi
    local out
    # shellcheck disable=SC2086
    if ! out="$($prefix ${CMD[$sys]} "${wl[@]}" 2>"$WORK/$sys.err")"; then
        echo "bench-vs-peers: $sys failed:" >&2
        cat "$WORK/$sys.err" >&2
        exit 1
    fi
    echo "$out" | grep '^RESULT' | sed -E "s/engine=[^ ]+/engine=$sys/" | {
        if [ -n "$suffix" ]; then sed -E "s/workload=([^ ]+)/workload=\\1@$suffix/"; else cat; fi
    } >> "$RAW"
}
n=${#SYSTEMS[@]}
for r in $(seq 1 "$ROUNDS"); do
    echo "== round $r/$ROUNDS" >&2
    for k in $(seq 0 $((n - 1))); do
        sys="${SYSTEMS[$(((k + r) % n))]}"
        run "$sys" "" "" "${WORKLOADS[@]}"
    done
done
for r in $(seq 1 "$ROUNDS"); do
    echo "== pinned round $r/$ROUNDS (taskset -c 0)" >&2
    for k in $(seq 0 $((n - 1))); do
        sys="${SYSTEMS[$(((k + r) % n))]}"
        run "$sys" 1core "taskset -c 0" "${PINNED[@]}"
    done
done

echo "== forksafe-bench split mem queue-held" >&2
"$OURS" --workers "$WORKERS" split mem queue-held > "$WORK/forksafe-extra.txt"
: > "$WORK/python.txt"
if [ "$PYTHON_BENCH" != 0 ]; then
    PYBENCH="$(build_python_bench_venv)"
    echo "== python/bench/bench_push.py" >&2
    "$PYBENCH" "$ROOT/python/bench/bench_push.py" --rounds "$ROUNDS" > "$WORK/python.txt"
fi
LOAD_AFTER="$(cat /proc/loadavg)"

# -- 4. report
python3 - "$RAW" "$WORK/forksafe-extra.txt" "$WORK/python.txt" "$COMMAND" "$STARTED" "$LOAD_BEFORE" "$LOAD_AFTER" \
    "$WORKERS" "$ROUNDS" "${SYSTEMS[*]}" <<'PY'
import re, statistics, sys
raw, extra, pytext, command, started, load0, load1, workers, rounds, systems = sys.argv[1:]
systems = systems.split()
ours_all = [s for s in systems if s.startswith("forksafe")]
peers = [s for s in systems if not s.startswith("forksafe")]
runs = {}
ops = {}
for line in open(raw):
    f = dict(kv.split("=", 1) for kv in line.split()[1:])
    runs.setdefault((f["engine"], f["workload"]), []).append(float(f["seconds"]))
    ops[f["workload"]] = int(f["ops"])
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"command: {command}")
print(f"date:    {started}")
print(f"machine: {cpu}, {workers} workers per system; {rounds} rounds, order rotated each round")
print(f"load:    before {load0}; after {load1}")
print("ops/s: ops / wall time to the final wait; median (min..max) over the rounds; ratio:")
print("forksafe ÷ peer on the medians (above 1: forksafe faster).")
print()

def stat(sys_, w):
    s = runs.get((sys_, w))
    if not s:
        return None
    n = ops[w]
    return n / statistics.median(s), n / max(s), n / min(s)

def fmt(v):
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.0f}k"

workloads = ["indep", "chain", "dag", "dag-2us", "indep-2t", "queue-10k", "queue-1m",
             "indep-batch", "indep@1core", "chain@1core", "dag@1core"]
print("| workload | " + " | ".join(systems) + " | " + " | ".join(f"÷ {p}" for p in peers) + " |")
print("|---" * (1 + len(systems) + len(peers)) + "|")
for w in workloads:
    cells, ours = [], stat("forksafe", w)
    for s in systems:
        st = stat(s, w)
        cells.append(f"{fmt(st[0])} ({fmt(st[1])}..{fmt(st[2])})" if st else "-")
    for p in peers:
        st = stat(p, w)
        cells.append(f"{ours[0] / st[0]:.2f}" if st and ours else "-")
    print(f"| {w} | " + " | ".join(cells) + " |")
print()
if "forksafe-inline" in systems:
    print("forksafe-inline ÷ peer, and ÷ forksafe (the default engine):")
    print()
    print("| workload | " + " | ".join(f"÷ {p}" for p in peers + ["forksafe"]) + " |")
    print("|---" * (1 + len(peers) + 1) + "|")
    for w in workloads:
        mine = stat("forksafe-inline", w)
        cells = []
        for p in peers + ["forksafe"]:
            st = stat(p, w)
            cells.append(f"{mine[0] / st[0]:.2f}" if st and mine else "-")
        print(f"| {w} | " + " | ".join(cells) + " |")
    print()

text = open(extra).read()
def grab(pattern):
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None

print("Targets (BENCHMARKS.md, \"Targets\"):")
def line(name, value, ok):
    print(f"- {name}: {value} — {'met' if ok else 'NOT met'}")
def missing(name):
    print(f"- {name}: not measured in this run")
push = grab(r"push alone \| \d+ \| ([\d.]+) µs CPU/op")
worker = grab(r"worker overhead ([\d.]+) =")
if push is not None:
    line("push ≤ 0.25 µs CPU per op (split)", f"{push:.3f} µs", push <= 0.25)
    line("worker overhead ≤ 0.3 µs per op (split)", f"{worker:.3f} µs", worker <= 0.3)
ideal = grab(r"allow (\d+) ops/s")
d2 = stat("forksafe", "dag-2us")
if ideal and d2:
    line("dag-2us ≥ 80% of the in-order 2-worker ideal", f"{fmt(d2[0])} of {fmt(ideal)} ops/s = {d2[0] / ideal:.0%}", d2[0] >= 0.8 * ideal)
if "libomp" in peers:
    for w in ["indep", "chain", "dag", "dag-2us", "indep-2t"]:
        o, l = stat("forksafe", w), stat("libomp", w)
        if o and l:
            need = 1.5 if w == "dag" else 1.0
            line(f"forksafe ÷ libomp on {w} ≥ {need}", f"{o[0] / l[0]:.2f}", o[0] / l[0] >= need)
else:
    missing("forksafe ÷ libomp")
if "libgomp" in peers:
    i, g = stat("forksafe-inline", "indep"), stat("libgomp", "indep")
    if i and g:
        line("forksafe-inline ≥ 0.6× libgomp on indep", f"{fmt(i[0])} vs {fmt(g[0])} = {i[0] / g[0]:.2f}×", i[0] >= 0.6 * g[0])
    i, g = stat("forksafe-inline", "chain"), stat("libgomp", "chain")
    if i and g:
        print(f"- forksafe-inline on chain (reported): {fmt(i[0])} vs libgomp {fmt(g[0])} = {i[0] / g[0]:.2f}×")
else:
    missing("forksafe-inline ÷ libgomp")
b, s1 = stat("forksafe", "indep-batch"), stat("forksafe", "indep")
if b and s1:
    beside = stat("libgomp", "indep")
    extra = f"; libgomp indep {fmt(beside[0])} = {b[0] / beside[0]:.2f}×" if beside else ""
    line("batch push ≥ 3× single pushes on indep", f"{fmt(b[0])} vs {fmt(s1[0])} = {b[0] / s1[0]:.2f}×{extra}", b[0] >= 3 * s1[0])
mem = grab(r"heap ([\d.]+) B/op")
if mem is not None:
    line("memory per pending Rust op ≤ 128 B", f"{mem:.1f} B", mem <= 128)
py = open(pytext).read()
def pygrab(pattern):
    m = re.search(pattern, py)
    return float(m.group(1)) if m else None
tpe_push = pygrab(r"ThreadPoolExecutor.submit ÷ forksafe Engine.push: ([\d.]+)")
tpe_many = pygrab(r"ThreadPoolExecutor.submit ÷ forksafe Engine.push_many: ([\d.]+)")
pymem = pygrab(r"memory per pending Python op .*: (\d+) B = malloc")
if tpe_push is not None:
    line("Python: Engine.push + run ≥ 2× ThreadPoolExecutor.submit + run", f"{tpe_push:.2f}×", tpe_push >= 2)
    line("Python: a batch push (Engine.push_many) ≥ 2× ThreadPoolExecutor", f"{tpe_many:.2f}×", tpe_many >= 2)
    line("Python: ≤ 512 B per pending Python op (malloc + Python heap)", f"{pymem:.0f} B", pymem <= 512)
else:
    missing("Python (PYTHON_BENCH=0)")
print()
print("Earlier targets, still checked:")
for ours in ours_all:
    for w in ["indep", "chain", "dag"]:
        p, u = stat(ours, w + "@1core"), stat(ours, w)
        if p and u:
            line(f"{ours}: pinned ÷ unpinned on {w} ≤ 1.2", f"{p[0] / u[0]:.2f}", p[0] / u[0] <= 1.2)
for ours in ours_all:
    small, large = stat(ours, "queue-10k"), stat(ours, "queue-1m")
    if small and large:
        r = small[0] / large[0]
        line(f"{ours}: queue-1m time per op within 2× of queue-10k", f"{r:.2f}×", r <= 2)
for m in re.finditer(r"queue-held: (\w+): .*ratio ([\d.]+)", text):
    line(f"queue-held {m.group(1)}: 1M ÷ 10k time per op ≤ 2", m.group(2), float(m.group(2)) <= 2)
print()
print("forksafe-bench split mem queue-held:")
for l in text.splitlines():
    if l.startswith(("| split", "| mem", "| queue", "split:", "mem:", "queue-held:")):
        print("  " + l)
if py.strip():
    print()
    print("python/bench/bench_push.py:")
    for l in py.splitlines():
        print("  " + l)
PY
