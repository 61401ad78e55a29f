//! What a PyO3 extension needs to run Python code from forksafe engine
//! workers, and to survive `fork()` and interpreter exit while doing so:
//! the bridge forksafe's own Python binding is built on.
//!
//! - [`PyBridge`]: the engine's host bridge for CPython. Host-lane ops take
//!   the GIL around each call; every blocking engine wait made by a thread
//!   that holds the GIL releases it first (docs/DESIGN.md, H2); after
//!   [`set_finalizing`] (call it from an `atexit` hook once your engines are
//!   shut down) or once CPython finalises, no engine calls into Python.
//! - [`HostObj`] and [`DeferredObj`]: Python objects owned by Rust state
//!   that may end on any thread (an op payload, an exception carried by
//!   poison). A drop without the GIL never takes it and never leaks: the
//!   reference goes on a try-locked queue that [`drain_deferred`] empties
//!   (call it from any function that holds the GIL).
//! - [`install_hooks`]: the interpreter's fork and exit hooks, registered
//!   once: before a fork, with the GIL released, the default engine is
//!   quiesced and every fork participant's work in flight (a
//!   `forksafe-rayon` pool's calls) is waited for, bounded; at exit the
//!   default engine shuts down and no engine calls into Python again.
//!   [`to_py_err`] turns a forksafe error into a Python exception.
//! - `tokio_runtime` (feature `tokio`): Rust futures as Python
//!   awaitables, and blocking calls with the GIL released, on
//!   `forksafe-tokio`'s fork-safe runtime.
//! - [`PyRaised`]: a Python exception as an op's error value: push bodies
//!   that return `Err(Box::new(PyRaised::new(&exc)))` poison what they
//!   write with the exception object itself, and [`original`] gets it back
//!   from any `OpError` the poison reaches, so a wait can re-raise it.
//!
//! A minimal extension (`cargo add forksafe forksafe-pyo3 pyo3`, crate
//! type `cdylib`, built by maturin):
//!
//! ```no_run
//! use forksafe::{Config, Engine};
//! use forksafe_pyo3::{drain_deferred, original, HostObj, PyBridge, PyRaised};
//! use pyo3::prelude::*;
//! use std::sync::OnceLock;
//!
//! static ENGINE: OnceLock<Engine> = OnceLock::new();
//!
//! fn engine() -> PyResult<&'static Engine> {
//!     if let Some(e) = ENGINE.get() {
//!         return Ok(e);
//!     }
//!     let e = Engine::with_bridge(Config::default(), Box::new(PyBridge))
//!         .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
//!     Ok(ENGINE.get_or_init(|| e))
//! }
//!
//! /// Runs `f()` on the engine's host lane; waits (GIL released) and
//! /// re-raises what `f` raised, as the same object.
//! #[pyfunction]
//! fn call_on_host(py: Python<'_>, f: Py<PyAny>) -> PyResult<()> {
//!     let e = engine()?;
//!     let var = e.new_var().map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
//!     let f = HostObj::new(f);
//!     e.op("call")
//!         .writes(&[&var])
//!         .host()
//!         .try_run(move || {
//!             Python::try_attach(|py| {
//!                 f.bind(py).call0().map(|_| ()).map_err(|err| {
//!                     let exc = err.value(py).clone().into_any();
//!                     Box::new(PyRaised::new(&exc)) as Box<dyn std::error::Error + Send + Sync>
//!                 })
//!             })
//!             .unwrap_or_else(|| Err("interpreter gone".into()))
//!         })
//!         .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
//!     let waited = py.detach(|| e.wait_for_var(&var));
//!     drain_deferred(py);
//!     match waited {
//!         Ok(()) => Ok(()),
//!         Err(forksafe::Error::Poisoned(op)) => match original(py, &op) {
//!             Some(exc) => Err(PyErr::from_value(exc)),
//!             None => Err(pyo3::exceptions::PyRuntimeError::new_err(op.to_string())),
//!         },
//!         Err(other) => Err(pyo3::exceptions::PyRuntimeError::new_err(other.to_string())),
//!     }
//! }
//!
//! #[pymodule]
//! fn my_extension(m: &Bound<'_, PyModule>) -> PyResult<()> {
//!     forksafe_pyo3::init_finalizing_probe();
//!     m.add_function(wrap_pyfunction!(call_on_host, m)?)
//! }
//! ```

mod bridge;
mod hooks;
mod raised;
mod thread_state;
#[cfg(feature = "tokio")]
pub mod tokio_runtime;

pub use bridge::*;
pub use hooks::{detach, drain_for_fork, install_hooks, to_py_err, ForkDrain};
pub use raised::{message_of, original, type_name, PyRaised};
