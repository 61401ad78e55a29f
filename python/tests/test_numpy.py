"""Data vars over numpy arrays (zero-copy), the Rust kernels, futures and
bad input (issue "Python package for real users", items 1-4)."""

from __future__ import annotations

import array
import asyncio
import concurrent.futures as cf
import threading

import numpy as np
import pytest

import forksafe


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_zero_copy_the_callback_and_get_see_the_registered_memory(eng):
    a = np.arange(8.0)
    d = eng.data(a)
    assert d.array is a, "the registered object itself"
    seen = eng.push(lambda w: (address(w), np.shares_memory(w, a)), writes=[d])
    assert seen.result(timeout=10) == (address(a), True)
    # A read gets a read-only view of the same memory.
    ro = eng.push(lambda r: (address(r), r.flags.writeable, r.base is a), reads=[d])
    assert ro.result(timeout=10) == (address(a), False, True)
    # A kernel writes the caller's array in place.
    eng.fill(d, 5.0)
    got = eng.get(d)
    assert got is a and address(got) == address(a)
    assert a.tolist() == [5.0] * 8


def test_read_only_view_refuses_writes_in_a_callback(eng):
    d = eng.data(np.zeros(3))

    def writes_to_a_read(r):
        r[0] = 1.0

    err = eng.push(writes_to_a_read, reads=[d]).exception(timeout=10)
    assert isinstance(err, ValueError) and "read-only" in str(err)
    assert eng.get(d).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        eng.wait_all()


def test_buffer_protocol_objects_are_viewed_not_copied(eng):
    buf = bytearray(16)
    d = eng.data(buf)
    eng.push(lambda w: w.__setitem__(slice(None), 7), writes=[d]).result(timeout=10)
    assert bytes(buf) == bytes([7] * 16), "written through to the bytearray"
    ints = array.array("i", [1, 2, 3])
    di = eng.data(ints)
    assert eng.sum(di).result(timeout=10) == 6
    eng.scale(di, 2, di)
    eng.wait(di)
    assert list(ints) == [2, 4, 6]
    with pytest.raises(TypeError, match="buffer protocol"):
        eng.data([1.0, 2.0])
    ro = eng.data(b"\0" * 8)
    with pytest.raises(ValueError, match="read-only"):
        eng.push(lambda w: None, writes=[ro])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_kernels_match_numpy(eng, dtype):
    rng = np.random.default_rng(7)
    a = (rng.random(1000) * 100).astype(dtype)
    b = (rng.random(1000) * 100).astype(dtype)
    da, db = eng.data(a.copy()), eng.data(b.copy())
    out = eng.data(np.zeros(1000, dtype=dtype))
    eng.add(da, db, out)
    assert np.array_equal(eng.get(out), a + b)
    eng.mul(da, db, out)
    assert np.array_equal(eng.get(out), a * b)
    factor = 3 if dtype.startswith("int") else 0.5
    eng.scale(da, factor, out)
    assert np.array_equal(eng.get(out), a * np.array(factor, dtype=dtype))
    eng.copy(db, out)
    assert np.array_equal(eng.get(out), b)
    assert eng.max(da).result(timeout=10) == a.max()
    s = eng.sum(da).result(timeout=10)
    assert s == pytest.approx(float(a.sum(dtype="float64")), rel=1e-4)
    assert eng.mean(da).result(timeout=10) == pytest.approx(float(a.mean()), rel=1e-4)


def test_max_propagates_nan_like_numpy(eng):
    for values in ([1.0, float("nan"), 3.0], [float("nan"), 1.0], [2.0, 1.0]):
        a = np.array(values)
        got = eng.max(eng.data(a)).result(timeout=10)
        assert (np.isnan(got) and np.isnan(a.max())) or got == a.max(), (values, got)


def test_bool_arrays_fill_copy_and_or(eng):
    a, b = eng.data(np.array([True, False, False])), eng.data(np.array([False, False, True]))
    out = eng.data(np.zeros(3, dtype=bool))
    eng.add(a, b, out)
    assert eng.get(out).tolist() == [True, False, True]
    eng.fill(out, False)
    assert eng.get(out).tolist() == [False] * 3
    # Reductions of bool arrays are refused at push, pushing nothing.
    before = eng.pending()
    with pytest.raises(TypeError, match="numeric"):
        eng.sum(a)
    assert eng.pending() == before
    eng.wait_all()
    # bool * True is and, as numpy's.
    eng.scale(a, True, out)
    assert eng.get(out).tolist() == [True, False, False]


def test_kernel_bad_input_is_a_typed_error_and_pushes_nothing(eng):
    a = eng.data(np.zeros(4))
    before = eng.pending()
    with pytest.raises(TypeError):
        eng.add(a, np.zeros(4), a)  # not a Data
    with pytest.raises(ValueError, match="shapes differ"):
        eng.add(a, eng.data(np.zeros(5)), a)
    with pytest.raises(TypeError, match="does not fit"):
        eng.fill(eng.data(np.zeros(2, dtype=np.int32)), 1.5)
    with pytest.raises(TypeError, match="does not fit"):
        eng.fill(eng.data(np.zeros(2, dtype=np.int32)), 2**40)
    with pytest.raises(TypeError, match="contiguous"):
        eng.fill(eng.data(np.zeros((4, 4))[:, 0]), 1.0)
    with pytest.raises(TypeError, match="contiguous"):
        eng.sum(eng.data(np.zeros(3, dtype=np.complex128)))
    assert eng.pending() == before
    # A callback still gets an array the kernels do not take.
    cplx = eng.data(np.zeros(2, dtype=np.complex128))
    assert eng.push(lambda c: c.dtype.name, reads=[cplx]).result(timeout=10) == "complex128"


