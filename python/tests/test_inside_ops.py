"""Waits and forks inside a callback (docs/DESIGN.md, "Waiting inside an
op"): a wait inside an op returns only after what it covers has completed,
the ops the callback pushed itself included, or raises WaitOnSelfError at
once; a fork from inside a callback gives a child whose engine works."""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle

import numpy as np
import pytest

import forksafe
from conftest import in_child, wait_child

LIMIT = 20.0


def inside(eng, body, **kw):
    """Runs `body()` as a callback and returns what it returned (or raises
    what it raised)."""
    return eng.push(body, **kw).result(LIMIT)


@pytest.mark.parametrize("host_workers", [1, 2])
def test_get_inside_a_callback_sees_the_op_it_pushed(host_workers):
    eng = forksafe.Engine(compute_workers=1, host_workers=host_workers)
    d = eng.data(np.zeros(3))

    def body():
        eng.fill(d, 7.0)
        return eng.get(d).copy()

    assert inside(eng, body).tolist() == [7.0, 7.0, 7.0]
    eng.shutdown()


def test_wait_all_inside_a_callback_waits_for_its_own_pushes():
    eng = forksafe.Engine(compute_workers=1, host_workers=1)
    seen = []

    def body():
        futs = [eng.push(lambda i=i: seen.append(i)) for i in range(3)]
        eng.sleep(0.02)
        eng.wait_all()
        return [f.done() for f in futs], list(seen)

    done, got = inside(eng, body)
    assert done == [True, True, True]
    assert got == [0, 1, 2]
    eng.shutdown()


def test_result_of_a_future_pushed_inside_a_callback_one_host_worker():
    eng = forksafe.Engine(compute_workers=1, host_workers=1)
    d = eng.data(np.arange(4.0))

    def body():
        inner = eng.push(lambda: 41 + 1).result(5)
        kernel = eng.sum(d).result(5)
        return inner, kernel

    assert inside(eng, body) == (42, 6.0)
    eng.shutdown()


def test_nested_results_through_stand_ins():
    eng = forksafe.Engine(compute_workers=1, host_workers=1)

    def level(n):
        if n == 0:
            return 0
        return 1 + eng.push(level, args=(n - 1,)).result(LIMIT)

    assert inside(eng, lambda: level(6)) == 6
    eng.shutdown()


def test_waiting_for_an_op_queued_behind_the_callback_raises():
    eng = forksafe.Engine(compute_workers=1, host_workers=1)
    v = eng.new_var()

    def body():
        behind = eng.push(lambda: None, writes=[v])
        with pytest.raises(forksafe.WaitOnSelfError) as e:
            behind.result(LIMIT)
        assert e.value.on_id == behind.op_id
        assert e.value.op_name == "caller"
        with pytest.raises(forksafe.WaitOnSelfError):
            eng.wait(v)
        with pytest.raises(forksafe.WaitOnSelfError):
            eng.wait_all()
        return "raised"

    assert eng.push(body, writes=[v], name="caller").result(LIMIT) == "raised"
    eng.wait_all(LIMIT)
    assert eng.var_version(v) == 2, "both ops ran"
    eng.shutdown()


def test_get_of_data_the_callback_writes_returns_its_array():
    eng = forksafe.Engine(compute_workers=1, host_workers=1)
    d = eng.data(np.ones(2))

    def body(arr):
        return eng.get(d) is arr

    assert eng.push(body, writes=[d]).result(LIMIT) is True
    eng.shutdown()


def test_wait_on_self_error_pickles():
    eng = forksafe.Engine(compute_workers=1, host_workers=1)
    v = eng.new_var()

    def body():
        try:
            eng.wait(v)
        except forksafe.WaitOnSelfError as e:
            return e
        return None

    err = eng.push(body, writes=[v]).result(LIMIT)
    assert isinstance(err, forksafe.WaitOnSelfError)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is forksafe.WaitOnSelfError
    assert str(back) == str(err)
    eng.shutdown()


def _fork_child_uses_engine(eng):
    """In a fork child made inside a callback: push, wait, get."""
    d = eng.data(np.zeros(2))
    eng.fill(d, 3.0)
    assert eng.get(d, timeout=LIMIT).tolist() == [3.0, 3.0]
    assert eng.push(lambda: 5).result(LIMIT) == 5
    eng.wait_all(LIMIT)


@pytest.mark.parametrize("host_workers", [1, 2])
def test_os_fork_inside_a_callback_gives_a_working_child(host_workers):
    eng = forksafe.Engine(compute_workers=1, host_workers=host_workers)

    def body():
        pid = os.fork()
        if pid == 0:
            in_child(lambda: _fork_child_uses_engine(eng))
        return pid

    pid = inside(eng, body)
    assert wait_child(pid, LIMIT) == 0
    # The parent works after.
    assert eng.push(lambda: 1).result(LIMIT) == 1
    eng.shutdown()


def _square(x):
    return x * x


def test_multiprocessing_pool_from_a_callback():
    eng = forksafe.default_engine()

    def body():
        ctx = mp.get_context("fork")
        with ctx.Pool(2) as pool:
            return pool.map(_square, range(6))

    assert inside(eng, body) == [0, 1, 4, 9, 16, 25]
    assert eng.push(lambda: "after").result(LIMIT) == "after"
