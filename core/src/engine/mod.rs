//! The engine: its configuration, its public handle ([`CoreEngine`]), and the
//! files an op's path and the lifecycle steps run through. The parts are
//! wired together in `shared.rs`. One op's path reads one way, file by
//! file (docs/DESIGN.md, "One op's path"): `admission` (checks, the
//! pending bound, the append to its vars) → `dispatch` (a ready queue, a
//! worker woken) → `worker` (the worker thread that takes it) → `run` (its
//! body) → `complete` (its vars released, the next ops granted, waiters
//! woken). The lifecycle steps each have their own file: `wait`,
//! `quiesce`, `fork` (prepare, parent and the child's settling),
//! `shutdown`.
//!
//! # State
//!
//! An [`CoreEngine`] handle holds the shared parts and nothing else; dropping
//! it shuts the engine down (a one-second deadline) and leaves the fork
//! domain. Each part's states are in its own file's `# State`.

mod admission;
mod complete;
mod dispatch;
mod finish;
mod fork;
#[cfg(any(loom, shuttle))]
mod fork_point;
mod lifecycle_cell;
mod payload;
mod quiesce;
mod run;
mod shared;
mod shutdown;
#[cfg(any(loom, shuttle))]
mod snapshot;
mod spawn;
mod token;
mod wait;
mod wait_graph;
mod waiters;
mod worker;
#[cfg(test)]
mod worker_tests;

pub(crate) use shared::Shared;

pub use crate::report::{ForkReport, ShutdownReport};
#[cfg(any(loom, shuttle))]
pub use fork_point::{EngineLock, ForkPoint};
pub use quiesce::QuiesceGuard;
#[cfg(any(loom, shuttle))]
pub use snapshot::ForkSnapshot;
pub use token::{CompletionToken, Payload};

use crate::domain::{ForkDomain, ForkMember};
use crate::error::{Error, OpError, Result};
use crate::host::{HostBridge, NoHost};
use crate::lifecycle::State;
use crate::op_info::Lane;
use crate::spec::Var;
use crate::sync::{Arc, MODEL_BUILD};
use crate::trace::TraceEvent;
use crate::var::VarState;
use std::time::Duration;

/// Engine sizing and limits. [`Config::validate`] checks the ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Worker threads of the compute lane (1..=1024).
    pub compute_workers: usize,
    /// Worker threads of the host lane (1..=1024).
    pub host_workers: usize,
    /// Bound on pending ops; `None` is unbounded (the default). `Some(0)` is
    /// invalid.
    pub max_pending: Option<usize>,
    /// Prefix of worker thread names: 1..=32 bytes, no NUL.
    pub thread_name: String,
    /// Stack size of each worker thread in bytes (`None`: std's default,
    /// 2 MiB unless `RUST_MIN_STACK` says otherwise; sizes below the
    /// platform's minimum are raised to it). `Some(0)` is invalid. A size
    /// the OS cannot provide fails [`CoreEngine::new`] with [`Error::Spawn`].
    pub worker_stack_size: Option<usize>,
    /// Per lane, at most this many of its workers may be blocked at once in
    /// a wait inside an op (0..=1024; default 64). Each such wait lets the
    /// lane run one stand-in worker, so a lane never has more than its size
    /// plus this many threads; a wait past the cap fails with
    /// [`Error::StandInLimit`] instead of blocking. Stand-ins are parked and
    /// reused, never left behind (see the `pool` module's `# State`).
    pub max_stand_ins: usize,
    /// Run inline (`None`, the default: never). With `Some(n)`, a push whose
    /// op is ready at once (every var granted) runs that op on the pushing
    /// thread, before `push` returns, when the ready queue it would join
    /// already holds at least `n` ops: a pusher that outruns the workers
    /// does work instead of queueing it, like OpenMP's undeferred tasks.
    /// Only compute-lane ops, and only when the pusher is not itself inside
    /// an op, does not hold the host lock, and no quiesce holds; the body
    /// runs outside every engine lock and fork-gate section, and its result
    /// and errors are reported at waits as a worker's would be (the rule,
    /// docs/DESIGN.md "Running inline"). Turn it on only if no body waits
    /// for something its pusher does after `push` returns: that body would
    /// wait for its own thread.
    pub run_inline_from: Option<usize>,
}

/// The default of [`Config::max_stand_ins`].
pub const DEFAULT_MAX_STAND_INS: usize = 64;

impl Default for Config {
    fn default() -> Self {
        Config {
            compute_workers: 2,
            host_workers: 1,
            max_pending: None,
            thread_name: "forksafe".into(),
            worker_stack_size: None,
            max_stand_ins: DEFAULT_MAX_STAND_INS,
            run_inline_from: None,
        }
    }
}

