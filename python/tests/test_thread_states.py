"""Each host worker keeps one CPython thread state for its life: callbacks
on one worker share its `threading.local`, and shutdown frees every state
the workers kept (nothing is left in the interpreter's thread list, in the
parent or in a fork child)."""

from __future__ import annotations

import ctypes
import os
import threading
import weakref

import forksafe
from conftest import wait_child

_api = ctypes.pythonapi
_api.PyInterpreterState_Get.restype = ctypes.c_void_p
_api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
_api.PyInterpreterState_ThreadHead.restype = ctypes.c_void_p
_api.PyThreadState_Next.argtypes = [ctypes.c_void_p]
_api.PyThreadState_Next.restype = ctypes.c_void_p


def thread_states() -> int:
    """The thread states in this interpreter's list (read with the GIL
    held: `pythonapi` calls keep it)."""
    n = 0
    ts = _api.PyInterpreterState_ThreadHead(_api.PyInterpreterState_Get())
    while ts:
        n += 1
        ts = _api.PyThreadState_Next(ts)
    return n


def run_counting(eng: forksafe.Engine, local: threading.local, n: int) -> dict[int, list[int]]:
    """Runs `n` host callbacks that count themselves in `local`; returns,
    per worker thread, the counts its callbacks saw, in order."""
    seen: dict[int, list[int]] = {}

    def count() -> None:
        local.n = getattr(local, "n", 0) + 1
        seen.setdefault(threading.get_ident(), []).append(local.n)

    v = eng.new_var()
    for _ in range(n):
        # One var: the callbacks run one after another, on either worker.
        eng.push(count, writes=[v])
    eng.wait_all()
    return seen


def test_callbacks_on_one_worker_share_its_thread_state():
    before = thread_states()
    eng = forksafe.Engine(compute_workers=1, host_workers=2)
    try:
        seen = run_counting(eng, threading.local(), 300)
        assert threading.get_ident() not in seen, "callbacks run on host workers"
        for counts in seen.values():
            # A thread state made per callback would start each at 1.
            assert counts == list(range(1, len(counts) + 1))
        assert thread_states() == before + len(seen), "one kept state per worker that ran"
    finally:
        eng.shutdown()
    assert thread_states() == before, "shutdown frees every kept state"


def test_a_kept_state_is_cleared_at_shutdown_not_before():
    local = threading.local()
    freed = threading.Event()

    class Held:
        pass

    def keep() -> None:
        h = Held()
        weakref.finalize(h, freed.set)
        local.held = h

    eng = forksafe.Engine(compute_workers=1, host_workers=1)
    try:
        eng.push(keep, writes=[eng.new_var()])
        eng.wait_all()
        assert not freed.is_set(), "the worker's thread state outlives its callback"
    finally:
        eng.shutdown()
    assert freed.is_set(), "shutdown clears the state, and what its locals hold"


def test_engines_made_and_shut_down_leave_no_thread_state_behind():
    before = thread_states()
    for _ in range(30):
        eng = forksafe.Engine(compute_workers=1, host_workers=2)
        run_counting(eng, threading.local(), 20)
        eng.shutdown()
    assert thread_states() == before


def test_a_fork_child_frees_the_parents_worker_states_and_keeps_its_own():
    eng = forksafe.Engine(compute_workers=1, host_workers=2)
    try:
        local = threading.local()
        first = run_counting(eng, local, 50)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                # CPython freed the parent's worker states; only this
                # thread's is left.
                ok = thread_states() == 1
                seen = run_counting(eng, local, 50)
                ok = ok and thread_states() == 1 + len(seen)
                ok = ok and all(c == list(range(1, len(c) + 1)) for c in seen.values())
                eng.shutdown()
                ok = ok and thread_states() == 1
                code = 0 if ok else 3
            finally:
                os._exit(code)
        assert wait_child(pid) == 0
        # The parent's workers still keep theirs, and go on counting.
        more = run_counting(eng, local, 50)
        for ident, counts in more.items():
            if ident in first:
                assert counts[0] == first[ident][-1] + 1
    finally:
        eng.shutdown()
