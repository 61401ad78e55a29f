//! `Engine`, `Var` and `Array` for Python.

use crate::bridge::{host_finalizing, HostObj, PyBridge};
use crate::errors::{encode_exception, to_py, IntoPy};
use forksafe::{Config, Engine, Priority, State, Var};
use forksafe_core::sync::{park_until, Arc, Clock, Mutex};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::time::{Duration, Instant};

/// How long one slice of a wait on the main thread lasts before it takes
/// the GIL back to run signal handlers (Ctrl-C, pytest-timeout).
const SIGNAL_SLICE: Duration = Duration::from_millis(100);

/// An explicit engine (shared by its Python object, its arrays and the ops
/// that touch them) or the process-wide default one.
#[derive(Clone)]
pub(crate) enum EngineRef {
    Owned(Arc<Engine>),
    Default(&'static Engine),
}

impl std::ops::Deref for EngineRef {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        match self {
            EngineRef::Owned(e) => e,
            EngineRef::Default(e) => e,
        }
    }
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
    let total = timeout.map(|t| seconds("timeout", t)).transpose()?;
    if !on_main_thread(py)? {
        return py.detach(|| call(total)).py_err(py);
    }
    let deadline = total.map(|t| Instant::now() + t);
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let slice = match left {
            Some(l) if l <= SIGNAL_SLICE => Some(l.max(Duration::from_micros(1))),
            _ => Some(SIGNAL_SLICE),
        };
        let last = slice == left;
        match py.detach(|| call(slice)) {
            Err(forksafe::Error::Timeout { .. }) if !last => py.check_signals()?,
            other => return other.py_err(py),
        }
    }
}