impl Config {
    /// Checks every value's range.
    ///
    /// ```
    /// use forksafe_core::{Config, Error};
    /// let bad = Config { compute_workers: 0, ..Config::default() };
    /// assert!(matches!(bad.validate(), Err(Error::InvalidConfig(_))));
    /// ```
    pub fn validate(&self) -> Result<()> {
        if !(1..=1024).contains(&self.compute_workers) {
            return Err(Error::InvalidConfig("compute_workers must be in 1..=1024"));
        }
        if !(1..=1024).contains(&self.host_workers) {
            return Err(Error::InvalidConfig("host_workers must be in 1..=1024"));
        }
        if self.max_pending == Some(0) {
            return Err(Error::InvalidConfig("max_pending must be positive"));
        }
        if self.thread_name.is_empty() || self.thread_name.len() > 32 {
            return Err(Error::InvalidConfig("thread_name must be 1..=32 bytes"));
        }
        // std panics on a thread name with a NUL, in whichever call starts
        // a worker.
        if self.thread_name.contains('\0') {
            return Err(Error::InvalidConfig("thread_name must not contain NUL"));
        }
        if self.worker_stack_size == Some(0) {
            return Err(Error::InvalidConfig("worker_stack_size must be positive"));
        }
        if self.max_stand_ins > 1024 {
            return Err(Error::InvalidConfig("max_stand_ins must be in 0..=1024"));
        }
        Ok(())
    }

    pub(crate) fn workers(&self, lane: Lane) -> usize {
        match lane {
            Lane::Compute => self.compute_workers,
            Lane::Host => self.host_workers,
        }
    }
}

/// A dependency engine over payload `P` (docs/DESIGN.md). Dropping it shuts it
/// down with a one-second deadline and leaves the fork domain.
///
/// ```
/// use forksafe_core::{BodyError, CompletionToken, CoreEngine, ForkDomain, OpSpec, Payload};
/// struct Nop;
/// impl Payload for Nop {
///     fn run(self, _t: Option<CompletionToken<Self>>) -> Result<(), BodyError> { Ok(()) }
/// }
/// let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
/// let engine = CoreEngine::<Nop>::new(domain, Default::default()).unwrap();
/// let v = engine.new_var().unwrap();
/// engine.push(OpSpec::new(Nop).writes(&[v.clone()])).unwrap();
/// engine.wait_for_var(&v).unwrap();
/// assert_eq!(engine.var_version(&v).unwrap(), 1);
/// ```
pub struct CoreEngine<P: Payload> {
    pub(crate) shared: Arc<Shared<P>>,
}

impl<P: Payload> std::fmt::Debug for CoreEngine<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreEngine")
            .field("id", &self.shared.id())
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

struct Member<P: Payload>(Arc<Shared<P>>);

impl<P: Payload> ForkMember for Member<P> {
    fn id(&self) -> u64 {
        self.0.id()
    }
    fn prepare(&self) {
        fork::prepare(&self.0);
    }
    fn parent(&self) {
        fork::parent(&self.0);
    }
    fn handle(&self) -> Box<dyn ForkMember> {
        Box::new(Member(self.0.clone()))
    }
    fn state(&self) -> State {
        self.0.state()
    }
    fn quiesce(&self, timeout: Duration) -> Result<Box<dyn Send>> {
        let deadline = self.0.deadline(timeout)?;
        let guard = quiesce::quiesce(&self.0, deadline)?;
        Ok(Box::new(guard))
    }
}

impl<P: Payload> CoreEngine<P> {
    /// An engine with no host runtime ([`NoHost`]).
    pub fn new(domain: &'static ForkDomain, config: Config) -> Result<Self> {
        Self::with_bridge(domain, config, Box::new(NoHost))
    }

    /// An engine whose host lane calls host code through `bridge`. Starts
    /// each lane's configured workers (model builds: at the first op); a
    /// worker the OS refuses fails the call with [`Error::Spawn`].
    pub fn with_bridge(
        domain: &'static ForkDomain,
        config: Config,
        bridge: Box<dyn HostBridge>,
    ) -> Result<Self> {
        let engine = Self::unstarted_with_bridge(domain, config, bridge)?;
        if !MODEL_BUILD {
            // On failure the engine is dropped: shut down and unregistered.
            spawn::start_base_workers(&engine.shared)?;
        }
        Ok(engine)
    }

    /// Unit tests: an engine whose workers start at the first op, as in
    /// model builds.
    #[cfg(test)]
    pub(crate) fn unstarted(domain: &'static ForkDomain, config: Config) -> Result<Self> {
        Self::unstarted_with_bridge(domain, config, Box::new(NoHost))
    }

