//! The interpreter's fork and exit hooks for an extension built on
//! forksafe: [`install_hooks`] registers, once per process, an
//! `os.register_at_fork` before-hook that drains with the GIL released
//! (the default engine quiesced, every fork participant's work in flight
//! waited for), hooks after the fork that let the drain go, and an
//! `atexit` hook that shuts the default engine down, holds every
//! participant's new work and waits for its work in flight (so no thread
//! returns into the interpreter after it finalises), and stops engines
//! calling into Python; [`detach`] is pyo3's `Python::detach` that
//! never takes the GIL back after that hook. [`to_py_err`] turns a
//! forksafe error into a Python exception.
//!
//! Why a before-hook when `pthread_atfork` handlers already keep forksafe
//! consistent: CPython calls `fork()` with the GIL held, so the atfork
//! prepare steps run with it held and any work that needs the GIL cannot
//! finish before their bound passes (MXNet's fork hang, docs/DESIGN.md H2).
//! The before-hook runs first, with the GIL released, so that work can
//! finish and the prepare steps find nothing left to wait for.

use crate::bridge::set_finalizing;
use forksafe::{PrepareDeadline, QuiesceGuard, WorkGate};
use forksafe_core::global::OnceFlag;
use forksafe_core::sync::{Clock, Mutex};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyDict, PyTuple};
use std::time::Duration;

/// The before-hook's drain, held until the fork returns. CPython forks one thread at a time (`os.fork` holds the import
/// lock), so one slot is enough.
static HOLD: Mutex<Option<ForkDrain>> = Mutex::new(None);

/// Threads on their way back into Python from [`detach`]: counted from
/// just before they take the GIL back until they hold it. The exit hook
/// closes it for good and waits for the count to reach zero, so no thread
/// takes the GIL back once the interpreter finalises.
static RETURNS: WorkGate = WorkGate::new();

/// Whether this extension's hooks are registered.
static INSTALLED: OnceFlag = OnceFlag::new();

/// A forksafe error (any `Display`: [`forksafe::Error`], a pool's build
/// error) as a Python `RuntimeError` carrying its message.
///
/// ```no_run
/// # use pyo3::prelude::*;
/// fn engine_call() -> PyResult<()> {
///     forksafe::drain_participants(std::time::Duration::ZERO).map_err(forksafe_pyo3::to_py_err)?;
///     Ok(())
/// }
/// ```
pub fn to_py_err(e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

/// Runs `f` with the GIL released, as pyo3's `Python::detach` does, and
/// takes the GIL back only if the interpreter is not exiting: once the exit
/// hook of [`install_hooks`] has run, a thread whose `f` returns waits
/// here for good instead (the process is ending). CPython 3.9-3.13 end a
/// daemon thread that takes the GIL back during finalisation with a forced
/// unwind, and that unwind aborts the process ("FATAL: exception not
/// rethrown") when it meets the Rust frames of the call.
///
/// ```no_run
/// # use pyo3::prelude::*;
/// #[pyfunction]
/// fn total(py: Python<'_>, n: u64) -> u64 {
///     forksafe_pyo3::detach(py, || (0..n).sum())
/// }
/// ```
pub fn detach<T, F>(py: Python<'_>, f: F) -> T
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    let (value, returning) = py.detach(|| {
        let value = f();
        // Waits for good if the exit hook has closed the gate.
        (value, RETURNS.enter())
    });
    // The GIL is held again: no longer on the way back.
    drop(returning);
    value
}

/// A pass of the gate the exit hook closes for good: held by a thread
/// while it may call into Python from a Rust thread (a task that resolves
/// a Python future, `tokio_runtime.rs`). Waits for good once the exit hook
/// has closed the gate, so such a thread never enters a finalising
/// interpreter; the hook waits, bounded, for the passes held.
#[cfg(feature = "tokio")]
pub(crate) fn python_pass() -> forksafe::WorkPass<'static> {
    RETURNS.enter()
}

/// Registers this extension's fork and exit hooks, once per process
/// (later calls do nothing): see the module docs. `drain` bounds the
/// before-hook's wait; 0 is a `ValueError`.
///
/// ```no_run
/// use pyo3::prelude::*;
/// #[pymodule]
/// fn my_extension(m: &Bound<'_, PyModule>) -> PyResult<()> {
///     forksafe_pyo3::install_hooks(m.py(), std::time::Duration::from_secs(2))?;
///     Ok(())
/// }
/// ```
pub fn install_hooks(py: Python<'_>, drain: Duration) -> PyResult<()> {
    if drain.is_zero() {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "the fork drain bound must be positive",
        ));
    }
    INSTALLED.call_once(u64::from(std::process::id()), || register(py, drain))
}

