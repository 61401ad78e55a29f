//! The demo extension with rayon's global pool. A fork child of a process
//! that used the pool hangs in its first parallel call: the pool's threads
//! were not copied, and the call waits for them for ever.

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use rayon::prelude::*;

/// The sum of squares of a float64 array, in parallel, GIL released.
#[pyfunction]
fn sum_of_squares(py: Python<'_>, a: PyReadonlyArray1<'_, f64>) -> PyResult<f64> {
    let xs = a.as_slice()?;
    Ok(py.detach(|| xs.par_iter().map(|x| x * x).sum()))
}

#[pymodule]
fn rayon_ext_plain(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // numpy's C API and its borrow checker are set up lazily, once, behind
    // once-cells: do both now, at import, so no fork can copy a cell left
    // half-initialised by another thread's first call (the child would wait
    // on it for ever).
    let _ = PyArray1::<f64>::zeros(m.py(), 0, false).readonly();
    m.add_function(wrap_pyfunction!(sum_of_squares, m)?)
}
