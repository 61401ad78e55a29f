//! A Python exception as an op's error value.

use crate::bridge::DeferredObj;
use forksafe::OpError as CoreOpError;
use pyo3::prelude::*;

/// The exception a Python callback raised, as the error its op failed
/// with: it travels with the poison to every var the failure reaches
/// (core keeps it as the `OpError`'s source), so every wait that reports
/// it raises this same object again.
pub struct PyRaised {
    exc: DeferredObj,
    /// `Type: message`, for Rust-side displays of the error.
    text: String,
}

impl PyRaised {
    /// Wraps the raised exception `exc`.
    pub fn new(exc: &Bound<'_, PyAny>) -> Self {
        let text = format!("{}: {}", type_name(exc), message_of(exc));
        PyRaised {
            exc: DeferredObj::new(exc.clone().unbind()),
            text,
        }
    }
}

impl std::fmt::Display for PyRaised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::fmt::Debug for PyRaised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PyRaised({})", self.text)
    }
}

impl std::error::Error for PyRaised {}

/// The qualified type name of an exception (module-qualified unless it is
/// a builtin or from `__main__`).
pub fn type_name(exc: &Bound<'_, PyAny>) -> String {
    let ty = exc.get_type();
    let qual = ty
        .qualname()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "Exception".into());
    match ty.module().map(|m| m.to_string()) {
        Ok(m) if m != "builtins" && m != "__main__" => format!("{m}.{qual}"),
        _ => qual,
    }
}

/// `str(exc)`, or a placeholder if that raises.
pub fn message_of(exc: &Bound<'_, PyAny>) -> String {
    exc.str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "<unprintable exception>".into())
}

/// The exception a callback raised, if `e` is (or passes on) that failure.
pub fn original<'py>(py: Python<'py>, e: &CoreOpError) -> Option<Bound<'py, PyAny>> {
    e.body_error()
        .and_then(|b| b.downcast_ref::<PyRaised>())
        .map(|r| r.exc.bind(py).clone())
}
