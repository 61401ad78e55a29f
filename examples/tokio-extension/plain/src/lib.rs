//! The tokio demo extension with a plain static runtime, the pattern of
//! most Rust-backed Python I/O libraries. A fork child of a process that
//! used the runtime hangs in its first call: the runtime's threads were not
//! copied, and the call waits for them for ever.

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::OnceLock;

#[path = "../../io.rs"]
mod io;

fn rt() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
}

fn os_err(e: std::io::Error) -> PyErr {
    PyOSError::new_err(e.to_string())
}

/// `msg` sent to the loopback server on `port`; its reply (sync, GIL released).
#[pyfunction]
fn fetch<'py>(py: Python<'py>, port: u16, msg: Vec<u8>) -> PyResult<Bound<'py, PyBytes>> {
    let reply = py
        .detach(|| rt().block_on(io::echo(port, msg)))
        .map_err(os_err)?;
    Ok(PyBytes::new(py, &reply))
}

/// The same, as an awaitable.
#[pyfunction]
fn fetch_async(py: Python<'_>, port: u16, msg: Vec<u8>) -> PyResult<Bound<'_, PyAny>> {
    pyo3_async_runtimes::tokio::future_into_py(py, async move {
        io::echo(port, msg).await.map_err(os_err)
    })
}

/// `data` written to `path` with tokio::fs and read back.
#[pyfunction]
fn write_read<'py>(py: Python<'py>, path: String, data: Vec<u8>) -> PyResult<Bound<'py, PyBytes>> {
    let back = py
        .detach(|| rt().block_on(io::write_read(path, data)))
        .map_err(os_err)?;
    Ok(PyBytes::new(py, &back))
}

/// Sleeps inside the runtime's `block_on` (GIL released).
#[pyfunction]
fn sleep(py: Python<'_>, seconds: f64) {
    py.detach(|| rt().block_on(io::sleep(seconds)))
}

#[pymodule]
fn tokio_ext_plain(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fetch, m)?)?;
    m.add_function(wrap_pyfunction!(fetch_async, m)?)?;
    m.add_function(wrap_pyfunction!(write_read, m)?)?;
    m.add_function(wrap_pyfunction!(sleep, m)?)
}
