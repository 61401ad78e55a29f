"""An MXNet-style custom operator on forksafe: an addition op with forward
and backward, written in Python, run by the engine's host lane.

MXNet runs a `mx.operator.CustomOp`'s forward/backward as engine ops on its
worker threads, with the GIL taken around each call; a process that forks
(a DataLoader, multiprocessing) or exits while such ops are pending used to
hang. Here the same shape runs on forksafe, then the process forks with
custom ops still queued and exits with work pending: both are safe.

Run:  python examples/custom_op.py
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import time

import numpy as np

import forksafe


class CustomOp:
    """The shape of `mx.operator.CustomOp`: in_data, out_data, in_grad and
    out_grad are numpy arrays (the engine's data vars)."""

    def forward(self, is_train, req, in_data, out_data, aux):
        raise NotImplementedError

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        raise NotImplementedError

    def assign(self, dst: np.ndarray, req: str, src: np.ndarray) -> None:
        """MXNet's `assign`: write, add to, or skip `dst` as `req` says."""
        if req == "null":
            return
        if req == "add":
            dst += src
        else:
            dst[...] = src


class Addition(CustomOp):
    """out = x + y; dx = dy = dout."""

    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0] + in_data[1])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], out_grad[0])
        self.assign(in_grad[1], req[1], out_grad[0])


def push_forward(eng, op, in_data, out_data, req=("write",), is_train=True):
    """What MXNet's engine does for a custom op's forward: a host-lane op
    that reads the inputs and writes the outputs (data vars; the callback
    gets their arrays, inputs read-only)."""
    n = len(in_data)

    def forward(*arrays):
        op.forward(is_train, list(req), list(arrays[:n]), list(arrays[n:]), [])

    return eng.push(forward, reads=in_data, writes=out_data,
                    name=f"{type(op).__name__}.forward")


def push_backward(eng, op, out_grad, in_data, out_data, in_grad, req=("write", "write")):
    k, n, m = len(out_grad), len(in_data), len(out_data)

    def backward(*arrays):
        og, ind = arrays[:k], arrays[k:k + n]
        outd, ing = arrays[k + n:k + n + m], arrays[k + n + m:]
        op.backward(list(req), list(og), list(ind), list(outd), list(ing), [])

    return eng.push(backward, reads=[*out_grad, *in_data, *out_data], writes=in_grad,
                    name=f"{type(op).__name__}.backward")


def child(n: int) -> None:
    """A forked worker (a data loader, say) using the engine on its own."""
    eng = forksafe.default_engine()
    x, y = eng.data(np.full(3, float(n))), eng.data(np.ones(3))
    out = eng.data(np.zeros(3))
    push_forward(eng, Addition(), [x, y], [out]).result(timeout=30)
    assert eng.get(out).tolist() == [n + 1.0] * 3, eng.get(out)


def main() -> int:
    eng = forksafe.default_engine()
    op = Addition()

    x, y = eng.data(np.array([1.0, 2.0, 3.0])), eng.data(np.array([10.0, 20.0, 30.0]))
    out = eng.data(np.zeros(3))
    dout = eng.data(np.zeros(3))
    eng.fill(dout, 1.0)  # a built-in Rust kernel (compute lane, GIL released)
    dx, dy = eng.data(np.zeros(3)), eng.data(np.zeros(3))

    push_forward(eng, op, [x, y], [out])
    push_backward(eng, op, [dout], [x, y], [out], [dx, dy])
    eng.wait_all()
    print("forward:", eng.get(out).tolist())
    print("backward:", eng.get(dx).tolist(), eng.get(dy).tolist())
    assert eng.get(out).tolist() == [11.0, 22.0, 33.0]
    assert eng.get(dx).tolist() == eng.get(dy).tolist() == [1.0, 1.0, 1.0]

    # Fork with custom ops still queued: the fork waits (GIL released) for
    # the running one, the child runs its own ops, the parent's finish.
    slow = eng.new_var()
    for _ in range(20):
        eng.push(time.sleep, args=(0.01,), writes=[slow], name="slow")
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=child, args=(n,)) for n in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0, p.exitcode
    eng.wait(slow)
    print("forked children ok; parent ops all ran:", eng.var_version(slow) == 20)

    # Exit with custom ops still pending: the atexit hook shuts the engine
    # down (queued ops cancelled after its deadline) before Python finalises.
    for _ in range(100):
        eng.push(time.sleep, args=(0.05,), writes=[slow], name="pending at exit")
    print("exiting with", eng.pending(), "ops pending")
    return 0


if __name__ == "__main__":
    sys.exit(main())
