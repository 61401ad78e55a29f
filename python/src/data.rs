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
//! # Memory safety
//!
//! Kernels read and write a registered array through a raw pointer with the
//! GIL released, so no sequence of numpy calls may move or free its buffer
//! while the `Data` lives:
//!
//! - The `Data` keeps the array alive (a reference in a [`HostObj`]) and a
//!   weak reference to it and to every ndarray it views (its `.base`
//!   chain). numpy refuses to resize an array that has a weak reference,
//!   `refcheck=False` included (`ValueError`), so neither the array nor a
//!   base it views can be reallocated. A buffer that is not an ndarray (a
//!   `bytearray`, an `mmap`) is held through numpy's buffer export, which
//!   refuses resizing and closing (`BufferError`).
//! - What else can change in place (`dtype`, `shape`, `strides`, the
//!   `writeable` flag) keeps the buffer where it is, so every push re-reads
//!   the array under the GIL ([`kernel_view`]) and refuses what the kernel
//!   cannot do with it now: a dtype or layout it does not take
//!   (`TypeError`), a read-only output (`ValueError`). The kernel then uses
//!   that push's view: memory of the same, pinned allocation.
//! - `ndarray.__setstate__` (the pickle protocol) replaces and frees an
//!   array's buffer whatever refers to it; numpy's own views crash on it.
//!   A push after it is refused (its data pointer changed: `ValueError`); a
//!   kernel already queued when it runs is not protected: do not unpickle
//!   into a registered array.
//!
//! Between registration and the last op, Python code outside ops should
//! touch the array only after `Engine.get` (which waits for writers); two
//! data vars over overlapping memory are ordered independently (register
//! the base array once).

use crate::bridge::HostObj;
use forksafe::Var;
use forksafe_core::sync::Arc;
use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;

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

/// The memory order of a contiguous array. Elementwise kernels walk
/// memory, not indices, so their operands must share one order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Both C and Fortran contiguous: 0-d, 1-d, or at most one element.
    Either,
    /// Row-major only.
    C,
    /// Column-major only.
    F,
}

impl Order {
    /// Whether elementwise operands of these orders pair element by element.
    pub(crate) fn agrees(self, other: Order) -> bool {
        self == other || self == Order::Either || other == Order::Either
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Order::Either => "contiguous",
            Order::C => "C-ordered",
            Order::F => "Fortran-ordered",
        }
    }
}

/// Where an array's elements are for one kernel push, read under the GIL.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawElems {
    pub(crate) dtype: Dtype,
    /// The address of the first element.
    pub(crate) ptr: usize,
    /// How many elements.
    pub(crate) len: usize,
    pub(crate) order: Order,
}

/// An array's kernel view at one push, and its shape.
#[derive(Debug, Clone)]
pub(crate) struct KernelView {
    pub(crate) raw: RawElems,
    pub(crate) shape: Vec<usize>,
}

/// A registered array and its var (shared by the `Data` object and every
/// op that names it). Guards the pin of the module's "Memory safety".
pub(crate) struct DataInner {
    pub(crate) var: Var,
    pub(crate) array: HostObj,
    /// Weak references to the array and every ndarray in its base chain:
    /// numpy resizes none of them while these live.
    _pins: HostObj,
    /// The data pointer at registration: a push that finds another one
    /// (the buffer was replaced) is refused.
    registered_ptr: usize,
}

impl DataInner {
    /// Whether the array is writeable now (its flag can change after
    /// registration).
    pub(crate) fn writeable(&self, py: Python<'_>) -> bool {
        let array = self.array.bind(py);
        match array.cast::<numpy::PyUntypedArray>() {
            // SAFETY: a live ndarray (the GIL is held); `flags` is read.
            Ok(a) => unsafe {
                (*a.as_array_ptr()).flags & numpy::npyffi::flags::NPY_ARRAY_WRITEABLE != 0
            },
            Err(_) => false,
        }
    }
}

/// The data pointer of `arr` if it is an ndarray.
fn data_ptr(arr: &Bound<'_, PyAny>) -> Option<usize> {
    let a = arr.cast::<numpy::PyUntypedArray>().ok()?;
    // SAFETY: `a` is a live ndarray (the GIL is held); its `data` field
    // is read, not dereferenced.
    Some(unsafe { (*a.as_array_ptr()).data } as usize)
}

/// The contiguous, aligned elements of `arr` if it has one of the kernels'
/// dtypes (native byte order).
fn raw_elems(arr: &Bound<'_, PyAny>) -> Option<RawElems> {
    macro_rules! try_dtype {
        ($t:ty, $d:expr) => {
            if let Ok(a) = arr.cast::<PyArrayDyn<$t>>() {
                let aligned = (a.data() as usize) % std::mem::align_of::<$t>() == 0;
                let order = match (a.is_c_contiguous(), a.is_fortran_contiguous()) {
                    (true, true) => Order::Either,
                    (true, false) => Order::C,
                    (false, true) => Order::F,
                    (false, false) => return None,
                };
                if !aligned {
                    return None;
                }
                return Some(RawElems {
                    dtype: $d,
                    ptr: a.data() as usize,
                    len: a.len(),
                    order,
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
        // Pin the buffer: a weak reference to the array and to each
        // ndarray it views stops numpy from resizing any of them.
        let weakref = py.import("weakref")?.getattr("ref")?;
        let pins = PyList::empty(py);
        let mut owner = array.clone();
        while owner.is_instance(&ndarray)? {
            pins.append(weakref.call1((&owner,))?)?;
            let base = owner.getattr("base")?;
            if base.is_none() {
                break;
            }
            owner = base;
        }
        let registered_ptr = data_ptr(&array).unwrap_or(0);
        Ok(PyData {
            inner: Arc::new(DataInner {
                var,
                array: HostObj::new(array.unbind()),
                _pins: HostObj::new(pins.into_any().unbind()),
                registered_ptr,
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

/// What a kernel pushed now may do with `data`'s array, read now under
/// the GIL: its elements and shape; a `TypeError` for a dtype or layout
/// the kernels do not take, a `ValueError` for a read-only output or a
/// replaced buffer (the module's "Memory safety").
pub(crate) fn kernel_view(
    py: Python<'_>,
    data: &DataInner,
    op: &str,
    write: bool,
) -> PyResult<KernelView> {
    let array = data.array.bind(py);
    if data_ptr(array) != Some(data.registered_ptr) {
        return Err(PyValueError::new_err(format!(
            "{op}: the array's buffer was replaced since Engine.data() \
             (ndarray.__setstate__?); register the array again"
        )));
    }
    let raw = raw_elems(array).ok_or_else(|| {
        let dtype = array
            .getattr("dtype")
            .and_then(|d| d.str())
            .map(|s| s.to_string())
            .unwrap_or_default();
        PyTypeError::new_err(format!(
            "{op}: the Rust kernels take contiguous, aligned float32, float64, int32, int64 \
             or bool arrays in native byte order, got a {dtype} array that is not one; use \
             numpy.ascontiguousarray, or a Python callback (Engine.push)"
        ))
    })?;
    let a = array.cast::<numpy::PyUntypedArray>()?;
    if write {
        // SAFETY: `a` is a live ndarray (the GIL is held); `flags` is read.
        let flags = unsafe { (*a.as_array_ptr()).flags };
        if flags & numpy::npyffi::flags::NPY_ARRAY_WRITEABLE == 0 {
            return Err(PyValueError::new_err(format!(
                "{op}: the output array is read-only"
            )));
        }
    }
    Ok(KernelView {
        raw,
        shape: a.shape().to_vec(),
    })
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
