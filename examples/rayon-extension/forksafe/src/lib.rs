//! The demo extension made fork-safe: the same function as `plain/`, with
//! the three-line change of the README's "Making your PyO3 extension
//! fork-safe" (marked `fork-safe 1/3` to `3/3`). A fork child builds its
//! own pool at its first parallel call; a fork waits (GIL released,
//! bounded) for the calls in flight; at exit no call returns into the
//! finalised interpreter.

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use rayon::prelude::*;

/// The sum of squares of a float64 array, in parallel, GIL released.
#[pyfunction]
fn sum_of_squares(py: Python<'_>, a: PyReadonlyArray1<'_, f64>) -> PyResult<f64> {
    let xs = a.as_slice()?;
    // fork-safe 1/3: the process's pool, rebuilt in a fork child.
    let pool = forksafe_rayon::global_pool().map_err(forksafe_pyo3::to_py_err)?;
    // fork-safe 2/3: run in it; never take the GIL back after the exit hook.
    Ok(forksafe_pyo3::detach(py, || {
        pool.install(|| xs.par_iter().map(|x| x * x).sum())
    }))
}

/// How many threads this process's pool has (0 before its first call in
/// a fork child).
#[pyfunction]
fn pool_threads() -> PyResult<usize> {
    let pool = forksafe_rayon::global_pool().map_err(forksafe_pyo3::to_py_err)?;
    Ok(pool.current_num_threads())
}

#[pymodule]
fn rayon_ext_forksafe(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // numpy's C API and its borrow checker are set up lazily, once, behind
    // once-cells: do both now, at import, so no fork can copy a cell left
    // half-initialised by another thread's first call (the child would wait
    // on it for ever).
    let _ = PyArray1::<f64>::zeros(m.py(), 0, false).readonly();
    // fork-safe 3/3: the fork and exit hooks (drain with the GIL released).
    forksafe_pyo3::install_hooks(m.py(), std::time::Duration::from_secs(2))?;
    m.add_function(wrap_pyfunction!(sum_of_squares, m)?)?;
    m.add_function(wrap_pyfunction!(pool_threads, m)?)
}
