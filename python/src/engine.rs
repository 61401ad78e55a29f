//! `Engine` and `Var` for Python: pushing callbacks and kernels, waiting.

use crate::bridge::{drain_deferred, HostObj, PyBridge};
use crate::data::{kernel_view, PyData};
use crate::engine_ref::EngineRef;
use crate::errors::{to_py, IntoPy};
use crate::future::{push_from_python, HostCall, Resolver};
use crate::kernels::{self, Binary, KernelOut, Reduce, Scalar};
use crate::var::PyVar;
use forksafe::{Config, CoreConfig, Engine, Priority, State, Var};
use forksafe_core::sync::{park_until, Arc, Clock, Handoff};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::time::{Duration, Instant};

/// How long one slice of a wait on the main thread lasts before it takes
/// the GIL back to run signal handlers (Ctrl-C, pytest-timeout).
const SIGNAL_SLICE: Duration = Duration::from_millis(100);

/// A shutdown's `timeout`: `0` cancels what is queued at once (the
/// shortest deadline), `inf` or a huge value waits for ever (the longest
/// deadline core keeps); negative or NaN is a `ValueError`.
pub(crate) fn shutdown_wait(t: f64) -> PyResult<Duration> {
    Ok(wait_timeout(Some(t))?.unwrap_or(Duration::MAX))
}

/// Seconds (a positive, finite float) as a `Duration`.
pub(crate) fn seconds(what: &str, s: f64) -> PyResult<Duration> {
    if !(s.is_finite() && s > 0.0) {
        return Err(PyValueError::new_err(format!(
            "{what} must be a positive number of seconds, got {s}"
        )));
    }
    Duration::try_from_secs_f64(s)
        .map_err(|_| PyValueError::new_err(format!("{what} is out of range: {s}")))
}

/// Timeouts at or above this many seconds (about 31 years) are no deadline.
const FOREVER_SECONDS: f64 = 1e9;

/// A wait's `timeout` in Python's convention: `None`, `inf` or any value
/// from [`FOREVER_SECONDS`] up waits for ever (`None` here); `0` polls (the
/// shortest deadline: a wait that is not over raises `WaitTimeout`); a
/// negative number or NaN is a `ValueError`.
pub(crate) fn wait_timeout(timeout: Option<f64>) -> PyResult<Option<Duration>> {
    let Some(t) = timeout else {
        return Ok(None);
    };
    if t.is_nan() || t < 0.0 {
        return Err(PyValueError::new_err(format!(
            "timeout must be None or a number of seconds >= 0, got {t}"
        )));
    }
    if t >= FOREVER_SECONDS {
        return Ok(None);
    }
    Ok(Some(
        Duration::from_secs_f64(t).max(Duration::from_nanos(1)),
    ))
}

fn parse_priority(p: &str) -> PyResult<Priority> {
    match p {
        "high" => Ok(Priority::High),
        "normal" => Ok(Priority::Normal),
        "low" => Ok(Priority::Low),
        _ => Err(PyValueError::new_err(format!(
            "priority must be 'high', 'normal' or 'low', got {p:?}"
        ))),
    }
}

fn state_name(s: State) -> &'static str {
    match s {
        State::Running => "running",
        State::Quiescing => "quiescing",
        State::Quiesced => "quiesced",
        State::ShuttingDown => "shutting_down",
        State::Stopped => "stopped",
    }
}

/// Whether the calling thread is Python's main thread (the one that runs
/// signal handlers).
fn on_main_thread(py: Python<'_>) -> PyResult<bool> {
    let threading = py.import("threading")?;
    let main = threading.call_method0("main_thread")?;
    let current = threading.call_method0("current_thread")?;
    Ok(main.is(&current))
}

/// Runs a blocking engine wait with the GIL released. On the main thread it
/// waits in slices and runs Python's signal handlers between them, so
/// Ctrl-C (and pytest-timeout) can interrupt it; `call` gets each slice's
/// timeout, `None` for no deadline.
fn blocking<T: Send>(
    py: Python<'_>,
    timeout: Option<f64>,
    call: impl Fn(Option<Duration>) -> forksafe::Result<T> + Sync,
) -> PyResult<T> {
    let total = wait_timeout(timeout)?;
    if !on_main_thread(py)? {
        return py.detach(|| call(total)).py_err(py);
    }
    let deadline = total.and_then(|t| Instant::now().checked_add(t));
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let slice = match left {
            Some(l) if l <= SIGNAL_SLICE => Some(l.max(Duration::from_micros(1))),
            _ => Some(SIGNAL_SLICE),
        };
        // The slice that ends at the deadline is the last one.
        let last = left.is_some_and(|l| l <= SIGNAL_SLICE);
        match py.detach(|| call(slice)) {
            Err(forksafe::Error::Timeout { .. }) if !last => py.check_signals()?,
            other => return other.py_err(py),
        }
    }
}

