//! The CPython host bridge: how host-lane ops take the GIL, how engine waits
//! let go of it, and how Python objects owned by the engine are dropped.
//!
//! - [`PyBridge`] takes the GIL (`Python::attach`) around each host call and
//!   releases it (`Python::detach`) around every blocking engine wait made
//!   by a thread that holds it (docs/DESIGN.md, H2); an engine worker keeps
//!   one CPython thread state for its life (`thread_state.rs`).
//! - [`HostObj`] is how Rust state owns a Python object: it is dropped
//!   (decref'd) only by a thread that holds the GIL while the interpreter is
//!   alive; a thread without the GIL (an engine worker, a fork child before
//!   the interpreter is re-initialised) queues it on [`deferred`] for the
//!   next binding call that holds the GIL, and after the `atexit` shutdown
//!   it is leaked (H1, I5, I8).
//! - [`host_finalizing`] is true once the binding's `atexit` hook has shut
//!   every engine down, or once CPython itself reports finalisation: from
//!   then on the engine never calls into Python again.

use forksafe::HostBridge;
use forksafe_core::sync::{AtomicBool, AtomicUsize, Ordering};
use pyo3::prelude::*;
use std::mem::ManuallyDrop;
use std::os::raw::c_int;

/// Set by the `atexit` hook after it shut the engines down.
static FINALIZING: AtomicBool = AtomicBool::new(false);

/// `Py_IsFinalizing` (3.13+) or `_Py_IsFinalizing` (3.11, 3.12), looked up
/// at module init; 0 if neither exists.
static IS_FINALIZING_FN: AtomicUsize = AtomicUsize::new(0);

/// Looks up CPython's "is finalizing" function in the running interpreter.
/// Called once, at module init, with the GIL held.
pub fn init_finalizing_probe() {
    for name in [c"Py_IsFinalizing", c"_Py_IsFinalizing"] {
        // SAFETY: `dlsym` with `RTLD_DEFAULT` and a NUL-terminated name only
        // reads the process's symbol tables.
        let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
        if !sym.is_null() {
            IS_FINALIZING_FN.store(sym as usize, Ordering::Release);
            return;
        }
    }
}

/// Marks the host as finalising: no engine calls into Python afterwards.
pub fn set_finalizing() {
    FINALIZING.store(true, Ordering::SeqCst);
}

/// Whether the engine must no longer call into Python.
pub fn host_finalizing() -> bool {
    if FINALIZING.load(Ordering::SeqCst) {
        return true;
    }
    let f = IS_FINALIZING_FN.load(Ordering::Acquire);
    if f == 0 {
        return false;
    }
    // SAFETY: `f` is the address of CPython's `int (*)(void)` finalising
    // probe, found by `dlsym`; it reads one runtime field and needs no GIL.
    let probe: extern "C" fn() -> c_int = unsafe { std::mem::transmute(f) };
    probe() != 0
}

/// Whether the calling thread holds the GIL.
pub fn gil_held() -> bool {
    extern "C" {
        // Not in PyO3's abi3 bindings, but exported by every CPython 3
        // (since 3.4); the extension is loaded into that interpreter.
        fn PyGILState_Check() -> c_int;
    }
    // SAFETY: `PyGILState_Check` only compares the calling thread's state
    // with the current one; it is callable without the GIL.
    unsafe { PyGILState_Check() == 1 }
}

/// Lets a non-`Send` closure cross PyO3's `Ungil` bound of
/// [`Python::detach`], which runs it on the calling thread.
struct SameThread<T>(T);

// SAFETY: only used with `Python::detach`, which calls the closure
// synchronously on the thread that made it; nothing crosses threads.
unsafe impl<T> Send for SameThread<T> {}

/// The bridge of every engine the binding makes.
#[derive(Debug, Default, Clone, Copy)]
pub struct PyBridge;

impl HostBridge for PyBridge {
    fn with_host_lock(&self, f: &mut dyn FnMut()) {
        if host_finalizing() {
            // Not called: core then runs `f` without the lock, and the
            // binding's host bodies and `HostObj` drops check
            // `host_finalizing` themselves and never touch Python.
            return;
        }
        // An engine worker's first call makes the thread state it keeps;
        // `Python::attach` then takes the GIL with it.
        crate::thread_state::keep(gil_held());
        Python::attach(|_py| f());
    }

    fn without_host_lock(&self, f: &mut dyn FnMut()) {
        if !gil_held() {
            f();
            return;
        }
        // SAFETY: this thread holds the GIL (checked just above).
        let py = unsafe { Python::assume_attached() };
        let f = SameThread(f);
        py.detach(move || {
            let f = f;
            (f.0)()
        });
    }

    fn holds_host_lock(&self) -> bool {
        gil_held()
    }

    fn is_finalizing(&self) -> bool {
        host_finalizing()
    }

    fn worker_started(&self) {
        crate::thread_state::worker_started();
    }

