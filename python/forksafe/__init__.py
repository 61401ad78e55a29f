"""forksafe: a dependency engine whose Python callbacks stay safe across
``fork()`` and interpreter exit.

Ops declare the vars they read and write and run in per-var push order on
worker threads: Python callables on the *host lane* (the GIL is taken around
each call), built-in Rust kernels over numpy arrays (``add``, ``mul``,
``scale``, ``copy``, ``fill``, ``sum``, ``mean``, ``max``, ``sleep``) on the
*compute lane* with the GIL released. Waits release the GIL too.

Importing the package installs two hooks:

* ``os.register_at_fork``: before a fork made through Python (``os.fork``,
  ``multiprocessing``'s fork start method, ``subprocess`` with
  ``preexec_fn``) every engine is quiesced with the GIL released, bounded by
  :func:`fork_drain`; the quiesce is released in the parent afterwards. In
  the child, each engine settles at its first call: ops pending at the fork
  complete with an :class:`OpError` of kind ``'lost_in_fork'`` without
  running, and new ops run normally. Forks that bypass Python (C code,
  ``subprocess`` without ``preexec_fn``) leave every engine consistent
  through the engine's own ``pthread_atfork`` handlers; CPython's GIL is
  another matter (docs/python.md, "Limits").
* ``atexit``: every engine is shut down (queued ops run until its
  ``shutdown_deadline``, then are cancelled) before the interpreter
  finalises; afterwards no engine calls into Python again.

Ops hand data to each other through *data vars*: ``eng.data(array)``
registers a numpy array (or any buffer-protocol object, viewed as one)
without copying it; a callback gets the arrays of the data vars it names,
reads first then writes (a read as a read-only view), and ``eng.get(d)``
gives the array back once its writers are done. Every push returns an
:class:`OpFuture` (a :class:`concurrent.futures.Future`) with the callback's
return value or its exception, the original object.

Example::

    import numpy as np
    import forksafe

    eng = forksafe.Engine()
    x = eng.data(np.arange(4.0))
    y = eng.data(np.zeros(4))
    eng.scale(x, 10.0, out=y)                             # Rust, GIL released
    total = eng.push(lambda y: float(y.sum()), reads=[y])  # Python, host lane
    print(total.result(), eng.get(y))                      # 60.0 [ 0. 10. 20. 30.]
"""

from __future__ import annotations

import atexit as _atexit
import concurrent.futures as _cf
from concurrent.futures import _base as _cf_base
import os as _os
import threading as _threading
import weakref as _weakref
from typing import Any, Callable, Iterable, Optional

from . import _forksafe as _native
from ._forksafe import (
    Data,
    ForkHold,
    ForkInProgressError,
    ForksafeError,
    OpError,
    ShutDownError,
    Var,
    WaitTimeout,
    WaitOnSelfError,
    fork_epoch,
)

__version__ = _native.__version__

__all__ = [
    "Data",
    "Engine",
    "OpFuture",
    "ForkInProgressError",
    "ForksafeError",
    "OpError",
    "ShutDownError",
    "Var",
    "WaitTimeout",
    "WaitOnSelfError",
    "default_engine",
    "fork_drain",
    "fork_epoch",
    "set_fork_drain",
    "shutdown_all",
]

# Every engine made from Python, so the exit hook can shut each down.
_live: "_weakref.WeakSet[Engine]" = _weakref.WeakSet()
# Guards the first use of an OpFuture's lazily made fields (OpFuture._lazy).
_LAZY_FIELDS = _threading.Lock()
_DONE_STATES = frozenset(
    (_cf_base.CANCELLED, _cf_base.CANCELLED_AND_NOTIFIED, _cf_base.FINISHED)
)
_default: "Engine | None" = None
_default_lock = _threading.Lock()
_fork_drain_override: float | None = None


def _forever_is_none(timeout: Optional[float]) -> Optional[float]:
    # Python's convention: inf, or a value too large for a deadline (the
    # binding's limit, about 31 years), waits for ever.
    if timeout is not None and timeout >= 1e9:
        return None
    return timeout


