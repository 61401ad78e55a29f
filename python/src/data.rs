//! `Data`: a data var holding a numpy array, zero-copy.
//!
//! `Engine.data(obj)` registers the array (any buffer-protocol object is
//! viewed as one, without a copy); ops that name the var get the array
//! itself (a write) or a read-only view of it (a read) in Python callbacks,
//! and a raw typed slice in the built-in Rust kernels, which run with the
//! GIL released. The engine's access grant (docs/DESIGN.md, I9) is what
//! makes a writer exclusive: no two ops that touch one var with a write
//! between them overlap.
//!
//! What the binding relies on, and what a user must not break:
//!
//! - The array object is kept alive by the `Data` (a reference in a
//!   [`HostObj`]), and the data pointer and length are read once, at
//!   registration: numpy cannot move an array's buffer while other
//!   references exist except through `resize(refcheck=False)`, which
//!   numpy documents as the caller's promise that nobody else holds it.
//! - Between registration and the last op, Python code outside ops should
//!   touch the array only after `Engine.get` (which waits for writers);
//!   Rust kernels read and write it through raw pointers, so two data vars
//!   over overlapping memory are not undefined behaviour in Rust, but they
//!   are ordered independently (register the base array once).

use crate::bridge::HostObj;
use forksafe::Var;
use forksafe_core::sync::Arc;
use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

/// The element types the Rust kernels handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dtype {
    F32,
    F64,
    I32,
    I64,
    Bool,
}

impl Dtype {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::F64 => "float64",
            Dtype::I32 => "int32",
            Dtype::I64 => "int64",
            Dtype::Bool => "bool",
        }
    }
}

/// Where a registered array's elements are, for the Rust kernels: `None`
/// when its dtype or layout is not one they handle (Python callbacks still
/// get the array).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawElems {
    pub(crate) dtype: Dtype,
    /// The address of the first element.
    pub(crate) ptr: usize,
    /// How many elements.
    pub(crate) len: usize,
}

/// A registered array and its var (shared by the `Data` object and every
/// op that names it).
pub(crate) struct DataInner {
    pub(crate) var: Var,
    pub(crate) array: HostObj,
    pub(crate) writeable: bool,
    pub(crate) raw: Option<RawElems>,
}

/// The contiguous elements of `arr` if it has one of the kernels' dtypes.
fn raw_elems(arr: &Bound<'_, PyAny>) -> Option<RawElems> {
    macro_rules! try_dtype {
        ($t:ty, $d:expr) => {
            if let Ok(a) = arr.cast::<PyArrayDyn<$t>>() {
                let aligned = (a.data() as usize) % std::mem::align_of::<$t>() == 0;
                if !a.is_contiguous() || !aligned {
                    return None;
                }
                return Some(RawElems {
                    dtype: $d,
                    ptr: a.data() as usize,
                    len: a.len(),
                });
            }
        };
    }
    try_dtype!(f64, Dtype::F64);
    try_dtype!(f32, Dtype::F32);
    try_dtype!(i64, Dtype::I64);
    try_dtype!(i32, Dtype::I32);
    try_dtype!(bool, Dtype::Bool);
    None
}

/// A data var: a numpy array whose reads and writes the engine orders.
/// Built by `Engine.data(array)`; pass it in an op's `reads`/`writes`.
#[pyclass(frozen, name = "Data", module = "forksafe._forksafe")]
pub struct PyData {
    pub(crate) inner: Arc<DataInner>,
}

impl PyData {
    /// Registers `obj` (an ndarray, or a buffer-protocol object viewed as
    /// one without a copy) as a data var of `engine`.
    pub(crate) fn register(py: Python<'_>, var: Var, obj: &Bound<'_, PyAny>) -> PyResult<PyData> {
        let np = py.import("numpy")?;
        let ndarray = np.getattr("ndarray")?;
        let array =
            if obj.is_instance(&ndarray)? {
                obj.clone()
            } else {
                // The buffer protocol, or nothing: a list would be copied into
                // a new array the caller does not hold, and its writes lost.
                let view =
                    py.import("builtins")?
                        .getattr("memoryview")?
                        .call1((obj,))
                        .map_err(|_| {
                            PyTypeError::new_err(format!(
                        "data: expected a numpy array or an object with the buffer protocol, \
                         got {} (make it an array first: numpy.array(...))",
                        obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                    ))
                        })?;
                np.call_method1("asarray", (view,))?
            };
        let writeable: bool = array.getattr("flags")?.getattr("writeable")?.extract()?;
        let raw = raw_elems(&array);
        Ok(PyData {
            inner: Arc::new(DataInner {
                var,
                array: HostObj::new(array.unbind()),
                writeable,
                raw,
            }),
        })
    }
}

/// The object a callback gets for a data var: the array itself for a
/// write, a read-only view of it for a read.
pub(crate) fn callback_view<'py>(
    py: Python<'py>,
    data: &DataInner,
    write: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let array = data.array.bind(py);
    if write {
        return Ok(array.clone());
    }
    let view = array.call_method0("view")?;
    view.getattr("flags")?.setattr("writeable", false)?;
    Ok(view)
}

/// The raw elements of `data` for a kernel, or a `TypeError` naming what
/// is missing.
pub(crate) fn kernel_elems(data: &DataInner, op: &str, write: bool) -> PyResult<RawElems> {
    let raw = data.raw.ok_or_else(|| {
        PyTypeError::new_err(format!(
            "{op}: the Rust kernels take contiguous float32, float64, int32, int64 or bool \
             arrays; use a Python callback (Engine.push) for others"
        ))
    })?;
    if write && !data.writeable {
        return Err(PyValueError::new_err(format!(
            "{op}: the output array is read-only"
        )));
    }
    Ok(raw)
}

#[pymethods]
impl PyData {
    /// The registered array itself (no wait: use `Engine.get` to read it
    /// after its writers).
    #[getter]
    fn array(&self, py: Python<'_>) -> Py<PyAny> {
        self.inner.array.bind(py).clone().unbind()
    }

    /// The data var's plain `Var`.
    #[getter]
    fn var(&self) -> crate::var::PyVar {
        crate::var::PyVar {
            var: self.inner.var.clone(),
        }
    }

    /// The array's dtype.
    #[getter]
    fn dtype(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(self.inner.array.bind(py).getattr("dtype")?.unbind())
    }

    /// The array's shape.
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(self.inner.array.bind(py).getattr("shape")?.unbind())
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.inner.array.bind(py).len()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let a = self.inner.array.bind(py);
        let dtype = a
            .getattr("dtype")
            .and_then(|d| d.str())
            .map(|s| s.to_string())
            .unwrap_or_default();
        let shape = a
            .getattr("shape")
            .and_then(|d| d.str())
            .map(|s| s.to_string())
            .unwrap_or_default();
        format!(
            "<forksafe.Data {:?} dtype={dtype} shape={shape}>",
            self.inner.var
        )
    }
}
