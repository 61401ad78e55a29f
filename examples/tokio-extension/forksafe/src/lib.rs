//! The tokio demo extension made fork-safe: the functions of `plain/` on
//! `forksafe-tokio`'s runtime (the changes are marked `fork-safe`). A fork
//! child builds its own runtime at its first call; a fork waits (GIL
//! released, bounded) for the `block_on` calls in flight; at exit no call
//! returns into the finalised interpreter.

use forksafe_pyo3::tokio_runtime::{block_on, future_into_py};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

#[path = "../../io.rs"]
mod io;

fn os_err(e: std::io::Error) -> PyErr {
    PyOSError::new_err(e.to_string())
}

/// `msg` sent to the loopback server on `port`; its reply (sync, GIL released).
#[pyfunction]
fn fetch<'py>(py: Python<'py>, port: u16, msg: Vec<u8>) -> PyResult<Bound<'py, PyBytes>> {
    // fork-safe: this process's runtime, GIL released.
    let reply = block_on(py, io::echo(port, msg))?.map_err(os_err)?;
    Ok(PyBytes::new(py, &reply))
}

/// The same, as an awaitable.
#[pyfunction]
fn fetch_async(py: Python<'_>, port: u16, msg: Vec<u8>) -> PyResult<Bound<'_, PyAny>> {
    // fork-safe: the awaitable runs on this process's runtime.
    future_into_py(py, async move { io::echo(port, msg).await.map_err(os_err) })
}

/// `data` written to `path` with tokio::fs and read back.
#[pyfunction]
fn write_read<'py>(py: Python<'py>, path: String, data: Vec<u8>) -> PyResult<Bound<'py, PyBytes>> {
    let back = block_on(py, io::write_read(path, data))?.map_err(os_err)?;
    Ok(PyBytes::new(py, &back))
}

/// Sleeps inside the runtime's `block_on` (GIL released).
#[pyfunction]
fn sleep(py: Python<'_>, seconds: f64) -> PyResult<()> {
    block_on(py, io::sleep(seconds))
}

/// Spawns `n` tasks that sleep for an hour: work still pending at exit.
#[pyfunction]
fn spawn_pending(n: usize) -> PyResult<()> {
    let rt = forksafe_tokio::global_runtime().map_err(forksafe_pyo3::to_py_err)?;
    for _ in 0..n {
        // The handle is dropped: the task runs detached.
        drop(
            rt.spawn(io::sleep(3600.0))
                .map_err(forksafe_pyo3::to_py_err)?,
        );
    }
    Ok(())
}

/// Whether this process has built its runtime (false in a fork child until
/// its first call).
#[pyfunction]
fn runtime_built() -> PyResult<bool> {
    let rt = forksafe_tokio::global_runtime().map_err(forksafe_pyo3::to_py_err)?;
    Ok(rt.is_built())
}

#[pymodule]
fn tokio_ext_forksafe(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // fork-safe: the fork and exit hooks (drain with the GIL released).
    forksafe_pyo3::install_hooks(m.py(), std::time::Duration::from_secs(2))?;
    m.add_function(wrap_pyfunction!(fetch, m)?)?;
    m.add_function(wrap_pyfunction!(fetch_async, m)?)?;
    m.add_function(wrap_pyfunction!(write_read, m)?)?;
    m.add_function(wrap_pyfunction!(sleep, m)?)?;
    m.add_function(wrap_pyfunction!(spawn_pending, m)?)?;
    m.add_function(wrap_pyfunction!(runtime_built, m)?)
}
