"""Benchmark (not a test): the cost of one Python callback through forksafe
beside ``concurrent.futures.ThreadPoolExecutor``, and the memory each
pending Python op holds.

Run:  python python/bench/bench_push.py [--rounds N] [--ops N] [--pending N]

* push + run: ``--ops`` no-op callbacks, each writing its own var (op i
  writes var i % 1024), pushed from this thread and run by 2 host workers,
  timed to the last one's end (``wait_all``); beside it the same calls
  through ``Engine.push_many`` (one batch per 1024 ops), and
  ``ThreadPoolExecutor(max_workers=2).submit`` + ``concurrent.futures.wait``.
  Interleaved round by round (order rotated each round); medians with
  min..max; ratios within this one run.
* memory: ``--pending`` ops queued behind a host op that holds the one host
  worker, their futures kept; per pending op, the growth of malloc's bytes
  in use (``mallinfo2``: the Rust side) and RSS in a run without
  tracemalloc, plus that of Python's own heap (``tracemalloc``) in a
  second run.

Prints the command, date, machine and load average.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import ctypes
import datetime
import os
import platform
import statistics
import sys
import threading
import time
import tracemalloc

import forksafe

VARS = 1024
BATCH = 1024


def noop() -> None:
    pass


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
        "fsmblks", "uordblks", "fordblks", "keepcost")]


def malloc_in_use() -> int:
    """Bytes glibc's malloc has handed out and not taken back (every
    thread's arenas): the Rust side of an op, and Python objects too large
    for Python's own allocator. 0 where mallinfo2 is missing."""
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallinfo2"):
        return 0
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return int(info.uordblks + info.hblkhd)


def fs_push(eng: forksafe.Engine, vars_: list, n: int) -> None:
    for i in range(n):
        eng.push(noop, writes=[vars_[i % VARS]])
    eng.wait_all()


def fs_push_many(eng: forksafe.Engine, vars_: list, n: int) -> None:
    for start in range(0, n, BATCH):
        k = min(BATCH, n - start)
        eng.push_many(noop, [()] * k,
                      writes=[[vars_[(start + j) % VARS]] for j in range(k)])
    eng.wait_all()


def tpe_submit(pool: cf.ThreadPoolExecutor, n: int) -> None:
    futs = [pool.submit(noop) for _ in range(n)]
    cf.wait(futs)


def _pending_run(n: int, trace: bool) -> tuple[float, float, float]:
    """Queues `n` ops behind a host op that holds the one host worker, their
    futures kept; returns the growth per op of malloc's bytes in use,
    Python's heap (0 unless `trace`) and RSS."""
    eng = forksafe.Engine(compute_workers=1, host_workers=1)
    vars_ = [eng.new_var() for _ in range(VARS)]
    fs_push(eng, vars_, VARS)
    gate = threading.Event()
    hold = eng.push(gate.wait)
    if trace:
        tracemalloc.start()
    rss0, heap0, (py0, _) = rss_bytes(), malloc_in_use(), tracemalloc.get_traced_memory()
    futs = [eng.push(noop, writes=[vars_[i % VARS]]) for i in range(n)]
    rss1, heap1, (py1, _) = rss_bytes(), malloc_in_use(), tracemalloc.get_traced_memory()
    if trace:
        tracemalloc.stop()
    if eng.pending() < n:
        raise SystemExit(f"bench_push: only {eng.pending()} of {n} ops pending")
    gate.set()
    hold.result()
    eng.wait_all()
    assert all(f.done() for f in futs)
    eng.shutdown()
    return (heap1 - heap0) / n, (py1 - py0) / n, (rss1 - rss0) / n


def pending_memory(n: int) -> tuple[float, float, float]:
    """Per pending op, `n` ops queued: malloc's bytes in use (the Rust
    side) and RSS growth (noisy: it depends on what earlier frees left to
    reuse) from a run without tracemalloc, whose own bookkeeping is
    malloc'd and would count as the op's; Python's heap from a second run
    with tracemalloc on."""
    heap, _, rss = _pending_run(n, trace=False)
    _, py, _ = _pending_run(n, trace=True)
    return heap, py, rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--pending", type=int, default=200_000)
    args = ap.parse_args()
    n = args.ops
    print("command:", " ".join([os.path.basename(sys.executable), *sys.argv]))
    print("date:", datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    print("machine:", platform.machine(), os.cpu_count(), "cpus,", platform.platform())
    print("python", platform.python_version(), "forksafe", forksafe.__version__)
    print("load before:", " ".join(f"{x:.2f}" for x in os.getloadavg()))

    eng = forksafe.Engine(compute_workers=1, host_workers=2)
    vars_ = [eng.new_var() for _ in range(VARS)]
    pool = cf.ThreadPoolExecutor(max_workers=2)
    systems = {
        "forksafe Engine.push": lambda: fs_push(eng, vars_, n),
        "forksafe Engine.push_many": lambda: fs_push_many(eng, vars_, n),
        "ThreadPoolExecutor.submit": lambda: tpe_submit(pool, n),
    }
    for run in systems.values():
        run()  # warm: threads started, vars grown
    times: dict[str, list[float]] = {k: [] for k in systems}
    names = list(systems)
    for r in range(args.rounds):
        for k in names[r % len(names):] + names[: r % len(names)]:
            t = time.perf_counter()
            systems[k]()
            times[k].append(time.perf_counter() - t)
    eng.shutdown()
    pool.shutdown()

    print(f"\npush + run of {n:,} no-op callbacks, 2 worker threads, {args.rounds} rounds,")
    print("µs per op, median (min..max):")
    med = {k: statistics.median(v) / n * 1e6 for k, v in times.items()}
    for k, v in times.items():
        print(f"  {k:28s} {med[k]:7.2f}  ({min(v) / n * 1e6:.2f}..{max(v) / n * 1e6:.2f})")
    tpe = med["ThreadPoolExecutor.submit"]
    print("\nratios (above 1: forksafe faster):")
    for k in names[:2]:
        print(f"  ThreadPoolExecutor.submit ÷ {k}: {tpe / med[k]:.2f}")
    heap, py, rss = pending_memory(args.pending)
    print(f"\nmemory per pending Python op ({args.pending:,} pending): "
          f"{heap + py:.0f} B = malloc {heap:.0f} B + Python heap (tracemalloc) {py:.0f} B; "
          f"RSS growth {rss:.0f} B")
    print("load after:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
