//! The CPython host bridge: how host-lane ops take the GIL, how engine waits
//! let go of it, and how Python objects owned by the engine are dropped.
//!
//! - [`PyBridge`] takes the GIL (`Python::attach`) around each host call and
//!   releases it (`Python::detach`) around every blocking engine wait made
//!   by a thread that holds it (docs/DESIGN.md, H2).
//! - [`HostObj`] is how an op payload owns a Python object: it is dropped
//!   (decref'd) only by a thread that holds the GIL while the interpreter is
//!   alive, and leaked otherwise — in a fork child before the interpreter is
//!   re-initialised, after the `atexit` shutdown, or by a thread without the
//!   GIL (H1, I5, I8). It never goes through PyO3's deferred-decref pool.
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
pub(crate) fn init_finalizing_probe() {
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
pub(crate) fn set_finalizing() {
    FINALIZING.store(true, Ordering::SeqCst);
}

/// Whether the engine must no longer call into Python.
pub(crate) fn host_finalizing() -> bool {
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
pub(crate) fn gil_held() -> bool {
    // SAFETY: `PyGILState_Check` only compares the calling thread's state
    // with the current one; it is callable without the GIL.
    unsafe { pyo3::ffi::PyGILState_Check() == 1 }
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
}

/// A Python object owned by an op payload: dropped with the GIL held by
/// the dropping thread, leaked if that thread does not hold it or the
/// interpreter is finalising (see the module doc).
pub(crate) struct HostObj(ManuallyDrop<Py<PyAny>>);

impl HostObj {
    /// Takes ownership of `obj`.
    pub(crate) fn new(obj: Py<PyAny>) -> Self {
        HostObj(ManuallyDrop::new(obj))
    }

    /// The object, bound to the GIL.
    pub(crate) fn bind<'py>(&self, py: Python<'py>) -> &Bound<'py, PyAny> {
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
            // Dropping it is host code that cannot run now (H1, I8).
            std::mem::forget(obj);
        }
    }
}
