//! How an op's Python future gets resolved, whatever happens to the op.
//!
//! `forksafe.Engine.push` (and every kernel) returns an `OpFuture`, a
//! `concurrent.futures.Future`. It is resolved exactly once:
//!
//! - **ran**: a callback's body resolves it with the return value or the
//!   exception, on the host worker, with the GIL, before the op completes;
//!   a kernel's is resolved by a small host-lane op that follows the
//!   compute op (run even if it failed) and reads what it left.
//! - **did not run** (skipped because an input was poisoned, cancelled by
//!   shutdown, refused at push): the body's [`Resolver`] is dropped unrun
//!   and resolves the future with an `OpError` (`skipped`, whose
//!   `__cause__` is what poisoned the input; or `cancelled`). A drop on a
//!   thread with the GIL and outside a push resolves at once; any other
//!   drop (inside a push, where an engine lock may be held; a thread
//!   without the GIL) leaves the job to the next binding call that holds
//!   the GIL (`bridge::deferred`).
//! - **lost in a fork**: the child never runs or drops the op (I5), so the
//!   Python side resolves the child's copy of the future lazily: an
//!   `OpFuture` pushed in an earlier fork epoch and still pending when used
//!   in the child raises `OpError` of kind `lost_in_fork`.

use crate::bridge::{deferred, gil_held, host_finalizing, HostObj};
use crate::data::{callback_view, DataInner};
use crate::engine_ref::WeakEngineRef;
use crate::errors::{new_op_error, raised, OpFacts, PyRaised};
use forksafe::{OpError as CoreOpError, Var};
use forksafe_core::sync::Arc;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::cell::Cell;

forksafe_core::sync::thread_local! {
    /// Set while this thread is inside an engine push (where a refused
    /// op's payload is dropped, possibly under an engine lock).
    static IN_PUSH: Cell<bool> = const { Cell::new(false) };
}

/// Runs an engine push made from Python with [`IN_PUSH`] set; with the GIL
/// released when `may_wait` (a bounded engine, where a push may wait for
/// room).
pub(crate) fn push_from_python<T: Send>(
    py: Python<'_>,
    may_wait: bool,
    push: impl FnOnce() -> T + Send,
) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_PUSH.with(|c| c.set(self.0));
        }
    }
    let _reset = Reset(IN_PUSH.with(|c| c.replace(true)));
    if may_wait {
        py.detach(push)
    } else {
        push()
    }
}

/// Calls `future._forksafe_resolve(ok, value)`; an exception there (a
/// broken future subclass) is reported as unraisable, never lost silently.
pub(crate) fn resolve(
    py: Python<'_>,
    future: &Bound<'_, PyAny>,
    ok: bool,
    value: Bound<'_, PyAny>,
) {
    if let Err(e) = future.call_method1("_forksafe_resolve", (ok, value)) {
        e.write_unraisable(py, Some(future));
    }
}

/// The error for an op that did not run: `skipped` (cause: the poison it
/// found on `vars`) or `cancelled`.
fn unrun_error<'py>(
    py: Python<'py>,
    engine: &WeakEngineRef,
    vars: &[Var],
    name: &str,
    id: Option<u64>,
) -> Bound<'py, PyAny> {
    let poison = engine
        .upgrade()
        .and_then(|e| vars.iter().find_map(|v| e.var_poison(v).ok().flatten()));
    match poison {
        Some(p) => skipped(py, name, id, &p),
        None => new_op_error(
            py,
            OpFacts {
                name,
                id,
                kind: "cancelled",
                message: "was cancelled by shutdown before it ran".into(),
                vars: None,
            },
            None,
        ),
    }
}

/// An `OpError` of kind `skipped` for op `name`, whose `__cause__` is what
/// the poison `p` raises (the failing callback's own exception, or an
/// `OpError`). When `p` is this op's own failure, that is what it raises.
pub(crate) fn skipped<'py>(
    py: Python<'py>,
    name: &str,
    id: Option<u64>,
    p: &CoreOpError,
) -> Bound<'py, PyAny> {
    if id == Some(p.op().id) {
        return raised(py, p);
    }
    let err = new_op_error(
        py,
        OpFacts {
            name,
            id,
            kind: "skipped",
            message: format!(
                "was skipped: an input is poisoned by op '{}' (#{})",
                p.op().name,
                p.op().id
            ),
            vars: None,
        },
        None,
    );
    let _ = err.setattr("__cause__", raised(py, p));
    err
}

