"""Fork integration: os.register_at_fork hooks (drained quiesce with the GIL
released), raw forks that bypass Python, multiprocessing's start methods,
subprocess."""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pytest

import forksafe
from conftest import in_child, wait_child


def child_main(q) -> None:
    """multiprocessing target (importable, for spawn and forkserver): the
    child pushes host and Rust ops on its own engine and waits."""
    eng = forksafe.default_engine()
    lost = (eng.fork_report() or {}).get("lost", [])
    a, b = eng.data(np.array([1.0, 2.0])), eng.data(np.array([3.0, 4.0]))
    out = eng.data(np.zeros(2))
    eng.add(a, b, out)
    seen = []
    v = eng.new_var()
    for i in range(20):
        eng.push(lambda _out, i=i: seen.append(i), reads=[out], writes=[v])
    eng.wait(v)
    try:
        eng.wait_all()
    except forksafe.OpError as e:
        # A fork child: the parent's pending ops were lost, nothing else.
        assert {x.kind for x in e.errors} == {"lost_in_fork"}, e.errors
        assert len(e.errors) == len(lost)
    q.put((eng.get(out).tolist(), seen == list(range(20)), len(lost)))


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_multiprocessing_child_pushes_and_waits(method):
    eng = forksafe.default_engine()
    v = eng.new_var()
    done = []
    for i in range(30):
        eng.push(lambda i=i: (time.sleep(0.005), done.append(i)), writes=[v], name="parent op")
    ctx = mp.get_context(method)
    q = ctx.Queue()
    p = ctx.Process(target=child_main, args=(q,))
    p.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                out, ordered, lost = q.get(timeout=0.1)
                break
            except Exception:
                if not p.is_alive() and q.empty():
                    pytest.fail(f"{method} child exited {p.exitcode} without a result")
                if time.monotonic() > deadline:
                    pytest.fail(f"{method} child gave no result in 30s")
    finally:
        p.join(30)
        if p.exitcode is None:
            p.kill()
            pytest.fail(f"{method} child hung")
    assert p.exitcode == 0
    assert out == [4.0, 6.0] and ordered
    if method != "fork":
        assert lost == 0
    # Every parent op ran exactly once, in order.
    eng.wait(v, timeout=30)
    assert done == list(range(30))


def test_fork_child_inherits_pending_ops_as_lost(eng):
    v, mine = eng.new_var(), eng.new_var()
    ran = []
    for i in range(20):
        eng.push(lambda i=i: (time.sleep(0.01), ran.append(i)), writes=[v], name="inherited")
    pid = os.fork()
    if pid == 0:

        def child():
            report = eng.fork_report()
            assert report is not None and report["lost"], report
            assert set(report["lost"]) == {"inherited"}
            with pytest.raises(forksafe.OpError) as info:
                eng.wait(v)
            assert info.value.kind == "lost_in_fork"
            eng.clear_poison(v)
            got = []
            eng.push(got.append, args=(1,), writes=[v])
            eng.push(got.append, args=(2,), writes=[mine])
            eng.wait(v)
            eng.wait(mine)
            assert got == [1, 2] or sorted(got) == [1, 2]
            assert not ran or len(ran) < 20  # the child never re-runs them

        in_child(child)
    assert wait_child(pid) == 0
    eng.wait(v)
    assert ran == list(range(20))


def test_many_rounds_push_then_fork(eng):
    count = [0]
    vars_ = [eng.new_var() for _ in range(4)]

    def bump():
        time.sleep(0.002)
        count[0] += 1

    rounds = 25
    for r in range(rounds):
        for i in range(8):
            eng.push(bump, writes=[vars_[i % 4]], name=f"r{r}")
        pid = os.fork()
        if pid == 0:

            def child():
                w = eng.new_var()
                hit = []
                eng.push(hit.append, args=(r,), writes=[w])
                eng.sleep(0.001, reads=[w])
                eng.wait(w, timeout=10)
                assert hit == [r]

            in_child(child)
        assert wait_child(pid) == 0, f"round {r}"
    eng.wait_all(timeout=30)
    assert count[0] == rounds * 8


def test_os_fork_from_a_non_main_thread(eng):
    v = eng.new_var()
    for _ in range(10):
        eng.push(time.sleep, args=(0.005,), writes=[v])
    result = {}

    def forker():
        pid = os.fork()
        if pid == 0:

            def child():
                w = eng.new_var()
                out = []
                eng.push(out.append, args=("child",), writes=[w])
                eng.wait(w, timeout=10)
                assert out == ["child"]

            in_child(child)
        result["rc"] = wait_child(pid)

    t = threading.Thread(target=forker)
    t.start()
    t.join(30)
    assert not t.is_alive()
    assert result["rc"] == 0
    eng.wait(v, timeout=10)


def settle_and_use(eng, v) -> None:
    """In a child: `v` is poisoned with 'lost_in_fork' if an op on it was
    pending at the fork; clear it and use it."""
    try:
        eng.wait(v, timeout=10)
    except forksafe.OpError as e:
        assert e.kind == "lost_in_fork", e
        eng.clear_poison(v)
    out = []
    eng.push(out.append, args=(1,), writes=[v])
    eng.wait(v, timeout=10)
    assert out == [1]


