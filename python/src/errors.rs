//! Python exceptions of the binding, and how engine errors and Python
//! exceptions raised in callbacks become them.

use forksafe::{Error, OpError as CoreOpError, OpErrorKind};
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;

pyo3::create_exception!(
    _forksafe,
    ForksafeError,
    PyException,
    "Base class of the errors forksafe raises (bad input aside, which is ValueError/TypeError)."
);
pyo3::create_exception!(
    _forksafe,
    OpError,
    ForksafeError,
    "An op failed (its callback raised, a Rust op failed), or was lost in a fork child, or \
     cancelled by shutdown. Attributes: op_name, op_id, kind ('failed', 'panicked', \
     'lost_in_fork', 'cancelled', 'token_dropped', 'worker_start'), exc_type (the callback's exception type \
     name, or None), message (the original message), traceback (the callback's formatted \
     traceback text, or None), errors (from wait_all: every error raised since the previous \
     wait_all, this one first)."
);
pyo3::create_exception!(
    _forksafe,
    ShutDownError,
    ForksafeError,
    "The engine is shut down (or shutting down): it accepts no new op."
);
pyo3::create_exception!(
    _forksafe,
    WaitTimeout,
    ForksafeError,
    "A wait's deadline passed; attribute `pending` names the ops still pending."
);
pyo3::create_exception!(
    _forksafe,
    ForkInProgressError,
    ForksafeError,
    "Called from the forking thread between fork's prepare and parent/child handlers."
);

/// Marks a failure message that carries a Python exception.
const MARK: &str = "\u{1}pyexc\u{1}";

/// A Python exception raised by a callback, encoded into the op's failure
/// message (which travels with the poison to every dependent op):
/// `MARK len(type):len(message):type message traceback`.
pub(crate) fn encode_exception(py: Python<'_>, err: &PyErr) -> String {
    let ty = err.get_type(py);
    let qual = ty
        .qualname()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let type_name = match ty.module().map(|m| m.to_string()) {
        Ok(m) if m != "builtins" && m != "__main__" => format!("{m}.{qual}"),
        _ => qual,
    };
    let value = err.value(py);
    let message = value
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "<unprintable exception>".into());
    let traceback = py
        .import("traceback")
        .and_then(|tb| {
            tb.call_method1(
                "format_exception",
                (err.get_type(py), value, err.traceback(py)),
            )
        })
        .and_then(|lines| lines.extract::<Vec<String>>())
        .map(|lines| lines.concat())
        .unwrap_or_else(|_| format!("{type_name}: {message}\n"));
    format!(
        "{MARK}{}:{}:{type_name}{message}{traceback}",
        type_name.len(),
        message.len()
    )
}

/// The parts of an encoded exception: type name, message, traceback.
fn decode_exception(s: &str) -> Option<(&str, &str, &str)> {
    let rest = s.strip_prefix(MARK)?;
    let (tlen, rest) = rest.split_once(':')?;
    let (mlen, rest) = rest.split_once(':')?;
    let tlen: usize = tlen.parse().ok()?;
    let mlen: usize = mlen.parse().ok()?;
    let ty = rest.get(..tlen)?;
    let msg = rest.get(tlen..tlen + mlen)?;
    let tb = rest.get(tlen + mlen..)?;
    Some((ty, msg, tb))
}

/// A Python `OpError` for one engine op error.
pub(crate) fn op_error(py: Python<'_>, e: &CoreOpError) -> PyErr {
    let op = e.op();
    let (kind, exc_type, message, traceback) = match e.kind() {
        OpErrorKind::Failed(m) => match decode_exception(m) {
            Some((t, msg, tb)) => ("failed", Some(t), msg.to_string(), Some(tb)),
            None => ("failed", None, m.clone(), None),
        },
        OpErrorKind::Panicked(m) => ("panicked", None, m.clone(), None),
        OpErrorKind::LostInFork => (
            "lost_in_fork",
            None,
            "was pending at fork; not run in the child".to_string(),
            None,
        ),
        OpErrorKind::Cancelled => ("cancelled", None, "was cancelled by shutdown".into(), None),
        OpErrorKind::TokenDropped => (
            "token_dropped",
            None,
            "completion token dropped unfinished".into(),
            None,
        ),
        OpErrorKind::WorkerStart(m) => (
            "worker_start",
            None,
            format!("had no worker: cannot start one: {m}"),
            None,
        ),
        other => ("other", None, format!("{other:?}"), None),
    };
    let what = match (exc_type, traceback) {
        (Some(t), Some(tb)) => format!("failed: {t}: {message}\n\n{tb}"),
        _ if kind == "failed" => format!("failed: {message}"),
        _ if kind == "panicked" => format!("panicked: {message}"),
        _ => message.clone(),
    };
    let text = format!("op '{}' (#{}) {}", op.name, op.id, what.trim_end());
    let err = OpError::new_err(text);
    let value = err.value(py);
    let _ = value.setattr("op_name", op.name.as_str());
    let _ = value.setattr("op_id", op.id);
    let _ = value.setattr("kind", kind);
    let _ = value.setattr("exc_type", exc_type);
    let _ = value.setattr("message", message);
    let _ = value.setattr("traceback", traceback);
    err
}

/// The Python exception for an engine error.
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    match e {
        Error::Poisoned(op) => {
            let err = op_error(py, &op);
            let _ = err
                .value(py)
                .setattr("errors", PyList::new(py, [err.value(py)]).ok());
            err
        }
        Error::OpsFailed(errs) => {
            let all: Vec<PyErr> = errs.iter().map(|e| op_error(py, e)).collect();
            let values: Vec<Bound<'_, PyAny>> =
                all.iter().map(|e| e.value(py).clone().into_any()).collect();
            let list = PyList::new(py, values).ok();
            match all.into_iter().next() {
                Some(first) => {
                    let _ = first.value(py).setattr("errors", list);
                    first
                }
                None => ForksafeError::new_err("wait_all reported an empty error list"),
            }
        }
        Error::ForeignVar
        | Error::DeletedVar
        | Error::DuplicateVar
        | Error::TooManyVars
        | Error::ZeroTimeout
        | Error::InvalidConfig(_) => PyValueError::new_err(e.to_string()),
        Error::ShutDown => ShutDownError::new_err(e.to_string()),
        Error::ForkInProgress => ForkInProgressError::new_err(e.to_string()),
        Error::Timeout { ref pending } => {
            let names: Vec<String> = pending
                .iter()
                .map(|i| format!("{} (#{})", i.name, i.id))
                .collect();
            let err = WaitTimeout::new_err(e.to_string());
            let _ = err.value(py).setattr("pending", names);
            err
        }
        Error::Interrupted => pyo3::exceptions::PyKeyboardInterrupt::new_err(e.to_string()),
        other => ForksafeError::new_err(other.to_string()),
    }
}

/// `Result` into `PyResult`, with the GIL to build the exception.
pub(crate) trait IntoPy<T> {
    /// Converts the error, if any.
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for forksafe::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}