/// Resolves one op's future exactly once; dropped unused, it resolves it
/// as an op that did not run (see the module doc).
pub(crate) struct Resolver {
    future: Option<HostObj>,
    engine: WeakEngineRef,
    vars: OpVars,
}

/// An op's vars, reads first: inline up to two, so most pending ops keep
/// no allocation for them.
pub(crate) type OpVars = smallvec::SmallVec<[Var; 2]>;

impl Resolver {
    pub(crate) fn new(future: &Bound<'_, PyAny>, engine: WeakEngineRef, vars: OpVars) -> Self {
        Resolver {
            future: Some(HostObj::new(future.clone().unbind())),
            engine,
            vars,
        }
    }

    /// The op's name, as its future carries it (`OpFuture.name`, set from
    /// the same name the op was pushed with): read when an error needs it,
    /// so a pending op keeps no copy of its own.
    fn name(&self, py: Python<'_>) -> String {
        self.future
            .as_ref()
            .map_or_else(|| "op".to_string(), |f| future_name(py, f))
    }

    /// Resolves with a value (`ok`) or an exception; the GIL is held.
    pub(crate) fn resolve(mut self, py: Python<'_>, ok: bool, value: Bound<'_, PyAny>) {
        if let Some(f) = self.future.take() {
            resolve(py, f.bind(py), ok, value);
        }
    }

    /// The future's `op_id`, once the push has set it.
    fn op_id(py: Python<'_>, future: &HostObj) -> Option<u64> {
        future.bind(py).getattr("op_id").ok()?.extract().ok()
    }
}

/// `future.name` as text; "op" for a future without one.
fn future_name(py: Python<'_>, future: &HostObj) -> String {
    future
        .bind(py)
        .getattr("name")
        .and_then(|n| n.extract::<String>())
        .unwrap_or_else(|_| "op".to_string())
}

impl Drop for Resolver {
    fn drop(&mut self) {
        let Some(future) = self.future.take() else {
            return;
        };
        let engine = self.engine.clone();
        let vars = std::mem::take(&mut self.vars);
        let job = move |py: Python<'_>| {
            let id = Resolver::op_id(py, &future);
            let name = future_name(py, &future);
            let err = unrun_error(py, &engine, &vars, &name, id);
            resolve(py, future.bind(py), false, err);
        };
        if !IN_PUSH.with(|c| c.get()) && gil_held() && !host_finalizing() {
            Python::attach(job);
        } else {
            deferred::push(deferred::Job::Call(Box::new(job)));
        }
    }
}

/// A Python callable, its arguments and the data vars whose arrays it
/// gets, run on the host lane.
pub(crate) struct HostCall {
    pub(crate) func: HostObj,
    pub(crate) args: HostObj,
    pub(crate) kwargs: Option<HostObj>,
    /// Data vars in call order (reads, then writes) and whether written.
    pub(crate) data: Vec<(Arc<DataInner>, bool)>,
    /// How many of the resolver's vars (reads first, then writes) the op
    /// reads: the `OpError` of a failure describes them from that, so a
    /// pending op keeps no text of its own.
    pub(crate) reads: usize,
    pub(crate) resolver: Resolver,
}

/// The op's vars as an `OpError` names them: `reads: Var #1, Data #2;
/// writes: …` (a var is a `Data` when a data var of the call has it).
fn describe_vars(vars: &[Var], reads: usize, data: &[(Arc<DataInner>, bool)]) -> String {
    let name = |v: &Var| {
        let kind = if data.iter().any(|(d, _)| d.var == *v) {
            "Data"
        } else {
            "Var"
        };
        format!("{kind} #{}", v.id())
    };
    let list = |vs: &[Var]| vs.iter().map(name).collect::<Vec<_>>().join(", ");
    let reads = reads.min(vars.len());
    format!(
        "reads: {}; writes: {}",
        list(&vars[..reads]),
        list(&vars[reads..])
    )
}

