//! Explicit engines: a core engine over boxed closures, with its config,
//! the fork handlers registered before it starts, and a `Drop` that shuts
//! it down within its deadline.

use crate::atfork::{ensure_registered, DOMAIN};
use crate::{
    Config, ForkReport, HostBridge, NoHost, OpBuilder, OpError, QuiesceGuard, Result,
    ShutdownReport, State, Task, Trace, Var,
};
use forksafe_core::{OpName, OpSpec};
use std::time::Duration;

/// An op id: the push sequence number, unique per engine.
pub type OpId = u64;

/// A dependency engine (docs/DESIGN.md): ops with read and write sets run on
/// worker lanes in per-var push order, and the engine stays usable across
/// `fork()`. Workers start lazily. Dropping it shuts it down within
/// [`Config::shutdown_deadline`] (see [`Engine::shutdown`]).
///
/// ```
/// use forksafe::{Config, Engine};
/// let engine = Engine::new(Config::default()).unwrap();
/// let (a, b) = (engine.new_var().unwrap(), engine.new_var().unwrap());
/// engine.op("produce").writes(&[&a]).run(|| { /* fill a */ }).unwrap();
/// engine.op("consume").reads(&[&a]).writes(&[&b]).run(|| { /* a -> b */ }).unwrap();
/// engine.wait_for_var(&b).unwrap();
/// assert_eq!(engine.var_version(&a).unwrap(), 1);
/// engine.wait_all().unwrap();
/// ```
pub struct Engine {
    inner: forksafe_core::Engine<Task>,
    config: Config,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("id", &self.inner.id())
            .field("state", &self.inner.state())
            .field("config", &self.config)
            .finish()
    }
}

impl Engine {
    /// An engine with no host runtime ([`NoHost`]).
    pub fn new(config: Config) -> Result<Engine> {
        Engine::with_bridge(config, Box::new(NoHost))
    }

    /// An engine whose host lane calls host code through `bridge`.
    ///
    /// ```
    /// use forksafe::{bridge::NoHost, Config, Engine, Error};
    /// let bad = Config { host_workers: 0, ..Config::default() };
    /// assert!(matches!(Engine::with_bridge(bad, Box::new(NoHost)), Err(Error::InvalidConfig(_))));
    /// ```
    pub fn with_bridge(config: Config, bridge: Box<dyn HostBridge>) -> Result<Engine> {
        config.validate()?;
        ensure_registered()?;
        let inner = forksafe_core::Engine::with_bridge(&DOMAIN, config.core(), bridge)?;
        Ok(Engine { inner, config })
    }

    /// The config the engine was built with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The engine's id, unique in this process.
    pub fn id(&self) -> u64 {
        self.inner.id()
    }

    /// The engine's lifecycle state.
    pub fn state(&self) -> State {
        self.inner.state()
    }

    /// A new var of this engine.
    pub fn new_var(&self) -> Result<Var> {
        self.inner.new_var()
    }