    fn worker_exiting(&self) {
        crate::thread_state::worker_exiting(!host_finalizing() && !gil_held());
    }
}

/// A Python object owned by Rust state that may end its life on any
/// thread: an op payload, a data var's array, the exception an op failed
/// with (which travels with the poison). Dropped (decref'd) at once by a
/// thread that holds the GIL while the interpreter is alive; otherwise its
/// reference goes onto the [`deferred`] queue, and the next binding call
/// that holds the GIL drops it ([`drain_deferred`]). It never goes through
/// PyO3's own deferred-decref pool, whose lock a fork could copy held.
pub struct HostObj(ManuallyDrop<Py<PyAny>>);

impl HostObj {
    /// Takes ownership of `obj`.
    pub fn new(obj: Py<PyAny>) -> Self {
        HostObj(ManuallyDrop::new(obj))
    }

    /// The object, bound to the GIL.
    pub fn bind<'py>(&self, py: Python<'py>) -> &Bound<'py, PyAny> {
        self.0.bind(py)
    }
}

impl Drop for HostObj {
    fn drop(&mut self) {
        // SAFETY: the only place the object is taken out; `self.0` is not
        // used again.
        let obj = unsafe { ManuallyDrop::take(&mut self.0) };
        if !host_finalizing() && gil_held() {
            // Re-entrant: the GIL is already held, so this only counts it.
            Python::attach(|py| obj.drop_ref(py));
        } else {
            // Dropping it is host code that cannot run here (H1, I8): the
            // next call that holds the GIL does it.
            deferred::push(deferred::Job::Decref(obj));
        }
    }
}

/// A Python object that core may drop anywhere, even under an engine lock
/// with the GIL held (the exception an op failed with lives in the poison
/// of vars, and core replaces poison under a var's lock): its reference
/// always goes onto the [`deferred`] queue, never decref'd in place, so no
/// `__del__` runs under an engine lock (H1).
pub struct DeferredObj(ManuallyDrop<Py<PyAny>>);

impl DeferredObj {
    /// Takes ownership of `obj`.
    pub fn new(obj: Py<PyAny>) -> Self {
        DeferredObj(ManuallyDrop::new(obj))
    }

    /// The object, bound to the GIL.
    pub fn bind<'py>(&self, py: Python<'py>) -> &Bound<'py, PyAny> {
        self.0.bind(py)
    }
}

impl Drop for DeferredObj {
    fn drop(&mut self) {
        // SAFETY: the only place the object is taken out; `self.0` is not
        // used again.
        let obj = unsafe { ManuallyDrop::take(&mut self.0) };
        deferred::push(deferred::Job::Decref(obj));
    }
}

/// Work that needs the GIL, left by threads that do not hold it.
///
/// # State
///
/// One queue of [`deferred::Job`]s behind a leaf lock that is only ever *tried*
/// (`try_lock`), never waited for: a pusher is any thread (an engine
/// worker dropping a payload or a poison, possibly under an engine lock),
/// a drainer is a binding call holding the GIL. A try that fails spins a
/// little and then leaks the job: a fork child whose copy of the lock is
/// held by a thread it does not have must never hang (docs/DESIGN.md, "The
/// fork point"), and a leaked reference only costs memory. After the
/// interpreter is finalising nothing is drained (I8): the jobs leak.
pub mod deferred {
    use super::host_finalizing;
    use forksafe_core::sync::{LockRank, Mutex};
    use pyo3::prelude::*;

    /// A job for a thread that holds the GIL.
    pub enum Job {
        /// Drop one reference.
        Decref(Py<PyAny>),
        /// Run a closure (resolving an op's future).
        Call(Box<dyn FnOnce(Python<'_>) + Send>),
    }

    static QUEUE: Mutex<Vec<Job>> = Mutex::ranked(Vec::new(), LockRank::Leaf);

    /// How many times a push or drain tries the lock before giving up.
    const TRIES: u32 = 1000;

    /// Queues `job`; leaks it if the queue cannot be had.
    pub fn push(job: Job) {
        for round in 0..TRIES {
            if let Some(mut q) = QUEUE.try_lock() {
                q.push(job);
                return;
            }
            // A CPU hint at first, then yields.
            forksafe_core::sync::spin_step(round);
        }
        std::mem::forget(job);
    }

    /// Runs the queued jobs; the caller holds the GIL. A job queued while
    /// they run waits for the next drain.
    pub fn drain(py: Python<'_>) {
        if host_finalizing() {
            return;
        }
        let jobs = match QUEUE.try_lock() {
            Some(mut q) if !q.is_empty() => std::mem::take(&mut *q),
            _ => return,
        };
        for job in jobs {
            match job {
                Job::Decref(obj) => obj.drop_ref(py),
                Job::Call(f) => f(py),
            }
        }
    }
}

pub use deferred::drain as drain_deferred;
