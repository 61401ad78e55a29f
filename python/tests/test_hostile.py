"""What a careless or hostile user does to the Python API: each probe
expects a typed exception (or the documented result), and after it the
engine still runs a callback and a kernel. Nothing may crash, hang or
silently do nothing."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import forksafe


def still_works(eng):
    d = eng.data(np.arange(4.0))
    assert eng.sum(d).result(10) == 6.0
    assert eng.push(lambda: "ok").result(10) == "ok"
    eng.wait_all(10)


class Boom(Exception):
    pass


class BadBool:
    def __bool__(self):
        raise Boom("no truth")


class BadIter:
    def __iter__(self):
        raise Boom("no iteration")


class BadIndex:
    def __float__(self):
        raise Boom("no float")


def other_engine_var():
    other = forksafe.Engine(compute_workers=1, host_workers=1)
    return other.new_var()


# (id, probe(eng, objs), expected exception class)
PROBES = [
    # push: the callable and its arguments
    ("push-not-callable", lambda e, o: e.push(42), TypeError),
    ("push-none", lambda e, o: e.push(None), TypeError),
    ("push-reads-not-iterable", lambda e, o: e.push(lambda: 0, reads=5), TypeError),
    ("push-writes-not-iterable", lambda e, o: e.push(lambda: 0, writes=3.5), TypeError),
    ("push-reads-bad-iter", lambda e, o: e.push(lambda: 0, reads=BadIter()), (TypeError, Boom)),
    ("push-reads-str", lambda e, o: e.push(lambda: 0, reads="abc"), TypeError),
    ("push-reads-int-item", lambda e, o: e.push(lambda: 0, reads=[1]), TypeError),
    ("push-reads-array-item", lambda e, o: e.push(lambda: 0, reads=[np.zeros(2)]), TypeError),
    ("push-writes-none-item", lambda e, o: e.push(lambda: 0, writes=[None]), TypeError),
    ("push-dup-reads", lambda e, o: e.push(lambda: 0, reads=[o["v"], o["v"]]), ValueError),
    ("push-read-and-write", lambda e, o: e.push(lambda: 0, reads=[o["v"]], writes=[o["v"]]), ValueError),
    ("push-data-and-its-var", lambda e, o: e.push(lambda a: 0, reads=[o["d"]], writes=[o["d"].var]), ValueError),
    ("push-foreign-var", lambda e, o: e.push(lambda: 0, reads=[other_engine_var()]), ValueError),
    ("push-bad-priority", lambda e, o: e.push(lambda: 0, priority="urgent"), ValueError),
    ("push-priority-int", lambda e, o: e.push(lambda: 0, priority=1), TypeError),
    ("push-args-not-iterable", lambda e, o: e.push(lambda: 0, args=7), TypeError),
    ("push-kwargs-not-dict", lambda e, o: e.push(lambda: 0, kwargs=[1]), TypeError),
    ("push-name-int", lambda e, o: e.push(lambda: 0, name=5), TypeError),
    ("push-deleted-var", lambda e, o: e.push(lambda: 0, reads=[o["deleted"]]), ValueError),
    ("push-too-many-vars", lambda e, o: e.push(lambda: 0, reads=[e.new_var() for _ in range(65_536)]), ValueError),
    # waits and timeouts
    ("wait-not-a-var", lambda e, o: e.wait(3), TypeError),
    ("wait-none", lambda e, o: e.wait(None), TypeError),
    ("wait-negative-timeout", lambda e, o: e.wait(o["v"], timeout=-1), ValueError),
    ("wait-nan-timeout", lambda e, o: e.wait(o["v"], timeout=float("nan")), ValueError),
    ("wait-str-timeout", lambda e, o: e.wait(o["v"], timeout="1"), TypeError),
    ("wait-foreign", lambda e, o: e.wait(other_engine_var()), ValueError),
    ("wait-all-negative", lambda e, o: e.wait_all(timeout=-0.5), ValueError),
    ("wait-all-neg-inf", lambda e, o: e.wait_all(timeout=float("-inf")), ValueError),
    ("get-not-data", lambda e, o: e.get(o["v"]), TypeError),
    ("get-array", lambda e, o: e.get(np.zeros(2)), TypeError),
    ("get-bad-timeout", lambda e, o: e.get(o["d"], timeout=-3), ValueError),
    ("shutdown-negative", lambda e, o: e.shutdown(timeout=-1), ValueError),
    ("future-result-str-timeout", lambda e, o: o["fut"].result(timeout="x"), TypeError),
    # data registration
    ("data-list", lambda e, o: e.data([1, 2, 3]), TypeError),
    ("data-int", lambda e, o: e.data(5), TypeError),
    ("data-none", lambda e, o: e.data(None), TypeError),
    ("data-str", lambda e, o: e.data("abc"), TypeError),
    # kernels: types, shapes, layouts, scalars
    ("add-one-input", lambda e, o: e._run_kernel("add", [o["d"]], o["d"]), TypeError),
    ("add-not-data", lambda e, o: e.add(np.zeros(3), o["d"], o["d"]), TypeError),
    ("add-dtypes-differ", lambda e, o: e.add(o["d"], o["i"], o["d"]), TypeError),
    ("add-shapes-differ", lambda e, o: e.add(o["d"], o["d5"], o["d"]), ValueError),
    ("add-orders-differ", lambda e, o: e.add(o["c2"], o["f2"], o["c2"]), TypeError),
    ("add-strided", lambda e, o: e.add(o["strided"], o["strided"], o["d"]), TypeError),
    ("add-object-dtype", lambda e, o: e.add(o["obj"], o["obj"], o["obj"]), TypeError),
    ("add-complex", lambda e, o: e.add(o["cplx"], o["cplx"], o["cplx"]), TypeError),
    ("add-big-endian", lambda e, o: e.add(o["be"], o["be"], o["be"]), TypeError),
    ("add-out-read-only", lambda e, o: e.add(o["d"], o["d"], o["ro"]), ValueError),
    ("scale-str-factor", lambda e, o: e.scale(o["d"], "2", o["d"]), TypeError),
    ("scale-none-factor", lambda e, o: e.scale(o["d"], None, o["d"]), TypeError),
    ("scale-float-on-int", lambda e, o: e.scale(o["i"], 1.5, o["i"]), TypeError),
    ("scale-huge-int-on-int32", lambda e, o: e.scale(o["i"], 2**40, o["i"]), TypeError),
    ("scale-number-on-bool", lambda e, o: e.scale(o["b"], 2.0, o["b"]), TypeError),
    ("scale-bad-float", lambda e, o: e.scale(o["d"], BadIndex(), o["d"]), (TypeError, Boom)),
    ("fill-float-on-int", lambda e, o: e.fill(o["i"], 2.5), TypeError),
    ("fill-bool-on-float", lambda e, o: e.fill(o["d"], True), TypeError),
    ("fill-list", lambda e, o: e.fill(o["d"], [1.0]), TypeError),
    ("fill-int-too-big", lambda e, o: e.fill(o["i"], 2**63), (TypeError, OverflowError)),
    ("copy-shapes-differ", lambda e, o: e.copy(o["d"], o["d5"]), ValueError),
    ("copy-to-read-only", lambda e, o: e.copy(o["d"], o["ro"]), ValueError),
    ("sum-bool", lambda e, o: e.sum(o["b"]), TypeError),
    ("max-empty", lambda e, o: e.max(o["empty"]), ValueError),
    ("mean-not-data", lambda e, o: e.mean([1.0]), TypeError),
    ("kernel-unknown", lambda e, o: e._run_kernel("divide", [o["d"]]), ValueError),
    ("sleep-negative", lambda e, o: e.sleep(-1), ValueError),
    ("sleep-nan", lambda e, o: e.sleep(float("nan")), ValueError),
    # vars
    ("clear-poison-not-var", lambda e, o: e.clear_poison(1), TypeError),
    ("delete-deleted", lambda e, o: e.delete_var(o["deleted"]), ValueError),
    ("var-version-foreign", lambda e, o: e.var_version(other_engine_var()), ValueError),
    # configuration
    ("engine-zero-workers", lambda e, o: forksafe.Engine(compute_workers=0), ValueError),
    ("engine-negative-workers", lambda e, o: forksafe.Engine(host_workers=-1), (ValueError, OverflowError)),
    ("engine-huge-workers", lambda e, o: forksafe.Engine(compute_workers=10**6), ValueError),
    ("engine-zero-pending", lambda e, o: forksafe.Engine(max_pending=0), ValueError),
    ("engine-nul-name", lambda e, o: forksafe.Engine(thread_name="a\0b"), ValueError),
    ("engine-empty-name", lambda e, o: forksafe.Engine(thread_name=""), ValueError),
    ("engine-zero-stack", lambda e, o: forksafe.Engine(worker_stack_size=0), ValueError),
    ("engine-huge-stack", lambda e, o: forksafe.Engine(worker_stack_size=1 << 50), forksafe.ForksafeError),
    ("engine-nan-drain", lambda e, o: forksafe.Engine(fork_drain=float("nan")), ValueError),
    ("engine-bad-keyword", lambda e, o: forksafe.Engine(workers=2), TypeError),
    ("set-fork-drain-zero", lambda e, o: forksafe.set_fork_drain(0), ValueError),
]


@pytest.fixture
def objs(eng):
    v = eng.new_var()
    deleted = eng.new_var()
    eng.delete_var(deleted)
    eng.wait_all(10)
    ro = np.zeros(3)
    ro.flags.writeable = False
    fut = eng.push(lambda: 0)
    fut.result(10)
    eng.wait_all(10)
    return {
        "fut": fut,
        "v": v,
        "deleted": deleted,
        "d": eng.data(np.zeros(3)),
        "d5": eng.data(np.zeros(5)),
        "i": eng.data(np.zeros(3, dtype=np.int32)),
        "b": eng.data(np.zeros(3, dtype=bool)),
        "c2": eng.data(np.zeros((2, 3))),
        "f2": eng.data(np.asfortranarray(np.zeros((2, 3)))),
        "strided": eng.data(np.zeros(6)[::2]),
        "obj": eng.data(np.array([1, "a", None], dtype=object)),
        "cplx": eng.data(np.zeros(3, dtype=complex)),
        "be": eng.data(np.zeros(3, dtype=">f8")),
        "ro": eng.data(ro),
        "empty": eng.data(np.zeros(0)),
    }


@pytest.mark.parametrize("probe,expected", [p[1:] for p in PROBES], ids=[p[0] for p in PROBES])
def test_probe_raises_a_typed_error_and_loses_nothing(eng, objs, probe, expected):
    before = eng.pending()
    with pytest.raises(expected):
        probe(eng, objs)
    assert eng.pending() == before, "a refused call left an op behind"
    still_works(eng)


def test_probes_are_many():
    assert len(PROBES) >= 60


# Behaviour probes: the documented result, then the engine works.

def test_a_callback_raising_anything_poisons_and_reraises_that_object(eng):
    v = eng.new_var()
    for exc in [Boom("x"), KeyboardInterrupt(), SystemExit(3), ValueError("v"), MemoryError()]:
        def cb(exc=exc):
            raise exc
        fut = eng.push(cb, writes=[v], run_on_error=True)
        with pytest.raises(type(exc)) as got:
            fut.result(10)
        assert got.value is exc
    # The first error poisons the var and sticks until cleared.
    with pytest.raises(Boom):
        eng.wait(v)
    with pytest.raises(Boom):
        eng.wait_all(10)
    eng.clear_poison(v)
    eng.wait(v, timeout=10)
    still_works(eng)


def test_a_callback_that_returns_an_unpicklable_or_odd_value(eng):
    lock = threading.Lock()
    assert eng.push(lambda: lock).result(10) is lock
    assert eng.push(lambda: BadBool()).result(10).__class__ is BadBool
    still_works(eng)


def test_a_callback_mutating_its_read_view_raises_inside(eng):
    d = eng.data(np.zeros(3))

    def cb(a):
        a[0] = 1.0

    with pytest.raises(ValueError, match="read-only"):
        eng.push(cb, reads=[d]).result(10)
    with pytest.raises(ValueError, match="read-only"):
        eng.wait_all(10)
    assert eng.get(d).tolist() == [0.0] * 3
    still_works(eng)


def test_deleting_the_registered_array_name_keeps_the_data_alive(eng):
    a = np.arange(5.0)
    d = eng.data(a)
    del a
    gc.collect()
    assert eng.sum(d).result(10) == 10.0
    still_works(eng)


def test_a_data_dropped_while_ops_are_queued(eng):
    gate = threading.Event()
    eng.push(lambda: gate.wait(10))
    d = eng.data(np.zeros(1000))
    futs = [eng.fill(d, float(i)) for i in range(20)]
    del d
    gc.collect()
    gate.set()
    for f in futs:
        f.result(10)
    still_works(eng)


def test_callbacks_that_push_wait_and_shut_down_their_engine(eng):
    def cb():
        return eng.shutdown(timeout=0.5)

    report = eng.push(cb).result(10)
    assert set(report) == {"cancelled", "still_running"}
    with pytest.raises(forksafe.ShutDownError):
        eng.push(lambda: 0)
    with pytest.raises(forksafe.ShutDownError):
        eng.new_var()


def test_shutdown_racing_pushes_from_threads(eng):
    errors = []

    def pusher():
        for _ in range(500):
            try:
                eng.push(lambda: None)
            except forksafe.ShutDownError:
                pass
            except BaseException as e:  # pragma: no cover - the failure
                errors.append(e)

    threads = [threading.Thread(target=pusher) for _ in range(3)]
    for t in threads:
        t.start()
    eng.shutdown(timeout=5)
    for t in threads:
        t.join(30)
    assert not errors and not any(t.is_alive() for t in threads)


def test_an_op_future_used_after_shutdown(eng):
    fut = eng.push(lambda: 5)
    eng.shutdown()
    assert fut.result(0) == 5
    assert not fut.running() and fut.done()
