"""Benchmark (not a test): elementwise add of two 1e7-element float64 arrays
through a forksafe kernel vs numpy's own ``np.add`` on the same arrays, and
two independent adds at once (forksafe: two kernels on the two compute
workers with the GIL released; numpy: two Python threads; baseline: one
after the other).

Run:  python python/bench/bench_add.py [--rounds N] [--n ELEMENTS]

Systems are interleaved round by round (order rotated each round); each
row prints the median with min..max over the rounds, and ratios are taken
within this one run. Prints the command, date, machine and load average.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import threading
import time

import numpy as np

import forksafe


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--n", type=int, default=10_000_000)
    args = ap.parse_args()
    n = args.n
    print("command:", " ".join([os.path.basename(sys.executable), *sys.argv]))
    print("date:", datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    print("machine:", platform.machine(), os.cpu_count(), "cpus,", platform.platform())
    print("numpy", np.__version__, "forksafe", forksafe.__version__)
    print("load before:", " ".join(f"{x:.2f}" for x in os.getloadavg()))

    eng = forksafe.Engine(compute_workers=2, host_workers=1)
    rng = np.random.default_rng(1)
    a, b = rng.random(n), rng.random(n)
    c, d = rng.random(n), rng.random(n)
    o1, o2 = np.empty(n), np.empty(n)
    da, db, dc, dd = (eng.data(x) for x in (a, b, c, d))
    do1, do2 = eng.data(o1), eng.data(o2)

    def np_one():
        np.add(a, b, out=o1)

    def fs_one():
        eng.add(da, db, do1).result()

    def np_two_serial():
        np.add(a, b, out=o1)
        np.add(c, d, out=o2)

    def np_two_threads():
        t = threading.Thread(target=np.add, args=(c, d), kwargs={"out": o2})
        t.start()
        np.add(a, b, out=o1)
        t.join()

    def fs_two_parallel():
        f1, f2 = eng.add(da, db, do1), eng.add(dc, dd, do2)
        f1.result()
        f2.result()

    systems = {
        "numpy np.add, 1 add": np_one,
        "forksafe kernel, 1 add": fs_one,
        "numpy, 2 adds one after the other": np_two_serial,
        "numpy, 2 adds in 2 threads": np_two_threads,
        "forksafe, 2 kernels at once": fs_two_parallel,
    }
    # Correctness once before timing.
    fs_two_parallel()
    assert np.array_equal(o1, a + b) and np.array_equal(o2, c + d)
    times: dict[str, list[float]] = {k: [] for k in systems}
    names = list(systems)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for k in order:
            times[k].append(timed(systems[k]))
    print(f"\n{n:,} float64 elements, {args.rounds} rounds, medians (min..max):")
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"  {k:38s} {med[k]*1e3:8.2f} ms  ({min(v)*1e3:.2f}..{max(v)*1e3:.2f})")
    print("\nratios:")
    print(f"  forksafe kernel / np.add (1 add):             {med['forksafe kernel, 1 add'] / med['numpy np.add, 1 add']:.2f}x the time")
    print(f"  speedup of 2 kernels at once over 2 serial:    {med['numpy, 2 adds one after the other'] / med['forksafe, 2 kernels at once']:.2f}x")
    print(f"  speedup of 2 numpy threads over 2 serial:      {med['numpy, 2 adds one after the other'] / med['numpy, 2 adds in 2 threads']:.2f}x")
    print("load after:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    eng.shutdown()


if __name__ == "__main__":
    main()