def test_future_api(eng):
    v = eng.new_var()
    gate, started = threading.Event(), threading.Event()
    fut = eng.push(lambda: started.set() or (gate.wait(10) and "value"), writes=[v], name="gated")
    assert isinstance(fut, cf.Future) and isinstance(fut, forksafe.OpFuture)
    assert fut.name == "gated" and isinstance(fut.op_id, int)
    assert started.wait(10)
    assert not fut.done() and fut.running()
    assert fut.cancel() is False, "a pushed op cannot be cancelled"
    with pytest.raises(cf.TimeoutError):
        fut.result(timeout=0.01)
    called = []
    fut.add_done_callback(lambda f: called.append(f.result()))
    gate.set()
    assert fut.result(timeout=10) == "value"
    assert fut.exception() is None
    eng.wait(v)
    assert called == ["value"]
    late = []
    fut.add_done_callback(lambda f: late.append(f.done()))
    assert late == [True], "a callback on a done future runs at once"
    # concurrent.futures helpers accept it.
    futs = [eng.push(lambda i=i: i * i) for i in range(5)]
    assert sorted(f.result() for f in cf.as_completed(futs, timeout=10)) == [0, 1, 4, 9, 16]


def test_futures_are_awaitable_in_asyncio(eng):
    async def main():
        d = eng.data(np.arange(10.0))
        total = await asyncio.wrap_future(eng.sum(d))
        doubled = await asyncio.wrap_future(eng.push(lambda r: r * 2, reads=[d]))
        failed = eng.push(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            await asyncio.wrap_future(failed)
        return total, doubled.tolist()

    total, doubled = asyncio.run(asyncio.wait_for(main(), 30))
    assert total == 45.0 and doubled == [2.0 * i for i in range(10)]
    with pytest.raises(ZeroDivisionError):
        eng.wait_all()


def test_skipped_and_cancelled_futures_resolve():
    eng = forksafe.Engine(compute_workers=1, host_workers=1)
    d = eng.data(np.zeros(4))

    def boom(w):
        raise RuntimeError("stage 1 failed")

    first = eng.push(boom, writes=[d], name="stage 1")
    kernel = eng.sum(d, name="reduce")
    callback = eng.push(lambda r: None, reads=[d], name="stage 2")
    original = first.exception(timeout=10)
    assert isinstance(original, RuntimeError)
    for f in (kernel, callback):
        e = f.exception(timeout=10)
        assert isinstance(e, forksafe.OpError) and e.kind == "skipped"
        assert e.__cause__ is original
    # Cancelled by shutdown: queued behind a long op.
    eng.clear_poison(d)
    eng.sleep(0.5, writes=[d])
    queued = [eng.fill(d, 1.0) for _ in range(3)] + [eng.push(lambda w: None, writes=[d])]
    eng.shutdown(0.05)
    for f in queued:
        e = f.exception(timeout=10)
        assert isinstance(e, forksafe.OpError) and e.kind == "cancelled", e


def test_bad_config_raises_at_construction():
    with pytest.raises(ValueError):
        forksafe.Engine(compute_workers=0)
    with pytest.raises(ValueError):
        forksafe.Engine(compute_workers=10**6)
    with pytest.raises(ValueError):
        forksafe.Engine(thread_name="a\0b")
    with pytest.raises(forksafe.ForksafeError):
        forksafe.Engine(worker_stack_size=2**60)
    with pytest.raises(OverflowError):
        forksafe.Engine(max_stand_ins=10**30)
    with pytest.raises((TypeError, OverflowError)):
        forksafe.Engine(compute_workers=-1)


def test_version():
    assert isinstance(forksafe.__version__, str) and forksafe.__version__.count(".") == 2


def test_failed_ops_exceptions_are_freed_once_cleared(eng):
    """An exception travels with the poison (the same object at every
    wait); once the poison is cleared and reported, nothing keeps it: the
    engine's references are dropped (deferred to a thread with the GIL)."""
    import gc
    import weakref

    class Boom(Exception):
        pass

    refs = []
    v = eng.new_var()

    def fail(n):
        raise Boom(n)

    for i in range(200):
        f = eng.push(fail, args=(i,), writes=[v])
        e = f.exception(timeout=10)
        refs.append(weakref.ref(e))
        with pytest.raises(Boom):
            eng.wait_all()
        eng.clear_poison(v)
        del f, e
    eng.wait(v)
    eng.push(lambda: None).result(timeout=10)  # a binding call drains the queue
    gc.collect()
    alive = sum(r() is not None for r in refs)
    assert alive == 0, f"{alive} of 200 exceptions still alive"
