//! The CPython thread state an engine worker keeps from one host call to
//! the next.
//!
//! A thread CPython did not start has no thread state of its own:
//! `PyGILState_Ensure` makes one each time such a thread takes the GIL,
//! and the matching `PyGILState_Release` frees it again (with its frame
//! stack, an `mmap` of its own). An engine worker that runs one Python
//! callback per GIL hold would make and free one per op, and a
//! `threading.local` set by one callback would be gone at the next. So a
//! worker keeps one: at its first host call it takes one extra
//! `PyGILState_Ensure` level and releases the GIL with
//! `PyEval_SaveThread`, which keeps the state; every later
//! `PyGILState_Ensure` (PyO3's `Python::attach`) then only takes the GIL
//! with it. The worker frees it as it exits
//! ([`HostBridge::worker_exiting`](forksafe::HostBridge::worker_exiting)):
//! `PyEval_RestoreThread` and the last `PyGILState_Release`, which clears
//! it (running the `__del__` of what its thread locals hold) and frees it.
//!
//! # State
//!
//! One cell per thread ([`KEPT`]), moved only by its own thread:
//!
//! | state | move | when | serves |
//! |---|---|---|---|
//! | `Other` | → `Worker` | `worker_started` | only engine workers keep a state: any other thread that takes the GIL through the bridge (a Rust thread dropping a payload) keeps none, so none is left behind when it exits without telling the bridge |
//! | `Worker` | → `Kept(ts)` | the first host call, GIL not held, host not finalising | one thread state per worker for its life |
//! | `Kept(ts)` | → `Freed` | `worker_exiting`, host not finalising: the GIL is taken to free it | nothing is left in the interpreter's thread list when shutdown returns |
//! | `Kept(ts)` | stays | `worker_exiting` while finalising | I8: no Python call once the host finalises; the process is ending |
//!
//! A fork child keeps the forking thread's cell: if that thread is a
//! worker inside a callback, its kept state is the one CPython keeps in
//! the child (the current one); the states of the parent's other threads
//! are freed by CPython's own after-fork step.

use std::cell::Cell;

use pyo3::ffi;

#[derive(Clone, Copy)]
enum WorkerState {
    /// Not an engine worker: keeps nothing.
    Other,
    /// An engine worker that has made no host call yet.
    Worker,
    /// An engine worker's thread state, with one `PyGILState_Ensure`
    /// level held and the GIL released.
    Kept(*mut ffi::PyThreadState),
    /// Freed as the worker exits.
    Freed,
}

forksafe_core::sync::thread_local! {
    /// This thread's kept state.
    static KEPT: Cell<WorkerState> = const { Cell::new(WorkerState::Other) };
}

/// Marks the calling thread as an engine worker.
pub(crate) fn worker_started() {
    KEPT.with(|k| k.set(WorkerState::Worker));
}

/// Before a host call: an engine worker that keeps no thread state yet
/// makes the one it keeps. The host is not finalising (the caller checked);
/// `gil_held`: whether this thread holds the GIL.
pub(crate) fn keep(gil_held: bool) {
    KEPT.with(|k| {
        if !matches!(k.get(), WorkerState::Worker) || gil_held {
            return;
        }
        // SAFETY: the interpreter is initialised (this extension runs in
        // it) and not finalising (the caller checked); this thread does
        // not hold the GIL (the caller said so), so `PyGILState_Ensure` makes
        // its thread state and takes the GIL, and `PyEval_SaveThread`
        // releases the GIL and returns that state, which stays this
        // thread's (one `PyGILState_Ensure` level still held).
        let state = unsafe {
            let _ = ffi::PyGILState_Ensure();
            ffi::PyEval_SaveThread()
        };
        k.set(WorkerState::Kept(state));
    });
}

/// As an engine worker exits: frees its kept thread state if
/// `may_call_python` (the host is not finalising and this thread does not
/// hold the GIL); otherwise it is left to the ending process.
pub(crate) fn worker_exiting(may_call_python: bool) {
    KEPT.with(|k| {
        let WorkerState::Kept(state) = k.get() else {
            k.set(WorkerState::Freed);
            return;
        };
        if !may_call_python {
            return;
        }
        // SAFETY: `state` is this thread's own thread state, made by
        // `keep` and released by `PyEval_SaveThread`; this thread does not
        // hold the GIL (the caller checked), so `PyEval_RestoreThread` takes it
        // with that state, and the `PyGILState_Release` of the one level
        // `keep` holds clears and frees the state and releases the GIL.
        unsafe {
            ffi::PyEval_RestoreThread(state);
            ffi::PyGILState_Release(ffi::PyGILState_STATE::PyGILState_UNLOCKED);
        }
        k.set(WorkerState::Freed);
    });
}