class OpFuture(_cf.Future):
    """The future of one op: a :class:`concurrent.futures.Future` resolved
    with the callback's return value (a kernel's result; None for ops that
    return nothing) or its exception.

    * ``result(timeout)`` / ``exception(timeout)`` wait with the GIL
      released; a failed callback's exception is raised as the same object,
      its ``__cause__`` an :class:`OpError` naming the op and its vars; an
      op skipped because an input was poisoned raises :class:`OpError`
      (kind ``'skipped'``) whose ``__cause__`` is what poisoned it.
    * ``add_done_callback`` callbacks run on the thread that resolves it (the
      host worker, as the op finishes) or at once if it is done; ``await
      asyncio.wrap_future(f)`` works.
    * ``op_id`` and ``name`` say which op it is. An op cannot be cancelled
      once pushed: ``cancel()`` returns False.
    * In a fork child, the future of an op that was pending at the fork
      resolves at its first use with :class:`OpError` of kind
      ``'lost_in_fork'`` (the op never runs there).
    """

    def __init__(self, name: str = "op", engine: Optional["Engine"] = None) -> None:
        # Not Future.__init__: its condition (about 1.4 KB with its lock
        # and deque), waiter list and callback list are made on first use
        # (`_condition` below), which most pending futures never see. The
        # state fields are Future's own, so every Future method works.
        self._state = _cf_base.PENDING
        self._result: Any = None
        self._exception: Optional[BaseException] = None
        self.op_id: Optional[int] = None
        self.name = name
        self._epoch = fork_epoch()
        self._engine = engine
        # The op whose completion resolves this future, if not `op_id`
        # (a kernel's: the host op that follows it).
        self._wait_id: Optional[int] = None

    def _lazy(self, field: str, make: Callable[[], Any]) -> Any:
        value = self.__dict__.get(field)
        if value is None:
            with _LAZY_FIELDS:
                value = self.__dict__.get(field)
                if value is None:
                    value = self.__dict__[field] = make()
        return value

    # Future's condition, waiter list and callback list, made on first
    # use; every Future method and `concurrent.futures.wait` reach them
    # through these names. Made under `_LAZY_FIELDS`, which the fast
    # resolve below also holds: a waiter either finds the future done or
    # has made the condition the resolve then notifies.
    @property
    def _condition(self) -> _threading.Condition:  # type: ignore[override]
        return self._lazy("_condition_", _threading.Condition)

    @property
    def _waiters(self) -> list:  # type: ignore[override]
        return self._lazy("_waiters_", list)

    @property
    def _done_callbacks(self) -> list:  # type: ignore[override]
        return self._lazy("_done_callbacks_", list)

    def _is_done(self) -> bool:
        return self._state in _DONE_STATES

    def _wait_inside_op(self, timeout: Optional[float]) -> None:
        # Inside an op of its engine, `result` is an engine wait: the wait
        # rule holds (WaitOnSelfError, never a deadlock) and the blocked
        # callback's worker gets a stand-in, so the op can run.
        eng = self._engine
        if eng is None or self.op_id is None or self._is_done():
            return
        if eng.current_op() is None:
            return
        try:
            wait_id = self.op_id if self._wait_id is None else self._wait_id
            eng._wait_op(wait_id, timeout)
        except WaitTimeout as e:
            raise _cf.TimeoutError(str(e)) from e

    def _forksafe_resolve(self, ok: bool, value: Any) -> None:
        # Called once by the engine (twice only in a fork child racing a
        # lost-op check): the second call finds it done and does nothing.
        # Nobody has waited or added a callback yet (no condition made):
        # the state is set here, with nothing to notify.
        with _LAZY_FIELDS:
            if "_condition_" not in self.__dict__:
                if self._state == _cf_base.PENDING:
                    if ok:
                        self._result = value
                    else:
                        self._exception = value
                    self._state = _cf_base.FINISHED
                return
        try:
            if ok:
                self.set_result(value)
            else:
                self.set_exception(value)
        except _cf.InvalidStateError:  # pragma: no cover - resolved once
            pass

    def _check_lost(self) -> None:
        if self._epoch != fork_epoch() and not self._is_done():
            self._forksafe_resolve(False, _native._lost_error(self.name, self.op_id))

    def cancel(self) -> bool:
        return False

    def done(self) -> bool:
        self._check_lost()
        return self._is_done()

    def running(self) -> bool:
        # As concurrent.futures: started and not done (a queued op is not).
        if self.done():
            return False
        eng = self._engine
        if eng is None or self.op_id is None:
            return False
        try:
            return bool(eng._op_running(self.op_id))
        except ForksafeError:
            return False

    def result(self, timeout: Optional[float] = None) -> Any:
        self._check_lost()
        timeout = _forever_is_none(timeout)
        self._wait_inside_op(timeout)
        return super().result(timeout)

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        self._check_lost()
        timeout = _forever_is_none(timeout)
        self._wait_inside_op(timeout)
        return super().exception(timeout)

    def add_done_callback(self, fn: Callable[["_cf.Future[Any]"], object]) -> None:
        self._check_lost()
        super().add_done_callback(fn)

    def __repr__(self) -> str:
        state = "done" if self._is_done() else "pending"
        return f"<forksafe.OpFuture {self.name!r} #{self.op_id} {state}>"