/// What one entry of an op's `reads` or `writes` names: a plain var, or a
/// data var (whose array the callback gets).
pub(crate) enum Named {
    Plain(Var),
    Data(Arc<crate::data::DataInner>),
}

impl Named {
    pub(crate) fn var(&self) -> &Var {
        match self {
            Named::Plain(v) => v,
            Named::Data(d) => &d.var,
        }
    }
}

/// The entries of one list argument (`Var` or `Data` items).
fn named_of(list: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<Named>> {
    if list.is_none() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for item in list
        .try_iter()
        .map_err(|_| PyTypeError::new_err(format!("{what} must be an iterable of Var or Data")))?
    {
        let item = item?;
        if let Ok(d) = item.cast::<PyData>() {
            out.push(Named::Data(d.get().inner.clone()));
        } else {
            out.push(Named::Plain(var_of(&item, what)?));
        }
    }
    Ok(out)
}

/// Vars of one list argument (`Var` or `Data` items).
fn vars_of(list: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<Var>> {
    Ok(named_of(list, what)?
        .iter()
        .map(|n| n.var().clone())
        .collect())
}

/// The var of a `Var` or a `Data`.
fn var_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Var> {
    if let Ok(v) = obj.cast::<PyVar>() {
        return Ok(v.get().var.clone());
    }
    if let Ok(d) = obj.cast::<PyData>() {
        return Ok(d.get().inner.var.clone());
    }
    Err(PyTypeError::new_err(format!(
        "{what}: expected a forksafe Var or Data, got {}",
        obj.get_type().name()?
    )))
}

/// The data var behind a kernel argument.
fn data_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Arc<crate::data::DataInner>> {
    obj.cast::<PyData>()
        .map(|d| d.get().inner.clone())
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{what}: expected a forksafe Data (Engine.data(array)), got {}",
                obj.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })
}

/// A kernel's scalar argument.
fn scalar_of(obj: &Bound<'_, PyAny>) -> PyResult<Scalar> {
    if let Ok(b) = obj.cast::<pyo3::types::PyBool>() {
        return Ok(Scalar::Bool(b.is_true()));
    }
    if let Ok(i) = obj.extract::<i64>() {
        return Ok(Scalar::Int(i));
    }
    obj.extract::<f64>()
        .map(Scalar::Float)
        .map_err(|_| PyTypeError::new_err("expected a number or a bool"))
}

/// Vars, deduplicated in order (an op names each var once).
fn unique<'a>(vars: impl IntoIterator<Item = &'a Var>) -> Vec<&'a Var> {
    let mut out: Vec<&Var> = Vec::new();
    for v in vars {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// The settings every op of one `push` or `push_many` call shares.
struct HostOpSettings {
    name: String,
    priority: forksafe::Priority,
    run_on_error: bool,
}

impl HostOpSettings {
    fn new(
        fn_: &Bound<'_, PyAny>,
        name: Option<String>,
        priority: &str,
        run_on_error: bool,
        what: &str,
    ) -> PyResult<Self> {
        if !fn_.is_callable() {
            return Err(PyTypeError::new_err(format!("{what}: fn must be callable")));
        }
        let name = match name {
            Some(n) => n,
            None => fn_
                .getattr("__qualname__")
                .and_then(|n| n.extract::<String>())
                .unwrap_or_else(|_| "callback".into()),
        };
        Ok(HostOpSettings {
            name,
            priority: parse_priority(priority)?,
            run_on_error,
        })
    }
}

/// References held across a push: if the engine drops a refused op's
/// payload inside the push, that drop only decrements and runs no Python
/// code under an engine lock (H1); these are released afterwards, with the
/// GIL and no engine lock.
type Keep<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyTuple>,
    Option<Bound<'py, PyDict>>,
    Bound<'py, PyAny>,
);

