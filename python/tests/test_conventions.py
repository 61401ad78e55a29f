"""Python conventions: timeouts (None/inf wait for ever, 0 polls, huge is
no deadline), picklable exceptions, concurrent.futures' running(), typed
errors after shutdown."""

from __future__ import annotations

import multiprocessing as mp
import pickle
import threading

import numpy as np
import pytest

import forksafe


@pytest.mark.parametrize("timeout", [None, float("inf"), 1e19, 1e300, 5.0])
def test_waits_with_no_deadline_or_a_huge_one(eng, timeout):
    v = eng.new_var()
    fut = eng.push(lambda: "ok", writes=[v])
    eng.wait(v, timeout=timeout)
    eng.wait_all(timeout=timeout)
    assert fut.result(timeout=timeout) == "ok"
    assert fut.exception(timeout=timeout) is None
    d = eng.data(np.zeros(1))
    assert eng.get(d, timeout=timeout).tolist() == [0.0]


def test_timeout_zero_polls(eng):
    v = eng.new_var()
    gate = threading.Event()
    fut = eng.push(lambda: gate.wait(10), writes=[v])
    with pytest.raises(forksafe.WaitTimeout):
        eng.wait(v, timeout=0)
    with pytest.raises(forksafe.WaitTimeout):
        eng.wait_all(timeout=0)
    gate.set()
    fut.result(10)
    # The future is resolved inside the op, just before it completes.
    eng.wait(v, timeout=10)
    eng.wait(v, timeout=0)
    eng.wait_all(timeout=0)


@pytest.mark.parametrize("bad", [-1.0, -1e-9, float("nan"), float("-inf")])
def test_bad_timeouts_are_value_errors(eng, bad):
    v = eng.new_var()
    with pytest.raises(ValueError, match="timeout"):
        eng.wait(v, timeout=bad)
    with pytest.raises(ValueError, match="timeout"):
        eng.wait_all(timeout=bad)
    with pytest.raises(ValueError, match="timeout"):
        eng.shutdown(timeout=bad)
    # Nothing was lost: the engine works.
    assert eng.push(lambda: 3).result(10) == 3


def test_running_follows_concurrent_futures():
    eng = forksafe.Engine(compute_workers=1, host_workers=1)
    gate, started = threading.Event(), threading.Event()
    first = eng.push(lambda: started.set() or gate.wait(10))
    queued = eng.push(lambda: None)
    assert started.wait(10)
    assert first.running() and not first.done()
    assert not queued.running() and not queued.done(), "a queued op is not running"
    gate.set()
    queued.result(10)
    assert not first.running() and first.done()
    assert not queued.running()
    eng.shutdown()


def _fail_in_engine(_):
    eng = forksafe.Engine(compute_workers=1, host_workers=1)
    v = eng.new_var()
    eng.push(lambda: 1 / 0, writes=[v])
    # Skipped: its input is poisoned; its future raises OpError.
    eng.push(lambda: None, reads=[v]).result(10)


def test_op_error_crosses_a_multiprocessing_pool():
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        with pytest.raises(forksafe.OpError) as e:
            pool.apply(_fail_in_engine, (0,))
    assert e.value.kind == "skipped"


def test_every_forksafe_exception_pickles(eng):
    v = eng.new_var()
    eng.push(lambda: 1 / 0, writes=[v])
    with pytest.raises(forksafe.OpError) as skipped:
        eng.push(lambda: None, reads=[v]).result(10)
    errs = [skipped.value]
    gate = threading.Event()
    eng.push(lambda: gate.wait(10), writes=[v], run_on_error=True)
    with pytest.raises(forksafe.WaitTimeout) as timeout:
        eng.wait(v, timeout=0.01)
    errs.append(timeout.value)
    gate.set()
    for cls in (forksafe.ForksafeError, forksafe.ShutDownError, forksafe.ForkInProgressError,
                forksafe.WaitOnSelfError):
        errs.append(cls("a message"))
    for err in errs:
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err)
        assert str(back) == str(err)
        assert back.__dict__ == err.__dict__
    assert type(errs[0]).__module__ == "forksafe"


def test_calls_after_shutdown_raise_shut_down_error():
    eng = forksafe.Engine(compute_workers=1, host_workers=1)
    d = eng.data(np.zeros(2))
    eng.shutdown()
    with pytest.raises(forksafe.ShutDownError):
        eng.new_var()
    with pytest.raises(forksafe.ShutDownError):
        eng.data(np.zeros(2))
    with pytest.raises(forksafe.ShutDownError):
        eng.push(lambda: None)
    with pytest.raises(forksafe.ShutDownError):
        eng.fill(d, 1.0)
    # Reads of what exists still answer.
    assert eng.get(d).tolist() == [0.0, 0.0]
    assert eng.state == "stopped"


def test_messages_and_reprs_speak_python(eng):
    v = eng.new_var()
    assert repr(v).startswith("<forksafe.Var #")
    i = eng.data(np.zeros(3, dtype=np.int32))
    with pytest.raises(TypeError) as e:
        eng.fill(i, 1.5)
    assert "1.5 (float)" in str(e.value) and "int32" in str(e.value)
    with pytest.raises(TypeError) as e:
        eng._run_kernel("scale", [i], i)
    assert "scale takes" in str(e.value)
    d = eng.data(np.zeros(2))
    eng.push(lambda a: 1 / 0, writes=[d], name="bad")
    with pytest.raises(ZeroDivisionError) as e:
        eng.wait(d)
    text = str(e.value.__cause__)
    assert "Data #" in text and "Var(engine" not in text
    for rust in ("Float(", "Int(", "Some(", "wrong arguments"):
        assert rust not in text
