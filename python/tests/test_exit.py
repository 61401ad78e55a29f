"""Exit with work pending: the atexit hook shuts every engine down before
the interpreter finalises, so the process exits 0 promptly and no engine
calls into Python afterwards. Each case runs in a fresh interpreter under a
deadline."""

from __future__ import annotations

from conftest import run_python

PRELUDE = """
import os, sys, time, threading
import forksafe
"""


def check_clean(rc, out, err, took, limit=8.0, rc_expected=0):
    assert rc == rc_expected, (rc, out, err)
    assert "Fatal Python error" not in err, err
    assert took < limit, f"exit took {took:.2f}s"


def test_exit_with_pending_callback_ops():
    rc, out, err, took = run_python(PRELUDE + """
eng = forksafe.Engine(host_workers=2)
d = forksafe.default_engine()
v = eng.new_var()
for i in range(500):
    eng.push(time.sleep, args=(0.01,), writes=[v])
    d.push(time.sleep, args=(0.01,))
eng.sleep(30.0, name="long rust op")
print("pushed", eng.pending() > 0, flush=True)
""")
    check_clean(rc, out, err, took)
    assert "pushed True" in out


def test_exit_while_a_callback_runs():
    # Shutdown waits for the callback inside the bridge (no host call after
    # it returns), then exits.
    rc, out, err, took = run_python(PRELUDE + """
eng = forksafe.Engine()
started = threading.Event()
def long_cb():
    started.set()
    time.sleep(0.5)
    print("callback finished", flush=True)
eng.push(long_cb)
for _ in range(100):
    eng.push(time.sleep, args=(0.05,))
started.wait(10)
""")
    check_clean(rc, out, err, took)
    assert "callback finished" in out


def test_exit_by_exception_and_sys_exit():
    rc, out, err, took = run_python(PRELUDE + """
eng = forksafe.default_engine()
for _ in range(200):
    eng.push(time.sleep, args=(0.02,))
raise RuntimeError("boom at top level")
""")
    check_clean(rc, out, err, took, rc_expected=1)
    assert "boom at top level" in err
    rc, out, err, took = run_python(PRELUDE + """
eng = forksafe.Engine()
for _ in range(200):
    eng.push(time.sleep, args=(0.02,))
sys.exit(3)
""")
    check_clean(rc, out, err, took, rc_expected=3)


def test_exit_with_a_daemon_thread_still_pushing():
    rc, out, err, took = run_python(PRELUDE + """
eng = forksafe.Engine()
refused = []
def pusher():
    while True:
        try:
            eng.push(lambda: time.sleep(0.001))
        except forksafe.ShutDownError:
            refused.append(1)
            time.sleep(0.001)
threading.Thread(target=pusher, daemon=True).start()
time.sleep(0.2)
""")
    check_clean(rc, out, err, took)


def test_no_python_call_after_the_exit_hook():
    # atexit hooks run last-registered first: this one, registered before
    # forksafe is imported, runs after forksafe's.
    rc, out, err, took = run_python("""
import atexit, time
def late():
    try:
        eng.push(print, args=("BAD: pushed after exit hook",))
    except forksafe.ShutDownError:
        print("late push refused", flush=True)
    e2 = forksafe.Engine()
    v = e2.new_var()
    e2.push(print, args=("BAD: callback after exit hook",), writes=[v])
    try:
        e2.wait(v, timeout=5)
    except forksafe.OpError as e:
        print("late op", e.kind, flush=True)
atexit.register(late)
import forksafe
eng = forksafe.Engine()
for _ in range(100):
    eng.push(time.sleep, args=(0.01,))
""")
    check_clean(rc, out, err, took)
    assert "late push refused" in out
    assert "late op cancelled" in out
    assert "BAD" not in out


def test_engine_dropped_with_pending_ops():
    rc, out, err, took = run_python(PRELUDE + """
import gc
eng = forksafe.Engine()
for _ in range(300):
    eng.push(time.sleep, args=(0.01,))
t = time.monotonic()
del eng
gc.collect()
print("dropped in", round(time.monotonic() - t, 1), flush=True)
e2 = forksafe.Engine()
v = e2.new_var()
e2.push(lambda: None, writes=[v])
e2.wait(v)
print("still works", flush=True)
""")
    check_clean(rc, out, err, took)
    assert "still works" in out
