//! `forksafe._forksafe`: the Python binding of forksafe (built by maturin;
//! the `forksafe` Python package wraps it).
//!
//! Python callables run as host-lane ops through [`bridge::PyBridge`], which
//! takes the GIL around each call; every blocking call made from Python
//! (waits, shutdown, the before-fork drain) releases the GIL first. The
//! package's `os.register_at_fork` hooks call [`before_fork`] (a bounded,
//! drained quiesce of every engine, GIL released) and release the held
//! quiesce after the fork; its `atexit` hook shuts every engine down and
//! then calls [`set_finalizing`], after which no engine calls into Python.
//! Forks that bypass Python are covered by the engine's own
//! `pthread_atfork` handlers.

use forksafe_pyo3 as bridge;
mod data;
mod engine;
mod engine_ref;
mod errors;
mod future;
mod kernels;
mod names;
mod var;

use forksafe::QuiesceGuard;
use forksafe_core::sync::Mutex;
use pyo3::prelude::*;

/// A drained quiesce of every engine, held by the before-fork hook until
/// the fork returns.
#[pyclass(frozen, name = "ForkHold", module = "forksafe._forksafe")]
pub struct ForkHold {
    held: Mutex<Vec<QuiesceGuard>>,
    timed_out: Vec<String>,
}

#[pymethods]
impl ForkHold {
    /// Ends the quiesce: in the parent, dispatch resumes; in a child the
    /// guards are inert (they belong to the parent's fork epoch, and each
    /// engine settles at its first call). Idempotent.
    fn release(&self, py: Python<'_>) {
        let held = std::mem::take(&mut *self.held.lock());
        py.detach(move || drop(held));
    }

    /// How many engines are held quiesced across the fork.
    #[getter]
    fn engines(&self) -> usize {
        self.held.lock().len()
    }

    /// Ops still running when the drain bound passed (`name (#id)`): a
    /// child forked now completes them with 'lost_in_fork'.
    #[getter]
    fn timed_out(&self) -> Vec<String> {
        self.timed_out.clone()
    }
}

/// The before-fork hook's work (a drained fork, docs/DESIGN.md):
/// `forksafe_pyo3::drain_for_fork` of `engines` (every engine made from
/// Python: only this module makes engines in this extension) and of the
/// fork participants, within `drain` seconds in all, with the GIL
/// released; the engines stay held until the fork returns. An engine that
/// misses the bound is not held and its running ops are listed (the child
/// inherits them and completes them with 'lost_in_fork'); an engine
/// shutting down or stopped is skipped. The fork goes on in every case: the engine's
/// `pthread_atfork` handlers keep it safe drained or not.
#[pyfunction]
#[pyo3(name = "_before_fork")]
fn before_fork(
    py: Python<'_>,
    drain: f64,
    engines: Vec<PyRef<'_, engine::PyEngine>>,
) -> PyResult<ForkHold> {
    let drain = engine::seconds("drain", drain)?;
    let refs: Vec<engine_ref::EngineRef> = engines.iter().map(|e| e.engine.clone()).collect();
    drop(engines);
    let engines: Vec<&forksafe::Engine> = refs.iter().map(|e| &**e).collect();
    let drained = bridge::drain_for_fork(py, &engines, drain);
    Ok(ForkHold {
        held: Mutex::new(drained.held),
        timed_out: drained
            .timed_out
            .iter()
            .map(|o| format!("{} (#{})", o.name, o.id))
            .collect(),
    })
}

/// The drain bound of `forksafe.fork_drain()`'s default: the default
/// engine's `fork_drain` if it started, else the default config's.
#[pyfunction]
#[pyo3(name = "_default_fork_drain")]
fn default_fork_drain() -> f64 {
    forksafe::default_engine_if_started()
        .map(|e| e.config().fork_drain)
        .unwrap_or_else(|| forksafe::Config::default().fork_drain)
        .as_secs_f64()
}

/// Called by the `atexit` hook once every engine is shut down: from now on
/// no engine calls into Python (host payloads are leaked, not dropped).
#[pyfunction]
#[pyo3(name = "_set_finalizing")]
fn set_finalizing() {
    bridge::set_finalizing();
}

/// Whether the engines have stopped calling into Python.
#[pyfunction]
#[pyo3(name = "_is_finalizing")]
fn is_finalizing() -> bool {
    bridge::host_finalizing()
}

/// Shuts the default engine down within `timeout` seconds (GIL released),
/// if it started.
#[pyfunction]
#[pyo3(name = "_shutdown_default", signature = (timeout=None))]
fn shutdown_default(py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
    let Some(e) = forksafe::default_engine_if_started() else {
        return Ok(());
    };
    let t = match timeout {
        Some(t) => engine::shutdown_wait(t)?,
        None => e.config().shutdown_deadline,
    };
    py.detach(|| e.shutdown(t))
        .map(|_| ())
        .map_err(|err| errors::to_py(py, err))
}

/// The `OpError` of an op pending at a fork, for its future in the child.
#[pyfunction]
#[pyo3(name = "_lost_error", signature = (name, op_id=None))]
fn lost_error<'py>(py: Python<'py>, name: &str, op_id: Option<u64>) -> Bound<'py, PyAny> {
    errors::new_op_error(
        py,
        errors::OpFacts {
            name,
            id: op_id,
            kind: "lost_in_fork",
            message: errors::LOST_IN_FORK.into(),
            vars: None,
        },
        None,
    )
}

/// How many times this process and its ancestors forked since the first
/// engine of the lineage was made.
#[pyfunction]
fn fork_epoch() -> u64 {
    forksafe::fork_epoch()
}

#[pymodule]
fn _forksafe(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    bridge::init_finalizing_probe();
    m.add_class::<engine::PyEngine>()?;
    m.add_class::<var::PyVar>()?;
    m.add_class::<data::PyData>()?;
    m.add_class::<ForkHold>()?;
    m.add("ForksafeError", py.get_type::<errors::ForksafeError>())?;
    m.add("OpError", py.get_type::<errors::OpError>())?;
    m.add("ShutDownError", py.get_type::<errors::ShutDownError>())?;
    m.add("WaitTimeout", py.get_type::<errors::WaitTimeout>())?;
    m.add("WaitOnSelfError", py.get_type::<errors::WaitOnSelfError>())?;
    m.add(
        "ForkInProgressError",
        py.get_type::<errors::ForkInProgressError>(),
    )?;
    m.add_function(wrap_pyfunction!(before_fork, m)?)?;
    m.add_function(wrap_pyfunction!(default_fork_drain, m)?)?;
    m.add_function(wrap_pyfunction!(set_finalizing, m)?)?;
    m.add_function(wrap_pyfunction!(is_finalizing, m)?)?;
    m.add_function(wrap_pyfunction!(shutdown_default, m)?)?;
    m.add_function(wrap_pyfunction!(fork_epoch, m)?)?;
    m.add_function(wrap_pyfunction!(lost_error, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