def test_fork_while_a_thread_holds_the_gil_in_a_callback_loop(eng):
    # Host callbacks keep taking the GIL while the main thread forks: the
    # before-hook drains with the GIL released, so it cannot deadlock.
    v = eng.new_var()
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            eng.push(lambda: sum(range(200)), writes=[v])
            eng.wait(v)

    t = threading.Thread(target=spin)
    t.start()
    try:
        for _ in range(10):
            pid = os.fork()
            if pid == 0:
                in_child(lambda: settle_and_use(eng, v))
            assert wait_child(pid) == 0
    finally:
        stop.set()
        t.join(30)


def test_raw_fork_bypassing_python_hooks(eng):
    # libc fork() through ctypes.PyDLL (keeps the GIL, runs no Python fork
    # hook): only the engine's pthread_atfork handlers run, and the package
    # never learns of the fork.
    #
    # CPython does not re-initialise its GIL in the child of a fork it was
    # not told about: if another thread waits for the GIL at that moment, the
    # child's first GIL release can hang inside CPython (docs/python.md,
    # "Limits": 6 hangs in 2000 raw forks with four plain Python threads and
    # no forksafe at all). So the callbacks are held queued while forking
    # (the native quiesce the before-fork hook would take, here taken by
    # hand): no engine thread runs Python or waits for the GIL, and what the
    # child inherits is only the engine's own state.
    libc = ctypes.PyDLL(None)
    v = eng.new_var()
    for _ in range(20):
        eng.push(time.sleep, args=(0.005,), writes=[v], name="busy")
    eng.sleep(0.05, writes=[v])
    hold = forksafe._native._before_fork(30.0, [eng])
    try:
        assert hold.timed_out == []
        assert eng.pending() > 0
        for _ in range(5):
            pid = libc.fork()
            if pid == 0:
                # A child of a raw fork: Python was not told; use Rust ops
                # only and leave at once.
                code = 1
                try:
                    w = eng.new_var()
                    eng.sleep(0.001, writes=[w])
                    eng.wait(w, timeout=10)
                    lost = eng.fork_report()["lost"]
                    code = 0 if lost else 2
                finally:
                    os._exit(code)
            assert wait_child(pid) == 0
    finally:
        hold.release()
    eng.wait(v, timeout=30)
    eng.wait_all()


def test_subprocess_while_callbacks_run(eng):
    v = eng.new_var()
    n = [0]

    def cb():
        n[0] += 1
        time.sleep(0.001)

    stop = threading.Event()

    def feeder():
        while not stop.is_set():
            eng.push(cb, writes=[v])
            time.sleep(0.0005)

    t = threading.Thread(target=feeder)
    t.start()
    try:
        for _ in range(10):
            subprocess.run(["true"], check=True, timeout=20)
        for _ in range(3):  # preexec_fn: goes through Python's fork hooks
            subprocess.run(["true"], check=True, timeout=20, preexec_fn=lambda: None)
        out = subprocess.run(
            [sys.executable, "-c", "import forksafe; e = forksafe.Engine(); "
             "v = e.new_var(); e.push(print, args=('sub ok',), writes=[v]); e.wait(v)"],
            capture_output=True, text=True, timeout=30, check=True,
            cwd=tempfile.gettempdir(),
        )
        assert out.stdout.strip() == "sub ok"
    finally:
        stop.set()
        t.join(30)
    eng.wait(v, timeout=30)
    assert n[0] > 0


def test_fork_from_inside_a_callback(eng):
    v = eng.new_var()
    status = {}

    def cb():
        pid = os.fork()
        if pid == 0:
            # The child carries this op; the engine serves the child.
            def child():
                w = eng.new_var()
                eng.sleep(0.001, writes=[w])
                eng.wait(w, timeout=10)

            in_child(child)
        status["rc"] = wait_child(pid)

    eng.push(cb, writes=[v], name="forker")
    eng.wait(v, timeout=30)
    assert status["rc"] == 0


def test_before_fork_hook_drains_running_callbacks(eng):
    # The before-hook waits, with the GIL released, for the callback that
    # is running; the child inherits nothing.
    v = eng.new_var()
    started = threading.Event()

    def long_cb():
        started.set()
        time.sleep(0.3)

    eng.push(long_cb, writes=[v], name="running at fork")
    assert started.wait(10)
    t = time.monotonic()
    pid = os.fork()
    if pid == 0:

        def child():
            report = eng.fork_report()
            assert report is None or not report["lost"], report
            eng.wait(v, timeout=10)

        in_child(child)
    took = time.monotonic() - t
    assert wait_child(pid) == 0
    assert took >= 0.2, took


def test_before_fork_drain_is_bounded(eng):
    forksafe.set_fork_drain(0.05)
    try:
        v = eng.new_var()
        started = threading.Event()

        def long_cb():
            started.set()
            time.sleep(1.0)

        eng.push(long_cb, writes=[v], name="running at fork")
        assert started.wait(10)
        t = time.monotonic()
        pid = os.fork()
        if pid == 0:

            def child():
                assert eng.fork_report()["lost"] == ["running at fork"]
                with pytest.raises(forksafe.OpError) as info:
                    eng.wait(v, timeout=10)
                assert info.value.kind == "lost_in_fork"

            in_child(child)
        took = time.monotonic() - t
        assert wait_child(pid) == 0
        assert took < 0.8, took
        eng.wait(v, timeout=10)
    finally:
        forksafe.set_fork_drain(None)