    fn unstarted_with_bridge(
        domain: &'static ForkDomain,
        config: Config,
        bridge: Box<dyn HostBridge>,
    ) -> Result<Self> {
        config.validate()?;
        let steps = shared::Steps {
            settle_child: fork::settle_child,
            worker_main: worker::worker_main,
        };
        let shared = Arc::new(Shared::new(domain, config, bridge, steps));
        domain.register(Box::new(Member(shared.clone())))?;
        Ok(CoreEngine { shared })
    }

    /// The engine's id, unique within its fork domain.
    pub fn id(&self) -> u64 {
        self.shared.id()
    }

    /// The lifecycle state.
    pub fn state(&self) -> State {
        self.shared.lifecycle().state()
    }

    /// A new var of this engine; [`Error::ShutDown`] once a shutdown began.
    pub fn new_var(&self) -> Result<Var<P>> {
        let _section = self.shared.enter()?;
        // No op could ever use it.
        if matches!(self.shared.state(), State::ShuttingDown | State::Stopped) {
            return Err(Error::ShutDown);
        }
        let id = self.shared.ids().next_var_id();
        Ok(Var::new(Arc::new(VarState::new(id, self.shared.key()))))
    }

    /// The var's version: how many writes of it have completed.
    pub fn var_version(&self, var: &Var<P>) -> Result<u64> {
        self.shared.check_var(var)?;
        let _section = self.shared.enter()?;
        let version = var.state().lock().version();
        Ok(version)
    }

    /// The error the var is poisoned with, if any (I7).
    pub fn var_poison(&self, var: &Var<P>) -> Result<Option<OpError>> {
        self.shared.check_var(var)?;
        let _section = self.shared.enter()?;
        let poison = var.state().lock().poison().cloned();
        Ok(poison)
    }

    /// Whether the calling thread is running the body of one of this
    /// engine's ops.
    pub fn is_inside_op(&self) -> bool {
        self.shared.calling_op().is_some()
    }

    /// The id of the op whose body the calling thread is running, if it is
    /// one of this engine's (a body that wants to name itself, as in an
    /// error it reports).
    pub fn current_op(&self) -> Option<u64> {
        self.shared.calling_op()
    }

    /// Whether op `id` has been started (by a worker, a stand-in or its
    /// pusher) and has not completed: what `concurrent.futures` calls
    /// running. False for an op that is queued, done, or not this
    /// engine's; a look at the live set, not for a per-op loop.
    pub fn is_running(&self, id: u64) -> Result<bool> {
        let _section = self.shared.enter()?;
        Ok(self
            .shared
            .live()
            .get(id)
            .is_some_and(|op| op.is(crate::op::OpStatus::Running)))
    }

    /// How many ops are accepted and not yet complete. It looks at each
    /// pending op's record (the engine keeps no pending count, which would
    /// be a write every completion shares): for diagnostics and tests, not
    /// for a per-op loop.
    pub fn pending(&self) -> Result<usize> {
        let _section = self.shared.enter()?;
        Ok(self.shared.live().len())
    }

    /// Turns the op timeline on or off. While on, every op body that runs
    /// adds one [`TraceEvent`]; off (the default), the cost is one relaxed
    /// load per body.
    pub fn set_tracing(&self, on: bool) -> Result<()> {
        let _section = self.shared.enter()?;
        self.shared.tracer().set(on);
        Ok(())
    }

    /// Takes the timeline events recorded so far, ordered by start time.
    pub fn take_trace(&self) -> Result<Vec<TraceEvent>> {
        let _section = self.shared.enter()?;
        Ok(self.shared.tracer().take())
    }

    /// The report of the last fork child settling, in a child process.
    pub fn fork_report(&self) -> Result<Option<ForkReport>> {
        let _section = self.shared.enter()?;
        let report = self.shared.lifecycle().lock().report().cloned();
        Ok(report)
    }

    /// Model builds: worker threads of `lane` alive, spares included (the
    /// pool models check the stand-in cap with it).
    #[cfg(any(loom, shuttle))]
    pub fn worker_threads(&self, lane: Lane) -> usize {
        let _section = self.shared.enter();
        self.shared.lane(lane).lock().pool().threads()
    }

    /// Model builds: moves the clock on one tick and wakes every timed
    /// waiter, so a model fires deadlines as events.
    #[cfg(any(loom, shuttle))]
    pub fn advance_clock(&self) {
        self.shared.clock().advance();
        for t in self.shared.waiters().take_timed() {
            t.unpark();
        }
    }
}

impl<P: Payload> Drop for CoreEngine<P> {
    fn drop(&mut self) {
        let _ = self.shutdown(Duration::from_secs(1));
        let _ = self.shared.domain().unregister(self.shared.id());
    }
}