impl PyEngine {
    /// One host op's spec: `fn_(*arrays, *args, **kwargs)` with `reads`
    /// and `writes`, resolving `future`; checked, not pushed.
    #[allow(clippy::too_many_arguments)]
    fn host_spec<'py>(
        &self,
        py: Python<'py>,
        fn_: &Bound<'py, PyAny>,
        future: &Bound<'py, PyAny>,
        reads: Option<Bound<'py, PyAny>>,
        writes: Option<Bound<'py, PyAny>>,
        args: Option<Bound<'py, PyAny>>,
        kwargs: Option<Bound<'py, PyDict>>,
        settings: &HostOpSettings,
        what: &str,
    ) -> PyResult<(forksafe::OpSpec, Keep<'py>)> {
        let reads = reads.map_or(Ok(Vec::new()), |r| named_of(&r, "reads"))?;
        let writes = writes.map_or(Ok(Vec::new()), |w| named_of(&w, "writes"))?;
        for w in &writes {
            if let Named::Data(d) = w {
                if !d.writeable(py) {
                    return Err(PyValueError::new_err(format!(
                        "{what}: a data var in writes holds a read-only array"
                    )));
                }
            }
        }
        let args = match args {
            None => PyTuple::empty(py),
            Some(a) => a
                .try_iter()
                .and_then(|it| it.collect::<PyResult<Vec<_>>>())
                .and_then(|v| PyTuple::new(py, v))
                .map_err(|_| PyTypeError::new_err(format!("{what}: args must be an iterable")))?,
        };
        let read_vars: Vec<Var> = reads.iter().map(|n| n.var().clone()).collect();
        let write_vars: Vec<Var> = writes.iter().map(|n| n.var().clone()).collect();
        let keep = (fn_.clone(), args.clone(), kwargs.clone(), future.clone());
        let all_vars: crate::future::OpVars =
            read_vars.iter().chain(&write_vars).cloned().collect();
        let call = HostCall {
            func: HostObj::new(fn_.clone().unbind()),
            args: HostObj::new(args.into_any().unbind()),
            kwargs: kwargs.map(|k| HostObj::new(k.into_any().unbind())),
            data: reads
                .into_iter()
                .map(|n| (n, false))
                .chain(writes.into_iter().map(|n| (n, true)))
                .filter_map(|(n, w)| match n {
                    Named::Data(d) => Some((d, w)),
                    Named::Plain(_) => None,
                })
                .collect(),
            reads: read_vars.len(),
            resolver: Resolver::new(future, self.engine.downgrade(), all_vars),
        };
        let mut op = self
            .engine
            .op(crate::names::op_name(&settings.name))
            .reads(&read_vars.iter().collect::<Vec<_>>())
            .writes(&write_vars.iter().collect::<Vec<_>>())
            .host()
            .priority(settings.priority);
        if settings.run_on_error {
            op = op.run_on_error();
        }
        Ok((op.into_try_spec(move || call.run()), keep))
    }
}

/// A dependency engine. Ops declare the vars they read and write and run in
/// per-var push order: Python callables on the host lane (with the GIL
/// held), built-in Rust kernels over data vars' numpy arrays on the compute
/// lane (GIL released). Keyword arguments size it: `compute_workers`, `host_workers`,
/// `max_pending` (None: unbounded), `fork_drain` and `shutdown_deadline`
/// (seconds), `thread_name`, `worker_stack_size` (bytes; None: 2 MiB),
/// `max_stand_ins` (per lane, waits inside ops blocked at once; 64).
#[pyclass(frozen, subclass, name = "Engine", module = "forksafe._forksafe")]
pub struct PyEngine {
    pub(crate) engine: EngineRef,
}