type Args<'a, 'py> = &'a Bound<'py, PyTuple>;
type Kwargs<'a, 'py> = Option<&'a Bound<'py, PyDict>>;

fn register(py: Python<'_>, drain: Duration) -> PyResult<()> {
    let before = PyCFunction::new_closure(
        py,
        Some(c"forksafe_before_fork"),
        None,
        move |args: Args<'_, '_>, _: Kwargs<'_, '_>| before_fork(args.py(), drain),
    )?;
    let after = PyCFunction::new_closure(
        py,
        Some(c"forksafe_after_fork"),
        None,
        |_: Args<'_, '_>, _: Kwargs<'_, '_>| release_hold(),
    )?;
    let at_exit = PyCFunction::new_closure(
        py,
        Some(c"forksafe_at_exit"),
        None,
        move |args: Args<'_, '_>, _: Kwargs<'_, '_>| at_exit(args.py(), drain),
    )?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("before", before)?;
    kwargs.set_item("after_in_parent", &after)?;
    kwargs.set_item("after_in_child", &after)?;
    py.import("os")?
        .getattr("register_at_fork")?
        .call((), Some(&kwargs))?;
    py.import("atexit")?
        .getattr("register")?
        .call1((at_exit,))?;
    Ok(())
}

/// What [`drain_for_fork`] holds until the fork returns, and what it could
/// not drain in time.
#[derive(Debug, Default)]
#[must_use = "the engines resume when this drops"]
pub struct ForkDrain {
    /// The engines held quiesced (dispatch resumes when these drop; in a
    /// fork child they are inert).
    pub held: Vec<QuiesceGuard>,
    /// Ops still running when the bound passed (a child forked now
    /// completes them with `LostInFork`).
    pub timed_out: Vec<forksafe::OpInfo>,
    /// Whether every fork participant's work in flight ended in time.
    pub participants_drained: bool,
}

/// A drained fork's first half, for an `os.register_at_fork` before-hook:
/// with the GIL released, quiesce each of `engines` (skipping those shutting
/// down or stopped) and wait for every fork participant's work in flight
/// ([`forksafe::drain_participants`]), within `drain` in all. Hold the
/// result until the fork returns. The fork goes on whatever it reports:
/// the `pthread_atfork` handlers keep every engine and participant safe,
/// drained or not.
pub fn drain_for_fork(py: Python<'_>, engines: &[&forksafe::Engine], drain: Duration) -> ForkDrain {
    py.detach(|| {
        let start = std::time::Instant::now();
        // At least a millisecond each: an idle engine still gets its
        // quiesce; a busy one past the bound reports its running ops.
        let left = || {
            drain
                .saturating_sub(start.elapsed())
                .max(Duration::from_millis(1))
        };
        let mut out = ForkDrain::default();
        for e in engines {
            if matches!(
                e.state(),
                forksafe::State::ShuttingDown | forksafe::State::Stopped
            ) {
                continue;
            }
            match e.quiesce(left()) {
                Ok(g) => out.held.push(g),
                Err(forksafe::Error::Timeout { pending }) => out.timed_out.extend(pending),
                Err(_) => {}
            }
        }
        out.participants_drained = forksafe::drain_participants(left()).unwrap_or(false);
        out
    })
}

/// The before-hook: [`drain_for_fork`] of the default engine (if it
/// started) and the participants.
fn before_fork(py: Python<'_>, drain: Duration) {
    let engines: Vec<&forksafe::Engine> =
        forksafe::default_engine_if_started().into_iter().collect();
    let hold = drain_for_fork(py, &engines, drain);
    *HOLD.lock() = Some(hold);
}

/// After the fork, on either side: the drain ends (in the child the guard
/// belongs to the parent's epoch and is inert).
fn release_hold() {
    let hold = HOLD.lock().take();
    drop(hold);
}

/// At exit, GIL released: shut the default engine down, and let every
/// participant hold new work and wait for its work in flight (within
/// `drain`), so no thread returns into Python once it finalises (CPython
/// 3.9-3.13 tear such a thread down with a forced unwind, which aborts
/// the process when it meets a Rust frame); then no engine calls into
/// Python again.
fn at_exit(py: Python<'_>, drain: Duration) {
    py.detach(|| {
        if let Some(e) = forksafe::default_engine_if_started() {
            let _ = e.shutdown(e.config().shutdown_deadline);
        }
        let _ = forksafe::exit_participants(drain);
        let clock = Clock::new();
        RETURNS.close_and_wait(&PrepareDeadline::after(&clock, drain));
    });
    set_finalizing();
}
