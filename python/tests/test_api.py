"""The Python API: vars, data vars, host-lane callbacks, built-in Rust
kernels, waits, errors and bad input."""

from __future__ import annotations

import threading
import time
import traceback

import numpy as np
import pytest

import forksafe


def test_push_callbacks_in_var_order(eng):
    v = eng.new_var()
    seen = []
    for i in range(200):
        eng.push(seen.append, args=(i,), writes=[v], name="append")
    eng.wait(v)
    assert seen == list(range(200))
    assert eng.var_version(v) == 200
    eng.wait_all()


def test_callback_args_kwargs_and_name(eng):
    out = {}

    def cb(a, b, *, c):
        out["v"] = (a, b, c, threading.current_thread().name)

    v = eng.new_var()
    eng.push(cb, args=[1, 2], kwargs={"c": 3}, writes=[v], name="named")
    eng.wait(v)
    assert out["v"][:3] == (1, 2, 3)


def test_rust_kernels_and_host_ops(eng):
    a = eng.data(np.array([1.0, 2.0]))
    b = eng.data(np.array([10.0, 20.0]))
    out = eng.data(np.zeros(2))
    eng.add(a, b, out)
    eng.add(out, a, out)  # in place: out is only written
    c = eng.data(np.zeros(2))
    eng.copy(out, c)
    eng.fill(a, 7.0)
    seen = eng.push(lambda c: c.tolist(), reads=[c])
    eng.wait_all()
    assert eng.get(out).tolist() == [12.0, 24.0]
    assert seen.result() == [12.0, 24.0]
    assert eng.get(a).tolist() == [7.0, 7.0]
    eng.mul(a, b, out)
    eng.scale(out, 0.5, out)
    assert eng.get(out).tolist() == [35.0, 70.0]
    assert eng.sum(out).result() == 105.0
    assert eng.mean(out).result() == 52.5
    assert eng.max(out).result() == 70.0


def test_default_engine():
    d = forksafe.default_engine()
    assert d is forksafe.default_engine()
    assert isinstance(d, forksafe.Engine) and d.is_default
    v = d.new_var()
    d.push(lambda: None, writes=[v])
    d.wait(v)


def test_exception_in_callback_reraised_at_wait(eng):
    v, w, ok = eng.new_var(), eng.new_var(), eng.new_var()

    def forward():
        raise KeyError("missing input 'x'")

    failed = eng.push(forward, writes=[v], name="bad forward")
    dependent = eng.push(lambda: None, reads=[v], writes=[w], name="dependent")
    eng.push(lambda: None, writes=[ok], name="independent")
    # The wait raises the callback's own exception object, chained from an
    # OpError that names the op and its vars.
    with pytest.raises(KeyError) as info:
        eng.wait(v)
    original = info.value
    assert failed.exception() is original
    e = original.__cause__
    assert isinstance(e, forksafe.OpError)
    assert e.kind == "failed"
    assert e.exc_type == "KeyError"
    assert e.message == "\"missing input 'x'\""
    assert e.op_name == "bad forward" and e.op_id == failed.op_id
    assert "writes: Var" in e.vars
    assert "Traceback (most recent call last)" in e.traceback
    assert "in forward" in e.traceback and "raise KeyError" in e.traceback
    assert "missing input 'x'" in str(e) and "bad forward" in str(e)
    tb = "".join(traceback.format_exception(type(original), original, original.__traceback__))
    assert "raise KeyError" in tb, "the original traceback is kept"
    # Poison sticks and passes on to dependents, with the same exception.
    with pytest.raises(KeyError) as again:
        eng.wait(v)
    assert again.value is original
    with pytest.raises(KeyError) as dep:
        eng.wait(w)
    assert dep.value is original
    # The skipped dependent's future: OpError caused by the original.
    skipped = dependent.exception(timeout=10)
    assert isinstance(skipped, forksafe.OpError) and skipped.kind == "skipped"
    assert skipped.op_name == "dependent" and skipped.__cause__ is original
    eng.wait(ok)
    with pytest.raises(KeyError) as all_:
        eng.wait_all()
    assert all_.value is original and all_.value.errors == [original]
    eng.wait_all()  # reported once
    # The engine keeps working once the poison is cleared.
    eng.clear_poison(v)
    eng.push(lambda: None, writes=[v])
    eng.wait(v)


