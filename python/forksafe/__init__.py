"""forksafe: a dependency engine whose Python callbacks stay safe across
``fork()`` and interpreter exit.

Ops declare the vars they read and write and run in per-var push order on
worker threads: Python callables on the *host lane* (the GIL is taken around
each call), built-in Rust ops (``add``, ``copy``, ``fill``, ``sleep``) on the
*compute lane*. Waits release the GIL.

Importing the package installs two hooks:

* ``os.register_at_fork``: before a fork made through Python (``os.fork``,
  ``multiprocessing``'s fork start method, ``subprocess`` with
  ``preexec_fn``) every engine is quiesced with the GIL released, bounded by
  :func:`fork_drain`; the quiesce is released in the parent afterwards. In
  the child, each engine settles at its first call: ops pending at the fork
  complete with an :class:`OpError` of kind ``'lost_in_fork'`` without
  running, and new ops run normally. Forks that bypass Python (C code,
  ``subprocess`` without ``preexec_fn``) are kept safe by the engine's own
  ``pthread_atfork`` handlers.
* ``atexit``: every engine is shut down (queued ops run until its
  ``shutdown_deadline``, then are cancelled) before the interpreter
  finalises; afterwards no engine calls into Python again.

Example::

    import forksafe
    eng = forksafe.Engine()
    a, b = eng.array([1.0, 2.0]), eng.array([10.0, 20.0])
    out = eng.array()
    eng.add(a, b, out)                       # Rust, compute lane
    eng.push(lambda: print(out.tolist()), reads=[out])   # Python, host lane
    eng.wait_all()
"""

from __future__ import annotations

import atexit as _atexit
import os as _os
import threading as _threading
import weakref as _weakref

from . import _forksafe as _native
from ._forksafe import (
    Array,
    ForkHold,
    ForkInProgressError,
    ForksafeError,
    OpError,
    ShutDownError,
    Var,
    WaitTimeout,
    fork_epoch,
)

__all__ = [
    "Array",
    "Engine",
    "ForkInProgressError",
    "ForksafeError",
    "OpError",
    "ShutDownError",
    "Var",
    "WaitTimeout",
    "default_engine",
    "fork_drain",
    "fork_epoch",
    "set_fork_drain",
    "shutdown_all",
]

# Every engine made from Python, so the exit hook can shut each down.
_live: "_weakref.WeakSet[Engine]" = _weakref.WeakSet()
_default: "Engine | None" = None
_default_lock = _threading.Lock()
_fork_drain_override: float | None = None


class Engine(_native.Engine):
    """A dependency engine (see the package docstring).

    Keyword arguments: ``compute_workers`` (2), ``host_workers`` (1),
    ``max_pending`` (None: unbounded), ``fork_drain`` (5.0 s),
    ``shutdown_deadline`` (1.0 s), ``thread_name`` ("forksafe"),
    ``worker_stack_size`` (bytes; None: 2 MiB; a size the OS refuses raises
    ``ForksafeError`` here), ``max_stand_ins`` (64: per lane, how many waits
    inside ops may block at once, each with a stand-in worker).

    Methods: ``new_var``, ``array``, ``push`` (a Python callable, host lane),
    ``add``/``copy``/``fill``/``sleep`` (Rust, compute lane), ``wait``,
    ``wait_all``, ``clear_poison``, ``delete_var``, ``var_version``,
    ``pending``, ``fork_report``, ``shutdown``; property ``state``.
    """

    def __init__(self, **_config: object) -> None:
        # The native __new__ built the engine from the keyword arguments.
        _live.add(self)


def default_engine(**config: object) -> Engine:
    """The process-wide default engine, started at the first call (with
    ``config``, the same keywords as :class:`Engine`; later calls ignore
    them). A fork child keeps using it."""
    global _default
    eng = _default
    if eng is not None:
        return eng
    with _default_lock:
        if _default is None:
            _default = Engine(_default=True, **config)
        return _default


def set_fork_drain(seconds: float | None) -> None:
    """Sets how long the before-fork hook waits for running ops (None: the
    default engine's ``fork_drain``, 5 s by default)."""
    global _fork_drain_override
    if seconds is not None and not seconds > 0:
        raise ValueError("fork drain must be a positive number of seconds")
    _fork_drain_override = seconds


def fork_drain() -> float:
    """How long the before-fork hook waits for running ops, in seconds."""
    if _fork_drain_override is not None:
        return _fork_drain_override
    return _native._default_fork_drain()


def _shutdown_quietly(eng: Engine) -> None:
    try:
        eng.shutdown()
    except Exception:  # pragma: no cover - shutdown reports, never fails
        pass


def shutdown_all() -> None:
    """Shuts every engine down, each within its ``shutdown_deadline`` (GIL
    released), all at once: the ``atexit`` hook calls this, and an exit
    takes the longest deadline, not their sum."""
    engines = list(_live)
    threads = []
    for eng in engines[1:]:
        t = _threading.Thread(target=_shutdown_quietly, args=(eng,), daemon=True)
        try:
            t.start()
            threads.append(t)
        except RuntimeError:  # no new threads this late (3.12+): one by one
            _shutdown_quietly(eng)
    if engines:
        _shutdown_quietly(engines[0])
    for t in threads:
        t.join()
    _native._shutdown_default()


# --- fork hooks -------------------------------------------------------------

# Quiesces held across a fork, by forking thread (two threads may fork at
# once; each hook runs on its forking thread).
_holds: dict[int, ForkHold] = {}


def _before_fork() -> None:
    _holds[_threading.get_ident()] = _native._before_fork(fork_drain(), list(_live))


def _after_fork_parent() -> None:
    hold = _holds.pop(_threading.get_ident(), None)
    if hold is not None:
        hold.release()


def _after_fork_child() -> None:
    # docs/DESIGN.md: the child does nothing eager; each engine settles at its
    # first call. The held quiesces belong to the parent's epoch and are
    # inert here; the other threads' entries are the parent's.
    holds = list(_holds.values())
    _holds.clear()
    for hold in holds:
        hold.release()


def _at_exit() -> None:
    shutdown_all()
    _native._set_finalizing()


_os.register_at_fork(
    before=_before_fork,
    after_in_parent=_after_fork_parent,
    after_in_child=_after_fork_child,
)
_atexit.register(_at_exit)