    /// Starts building an op named `name` (see [`OpBuilder`]): a string
    /// literal is kept without a copy, a `String` as is ([`OpName`]).
    ///
    /// ```
    /// # let engine = forksafe::Engine::new(Default::default()).unwrap();
    /// let v = engine.new_var().unwrap();
    /// engine.op("write v").writes(&[&v]).run(|| {}).unwrap();
    /// engine.wait_for_var(&v).unwrap();
    /// ```
    pub fn op(&self, name: impl Into<OpName>) -> OpBuilder<'_> {
        OpBuilder::new(self, name.into())
    }

    /// Pushes an op built by [`OpBuilder`] (blocking for room if a pending
    /// bound is set, with the host lock released; never from inside an op).
    pub(crate) fn push(&self, spec: OpSpec<Task>) -> Result<OpId> {
        self.inner.push(spec)
    }

    /// Pushes an op built by [`OpBuilder`], or [`crate::Error::Full`] at the
    /// pending bound.
    pub(crate) fn try_push(&self, spec: OpSpec<Task>) -> Result<OpId> {
        self.inner.try_push(spec)
    }

    /// Deletes `var` once every op pushed on it so far has completed; later
    /// pushes naming it get [`crate::Error::DeletedVar`].
    ///
    /// ```
    /// # use forksafe::Error;
    /// # let engine = forksafe::Engine::new(Default::default()).unwrap();
    /// let v = engine.new_var().unwrap();
    /// engine.delete_var(&v).unwrap();
    /// assert_eq!(engine.op("late").writes(&[&v]).run(|| {}), Err(Error::DeletedVar));
    /// ```
    pub fn delete_var(&self, var: &Var) -> Result<OpId> {
        self.inner.delete_var(var)
    }

    /// Clears the var's poison: an op ordered on the var like any other.
    pub fn clear_poison(&self, var: &Var) -> Result<OpId> {
        self.inner.clear_poison(var)
    }

    /// The var's version: how many writes of it have completed.
    pub fn var_version(&self, var: &Var) -> Result<u64> {
        self.inner.var_version(var)
    }

    /// The error the var is poisoned with, if any.
    pub fn var_poison(&self, var: &Var) -> Result<Option<OpError>> {
        self.inner.var_poison(var)
    }

    /// Returns once every write of `var` pushed before has completed, then
    /// its poison as [`crate::Error::Poisoned`]. Waits with the host lock
    /// released. From inside an op, the same, writes that op pushed
    /// included; [`crate::Error::WaitOnSelf`] at once if one of them cannot
    /// complete before that op (docs/DESIGN.md, "Waiting inside an op").
    pub fn wait_for_var(&self, var: &Var) -> Result<()> {
        self.inner.wait_for_var(var)
    }

    /// [`Engine::wait_for_var`] with a deadline ([`crate::Error::Timeout`]; a zero
    /// timeout is [`crate::Error::ZeroTimeout`]).
    pub fn wait_for_var_timeout(&self, var: &Var, timeout: Duration) -> Result<()> {
        self.inner.wait_for_var_timeout(var, timeout)
    }

    /// Returns once every op pushed before has completed, then every error
    /// first raised since the previous `wait_all` as [`crate::Error::OpsFailed`].
    pub fn wait_all(&self) -> Result<()> {
        self.inner.wait_all()
    }

    /// [`Engine::wait_all`] with a deadline.
    pub fn wait_all_timeout(&self, timeout: Duration) -> Result<()> {
        self.inner.wait_all_timeout(timeout)
    }

    /// Returns once op `id` has completed (at once if it has, or if no op
    /// `id` is pending). Its outcome is where the op put it: use
    /// [`crate::OpHandle`] for a value. Inside an op, the rule of
    /// [`Engine::wait_for_var`] holds.
    ///
    /// ```
    /// # let engine = forksafe::Engine::new(Default::default()).unwrap();
    /// let id = engine.op("work").run(|| {}).unwrap();
    /// engine.wait_for_op(id).unwrap();
    /// assert_eq!(engine.pending().unwrap(), 0);
    /// ```
    pub fn wait_for_op(&self, id: OpId) -> Result<()> {
        self.inner.wait_for_op(id)
    }

    /// Whether op `id` has started and not completed (queued and done ops
    /// are not running).
    ///
    /// ```
    /// # let engine = forksafe::Engine::new(Default::default()).unwrap();
    /// let id = engine.op("work").run(|| {}).unwrap();
    /// engine.wait_for_op(id).unwrap();
    /// assert!(!engine.is_running(id).unwrap());
    /// ```
    pub fn is_running(&self, id: OpId) -> Result<bool> {
        self.inner.is_running(id)
    }

    /// [`Engine::wait_for_op`] with a deadline ([`crate::Error::Timeout`]).
    pub fn wait_for_op_timeout(&self, id: OpId, timeout: Duration) -> Result<()> {
        self.inner.wait_for_op_timeout(id, timeout)
    }

    /// Whether the calling thread runs the body of one of this engine's ops.
    pub(crate) fn is_inside_op(&self) -> bool {
        self.inner.is_inside_op()
    }

    /// The id of the op whose body the calling thread is running, if it is
    /// one of this engine's ops; `None` elsewhere.
    ///
    /// ```
    /// # let engine = forksafe::Engine::new(Default::default()).unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let e = std::sync::Arc::new(engine);
    /// let inner = e.clone();
    /// let id = e.op("me").run(move || tx.send(inner.current_op()).unwrap()).unwrap();
    /// assert_eq!(rx.recv().unwrap(), Some(id));
    /// assert_eq!(e.current_op(), None);
    /// ```
    pub fn current_op(&self) -> Option<OpId> {
        self.inner.current_op()
    }

    /// How many ops are accepted and not yet complete. It looks at each
    /// pending op's record (no pending count is kept: it would be a write
    /// every completion shares), so call it for diagnostics, not per op.
    pub fn pending(&self) -> Result<usize> {
        self.inner.pending()
    }

    /// Stops dispatch and waits (host lock released) until every running op
    /// has completed; dispatch resumes when the guard drops.
    ///
    /// ```
    /// # let engine = forksafe::Engine::new(Default::default()).unwrap();
    /// let guard = engine.quiesce(std::time::Duration::from_secs(1)).unwrap();
    /// assert_eq!(engine.state(), forksafe::State::Quiesced);
    /// drop(guard);
    /// ```
    pub fn quiesce(&self, timeout: Duration) -> Result<QuiesceGuard> {
        self.inner.quiesce(timeout)
    }

    /// Starts (or resumes) recording the op timeline: one event per op body
    /// run, until [`Engine::trace_stop`]. Off by default; off, it costs one
    /// relaxed load per body.
    pub fn trace_start(&self) -> Result<()> {
        self.inner.set_tracing(true)
    }

    /// Stops recording the op timeline (what was recorded stays until
    /// [`Engine::trace_take`]).
    pub fn trace_stop(&self) -> Result<()> {
        self.inner.set_tracing(false)
    }

    /// Takes the timeline recorded so far; write it with
    /// [`Trace::to_chrome_json`] to load it in Perfetto.
    pub fn trace_take(&self) -> Result<Trace> {
        Ok(Trace {
            events: self.inner.take_trace()?,
            thread_name: self.config.thread_name.to_lowercase(),
        })
    }

    /// In a fork child: what this engine inherited (ops completed with
    /// `LostInFork`, the op carried by a fork from inside its body).
    pub fn fork_report(&self) -> Result<Option<ForkReport>> {
        self.inner.fork_report()
    }

    /// Shuts down: pushes fail with [`crate::Error::ShutDown`] from now on, queued
    /// ops run until `timeout` and are then cancelled, and once this
    /// returns the engine never calls host code again. Waits with the host
    /// lock released. A second call returns an empty report.
    ///
    /// It returns after the deadline plus the time the host ops running at
    /// the deadline take to return (a body cannot be stopped; the engine
    /// waits for it to leave the host bridge, so that no host call happens
    /// afterwards).
    ///
    /// ```
    /// # use forksafe::Error;
    /// # let engine = forksafe::Engine::new(Default::default()).unwrap();
    /// engine.shutdown(std::time::Duration::from_secs(1)).unwrap();
    /// assert_eq!(engine.op("late").run(|| {}), Err(Error::ShutDown));
    /// ```
    pub fn shutdown(&self, timeout: Duration) -> Result<ShutdownReport> {
        self.inner.shutdown(timeout)
    }

    /// [`Engine::shutdown`] with [`Config::shutdown_deadline`].
    pub fn shutdown_now(&self) -> Result<ShutdownReport> {
        self.inner.shutdown(self.config.shutdown_deadline)
    }

    /// A guard that shuts this engine down when it drops: the exit-hook
    /// pattern for explicit engines (hold it in `main`). See
    /// [`crate::ExitGuard`].
    pub fn exit_guard(&self) -> crate::ExitGuard<'_> {
        crate::ExitGuard::new(self)
    }

    /// [`crate::fork_with`] bounded by this engine's
    /// [`Config::fork_drain`]: quiesces every live engine, then forks.
    pub fn fork(&self) -> Result<crate::Forked> {
        crate::fork_with(self.config.fork_drain)
    }
}

impl Drop for Engine {
    /// Shuts the engine down within [`Config::shutdown_deadline`] (plus the
    /// running host bodies, see [`Engine::shutdown`]), with the host lock
    /// released; never calls into a host that is finalising (its payloads
    /// are leaked instead); never panics.
    fn drop(&mut self) {
        let _ = self.inner.shutdown(self.config.shutdown_deadline);
    }
}