def test_exception_that_has_a_cause_keeps_it(eng):
    v = eng.new_var()

    def chained():
        try:
            {}["k"]
        except KeyError as k:
            raise ValueError("bad input") from k

    f = eng.push(chained, writes=[v])
    e = f.exception(timeout=10)
    assert isinstance(e, ValueError) and isinstance(e.__cause__, KeyError)
    assert any("chained" in n for n in e.__notes__), "the op is named in a note"
    with pytest.raises(ValueError):
        eng.wait_all()


def test_rust_op_failure(eng):
    a, b = eng.data(np.zeros(1)), eng.data(np.zeros(2))
    with pytest.raises(ValueError, match="shapes differ"):
        eng.add(a, b, b)
    with pytest.raises(TypeError, match="dtypes differ"):
        eng.add(a, eng.data(np.zeros(1, dtype=np.int64)), a)
    # numpy's max of an empty array has no identity: refused at push,
    # pushing nothing (as numpy raises at the call).
    empty = eng.data(np.zeros(0))
    before = eng.pending()
    with pytest.raises(ValueError, match="zero-size array"):
        eng.max(empty)
    assert eng.pending() == before
    eng.wait_all()


def test_callback_waits_on_another_var():
    # One host worker: the callback waits for a Rust op and for a host op
    # pushed before it; neither deadlocks the pool.
    eng = forksafe.Engine(compute_workers=1, host_workers=1)
    x, y, z = eng.data(np.zeros(2)), eng.new_var(), eng.new_var()
    eng.sleep(0.2, writes=[x])
    eng.fill(x, 3.0)
    order = []
    eng.push(lambda: (time.sleep(0.1), order.append("y")), writes=[y])
    got = {}

    def consumer():
        eng.wait(y)
        got["x"] = eng.get(x).tolist()  # waits for the Rust writes of x
        order.append("consumer")

    eng.push(consumer, writes=[z], name="consumer")
    eng.wait(z, timeout=10)
    assert got["x"] == [3.0, 3.0]
    assert order == ["y", "consumer"]
    eng.shutdown()


def test_wait_on_own_write_is_an_error(eng):
    v = eng.new_var()
    caught = []

    def cb():
        try:
            eng.wait(v)
        except forksafe.WaitOnSelfError as e:
            caught.append((str(e), e.op_id, e.on_id, e.var_id))

    fut = eng.push(cb, writes=[v])
    eng.wait(v)
    assert caught, "the wait raised nothing"
    text, op_id, on_id, var_id = caught[0]
    assert "waits for the op itself" in text
    assert op_id == on_id == fut.op_id and var_id is not None


def test_wait_timeout(eng):
    v = eng.new_var()
    eng.sleep(1.0, writes=[v], name="long")
    with pytest.raises(forksafe.WaitTimeout) as info:
        eng.wait(v, timeout=0.05)
    assert any("long" in p for p in info.value.pending)
    with pytest.raises(forksafe.WaitTimeout):
        eng.wait_all(timeout=0.05)
    eng.wait(v, timeout=10)


def test_bad_input_raises_typed_errors(eng):
    other = forksafe.Engine()
    v, w = eng.new_var(), other.new_var()
    with pytest.raises(TypeError):
        eng.push(42)
    with pytest.raises(TypeError):
        eng.push(lambda: None, writes=[object()])
    with pytest.raises(TypeError):
        eng.push(lambda: None, writes=3)
    with pytest.raises(ValueError, match="more than once"):
        eng.push(lambda: None, reads=[v], writes=[v])
    with pytest.raises(ValueError, match="another engine"):
        eng.push(lambda: None, writes=[w])
    many = [eng.new_var() for _ in range(65536)]
    with pytest.raises(ValueError, match="more than 65535 vars"):
        eng.push(lambda: None, reads=many)
    with pytest.raises(ValueError, match="timeout"):
        eng.wait(v, timeout=-1)
    with pytest.raises(ValueError, match="timeout"):
        eng.wait(v, timeout=float("nan"))
    with pytest.raises(ValueError):
        eng.push(lambda: None, priority="urgent")
    with pytest.raises(ValueError):
        forksafe.Engine(compute_workers=0)
    with pytest.raises(ValueError):
        forksafe.Engine(fork_drain=-1)
    with pytest.raises(ValueError, match="worker_stack_size"):
        forksafe.Engine(worker_stack_size=0)
    with pytest.raises(TypeError):
        forksafe.Engine(bogus=1)
    eng.delete_var(v)
    with pytest.raises(ValueError, match="deleted"):
        eng.push(lambda: None, writes=[v])
    other.shutdown()