def _names(items: Optional[Iterable[Any]]) -> list:
    return [] if items is None else list(items)


class Engine(_native.Engine):
    """A dependency engine (see the package docstring).

    Keyword arguments: ``compute_workers`` (2), ``host_workers`` (1),
    ``max_pending`` (None: unbounded), ``fork_drain`` (5.0 s),
    ``shutdown_deadline`` (1.0 s), ``thread_name`` ("forksafe"),
    ``worker_stack_size`` (bytes; None: 2 MiB; a size the OS refuses raises
    ``ForksafeError`` here), ``max_stand_ins`` (64: per lane, how many waits
    inside ops may block at once, each with a stand-in worker).

    Data: ``data(array)``, ``get(data, timeout=None)``. Ops, each returning
    an :class:`OpFuture`: ``push`` (a Python callable, host lane; a batch
    of them with ``push_many``, which returns a list of futures), the Rust
    kernels ``add``/``mul``/``scale``/``copy``/``fill`` and ``sum``/``mean``/
    ``max``, and ``sleep`` (compute lane, GIL released). Waits and more:
    ``new_var``, ``wait``, ``wait_all``, ``clear_poison``, ``delete_var``,
    ``var_version``, ``pending``, ``fork_report``, ``shutdown``; property
    ``state``.
    """

    def __init__(self, **_config: object) -> None:
        # The native __new__ built the engine from the keyword arguments.
        _live.add(self)

    def push(
        self,
        fn: Callable[..., Any],
        /,
        *,
        reads: Optional[Iterable[Any]] = None,
        writes: Optional[Iterable[Any]] = None,
        args: Iterable[Any] = (),
        kwargs: Optional[dict] = None,
        name: Optional[str] = None,
        priority: str = "normal",
        run_on_error: bool = False,
    ) -> OpFuture:
        """Pushes ``fn(*arrays, *args, **kwargs)`` as a host-lane op (run with
        the GIL held, in per-var order) and returns its :class:`OpFuture`.

        ``arrays`` are the arrays of the :class:`Data` items of ``reads``
        (read-only views) and then of ``writes`` (the arrays themselves),
        each in the order given; plain :class:`Var` items order the op but
        pass nothing. If ``fn`` raises, the vars it writes are poisoned with
        that exception: waits on them re-raise it. ``run_on_error`` runs
        ``fn`` even when an input is poisoned.
        """
        fut = OpFuture(str(name or getattr(fn, "__qualname__", "callback")), self)
        self._push(
            fn,
            fut,
            reads=_names(reads),
            writes=_names(writes),
            name=name,
            args=tuple(args),
            kwargs=kwargs,
            priority=priority,
            run_on_error=run_on_error,
        )
        return fut

    def push_many(
        self,
        fn: Callable[..., Any],
        args: Iterable[Iterable[Any]],
        /,
        *,
        reads: Optional[Iterable[Optional[Iterable[Any]]]] = None,
        writes: Optional[Iterable[Optional[Iterable[Any]]]] = None,
        name: Optional[str] = None,
        priority: str = "normal",
        run_on_error: bool = False,
    ) -> list[OpFuture]:
        """Pushes one host-lane op per item of ``args``, in order, as that
        many :meth:`push` calls would, in one batch: op ``i`` calls
        ``fn(*arrays, *args[i])`` with ``reads[i]`` and ``writes[i]`` (each
        list ``None`` for no vars, or one entry per op). Returns the ops'
        futures in order.

        Every item is checked first: a bad one (``fn`` not callable, lists
        of different lengths, an item that is not a ``Var`` or ``Data``, a
        var named twice by one op, a var of another engine), or an engine
        that has shut down, raises as :meth:`push` would and nothing is
        pushed. An op the engine refuses while the batch is pushed (a
        deleted var, a shutdown begun meanwhile, the pending bound with the
        batch pushed from inside an op) has its future failed with the
        exception :meth:`push` would raise; the others are pushed.
        """
        items = [tuple(a) for a in args]
        per_op = [None if x is None else [_names(v) for v in x] for x in (reads, writes)]
        label = str(name or getattr(fn, "__qualname__", "callback"))
        futures = [OpFuture(label, self) for _ in items]
        self._push_many(
            fn,
            futures,
            items,
            reads_list=per_op[0],
            writes_list=per_op[1],
            name=name,
            priority=priority,
            run_on_error=run_on_error,
        )
        return futures

    def _run_kernel(self, kind: str, inputs: list, out: Any = None,
                    scalar: Any = None, name: Optional[str] = None) -> OpFuture:
        fut = OpFuture(name or kind, self)
        self._kernel(kind, fut, inputs, out, scalar, name=name)
        return fut

    def add(self, a: Data, b: Data, out: Data, *, name: Optional[str] = None) -> OpFuture:
        """``out[:] = a + b`` (one dtype, one length; ``out`` may be ``a``)."""
        return self._run_kernel("add", [a, b], out, name=name)

    def mul(self, a: Data, b: Data, out: Data, *, name: Optional[str] = None) -> OpFuture:
        """``out[:] = a * b``."""
        return self._run_kernel("mul", [a, b], out, name=name)

    def scale(self, a: Data, factor: float, out: Data, *, name: Optional[str] = None) -> OpFuture:
        """``out[:] = a * factor``."""
        return self._run_kernel("scale", [a], out, factor, name=name)

    def copy(self, src: Data, out: Data, *, name: Optional[str] = None) -> OpFuture:
        """``out[:] = src``."""
        return self._run_kernel("copy", [src], out, name=name)

    def fill(self, out: Data, value: Any, *, name: Optional[str] = None) -> OpFuture:
        """``out[:] = value``."""
        return self._run_kernel("fill", [], out, value, name=name)

    def sum(self, a: Data, *, name: Optional[str] = None) -> OpFuture:
        """The sum of ``a`` (a float, or an int for integer arrays)."""
        return self._run_kernel("sum", [a], name=name)

    def mean(self, a: Data, *, name: Optional[str] = None) -> OpFuture:
        """The mean of ``a`` (a float; NaN if empty)."""
        return self._run_kernel("mean", [a], name=name)

    def max(self, a: Data, *, name: Optional[str] = None) -> OpFuture:
        """The largest element of ``a`` (an empty array fails the op)."""
        return self._run_kernel("max", [a], name=name)

    def sleep(self, seconds: float, /, *, reads: Optional[Iterable[Any]] = None,
              writes: Optional[Iterable[Any]] = None, name: str = "sleep") -> OpFuture:
        """A compute-lane op that sleeps ``seconds`` (a stand-in for a long
        Rust kernel), reading ``reads`` and writing ``writes``."""
        fut = OpFuture(name, self)
        self._sleep(seconds, fut, reads=_names(reads), writes=_names(writes), name=name)
        return fut


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
    # No thread holds it across the fork: the child's futures use it.
    _LAZY_FIELDS.acquire()


def _after_fork_parent() -> None:
    _LAZY_FIELDS.release()
    hold = _holds.pop(_threading.get_ident(), None)
    if hold is not None:
        hold.release()


def _after_fork_child() -> None:
    # docs/DESIGN.md: the child does nothing eager; each engine settles at its
    # first call. The held quiesces belong to the parent's epoch and are
    # inert here; the other threads' entries are the parent's.
    _LAZY_FIELDS.release()
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