/// Vars of one list argument (`Var` or `Array` items).
fn vars_of(list: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<Var>> {
    if list.is_none() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for item in list
        .try_iter()
        .map_err(|_| PyTypeError::new_err(format!("{what} must be an iterable of Var or Array")))?
    {
        out.push(var_of(&item?, what)?);
    }
    Ok(out)
}

/// The var of a `Var` or an `Array`.
fn var_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Var> {
    if let Ok(v) = obj.cast::<PyVar>() {
        return Ok(v.get().var.clone());
    }
    if let Ok(a) = obj.cast::<PyArray>() {
        return Ok(a.get().inner.var.clone());
    }
    Err(PyTypeError::new_err(format!(
        "{what}: expected a forksafe Var or Array, got {}",
        obj.get_type().name()?
    )))
}

/// A Python callable and its arguments, run on the host lane.
struct HostCall {
    func: HostObj,
    args: HostObj,
    kwargs: Option<HostObj>,
}

impl HostCall {
    /// Calls the callable with the GIL held (re-entrant: the bridge already
    /// holds it) and drops it there too. A raised exception fails the op
    /// with its type, message and traceback text.
    fn run(self) -> Result<(), String> {
        if host_finalizing() {
            // `self` is leaked by its `HostObj`s: the host is going away.
            return Err("the interpreter is finalising; callback not run".into());
        }
        let out = Python::try_attach(move |py| {
            let args = self.args.bind(py).cast::<PyTuple>().ok().cloned();
            let kwargs = self
                .kwargs
                .as_ref()
                .and_then(|k| k.bind(py).cast::<PyDict>().ok().cloned());
            let result = match args {
                Some(args) => self.func.bind(py).call(args, kwargs.as_ref()),
                None => self.func.bind(py).call0(),
            };
            let out = result.map(|_| ()).map_err(|e| encode_exception(py, &e));
            drop(kwargs);
            drop(self);
            out
        });
        out.unwrap_or_else(|| Err("cannot attach to the interpreter; callback not run".into()))
    }
}

/// A dependency engine. Ops declare the vars they read and write and run in
/// per-var push order: Python callables on the host lane (with the GIL
/// held), built-in Rust ops (`add`, `copy`, `fill`, `sleep`) on the compute
/// lane. Keyword arguments size it: `compute_workers`, `host_workers`,
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
            compute_workers,
            host_workers,
            max_pending,
            thread_name: thread_name.to_string(),
            worker_stack_size,
            max_stand_ins,
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

    /// A new array of floats (a var with data), filled with `values`.
    #[pyo3(signature = (values=None))]
    fn array(&self, py: Python<'_>, values: Option<Vec<f64>>) -> PyResult<PyArray> {
        let var = self.engine.new_var().py_err(py)?;
        Ok(PyArray {
            inner: Arc::new(ArrayInner {
                var,
                data: Mutex::new(values.unwrap_or_default()),
            }),
            engine: self.engine.clone(),
        })
    }

    /// Pushes `fn(*args, **kwargs)` as a host-lane op that reads `reads` and
    /// writes `writes` (Vars or Arrays). Returns the op id. If `fn` raises,
    /// the op fails: the vars it writes are poisoned, and the wait that
    /// reports it raises `OpError` with the original type name, message
    /// and traceback text.
    #[pyo3(signature = (fn_, /, *, reads=None, writes=None, name=None, args=None,
                        kwargs=None, priority="normal", run_on_error=false))]
    #[allow(clippy::too_many_arguments)]
    fn push(
        &self,
        py: Python<'_>,
        fn_: Bound<'_, PyAny>,
        reads: Option<Bound<'_, PyAny>>,
        writes: Option<Bound<'_, PyAny>>,
        name: Option<String>,
        args: Option<Bound<'_, PyAny>>,
        kwargs: Option<Bound<'_, PyDict>>,
        priority: &str,
        run_on_error: bool,
    ) -> PyResult<u64> {
        if !fn_.is_callable() {
            return Err(PyTypeError::new_err("push: fn must be callable"));
        }
        let reads = reads.map_or(Ok(Vec::new()), |r| vars_of(&r, "reads"))?;
        let writes = writes.map_or(Ok(Vec::new()), |w| vars_of(&w, "writes"))?;
        let args = match args {
            None => PyTuple::empty(py),
            Some(a) => a
                .try_iter()
                .and_then(|it| it.collect::<PyResult<Vec<_>>>())
                .and_then(|v| PyTuple::new(py, v))
                .map_err(|_| PyTypeError::new_err("push: args must be an iterable"))?,
        };
        let name = match name {
            Some(n) => n,
            None => fn_
                .getattr("__qualname__")
                .and_then(|n| n.extract::<String>())
                .unwrap_or_else(|_| "callback".into()),
        };
        // An extra reference held across the push: if the engine drops the
        // payload inside the push (a refused op), that drop only decrements
        // and runs no Python code under an engine lock (H1); ours is
        // released here afterwards, with the GIL and no engine lock.
        let keep = (fn_.clone(), args.clone(), kwargs.clone());
        let call = HostCall {
            func: HostObj::new(fn_.unbind()),
            args: HostObj::new(args.into_any().unbind()),
            kwargs: kwargs.map(|k| HostObj::new(k.into_any().unbind())),
        };
        let mut op = self
            .engine
            .op(name.to_owned())
            .reads(&reads.iter().collect::<Vec<_>>())
            .writes(&writes.iter().collect::<Vec<_>>())
            .host()
            .priority(parse_priority(priority)?);
        if run_on_error {
            op = op.run_on_error();
        }
        let pushed = if self.engine.config().max_pending.is_some() {
            // May wait for room: with the GIL released.
            py.detach(move || op.try_run(move || call.run()))
        } else {
            op.try_run(move || call.run())
        };
        drop(keep);
        pushed.py_err(py)
    }

    /// Pushes a compute-lane op: `out[i] = a[i] + b[i]` (Arrays of one
    /// length; a length mismatch fails the op). `out` may be `a` or `b`.
    #[pyo3(signature = (a, b, out, *, name="add"))]
    fn add(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyArray>,
        b: &Bound<'_, PyArray>,
        out: &Bound<'_, PyArray>,
        name: &str,
    ) -> PyResult<u64> {
        let (a, b, out) = (
            a.get().inner.clone(),
            b.get().inner.clone(),
            out.get().inner.clone(),
        );
        let reads: Vec<&Var> = [&a, &b]
            .into_iter()
            .filter(|x| !Arc::ptr_eq(x, &out))
            .map(|x| &x.var)
            .fold(Vec::new(), |mut v, x| {
                if !v.contains(&x) {
                    v.push(x);
                }
                v
            });
        let body = {
            let (a, b, out) = (a.clone(), b.clone(), out.clone());
            move || -> Result<(), String> {
                let x = a.data.lock().clone();
                let y = b.data.lock().clone();
                if x.len() != y.len() {
                    return Err(format!(
                        "add: length mismatch ({} and {})",
                        x.len(),
                        y.len()
                    ));
                }
                let sum: Vec<f64> = x.iter().zip(&y).map(|(p, q)| p + q).collect();
                *out.data.lock() = sum;
                Ok(())
            }
        };
        self.engine
            .op(name.to_owned())
            .reads(&reads)
            .writes(&[&out.var])
            .try_run(body)
            .py_err(py)
    }

    /// Pushes a compute-lane op: `out = copy of src`.
    #[pyo3(signature = (src, out, *, name="copy"))]
    fn copy(
        &self,
        py: Python<'_>,
        src: &Bound<'_, PyArray>,
        out: &Bound<'_, PyArray>,
        name: &str,
    ) -> PyResult<u64> {
        let (src, out) = (src.get().inner.clone(), out.get().inner.clone());
        if Arc::ptr_eq(&src, &out) {
            return Err(PyValueError::new_err(
                "copy: src and out are the same array",
            ));
        }
        let body = {
            let (src, out) = (src.clone(), out.clone());
            move || {
                let x = src.data.lock().clone();
                *out.data.lock() = x;
            }
        };
        self.engine
            .op(name.to_owned())
            .reads(&[&src.var])
            .writes(&[&out.var])
            .run(body)
            .py_err(py)
    }

    /// Pushes a compute-lane op: every element of `out` set to `value`
    /// (`length` elements if given, else its current length).
    #[pyo3(signature = (out, value, length=None, *, name="fill"))]
    fn fill(
        &self,
        py: Python<'_>,
        out: &Bound<'_, PyArray>,
        value: f64,
        length: Option<usize>,
        name: &str,
    ) -> PyResult<u64> {
        let out = out.get().inner.clone();
        let body = {
            let out = out.clone();
            move || {
                let mut d = out.data.lock();
                let n = length.unwrap_or(d.len());
                d.clear();
                d.resize(n, value);
            }
        };
        self.engine
            .op(name.to_owned())
            .writes(&[&out.var])
            .run(body)
            .py_err(py)
    }

    /// Pushes a compute-lane op that sleeps `seconds` (a stand-in for a long
    /// Rust kernel), reading `reads` and writing `writes`.
    #[pyo3(signature = (seconds_, /, *, reads=None, writes=None, name="sleep"))]
    fn sleep(
        &self,
        py: Python<'_>,
        seconds_: f64,
        reads: Option<Bound<'_, PyAny>>,
        writes: Option<Bound<'_, PyAny>>,
        name: &str,
    ) -> PyResult<u64> {
        let d = seconds("seconds", seconds_)?;
        let reads = reads.map_or(Ok(Vec::new()), |r| vars_of(&r, "reads"))?;
        let writes = writes.map_or(Ok(Vec::new()), |w| vars_of(&w, "writes"))?;
        self.engine
            .op(name.to_owned())
            .reads(&reads.iter().collect::<Vec<_>>())
            .writes(&writes.iter().collect::<Vec<_>>())
            .run(move || {
                let clock = Clock::new();
                let deadline = clock.deadline_after(d);
                while !clock.passed(deadline) {
                    park_until(&clock, Some(deadline));
                }
            })
            .py_err(py)
    }

    /// Waits (GIL released) until every write of `var` (a Var or Array)
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

    /// Clears the poison of `var` (a Var or Array): an op ordered on it
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

    /// How many ops are accepted and not yet complete.
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
            Some(t) => seconds("timeout", t)?,
            None => self.engine.config().shutdown_deadline,
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