def test_shutdown_refuses_pushes_and_reports():
    eng = forksafe.Engine(host_workers=1)
    v = eng.new_var()
    for _ in range(50):
        eng.push(time.sleep, args=(0.02,), writes=[v], name="queued")
    report = eng.shutdown(0.1)
    assert "queued" in report["cancelled"]
    assert eng.state == "stopped"
    with pytest.raises(forksafe.ShutDownError):
        eng.push(lambda: None)
    with pytest.raises(forksafe.OpError) as info:
        eng.wait_all()
    assert any(e.kind == "cancelled" for e in info.value.errors)
    assert info.value.errors[0] is info.value


def test_push_and_wait_from_many_threads(eng):
    v = eng.new_var()
    count = [0]

    def bump():
        count[0] += 1

    def pusher():
        for _ in range(100):
            eng.push(bump, writes=[v])
        eng.wait(v)

    ts = [threading.Thread(target=pusher) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    eng.wait_all()
    assert count[0] == 400


def test_bounded_engine_push_waits_without_the_gil():
    eng = forksafe.Engine(max_pending=4, host_workers=1)
    v = eng.new_var()
    seen = []
    for i in range(40):
        eng.push(seen.append, args=(i,), writes=[v])
    eng.wait(v)
    assert seen == list(range(40))
    eng.shutdown()


def test_ctrl_c_interrupts_a_wait_on_the_main_thread(eng):
    import os
    import signal

    # A process started in the background by a non-interactive shell
    # inherits SIGINT ignored, and Python then installs no KeyboardInterrupt
    # handler: install it, as an interactive process has it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        v = eng.new_var()
        eng.sleep(5.0, writes=[v], name="long")
        threading.Timer(0.2, os.kill, args=(os.getpid(), signal.SIGINT)).start()
        t = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            eng.wait(v)
        assert time.monotonic() - t < 2.0
    finally:
        signal.signal(signal.SIGINT, previous)
    eng.shutdown(0.1)  # the 5 s Rust op keeps running; nothing waits for it


def test_a_stack_size_the_os_refuses_raises_at_engine():
    # Before: the engine was built and its ops never ran.
    with pytest.raises(forksafe.ForksafeError, match="cannot start a worker thread"):
        forksafe.Engine(worker_stack_size=2**62)


def test_push_inside_a_callback_at_the_bound_raises_instead_of_hanging():
    # The callback's op holds the only slot: the push inside it must not wait
    # for it (the bound rule), it raises at once.
    eng = forksafe.Engine(max_pending=1)
    seen = []

    def outer():
        try:
            eng.push(lambda: None)
            seen.append("pushed")
        except forksafe.ForksafeError as e:
            seen.append(str(e))

    eng.push(outer)
    eng.wait_all(timeout=30)
    assert seen == ["pending-op bound reached"]
    eng.shutdown()


def test_waits_inside_callbacks_reuse_their_stand_ins():
    # A host callback on a 1-worker host lane waits for an op queued behind
    # it, many times: each wait gets a stand-in, parked and reused after.
    # Before, each cycle left an exited, unjoined stand-in whose stack stayed
    # mapped (about 1.3 mappings a cycle; the process aborted near 32.7k).
    eng = forksafe.Engine(host_workers=1)
    v = eng.new_var()
    done = eng.new_var()

    def status(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field))

    def mappings():
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)

    threads, maps = [], []
    for _ in range(400):
        gate = threading.Event()
        eng.push(gate.wait, args=(30,))
        eng.push(lambda: None, writes=[v], priority="low")
        eng.push(lambda: eng.wait(v, timeout=30), writes=[done], priority="high")
        gate.set()
        eng.wait_all(timeout=30)
        threads.append(status("Threads:"))
        maps.append(mappings())
    assert max(threads) - min(threads) <= 1, threads
    assert maps[-1] - maps[20] < 64, (maps[20], maps[-1])
    eng.shutdown()


def test_every_op_keeps_its_own_name_however_many_names_there_are(eng):
    """Names are shared between ops that have the same one; past the
    binding's table of shared names (1024) and for long names each op keeps
    its own copy. Seen through the name the engine reports (a wait on the
    op's own var)."""
    seen = {}

    def cb(name):
        try:
            eng.wait(v)
        except forksafe.WaitOnSelfError as e:
            seen[name] = e.op_name

    v = eng.new_var()
    names = [f"op-{i}" for i in range(1500)] + ["op-7", "x" * 300, "x" * 300 + "y"]
    for name in names:
        eng.push(cb, args=(name,), writes=[v], name=name)
    eng.wait_all()
    assert seen == {n: n for n in names}
