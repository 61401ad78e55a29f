#!/usr/bin/env bash
# bench-ab.sh — two builds of forksafe-bench side by side: alternates them
# (the order flips every round), one fresh process per build per round, and
# prints median ops/s, median CPU µs/op and the ratio B / A per workload.
#
#   bash scripts/bench-ab.sh ROUNDS BIN_A BIN_B [WORKLOADS...]
#
# Build an older commit's binary with, for example:
#   git worktree add /tmp/old COMMIT
#   (cd /tmp/old && CARGO_TARGET_DIR=/tmp/old-target cargo build --release -p forksafe-bench)
set -euo pipefail
rounds="$1" a="$2" b="$3"
shift 3
[ $# -gt 0 ] && workloads=("$@") || workloads=(indep chain dag dag-2us)
raw="$(mktemp)"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
trap 'rm -f "$raw"' EXIT
for ((r = 0; r < rounds; r++)); do
    if ((r % 2 == 0)); then order=(A B); else order=(B A); fi
    for side in "${order[@]}"; do
        bin="$a"
        [ "$side" = B ] && bin="$b"
        "$bin" --reps 1 --raw "${workloads[@]}" 2>/dev/null | sed -n "s/^RESULT /$side /p" >>"$raw"
    done
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "A = $a, B = $b; $rounds rounds alternated; medians"
echo
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) cores, $(uname -srm); load before: $load_before"
echo
echo "| workload | A ops/s (min..max) | B ops/s (min..max) | B / A | A CPU µs/op | B CPU µs/op |"
echo "|---|---|---|---|---|---|"
for w in "${workloads[@]}"; do
    awk -v w="$w" '
        function median(v, n,   i, j, t) {
            for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
            return (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        }
        {
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            if (f["workload"] != w) next
            s = $1; n[s]++
            ops[s, n[s]] = f["ops"] / f["seconds"]; cpu[s, n[s]] = 1e6 * f["cpu_seconds"] / f["ops"]
        }
        END {
            for (k = 1; k <= n["A"]; k++) { oa[k] = ops["A", k]; ca[k] = cpu["A", k] }
            for (k = 1; k <= n["B"]; k++) { ob[k] = ops["B", k]; cb[k] = cpu["B", k] }
            ma = median(oa, n["A"]); mb = median(ob, n["B"])
            printf "| %s | %.0f (%.0f..%.0f) | %.0f (%.0f..%.0f) | %.2fx | %.2f | %.2f |\n", w, ma, oa[1], oa[n["A"]], mb, ob[1], ob[n["B"]], mb / ma, median(ca, n["A"]), median(cb, n["B"])
        }' "$raw"
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