/// A var: a handle naming a resource, ordered by the ops that read and write
/// it. Its `version` counts completed writes.
#[pyclass(frozen, name = "Var", module = "forksafe._forksafe")]
pub struct PyVar {
    pub(crate) var: Var,
}

#[pymethods]
impl PyVar {
    fn __repr__(&self) -> String {
        format!("<forksafe.Var {:?}>", self.var)
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

pub(crate) struct ArrayInner {
    var: Var,
    data: Mutex<Vec<f64>>,
}

/// An array of floats whose reads and writes are ordered by its var: the
/// engine's stand-in for an MXNet NDArray. Built by `Engine.array`.
#[pyclass(frozen, name = "Array", module = "forksafe._forksafe")]
pub struct PyArray {
    inner: Arc<ArrayInner>,
    engine: EngineRef,
}

#[pymethods]
impl PyArray {
    /// The array's var (pass it, or the array itself, in reads/writes).
    #[getter]
    fn var(&self) -> PyVar {
        PyVar {
            var: self.inner.var.clone(),
        }
    }

    /// The contents, after waiting (GIL released) for every write pushed
    /// before; raises `OpError` if the array is poisoned. Inside an op that
    /// writes this array it reads at once.
    #[pyo3(signature = (timeout=None))]
    fn tolist(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Vec<f64>> {
        let engine = &self.engine;
        let var = &self.inner.var;
        match blocking(py, timeout, |t| {
            let r = match t {
                Some(t) => engine.wait_for_var_timeout(var, t),
                None => engine.wait_for_var(var),
            };
            match r {
                Err(forksafe::Error::WaitOnSelf) => Ok(()),
                other => other,
            }
        }) {
            Ok(()) => Ok(self.inner.data.lock().clone()),
            Err(e) => Err(e),
        }
    }

    /// Sets the contents at once, without ordering: call it from an op that
    /// writes this array (or once nothing else touches it).
    fn assign(&self, values: Vec<f64>) {
        *self.inner.data.lock() = values;
    }

    fn __len__(&self) -> usize {
        self.inner.data.lock().len()
    }

    fn __repr__(&self) -> String {
        format!(
            "<forksafe.Array {:?} len={}>",
            self.inner.var,
            self.__len__()
        )
    }
}
