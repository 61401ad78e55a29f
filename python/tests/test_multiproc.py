"""multiprocessing pools (fork, forkserver, spawn), ProcessPoolExecutor and
os.fork from a thread, all with data vars holding numpy arrays while the
parent has ops pending (issue "Python package for real users", item 6).
The child's view of data follows the engine's rules: data written by ops
completed before the fork is there; data whose writer was pending at the
fork raises OpError(kind='lost_in_fork'), as does that writer's future."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import threading
import time

import numpy as np
import pytest

import forksafe
from conftest import in_child, wait_child


def pool_task(n: int) -> float:
    """A pool worker: its own engine, numpy data vars, a kernel and a
    callback (importable, for spawn and forkserver)."""
    eng = forksafe.default_engine()
    a = eng.data(np.full(1000, float(n)))
    b = eng.data(np.ones(1000))
    eng.add(a, b, a)
    total = eng.push(lambda x: float(x.sum()), reads=[a])
    return total.result(timeout=20)


def busy_parent() -> tuple[forksafe.Engine, forksafe.Data, list]:
    """The parent's default engine with callbacks still queued on a data
    var while the pool starts."""
    eng = forksafe.default_engine()
    d = eng.data(np.zeros(4))
    futs = [eng.push(lambda w: (time.sleep(0.002), w.__iadd__(1.0)), writes=[d]) for _ in range(50)]
    return eng, d, futs


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_pool_with_data_vars(method):
    eng, d, futs = busy_parent()
    ctx = mp.get_context(method)
    with ctx.Pool(2) as pool:
        got = pool.map_async(pool_task, range(6)).get(timeout=60)
    assert got == [1000.0 * (n + 1) for n in range(6)]
    for f in futs:
        f.result(timeout=30)
    assert eng.get(d).tolist() == [50.0] * 4, "the parent's ops all ran"


@pytest.mark.parametrize("method", [None, "fork"])
def test_process_pool_executor(method):
    eng, d, futs = busy_parent()
    ctx = mp.get_context(method) if method else None
    with cf.ProcessPoolExecutor(max_workers=2, mp_context=ctx) as ex:
        results = list(ex.map(pool_task, range(4), timeout=60))
    assert results == [1000.0 * (n + 1) for n in range(4)]
    for f in futs:
        f.result(timeout=30)
    assert eng.get(d).tolist() == [50.0] * 4


def test_os_fork_from_a_thread_with_callbacks_pending(eng):
    """A thread forks while a callback is blocked writing `lost` and more
    are queued. The fork drain is short, so the blocked one is pending at
    the fork: in the child its data is poisoned lost_in_fork (never read
    half-written as good), its future says so, and data from completed ops
    is there."""
    done = eng.data(np.zeros(3))
    lost = eng.data(np.zeros(3))
    eng.fill(done, 7.0).result(timeout=10)
    release = threading.Event()

    def blocked_writer(w):
        w[0] = 1.0  # half-written when the fork comes
        release.wait(20)
        w[:] = 2.0

    blocked = eng.push(blocked_writer, writes=[lost], name="blocked writer")
    queued = [eng.push(lambda w: w.__iadd__(1.0), writes=[lost]) for _ in range(5)]
    pid_box: list[int] = []
    forksafe.set_fork_drain(0.2)
    try:
        def fork_it() -> None:
            pid = os.fork()
            if pid == 0:
                def child() -> None:
                    assert eng.get(done).tolist() == [7.0] * 3
                    with pytest.raises(forksafe.OpError) as info:
                        eng.get(lost, timeout=10)
                    assert info.value.kind == "lost_in_fork"
                    err = blocked.exception(timeout=10)
                    assert isinstance(err, forksafe.OpError) and err.kind == "lost_in_fork"
                    for f in queued:
                        assert f.exception(timeout=10).kind == "lost_in_fork"
                    # New work runs in the child.
                    fresh = eng.data(np.arange(3.0))
                    assert eng.sum(fresh).result(timeout=10) == 3.0
                in_child(child)
            pid_box.append(pid)

        t = threading.Thread(target=fork_it)
        t.start()
        t.join(30)
        assert pid_box, "the forking thread returned"
        assert wait_child(pid_box[0], timeout=30) == 0
    finally:
        forksafe.set_fork_drain(None)
        release.set()
    assert blocked.result(timeout=10) is None
    for f in queued:
        f.result(timeout=10)
    assert eng.get(lost).tolist() == [7.0] * 3, "the parent's ops all ran"
