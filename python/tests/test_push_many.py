"""Batch pushes from Python (`Engine.push_many`) and the futures they
return: per-var order, per-op arguments and vars, bad input that pushes
nothing, refusals in the failed op's future, and the futures' lazily made
condition under concurrent waiters."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import threading

import numpy as np
import pytest

import forksafe


def test_push_many_runs_in_var_order_with_per_op_args(eng):
    v = eng.new_var()
    seen = []
    futs = eng.push_many(seen.append, [(i,) for i in range(500)], writes=[[v]] * 500)
    assert len(futs) == 500
    eng.wait(v)
    assert seen == list(range(500))
    assert eng.var_version(v) == 500
    ids = [f.op_id for f in futs]
    assert ids == sorted(ids) and None not in ids


def test_push_many_returns_each_result_and_passes_arrays(eng):
    arrays = [eng.data(np.full(4, float(i))) for i in range(8)]
    futs = eng.push_many(lambda a, k: float(a.sum()) * k, [(10,)] * 8,
                         reads=[[d] for d in arrays])
    assert [f.result(timeout=10) for f in futs] == [40.0 * i for i in range(8)]


def test_push_many_independent_ops_run_on_both_host_workers(eng):
    vars_ = [eng.new_var() for _ in range(64)]
    threads = set()
    lock = threading.Lock()

    def note():
        with lock:
            threads.add(threading.current_thread().name)

    futs = eng.push_many(note, [()] * 2000, writes=[[vars_[i % 64]] for i in range(2000)])
    cf.wait(futs, timeout=30)
    assert all(f.done() and f.exception() is None for f in futs)
    assert len(threads) >= 1


@pytest.mark.parametrize(
    "call, exc",
    [
        (lambda e, v: e.push_many(42, [()], writes=[[v]]), TypeError),
        (lambda e, v: e.push_many(print, [(), ()], writes=[[v]]), ValueError),
        (lambda e, v: e.push_many(print, [(), ()], reads=[[v], [v], [v]]), ValueError),
        (lambda e, v: e.push_many(print, [(), (), ()], writes=[[v], [v], ["no var"]]), TypeError),
        (lambda e, v: e.push_many(print, [(), 5], writes=[[v], [v]]), TypeError),
        (lambda e, v: e.push_many(print, [(), ()], reads=[[v], [v]], writes=[[v], [v]]), ValueError),
    ],
)
def test_bad_input_raises_and_pushes_nothing(eng, call, exc):
    v = eng.new_var()
    with pytest.raises(exc):
        call(eng, v)
    eng.wait_all()
    assert eng.var_version(v) == 0
    assert eng.pending() == 0


def test_a_refused_op_fails_its_future_and_the_rest_run(eng):
    v, gone = eng.new_var(), eng.new_var()
    eng.delete_var(gone)
    eng.wait_all()
    ran = []
    futs = eng.push_many(ran.append, [(0,), (1,), (2,)], writes=[[v], [gone], [v]])
    assert futs[0].result(timeout=10) is None
    assert futs[2].result(timeout=10) is None
    with pytest.raises(ValueError, match="deleted"):
        futs[1].result(timeout=10)
    assert futs[1].op_id is None
    assert ran == [0, 2]


def test_push_many_after_shutdown_raises():
    e = forksafe.Engine(host_workers=1)
    e.shutdown()
    with pytest.raises(forksafe.ShutDownError):
        e.push_many(print, [()] * 3)


def test_push_many_with_a_var_of_another_engine_pushes_nothing(eng):
    other = forksafe.Engine(host_workers=1)
    try:
        v, w = eng.new_var(), other.new_var()
        with pytest.raises(ValueError):
            eng.push_many(print, [(), ()], writes=[[v], [w]])
        eng.wait_all()
        assert eng.var_version(v) == 0
    finally:
        other.shutdown()


def test_a_batch_from_inside_an_op_fails_futures_past_the_bound():
    e = forksafe.Engine(host_workers=1, max_pending=3)
    try:
        out = {}

        def outer():
            out["futs"] = e.push_many(print, [()] * 4)

        e.push(outer).result(timeout=10)
        e.wait_all()
        errors = [f.exception(timeout=10) for f in out["futs"]]
        assert errors[:2] == [None, None]
        assert all(isinstance(x, forksafe.ForksafeError) and "bound" in str(x) for x in errors[2:]), errors
    finally:
        e.shutdown()


def test_push_many_longer_than_the_bound_waits_for_room():
    e = forksafe.Engine(host_workers=1, max_pending=4)
    try:
        v = e.new_var()
        seen = []
        futs = e.push_many(seen.append, [(i,) for i in range(100)], writes=[[v]] * 100)
        cf.wait(futs, timeout=30)
        assert seen == list(range(100))
    finally:
        e.shutdown()


def test_a_failing_callback_fails_its_own_future_only(eng):
    v = eng.new_var()

    def maybe(i):
        if i == 3:
            raise KeyError(i)
        return i

    futs = eng.push_many(maybe, [(i,) for i in range(6)], writes=[[eng.new_var()] for _ in range(6)])
    with pytest.raises(KeyError):
        futs[3].result(timeout=10)
    assert [f.result(timeout=10) for i, f in enumerate(futs) if i != 3] == [0, 1, 2, 4, 5]
    assert eng.var_version(v) == 0


def test_lazy_futures_under_concurrent_waiters(eng):
    # Waiters, done-callbacks and cf.wait race the engine's resolves: each
    # future's condition is made by whichever comes first.
    n = 3000
    gate = threading.Event()
    hold_var = eng.new_var()
    eng.push(gate.wait, writes=[hold_var])
    futs = eng.push_many(lambda i: i, [(i,) for i in range(n)], reads=[[hold_var]] * n)
    called = []
    lock = threading.Lock()

    def on_done(f):
        with lock:
            called.append(f.result())

    results = {}

    def waiter(k):
        results[k] = [futs[i].result(timeout=30) for i in range(k, n, 4)]

    threads = [threading.Thread(target=waiter, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for f in futs[::2]:
        f.add_done_callback(on_done)
    gate.set()
    done, not_done = cf.wait(futs, timeout=30)
    assert not not_done
    for t in threads:
        t.join(timeout=30)
    for f in futs[1::2]:
        f.add_done_callback(on_done)  # after resolve: runs at once
    assert sorted(sum(results.values(), [])) == list(range(n))
    assert sorted(called) == list(range(n))
    assert [f.result() for f in cf.as_completed(futs, timeout=10)]


def test_lazy_future_works_with_asyncio(eng):
    fut = eng.push(lambda: 7)

    async def main():
        return await asyncio.wrap_future(fut)

    assert asyncio.run(main()) == 7


def test_pending_futures_hold_no_condition_until_waited(eng):
    gate = threading.Event()
    eng.push(gate.wait)
    futs = eng.push_many(print, [()] * 10)
    assert not any("_condition_" in f.__dict__ for f in futs)
    assert not futs[0].done()
    gate.set()
    futs[0].result(timeout=10)
    eng.wait_all()
    assert all(f.done() for f in futs)


def test_a_failure_names_the_ops_vars(eng):
    d, v, w = eng.data(np.zeros(2)), eng.new_var(), eng.new_var()

    def boom(arr):
        raise RuntimeError("boom")

    futs = eng.push_many(boom, [()], reads=[[d, v]], writes=[[w]])
    with pytest.raises(RuntimeError) as info:
        futs[0].result(timeout=10)
    cause = info.value.__cause__
    assert isinstance(cause, forksafe.OpError)
    def num(var):
        return repr(var).split("#")[1].rstrip(">")

    assert cause.vars == f"reads: Data #{num(d.var)}, Var #{num(v)}; writes: Var #{num(w)}"
