//! `Var` for Python: a plain var handle.

use forksafe::Var;
use pyo3::prelude::*;

/// A var: a handle naming a resource, ordered by the ops that read and write
/// it. Its `version` counts completed writes.
#[pyclass(frozen, name = "Var", module = "forksafe._forksafe")]
pub struct PyVar {
    pub(crate) var: Var,
}

#[pymethods]
impl PyVar {
    fn __repr__(&self) -> String {
        format!("<forksafe.Var #{}>", self.var.id())
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<PyVar>().is_ok_and(|o| o.get().var == self.var)
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        format!("{:?}", self.var).hash(&mut h);
        h.finish()
    }
}
