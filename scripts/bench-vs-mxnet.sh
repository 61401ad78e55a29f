#!/usr/bin/env bash
# bench-vs-mxnet.sh — forksafe's engine and MXNet 1.9.1's engine, side by
# side, on the same workloads, in the same run, as ratios.
#
#   bash scripts/bench-vs-mxnet.sh [ROUNDS]     (default 5 rounds)
#
# 1. Installs mxnet==1.9.1 and numpy==1.23.5 from PyPI into a throwaway venv
#    (MXNET_VENV, default /tmp/forksafe-mxnet-venv; reused if present).
# 2. Builds bench/mxnet/harness.c against that wheel's libmxnet.so (the C API
#    headers are not in the wheel; the harness declares its prototypes).
# 3. Builds forksafe-bench (--release).
# 4. Runs both alternately, ROUNDS times (the order flips every round), each
#    round a fresh process per engine and one timed run per workload.
# 5. Prints a table of medians and ratios, and the targets of issue 4; then
#    forksafe-bench's fork, mem and split figures (forksafe alone).
#
# MXNet is set up as the fair reference: ThreadedEnginePerDevice,
# MXNET_CPU_WORKER_NTHREADS = forksafe's compute workers (= cores), OMP and
# MKL threads 1, engine bulk size 0 (set by the harness). Not part of the
# default test command.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-5}"
WORK="${BENCH_WORK:-/tmp/forksafe-bench-vs-mxnet}"
CORES="$(nproc)"
WORKLOADS=(indep chain dag dag-2us indep-2t)
mkdir -p "$WORK"

# shellcheck source=lib/bench-build.sh
source "$ROOT/scripts/lib/bench-build.sh"
MXNET="$(build_mxnet_harness)"
OURS="$(build_forksafe_bench)"

export MXNET_ENGINE_TYPE=ThreadedEnginePerDevice
export MXNET_CPU_WORKER_NTHREADS="$CORES"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 MXNET_USE_OPERATOR_TUNING=0

RAW="$WORK/raw.txt"
: > "$RAW"
run_ours() { "$OURS" --raw --reps 1 --workers "$CORES" "${WORKLOADS[@]}" | grep '^RESULT' >> "$RAW"; }
run_mxnet() { "$MXNET" --reps 1 "${WORKLOADS[@]}" 2>/dev/null | grep '^RESULT' >> "$RAW"; }
for r in $(seq 1 "$ROUNDS"); do
    echo "== round $r/$ROUNDS" >&2
    if [ $((r % 2)) -eq 1 ]; then run_ours; run_mxnet; else run_mxnet; run_ours; fi
done

echo "== fork, memory, dag-2us split (forksafe-bench fork mem split)" >&2
"$OURS" --reps "$ROUNDS" --workers "$CORES" fork mem split > "$WORK/fork-mem.txt"

python3 - "$RAW" "$WORK/fork-mem.txt" "$CORES" "$ROUNDS" <<'PY'
import re, statistics, sys
raw, forkmem, cores, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
secs, cpus = {}, {}
for line in open(raw):
    f = dict(kv.split("=", 1) for kv in line.split()[1:])
    secs.setdefault((f["engine"], f["workload"]), []).append(float(f["seconds"]))
    cpus.setdefault((f["engine"], f["workload"]), []).append(float(f["cpu_seconds"]))
    ops = int(f["ops"])
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"machine: {cpu}, {cores} cores; {rounds} rounds, engines alternated; ops per run: {ops}")
print(f"MXNet: ThreadedEnginePerDevice, MXNET_CPU_WORKER_NTHREADS={cores}, OMP_NUM_THREADS=1, bulk size 0")
print(f"forksafe: {cores} compute workers")
print("ops/s: ops / median wall time to the final wait; CPU: median process CPU time (user + system,")
print("all threads) per op, which load from other processes does not inflate; ratios are forksafe / MXNet")
print("for ops/s and MXNet / forksafe for CPU (above 1: forksafe better).")
print()
print("| workload | forksafe ops/s | MXNet ops/s | ratio | forksafe CPU µs/op | MXNet CPU µs/op | CPU ratio | target | met (on ops/s) |")
print("|---|---|---|---|---|---|---|---|---|")
med = statistics.median
for w in ["indep", "chain", "dag", "dag-2us", "indep-2t"]:
    o, m = secs.get(("forksafe", w)), secs.get(("mxnet", w))
    if not o or not m:
        continue
    ours, theirs = ops / med(o), ops / med(m)
    ratio = ours / theirs
    oc, mc = med(cpus[("forksafe", w)]) * 1e6 / ops, med(cpus[("mxnet", w)]) * 1e6 / ops
    if w == "dag-2us":
        ideal = cores / 2e-6
        target = f"≥ 80% of ideal {ideal:,.0f}/s"
        met = f"{ours / ideal:.0%} of ideal: {'yes' if ours >= 0.8 * ideal else 'no'}"
    elif w == "indep-2t":
        target, met = "(no target)", "-"
    else:
        target = "≥ 10x MXNet"
        met = "yes" if ratio >= 10 else "no"
    print(f"| {w} | {ours:,.0f} | {theirs:,.0f} | {ratio:.2f}x | {oc:.2f} | {mc:.2f} | {mc / oc:.2f}x | {target} | {met} |")
print()
print("| forksafe-bench | figure | ratio / note |")
print("|---|---|---|")
for line in open(forkmem):
    if line.startswith(("| fork", "| mem", "| split")):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        figure = "; ".join(c for c in cells[1:3] if c)
        print(f"| {cells[0]} | {figure} | {cells[3]} |")
print()
for line in open(forkmem):
    if line.startswith(("mem:", "split:")):
        print(line.rstrip())
text = open(forkmem).read()
idle = re.search(r"idle engine \|.*\| wall ([\d.]+)x, CPU ([\d.]+)x", text)
mem = re.search(r"heap ([\d.]+) B/op", text)
if idle:
    w, c = float(idle.group(1)), float(idle.group(2))
    print(f"fork with an idle engine: wall {w:.3f}x, CPU {c:.3f}x no engine "
          f"(target ≤ 1.1x: {'yes' if w <= 1.1 else 'no'})")
if mem:
    b = float(mem.group(1))
    print(f"memory per pending op: {b:.1f} B (target ≤ 128 B: {'yes' if b <= 128 else 'no'})")
PY
