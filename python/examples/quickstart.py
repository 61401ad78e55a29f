"""The README's first Python example, typed: numpy data vars, a Rust kernel
with the GIL released, a Python callback and its future.

Run:  python examples/quickstart.py
"""

from __future__ import annotations

import numpy as np

import forksafe


def total(y: np.ndarray) -> float:
    return float(y.sum())


def main() -> None:
    eng = forksafe.Engine()
    x = eng.data(np.arange(4.0))
    y = eng.data(np.zeros(4))
    eng.scale(x, 10.0, out=y)
    fut: forksafe.OpFuture = eng.push(total, reads=[y])
    print(fut.result(), eng.get(y))


if __name__ == "__main__":
    main()
