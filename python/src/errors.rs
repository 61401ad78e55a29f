//! Python exceptions of the binding, and how engine errors and Python
//! exceptions raised in callbacks become them.

use forksafe::{Error, OpError as CoreOpError, OpErrorKind};
pub(crate) use forksafe_pyo3::PyRaised;
use forksafe_pyo3::{message_of, original, type_name};
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;

pyo3::create_exception!(
    forksafe,
    ForksafeError,
    PyException,
    "Base class of the errors forksafe raises (bad input aside, which is ValueError/TypeError)."
);
pyo3::create_exception!(
    forksafe,
    OpError,
    ForksafeError,
    "An op failed, was skipped, lost in a fork child or cancelled by shutdown. A callback's own \
     exception is re-raised as itself, with an OpError as its __cause__; a dependent op skipped \
     because of it raises OpError (kind 'skipped') whose __cause__ is that exception. \
     Attributes: op_name, op_id, kind ('failed', 'panicked', 'skipped', 'lost_in_fork', \
     'cancelled', 'token_dropped', 'worker_start'), vars (the op's vars, described, when known), \
     exc_type (the callback's exception type name, or None), message, traceback (the \
     callback's formatted traceback text, or None), errors (from wait_all: every error \
     raised since the previous wait_all, this one first)."
);
pyo3::create_exception!(
    forksafe,
    ShutDownError,
    ForksafeError,
    "The engine is shut down (or shutting down): it accepts no new op."
);
pyo3::create_exception!(
    forksafe,
    WaitTimeout,
    ForksafeError,
    "A wait's deadline passed; attribute `pending` names the ops still pending."
);
pyo3::create_exception!(
    forksafe,
    ForkInProgressError,
    ForksafeError,
    "Called from the forking thread between fork's prepare and parent/child handlers."
);

pyo3::create_exception!(
    forksafe,
    WaitOnSelfError,
    ForksafeError,
    "A wait inside an op (wait, wait_all, get, an OpFuture's result) covers an op that cannot \
     complete before the calling op: the calling op itself, or an op queued behind it. Waiting \
     would deadlock, so it fails at once. Attributes: op_id, op_name (the calling op), on_id, \
     on_name (what it cannot wait for), var_id (the var waited for, or None)."
);

/// What an `OpError` of kind `lost_in_fork` says (from the engine, or from
/// a future that finds its op lost at its first use in a fork child).
pub(crate) const LOST_IN_FORK: &str = "was pending at fork; not run in the child";

/// The facts of an `OpError`, for [`new_op_error`].
pub(crate) struct OpFacts<'a> {
    pub(crate) name: &'a str,
    pub(crate) id: Option<u64>,
    pub(crate) kind: &'a str,
    pub(crate) message: String,
    /// The vars the op reads and writes, described.
    pub(crate) vars: Option<String>,
}

/// A new `OpError` value with its attributes set; `exc`, if any, is the
/// callback's exception it reports (type name and traceback text).
pub(crate) fn new_op_error<'py>(
    py: Python<'py>,
    facts: OpFacts<'_>,
    exc: Option<&Bound<'py, PyAny>>,
) -> Bound<'py, PyAny> {
    let id = facts.id.map_or(String::new(), |i| format!(" (#{i})"));
    let vars = facts
        .vars
        .as_deref()
        .map_or(String::new(), |v| format!(" [{v}]"));
    let exc_type = exc.map(type_name);
    let traceback = exc.and_then(|e| {
        py.import("traceback")
            // The three-argument form: the one-argument one is 3.10+.
            .and_then(|tb| {
                tb.call_method1(
                    "format_exception",
                    (e.get_type(), e, e.getattr("__traceback__")?),
                )
            })
            .and_then(|lines| lines.extract::<Vec<String>>())
            .map(|lines| lines.concat())
            .ok()
    });
    let what = match (&exc_type, facts.kind) {
        (Some(t), _) => format!("failed: {t}: {}", facts.message),
        (None, "failed") => format!("failed: {}", facts.message),
        (None, "panicked") => format!("panicked: {}", facts.message),
        _ => facts.message.clone(),
    };
    let text = format!("op '{}'{id}{vars} {what}", facts.name);
    let value = OpError::new_err(text)
        .into_value(py)
        .into_bound(py)
        .into_any();
    let _ = value.setattr("op_name", facts.name);
    let _ = value.setattr("op_id", facts.id);
    let _ = value.setattr("kind", facts.kind);
    let _ = value.setattr("vars", facts.vars);
    let _ = value.setattr("exc_type", exc_type);
    let _ = value.setattr("message", facts.message);
    let _ = value.setattr("traceback", traceback);
    value
}