#[pymethods]
impl PyEngine {
    #[new]
    #[pyo3(signature = (*, compute_workers=2, host_workers=1, max_pending=None,
                        fork_drain=5.0, shutdown_deadline=1.0, thread_name="forksafe",
                        worker_stack_size=None, max_stand_ins=forksafe::DEFAULT_MAX_STAND_INS,
                        _default=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        compute_workers: usize,
        host_workers: usize,
        max_pending: Option<usize>,
        fork_drain: f64,
        shutdown_deadline: f64,
        thread_name: &str,
        worker_stack_size: Option<usize>,
        max_stand_ins: usize,
        _default: bool,
    ) -> PyResult<Self> {
        let config = Config {
            core: CoreConfig {
                compute_workers,
                host_workers,
                max_pending,
                thread_name: thread_name.to_string(),
                worker_stack_size,
                max_stand_ins,
                // Not offered to Python: a kernel run inline would run on
                // the Python thread that pushed it, which callers of an
                // async array API do not expect.
                run_inline_from: None,
            },
            fork_drain: seconds("fork_drain", fork_drain)?,
            shutdown_deadline: seconds("shutdown_deadline", shutdown_deadline)?,
        };
        if _default {
            return default_engine(py, config).map(|engine| PyEngine { engine });
        }
        let engine = Engine::with_bridge(config, Box::new(PyBridge)).py_err(py)?;
        Ok(PyEngine {
            engine: EngineRef::Owned(Arc::new(engine)),
        })
    }

    /// A new var of this engine.
    fn new_var(&self, py: Python<'_>) -> PyResult<PyVar> {
        let var = self.engine.new_var().py_err(py)?;
        Ok(PyVar { var })
    }

    /// Registers `array` (a numpy array, or any object with the buffer
    /// protocol, viewed as one) as a data var, without copying it. Ops name
    /// the returned `Data` in `reads`/`writes`; `get` gives the array back
    /// after its writers.
    fn data(&self, py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<PyData> {
        let var = self.engine.new_var().py_err(py)?;
        PyData::register(py, var, array)
    }

    /// Waits (GIL released) for every write of `data` pushed before, then
    /// returns its array (the registered object: it shares its memory).
    /// Raises what the write that poisoned it raised (the callback's own
    /// exception, or `OpError`), `WaitTimeout` after `timeout` seconds.
    /// Inside an op, the wait rule holds (`WaitOnSelfError`), but for the
    /// calling op's own write of `data`: then it returns at once (the
    /// callback holds the array).
    #[pyo3(signature = (data, timeout=None))]
    fn get(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        let inner = data_of(data, "get")?;
        let engine = &self.engine;
        let var = &inner.var;
        blocking(py, timeout, |t| {
            let r = match t {
                Some(t) => engine.wait_for_var_timeout(var, t),
                None => engine.wait_for_var(var),
            };
            match r {
                Err(forksafe::Error::WaitOnSelf { op, on, .. }) if op.id == on.id => Ok(()),
                other => other,
            }
        })?;
        Ok(inner.array.bind(py).clone().unbind())
    }

    /// The native push behind `forksafe.Engine.push`: pushes
    /// `fn_(*arrays, *args, **kwargs)` as a host-lane op and resolves
    /// `future` with its return value or exception. Returns the op id.
    #[pyo3(signature = (fn_, future, /, *, reads=None, writes=None, name=None, args=None,
                        kwargs=None, priority="normal", run_on_error=false))]
    #[allow(clippy::too_many_arguments)]
    fn _push(
        &self,
        py: Python<'_>,
        fn_: Bound<'_, PyAny>,
        future: Bound<'_, PyAny>,
        reads: Option<Bound<'_, PyAny>>,
        writes: Option<Bound<'_, PyAny>>,
        name: Option<String>,
        args: Option<Bound<'_, PyAny>>,
        kwargs: Option<Bound<'_, PyDict>>,
        priority: &str,
        run_on_error: bool,
    ) -> PyResult<u64> {
        let settings = HostOpSettings::new(&fn_, name, priority, run_on_error, "push")?;
        let (spec, keep) = self.host_spec(
            py, &fn_, &future, reads, writes, args, kwargs, &settings, "push",
        )?;
        let may_wait = self.engine.config().core.max_pending.is_some();
        let engine = &self.engine;
        let pushed = push_from_python(py, may_wait, move || engine.push(spec));
        let id = pushed.py_err(py)?;
        let _ = future.setattr("op_id", id);
        drop(keep);
        drain_deferred(py);
        Ok(id)
    }

    /// The native batch push behind `forksafe.Engine.push_many`: op `i`
    /// calls `fn_(*arrays, *args_list[i])` with `reads_list[i]` and
    /// `writes_list[i]` (each list `None` or one entry per op), and
    /// resolves `futures[i]`. Every item is checked before any is pushed
    /// (`CoreEngine::check`: a bad one raises and nothing is pushed); then
    /// all are pushed in one batch (`push_batch`), and an op the engine
    /// still refuses has its future failed with the error a single push
    /// would raise. Returns each op's id, `None` for a refused one.
    #[pyo3(signature = (fn_, futures, args_list, /, *, reads_list=None, writes_list=None,
                        name=None, priority="normal", run_on_error=false))]
    #[allow(clippy::too_many_arguments)]
    fn _push_many(
        &self,
        py: Python<'_>,
        fn_: Bound<'_, PyAny>,
        futures: Vec<Bound<'_, PyAny>>,
        args_list: Vec<Bound<'_, PyAny>>,
        reads_list: Option<Vec<Bound<'_, PyAny>>>,
        writes_list: Option<Vec<Bound<'_, PyAny>>>,
        name: Option<String>,
        priority: &str,
        run_on_error: bool,
    ) -> PyResult<Vec<Option<u64>>> {
        let n = futures.len();
        let lengths_agree = args_list.len() == n
            && reads_list.as_ref().is_none_or(|l| l.len() == n)
            && writes_list.as_ref().is_none_or(|l| l.len() == n);
        if !lengths_agree {
            return Err(PyValueError::new_err(
                "push_many: args, reads and writes need one entry per op",
            ));
        }
        let settings = HostOpSettings::new(&fn_, name, priority, run_on_error, "push_many")?;
        let mut specs = Vec::with_capacity(n);
        let mut keeps = Vec::with_capacity(n);
        for (i, (future, args)) in futures.iter().zip(args_list).enumerate() {
            let reads = reads_list.as_ref().map(|l| l[i].clone());
            let writes = writes_list.as_ref().map(|l| l[i].clone());
            let (spec, keep) = self.host_spec(
                py,
                &fn_,
                future,
                reads,
                writes,
                Some(args),
                None,
                &settings,
                "push_many",
            )?;
            self.engine.check(&spec).py_err(py)?;
            specs.push(spec);
            keeps.push(keep);
        }
        let may_wait = self.engine.config().core.max_pending.is_some();
        let engine = &self.engine;
        let pushed = push_from_python(py, may_wait, move || engine.push_batch(specs));
        let mut ids = Vec::with_capacity(n);
        for (future, result) in futures.iter().zip(pushed) {
            match result {
                Ok(id) => {
                    let _ = future.setattr("op_id", id);
                    ids.push(Some(id));
                }
                Err(e) => {
                    let err = to_py(py, e).into_value(py).into_bound(py).into_any();
                    crate::future::resolve(py, future, false, err);
                    ids.push(None);
                }
            }
        }
        drop(keeps);
        drain_deferred(py);
        Ok(ids)
    }

    /// The native kernels behind `forksafe.Engine.add` and friends: `kind`
    /// names the kernel, `future` gets its result. Returns the op id.
    #[pyo3(signature = (kind, future, inputs, out=None, scalar=None, *, name=None))]
    #[allow(clippy::too_many_arguments)]
    fn _kernel(
        &self,
        py: Python<'_>,
        kind: &str,
        future: Bound<'_, PyAny>,
        inputs: Vec<Bound<'_, PyAny>>,
        out: Option<Bound<'_, PyAny>>,
        scalar: Option<Bound<'_, PyAny>>,
        name: Option<String>,
    ) -> PyResult<u64> {
        let name = name.unwrap_or_else(|| kind.to_string());
        let ins: Vec<_> = inputs
            .iter()
            .map(|i| data_of(i, kind))
            .collect::<PyResult<_>>()?;
        let out = out.map(|o| data_of(&o, kind)).transpose()?;
        let in_views: Vec<_> = ins
            .iter()
            .map(|d| kernel_view(py, d, kind, false))
            .collect::<PyResult<_>>()?;
        let out_view = out
            .as_ref()
            .map(|d| kernel_view(py, d, kind, true))
            .transpose()?;
        let scalar = scalar.map(|s| scalar_of(&s)).transpose()?;
        let (n_in, with_out, with_scalar) = match kind {
            "add" | "mul" => (2, true, false),
            "scale" => (1, true, true),
            "copy" => (1, true, false),
            "fill" => (0, true, true),
            "sum" | "mean" | "max" => (1, false, false),
            _ => return Err(PyValueError::new_err(format!("no kernel named {kind:?}"))),
        };
        if in_views.len() != n_in
            || out_view.is_some() != with_out
            || scalar.is_some() != with_scalar
        {
            return Err(PyTypeError::new_err(kernels::signature(kind)));
        }
        let all: Vec<_> = in_views.iter().chain(&out_view).collect();
        kernels::check_operands(kind, &all).map_err(|e| match e {
            kernels::Refused::Type(m) => PyTypeError::new_err(m),
            kernels::Refused::Value(m) => PyValueError::new_err(m),
        })?;
        if let (Some(s), Some(first)) = (scalar, all.first()) {
            if !kernels::scalar_fits(first.raw.dtype, s) {
                return Err(PyTypeError::new_err(format!(
                    "{kind}: {s} does not fit a {} array",
                    first.raw.dtype.name()
                )));
            }
        }
        let in_raw: Vec<_> = in_views.iter().map(|v| v.raw).collect();
        let out_raw = out_view.as_ref().map(|v| v.raw);
        type Body = Box<dyn FnOnce() -> Result<KernelOut, String> + Send>;
        // SAFETY (of every `unsafe` block below): each raw view was read at
        // this push, under the GIL, from an array its `DataInner` keeps
        // alive and pinned (`keep`, moved into the body; data.rs, "Memory
        // safety"), and checked here for dtype, shape, order, alignment and
        // writeability; the op names the inputs as reads and the output as
        // a write, so the engine runs no writer of them alongside (I9).
        let body: Body = match kind {
            "add" | "mul" => {
                let op = if kind == "add" {
                    Binary::Add
                } else {
                    Binary::Mul
                };
                let (a, b, o) = (in_raw[0], in_raw[1], out_raw.expect("checked"));
                // SAFETY: see above.
                Box::new(move || unsafe {
                    kernels::binary(op, a, b, o);
                    Ok(KernelOut::Nothing)
                })
            }
            "scale" => {
                let (a, o, f) = (
                    in_raw[0],
                    out_raw.expect("checked"),
                    scalar.expect("checked"),
                );
                // SAFETY: see above.
                Box::new(move || unsafe {
                    kernels::scale(a, f, o);
                    Ok(KernelOut::Nothing)
                })
            }
            "copy" => {
                let (a, o) = (in_raw[0], out_raw.expect("checked"));
                // SAFETY: see above.
                Box::new(move || unsafe {
                    kernels::copy(a, o);
                    Ok(KernelOut::Nothing)
                })
            }
            "fill" => {
                let (o, v) = (out_raw.expect("checked"), scalar.expect("checked"));
                // SAFETY: see above.
                Box::new(move || unsafe {
                    kernels::fill(o, v);
                    Ok(KernelOut::Nothing)
                })
            }
            "sum" | "mean" | "max" => {
                let op = match kind {
                    "sum" => Reduce::Sum,
                    "mean" => Reduce::Mean,
                    _ => Reduce::Max,
                };
                let a = in_raw[0];
                // SAFETY: see above.
                Box::new(move || unsafe { kernels::reduce(op, a) })
            }
            _ => return Err(PyValueError::new_err(format!("no kernel named {kind:?}"))),
        };
        // `push_compute` drops the output (and repeats) from the reads.
        let out_var = out.as_ref().map(|o| o.var.clone());
        let reads: Vec<Var> = ins.iter().map(|d| d.var.clone()).collect();
        let keep: Vec<_> = ins.into_iter().chain(out).collect();
        self.push_compute(
            py,
            name,
            reads,
            out_var.into_iter().collect(),
            future,
            move || {
                let r = body();
                drop(keep);
                r
            },
        )
    }

    /// Pushes a compute-lane op that sleeps `seconds` (a stand-in for a long
    /// Rust kernel), reading `reads` and writing `writes`; `future` is
    /// resolved with None once it has slept.
    #[pyo3(signature = (seconds_, future, /, *, reads=None, writes=None, name="sleep"))]
    fn _sleep(
        &self,
        py: Python<'_>,
        seconds_: f64,
        future: Bound<'_, PyAny>,
        reads: Option<Bound<'_, PyAny>>,
        writes: Option<Bound<'_, PyAny>>,
        name: &str,
    ) -> PyResult<u64> {
        let d = seconds("seconds", seconds_)?;
        let reads = reads.map_or(Ok(Vec::new()), |r| vars_of(&r, "reads"))?;
        let writes = writes.map_or(Ok(Vec::new()), |w| vars_of(&w, "writes"))?;
        self.push_compute(py, name.to_string(), reads, writes, future, move || {
            let clock = Clock::new();
            let deadline = clock.deadline_after(d);
            while !clock.passed(deadline) {
                park_until(&clock, Some(deadline));
            }
            Ok(KernelOut::Nothing)
        })
    }

    /// Waits (GIL released) until every write of `var` (a Var or Data)
    /// pushed before has completed; raises `OpError` if it is poisoned, and
    /// `WaitTimeout` after `timeout` seconds.
    #[pyo3(signature = (var, timeout=None))]
    fn wait(&self, py: Python<'_>, var: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<()> {
        let var = var_of(var, "wait")?;
        let engine = &self.engine;
        blocking(py, timeout, |t| match t {
            Some(t) => engine.wait_for_var_timeout(&var, t),
            None => engine.wait_for_var(&var),
        })
    }

    /// Waits (GIL released) until every op pushed before has completed; then
    /// raises `OpError` (with `.errors`: all of them) if any op failed since
    /// the previous `wait_all`, and `WaitTimeout` after `timeout` seconds.
    #[pyo3(signature = (timeout=None))]
    fn wait_all(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let engine = &self.engine;
        blocking(py, timeout, |t| match t {
            Some(t) => engine.wait_all_timeout(t),
            None => engine.wait_all(),
        })
    }

    /// Waits (GIL released) until op `op_id` has completed: what
    /// `OpFuture.result` does first inside an op, so the wait rule holds
    /// there (`WaitOnSelfError`) and a blocked callback gets a stand-in.
    #[pyo3(signature = (op_id, timeout=None))]
    fn _wait_op(&self, py: Python<'_>, op_id: u64, timeout: Option<f64>) -> PyResult<()> {
        let engine = &self.engine;
        blocking(py, timeout, |t| match t {
            Some(t) => engine.wait_for_op_timeout(op_id, t),
            None => engine.wait_for_op(op_id),
        })
    }

    /// Whether op `op_id` has started and not completed (`OpFuture.running`).
    fn _op_running(&self, py: Python<'_>, op_id: u64) -> PyResult<bool> {
        self.engine.is_running(op_id).py_err(py)
    }

    /// The id of the op whose callback the calling thread runs, if it is
    /// one of this engine's ops; None elsewhere.
    fn current_op(&self) -> Option<u64> {
        self.engine.current_op()
    }

    /// Clears the poison of `var` (a Var or Data): an op ordered on it
    /// like any other.
    fn clear_poison(&self, py: Python<'_>, var: &Bound<'_, PyAny>) -> PyResult<u64> {
        let var = var_of(var, "clear_poison")?;
        self.engine.clear_poison(&var).py_err(py)
    }

    /// Deletes `var` once every op pushed on it so far has completed.
    fn delete_var(&self, py: Python<'_>, var: &Bound<'_, PyAny>) -> PyResult<u64> {
        let var = var_of(var, "delete_var")?;
        self.engine.delete_var(&var).py_err(py)
    }

    /// How many writes of `var` have completed.
    fn var_version(&self, py: Python<'_>, var: &Bound<'_, PyAny>) -> PyResult<u64> {
        let var = var_of(var, "var_version")?;
        self.engine.var_version(&var).py_err(py)
    }

    /// How many ops are accepted and not yet complete (it looks at each
    /// pending op: for diagnostics, not per op).
    fn pending(&self, py: Python<'_>) -> PyResult<usize> {
        self.engine.pending().py_err(py)
    }

    /// The lifecycle state: 'running', 'quiescing', 'quiesced',
    /// 'shutting_down' or 'stopped'.
    #[getter]
    fn state(&self) -> &'static str {
        state_name(self.engine.state())
    }

    /// Whether this is the process-wide default engine.
    #[getter]
    fn is_default(&self) -> bool {
        matches!(self.engine, EngineRef::Default(_))
    }

    /// In a fork child: what this engine inherited, as a dict (`epoch`,
    /// `lost`: names of ops completed with 'lost_in_fork', `deletions`,
    /// `carried`); None elsewhere.
    fn fork_report<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(r) = self.engine.fork_report().py_err(py)? else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("epoch", r.epoch)?;
        let lost: Vec<String> = r.lost.iter().map(|i| i.name.clone()).collect();
        d.set_item("lost", lost)?;
        d.set_item("deletions", r.deletions)?;
        d.set_item("carried", r.carried.map(|i| i.name))?;
        Ok(Some(d))
    }

    /// Shuts down (GIL released): new pushes raise `ShutDownError`, queued
    /// ops run until `timeout` seconds (default: the engine's
    /// `shutdown_deadline`) and are then cancelled, and once this returns
    /// the engine never calls Python again. Returns a dict with the names of
    /// the `cancelled` and `still_running` ops. A second call returns empty
    /// lists.
    #[pyo3(signature = (timeout=None))]
    fn shutdown<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyDict>> {
        let t = match timeout {
            None => self.engine.config().shutdown_deadline,
            Some(t) => shutdown_wait(t)?,
        };
        let engine = &self.engine;
        let report = py.detach(|| engine.shutdown(t)).map_err(|e| to_py(py, e))?;
        let d = PyDict::new(py);
        let names =
            |v: &[forksafe::OpInfo]| -> Vec<String> { v.iter().map(|i| i.name.clone()).collect() };
        d.set_item("cancelled", PyList::new(py, names(&report.cancelled))?)?;
        d.set_item(
            "still_running",
            PyList::new(py, names(&report.still_running))?,
        )?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!(
            "<forksafe.Engine id={} state={}{}>",
            self.engine.id(),
            state_name(self.engine.state()),
            if self.is_default() { " default" } else { "" }
        )
    }
}

