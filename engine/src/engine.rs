//! Explicit engines: a core engine over boxed closures, with its config,
//! the fork handlers registered before it starts, and a `Drop` that shuts
//! it down within its deadline.

use crate::atfork::{ensure_registered, DOMAIN};
use crate::{Config, HostBridge, NoHost, OpBuilder, Result, ShutdownReport, Task, Trace};
use forksafe_core::OpName;

/// An op id: the push sequence number, unique per engine.
pub type OpId = u64;

/// A dependency engine (docs/DESIGN.md): ops with read and write sets run on
/// worker lanes in per-var push order, and the engine stays usable across
/// `fork()`. Workers start lazily. Dropping it shuts it down within
/// [`Config::shutdown_deadline`] (see [`CoreEngine::shutdown`](forksafe_core::CoreEngine::shutdown)).
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
    inner: forksafe_core::CoreEngine<Task>,
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
    /// use forksafe::{bridge::NoHost, Config, CoreConfig, Engine, Error};
    /// let bad = Config {
    ///     core: CoreConfig { host_workers: 0, ..CoreConfig::default() },
    ///     ..Config::default()
    /// };
    /// assert!(matches!(Engine::with_bridge(bad, Box::new(NoHost)), Err(Error::InvalidConfig(_))));
    /// ```
    pub fn with_bridge(config: Config, bridge: Box<dyn HostBridge>) -> Result<Engine> {
        config.validate()?;
        ensure_registered()?;
        let inner = forksafe_core::CoreEngine::with_bridge(&DOMAIN, config.core.clone(), bridge)?;
        Ok(Engine { inner, config })
    }

    /// The config the engine was built with.
    pub fn config(&self) -> &Config {
        &self.config
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
            thread_name: self.config.core.thread_name.to_lowercase(),
        })
    }

    /// [`CoreEngine::shutdown`](forksafe_core::CoreEngine::shutdown) with [`Config::shutdown_deadline`].
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

/// The core engine this one wraps: every lifecycle call, var and wait of
/// [`forksafe_core::CoreEngine`] (`state`, `new_var`, `wait_for_var`,
/// `wait_all`, `quiesce`, `shutdown`, …) is called on an `Engine` as is.
/// `Engine` adds only what differs: its config, the op builder
/// ([`Engine::op`]), the timeline as a [`Trace`], the deadlines of
/// [`Config`] ([`Engine::shutdown_now`], [`Engine::fork`]), and a shutdown
/// when it drops.
impl std::ops::Deref for Engine {
    type Target = forksafe_core::CoreEngine<Task>;

    fn deref(&self) -> &Self::Target {
        &self.inner
    }
}

impl Drop for Engine {
    /// Shuts the engine down within [`Config::shutdown_deadline`] (plus the
    /// running host bodies, see [`CoreEngine::shutdown`](forksafe_core::CoreEngine::shutdown)), with the host lock
    /// released; never calls into a host that is finalising (its payloads
    /// are leaked instead); never panics.
    fn drop(&mut self) {
        let _ = self.inner.shutdown(self.config.shutdown_deadline);
    }
}