/// A Python `OpError` for one engine op error (the callback's exception,
/// if any, as its `__cause__`).
pub(crate) fn op_error<'py>(py: Python<'py>, e: &CoreOpError) -> Bound<'py, PyAny> {
    let op = e.op();
    let (kind, message) = match e.kind() {
        OpErrorKind::Failed(m) => ("failed", m.clone()),
        OpErrorKind::Panicked(m) => ("panicked", m.clone()),
        OpErrorKind::LostInFork => ("lost_in_fork", LOST_IN_FORK.to_string()),
        OpErrorKind::Cancelled => ("cancelled", "was cancelled by shutdown".into()),
        OpErrorKind::TokenDropped => (
            "token_dropped",
            "completion token dropped unfinished".into(),
        ),
        OpErrorKind::WorkerStart(m) => (
            "worker_start",
            format!("had no worker: cannot start one: {m}"),
        ),
        other => ("other", format!("{other:?}")),
    };
    let exc = original(py, e);
    let facts = OpFacts {
        name: &op.name,
        id: Some(op.id),
        kind,
        message: match &exc {
            Some(x) => message_of(x),
            None => message,
        },
        vars: None,
    };
    let value = new_op_error(py, facts, exc.as_ref());
    if let Some(x) = exc {
        let _ = value.setattr("__cause__", x);
    }
    value
}

/// What a wait raises for one op error: the callback's own exception
/// object when there is one (its `__cause__` is the `OpError` its op made
/// when it failed), else an `OpError`.
pub(crate) fn raised<'py>(py: Python<'py>, e: &CoreOpError) -> Bound<'py, PyAny> {
    original(py, e).unwrap_or_else(|| op_error(py, e))
}

/// The Python exception for an engine error.
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    match e {
        Error::Poisoned(op) => PyErr::from_value(raised(py, &op)),
        Error::OpsFailed(errs) => {
            // The first error is raised; `errors` (on it, and on its
            // `OpError` cause when it is a callback's exception) lists all.
            let all: Vec<Bound<'_, PyAny>> = errs.iter().map(|e| raised(py, e)).collect();
            let list = PyList::new(py, &all).ok();
            match all.first() {
                Some(first) => {
                    if let Ok(cause) = first.getattr("__cause__") {
                        if cause.is_instance_of::<OpError>() {
                            let _ = cause.setattr("errors", list.clone());
                        }
                    }
                    let _ = first.setattr("errors", list);
                    PyErr::from_value(first.clone())
                }
                None => ForksafeError::new_err("wait_all reported an empty error list"),
            }
        }
        Error::ForeignVar
        | Error::DeletedVar
        | Error::DuplicateVar
        | Error::TooManyVars
        | Error::ZeroTimeout
        | Error::NoPayload
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
        Error::WaitOnSelf {
            ref op,
            ref on,
            var,
        } => {
            let err = WaitOnSelfError::new_err(e.to_string());
            let v = err.value(py);
            let _ = v.setattr("op_id", op.id);
            let _ = v.setattr("op_name", op.name.as_str());
            let _ = v.setattr("on_id", on.id);
            let _ = v.setattr("on_name", on.name.as_str());
            let _ = v.setattr("var_id", var);
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