impl PyEngine {
    /// Pushes `body` as a compute-lane op reading `reads` and writing
    /// `writes` plus a hidden `done` var, then the host-lane op that
    /// resolves `future` with what the body returned (or its failure): see
    /// `future::kernel_resolution`. Returns the compute op's id.
    fn push_compute(
        &self,
        py: Python<'_>,
        name: String,
        reads: Vec<Var>,
        writes: Vec<Var>,
        future: Bound<'_, PyAny>,
        body: impl FnOnce() -> Result<KernelOut, String> + Send + 'static,
    ) -> PyResult<u64> {
        let done = self.engine.new_var().py_err(py)?;
        let slot: Arc<Handoff<KernelOut>> = Arc::new(Handoff::new());
        let put = slot.clone();
        let writes: Vec<&Var> = unique(writes.iter().chain([&done]));
        let reads: Vec<&Var> = unique(reads.iter().filter(|r| !writes.contains(r)));
        let compute = self.engine.op(name.clone()).reads(&reads).writes(&writes);
        let may_wait = self.engine.config().core.max_pending.is_some();
        let pushed = push_from_python(py, may_wait, move || {
            compute.try_run(move || body().map(|v| put.put(v)))
        });
        let id = pushed.py_err(py)?;
        let _ = future.setattr("op_id", id);
        let resolver = Resolver::new(
            &future,
            self.engine.downgrade(),
            smallvec::smallvec![done.clone()],
        );
        let engine = self.engine.downgrade();
        let resolve_done = done.clone();
        let resolve = self
            .engine
            .op(format!("{name}:resolve"))
            .reads(&[&done])
            .host()
            .run_on_error();
        let pushed = push_from_python(py, may_wait, move || {
            resolve.run(move || {
                let _ = Python::try_attach(move |py| {
                    drain_deferred(py);
                    let value = slot.take().map(|v| match v {
                        KernelOut::Nothing => py.None(),
                        KernelOut::Float(x) => x
                            .into_pyobject(py)
                            .map_or_else(|_| py.None(), |o| o.into_any().unbind()),
                        KernelOut::Int(x) => x
                            .into_pyobject(py)
                            .map_or_else(|_| py.None(), |o| o.into_any().unbind()),
                    });
                    crate::future::kernel_resolution(
                        py,
                        resolver,
                        value,
                        &engine,
                        &resolve_done,
                        Some(id),
                    );
                });
            })
        });
        drain_deferred(py);
        // The future is resolved by that host op: a wait for the future
        // inside an op waits for it (`OpFuture._wait_inside_op`).
        let resolve_id = pushed.py_err(py)?;
        let _ = future.setattr("_wait_id", resolve_id);
        Ok(id)
    }
}

/// The default engine, started with `config` and the Python bridge the
/// first time (the config of later calls is ignored).
fn default_engine(py: Python<'_>, config: Config) -> PyResult<EngineRef> {
    if let Some(e) = forksafe::default_engine_if_started() {
        return Ok(EngineRef::Default(e));
    }
    match forksafe::init_default(config, Box::new(PyBridge)) {
        Ok(e) => Ok(EngineRef::Default(e)),
        // Another thread started it first (with the Python bridge too: only
        // this module starts the default engine of this extension).
        Err(forksafe::Error::DefaultEngineStarted)
            if forksafe::default_engine_if_started().is_some() =>
        {
            Ok(EngineRef::Default(
                forksafe::default_engine_if_started().expect("checked just above"),
            ))
        }
        Err(e) => Err(to_py(py, e)),
    }
}