impl HostCall {
    /// Calls the callable with the GIL held (re-entrant: the bridge already
    /// holds it) and resolves the future. A raised exception fails the op
    /// with that exception object as its error (`PyRaised`): it gets an
    /// `OpError` naming the op and its vars as its `__cause__` (or, if it
    /// already has a cause, a note), and every wait that reports it
    /// raises it again.
    pub(crate) fn run(self) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        if host_finalizing() {
            // The resolver and the objects are queued for a drain that
            // never comes: the host is going away (I8).
            return Err("the interpreter is finalising; callback not run".into());
        }
        let out = Python::try_attach(move |py| {
            crate::bridge::drain_deferred(py);
            let HostCall {
                func,
                args,
                kwargs,
                data,
                reads,
                resolver,
            } = self;
            let result = (|| {
                let mut argv = Vec::with_capacity(data.len());
                for (d, write) in &data {
                    argv.push(callback_view(py, d, *write)?);
                }
                if let Ok(extra) = args.bind(py).cast::<PyTuple>() {
                    argv.extend(extra.iter());
                }
                let kwargs = kwargs
                    .as_ref()
                    .and_then(|k| k.bind(py).cast::<PyDict>().ok().cloned());
                func.bind(py).call(PyTuple::new(py, argv)?, kwargs.as_ref())
            })();
            match result {
                Ok(value) => {
                    resolver.resolve(py, true, value);
                    Ok(())
                }
                Err(e) => {
                    let exc = e.value(py).clone().into_any();
                    // Keep the traceback on the object itself (PyO3 may
                    // hold it beside the value), so every re-raise has it.
                    if let Some(tb) = e.traceback(py) {
                        let _ = exc.setattr("__traceback__", tb);
                    }
                    let name = resolver.name(py);
                    let facts = OpFacts {
                        name: &name,
                        id: forksafe::running_op(),
                        kind: "failed",
                        message: exc.str().map(|s| s.to_string()).unwrap_or_default(),
                        vars: Some(describe_vars(&resolver.vars, reads, &data)),
                    };
                    let op_error = new_op_error(py, facts, Some(&exc));
                    let has_cause = exc
                        .getattr("__cause__")
                        .map(|c| !c.is_none())
                        .unwrap_or(true);
                    if !has_cause {
                        let _ = exc.setattr("__cause__", &op_error);
                    } else if let Ok(text) = op_error.str() {
                        add_note(&exc, text);
                    }
                    let failure: Box<dyn std::error::Error + Send + Sync> =
                        Box::new(PyRaised::new(&exc));
                    resolver.resolve(py, false, exc);
                    Err(failure)
                }
            }
        });
        out.unwrap_or_else(|| Err("cannot attach to the interpreter; callback not run".into()))
    }
}

/// Adds a note to an exception: `add_note` (3.11+), or the same
/// `__notes__` list by hand on older Pythons (which keep but do not print
/// it).
fn add_note(exc: &Bound<'_, PyAny>, text: Bound<'_, pyo3::types::PyString>) {
    if exc.call_method1("add_note", (&text,)).is_ok() {
        return;
    }
    let notes = match exc.getattr("__notes__") {
        Ok(n) if !n.is_none() => n,
        _ => {
            let fresh = pyo3::types::PyList::empty(exc.py()).into_any();
            if exc.setattr("__notes__", &fresh).is_err() {
                return;
            }
            fresh
        }
    };
    let _ = notes.call_method1("append", (text,));
}

/// The host-lane op that resolves a kernel's future: it reads the kernel's
/// hidden `done` var (and runs even if that is poisoned), takes the value
/// the kernel left, or else reports the poison.
pub(crate) fn kernel_resolution(
    py: Python<'_>,
    resolver: Resolver,
    value: Option<Py<PyAny>>,
    engine: &WeakEngineRef,
    done: &Var,
    kernel_id: Option<u64>,
) {
    match value {
        Some(v) => resolver.resolve(py, true, v.into_bound(py)),
        None => {
            let name = resolver.name(py);
            let err = unrun_error(py, engine, std::slice::from_ref(done), &name, kernel_id);
            resolver.resolve(py, false, err);
        }
    }
}
