//! The engine: shared state, construction, and the fork-gate sections that
//! every bookkeeping change runs in. Each concern has its own file: `push`,
//! `worker` (dispatch and execution), `complete`, `wait`, `quiesce`, `fork`
//! (prepare, parent and the child's settling), `shutdown`.

mod complete;
mod control;
mod fork;
#[cfg(any(loom, shuttle))]
mod fork_point;
mod push;
mod quiesce;
mod shutdown;
#[cfg(any(loom, shuttle))]
mod snapshot;
mod token;
mod wait;
mod wait_graph;
mod waiters;
mod worker;
#[cfg(test)]
mod worker_tests;

pub use fork::ForkReport;
#[cfg(any(loom, shuttle))]
pub use fork_point::{EngineLock, ForkPoint};
pub use quiesce::QuiesceGuard;
pub use shutdown::ShutdownReport;
#[cfg(any(loom, shuttle))]
pub use snapshot::ForkSnapshot;
pub use token::{CompletionToken, Payload};

use crate::domain::{ForkDomain, ForkMember};
use crate::epoch::EpochCell;
use crate::error::{Error, OpError, Result};
use crate::gate::{ForkGate, Section};
use crate::host::{HostBridge, NoHost};
use crate::lifecycle::State;
use crate::live::LiveIndex;
use crate::op_info::Lane;
use crate::ready::{LaneState, ReadyQueues, SpinHint};
use crate::spec::Var;
use crate::sync::{
    Arc, AtomicU64, AtomicUsize, CachePadded, Clock, Exits, LockRank, Mutex, Ordering, Tally,
    MODEL_BUILD,
};
use crate::trace::{TraceEvent, Tracer};
use crate::var::VarState;
use control::ControlCell;
use std::time::Duration;
use wait_graph::WaitGraph;
use waiters::Waiters;

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
    /// the OS cannot provide fails [`Engine::new`] with [`Error::Spawn`].
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

/// What workers, tokens and the domain share: the engine's parts, each
/// owning its state (its module's `# State` says who moves it and why):
/// the fork gate (`gate.rs`), the epoch cell (`epoch.rs`), the control
/// state (`control.rs`), the lanes' ready queues and pools (`ready/`,
/// `pool.rs`), the live index (`live.rs`), the engine-wide waiters
/// (`waiters.rs`) and the workers' exits (`sync/exits.rs`). The counters
/// beside them are plain sequence numbers and the pending bound's count.
pub(crate) struct Shared<P: Payload> {
    pub(crate) id: u64,
    pub(crate) domain: &'static ForkDomain,
    pub(crate) gate: ForkGate,
    pub(crate) clock: Clock,
    pub(crate) bridge: Box<dyn HostBridge>,
    pub(crate) config: Config,
    /// Each lane's workers and flags, its lock on its own cache line: taken
    /// when a worker parks, wakes or starts, not per op.
    pub(crate) lanes: [CachePadded<Mutex<LaneState>>; 2],
    /// Each lane's ready queues, one per configured worker, each with its
    /// own lock: a push and a completion touch one of them.
    pub(crate) ready: [ReadyQueues<P>; 2],
    /// Production builds: each lane's spin hint, written per op only while
    /// one of its workers spins (`ready/spin_hint.rs`).
    pub(crate) spin_hints: [SpinHint; 2],
    /// Lifecycle state, quiesce holds, errors, push waiters.
    pub(crate) control: ControlCell,
    /// Every accepted, not yet completed op (I2, I5).
    pub(crate) live: LiveIndex<P>,
    /// `wait_all` and shutdown waiters; model builds: timed waiters.
    pub(crate) waiters: Waiters,
    /// The waits inside ops that block, and what each waits for.
    pub(crate) wait_graph: WaitGraph<P>,
    /// Padded: written by every push, so it shares no line with what
    /// workers read per op (the lifecycle state, the epoch).
    pub(crate) next_op: CachePadded<AtomicU64>,
    pub(crate) next_var: AtomicU64,
    /// Pending ops, counted only when `config.max_pending` is set (then
    /// written by every push and completion: padded).
    pub(crate) pending: CachePadded<AtomicUsize>,
    /// The domain epoch this engine's state belongs to (I5).
    pub(crate) epoch: EpochCell,
    /// Set by prepare: 1 + the id of the op the forking thread is running.
    pub(crate) carried: AtomicU64,
    /// The workers' join handles, so shutdown returns only once every worker
    /// not running a body is gone (a raw fork that catches a std thread
    /// exiting can leave the child unable to start threads).
    pub(crate) exits: Exits,
    /// The optional op timeline.
    pub(crate) tracer: Tracer,
    /// Threads inside a completion's bookkeeping (model builds count them,
    /// for the fork-point check; production keeps nothing).
    pub(crate) completing: Tally,
}

/// A dependency engine over payload `P` (docs/DESIGN.md). Dropping it shuts it
/// down with a one-second deadline and leaves the fork domain.
///
/// ```
/// use forksafe_core::{BodyError, CompletionToken, Engine, ForkDomain, OpSpec, Payload};
/// struct Nop;
/// impl Payload for Nop {
///     fn run(self, _t: Option<CompletionToken<Self>>) -> Result<(), BodyError> { Ok(()) }
/// }
/// let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
/// let engine = Engine::<Nop>::new(domain, Default::default()).unwrap();
/// let v = engine.new_var().unwrap();
/// engine.push(OpSpec::new(Nop).writes(&[v.clone()])).unwrap();
/// engine.wait_for_var(&v).unwrap();
/// assert_eq!(engine.var_version(&v).unwrap(), 1);
/// ```
pub struct Engine<P: Payload> {
    pub(crate) shared: Arc<Shared<P>>,
}

impl<P: Payload> std::fmt::Debug for Engine<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("id", &self.shared.id)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

struct Member<P: Payload>(Arc<Shared<P>>);

impl<P: Payload> ForkMember for Member<P> {
    fn id(&self) -> u64 {
        self.0.id
    }
    fn prepare(&self) {
        self.0.prepare();
    }
    fn parent(&self) {
        self.0.parent();
    }
    fn handle(&self) -> Box<dyn ForkMember> {
        Box::new(Member(self.0.clone()))
    }
    fn state(&self) -> State {
        self.0.state()
    }
    fn quiesce(&self, timeout: Duration) -> Result<Box<dyn Send>> {
        let deadline = self.0.deadline(timeout)?;
        let guard = Shared::quiesce(&self.0, deadline)?;
        Ok(Box::new(guard))
    }
}

impl<P: Payload> Engine<P> {
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
            Shared::start_base_workers(&engine.shared)?;
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
        let lanes = Lane::ALL.map(|lane| {
            CachePadded::new(Mutex::ranked(
                LaneState::new(config.workers(lane), config.max_stand_ins),
                LockRank::Lane,
            ))
        });
        let ready = Lane::ALL.map(|lane| {
            // Nobody else can reach this engine yet: no fork copies it.
            let wanted = crate::sync::without_section(|| lanes[lane.index()].lock().pool.wanted());
            ReadyQueues::new(config.workers(lane), wanted)
        });
        let shared = Arc::new(Shared {
            id: domain.next_engine_id(),
            domain,
            gate: ForkGate::new(),
            clock: Clock::new(),
            bridge,
            config,
            lanes,
            ready,
            spin_hints: [SpinHint::new(), SpinHint::new()],
            control: ControlCell::new(),
            live: LiveIndex::new(),
            waiters: Waiters::new(),
            wait_graph: WaitGraph::new(),
            next_op: CachePadded::new(AtomicU64::new(1)),
            next_var: AtomicU64::new(1),
            pending: CachePadded::new(AtomicUsize::new(0)),
            epoch: EpochCell::new(domain.epoch()),
            carried: AtomicU64::new(0),
            exits: Exits::new(),
            tracer: Tracer::new(),
            completing: Tally::new(),
        });
        domain.register(Box::new(Member(shared.clone())))?;
        Ok(Engine { shared })
    }

    /// The engine's id, unique within its fork domain.
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// The lifecycle state.
    pub fn state(&self) -> State {
        self.shared.control.state()
    }

    /// A new var of this engine; [`Error::ShutDown`] once a shutdown began.
    pub fn new_var(&self) -> Result<Var<P>> {
        let _section = self.shared.enter()?;
        // No op could ever use it.
        if matches!(self.shared.state(), State::ShuttingDown | State::Stopped) {
            return Err(Error::ShutDown);
        }
        let id = self.shared.next_var.fetch_add(1, Ordering::Relaxed);
        Ok(Var {
            engine: self.shared.key(),
            state: Arc::new(VarState::new(id)),
        })
    }

    /// The var's version: how many writes of it have completed.
    pub fn var_version(&self, var: &Var<P>) -> Result<u64> {
        self.shared.check_var(var)?;
        let _section = self.shared.enter()?;
        let inner = var.state.inner.lock();
        Ok(inner.version)
    }

    /// The error the var is poisoned with, if any (I7).
    pub fn var_poison(&self, var: &Var<P>) -> Result<Option<OpError>> {
        self.shared.check_var(var)?;
        let _section = self.shared.enter()?;
        let inner = var.state.inner.lock();
        Ok(inner.poison.clone())
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
            .live
            .get(id)
            .is_some_and(|op| op.is(crate::op::OpStatus::Running)))
    }

    /// How many ops are accepted and not yet complete. It looks at each
    /// pending op's record (the engine keeps no pending count, which would
    /// be a write every completion shares): for diagnostics and tests, not
    /// for a per-op loop.
    pub fn pending(&self) -> Result<usize> {
        let _section = self.shared.enter()?;
        Ok(self.shared.live.len())
    }

    /// Turns the op timeline on or off. While on, every op body that runs
    /// adds one [`TraceEvent`]; off (the default), the cost is one relaxed
    /// load per body.
    pub fn set_tracing(&self, on: bool) -> Result<()> {
        let _section = self.shared.enter()?;
        self.shared.tracer.set(on);
        Ok(())
    }

    /// Takes the timeline events recorded so far, ordered by start time.
    pub fn take_trace(&self) -> Result<Vec<TraceEvent>> {
        let _section = self.shared.enter()?;
        Ok(self.shared.tracer.take())
    }

    /// The report of the last fork child settling, in a child process.
    pub fn fork_report(&self) -> Result<Option<ForkReport>> {
        let _section = self.shared.enter()?;
        let report = self.shared.control.lock().report.clone();
        Ok(report)
    }

    /// Model builds: worker threads of `lane` alive, spares included (the
    /// pool models check the stand-in cap with it).
    #[cfg(any(loom, shuttle))]
    pub fn worker_threads(&self, lane: Lane) -> usize {
        let _section = self.shared.enter();
        self.shared.lane(lane).lock().pool.threads()
    }

    /// Model builds: moves the clock on one tick and wakes every timed
    /// waiter, so a model fires deadlines as events.
    #[cfg(any(loom, shuttle))]
    pub fn advance_clock(&self) {
        self.shared.clock.advance();
        for t in self.shared.waiters.take_timed() {
            t.unpark();
        }
    }
}

impl<P: Payload> Drop for Engine<P> {
    fn drop(&mut self) {
        let _ = self.shutdown(Duration::from_secs(1));
        let _ = self.shared.domain.unregister(self.shared.id);
    }
}

impl<P: Payload> Shared<P> {
    /// Opens a bookkeeping section (I5, I6): settles the engine first in a
    /// fork child; waits out a fork window opened by another thread (bounded
    /// by the fork itself, which waits on nothing); refuses the forking
    /// thread with `ForkInProgress`.
    pub(crate) fn enter(&self) -> Result<Section<'_>> {
        let mut round = 0;
        loop {
            if !self.epoch.is(self.domain.epoch()) {
                self.settle_child();
            }
            if let Some(section) = self.gate.try_enter() {
                return Ok(section);
            }
            if self.domain.forking_here() {
                return Err(Error::ForkInProgress);
            }
            self.gate.wait_while(round, || {
                self.gate.is_closed() && self.epoch.is(self.domain.epoch())
            });
            round = round.saturating_add(1);
        }
    }

    /// Identifies the engine process-wide: its domain and its id there.
    pub(crate) fn key(&self) -> (usize, u64) {
        (self.domain.key(), self.id)
    }

    pub(crate) fn state(&self) -> State {
        self.control.state()
    }

    pub(crate) fn check_var(&self, var: &Var<P>) -> Result<()> {
        if var.engine != self.key() {
            return Err(Error::ForeignVar);
        }
        Ok(())
    }

    /// The op the calling thread runs, if it belongs to this engine.
    pub(crate) fn calling_op(&self) -> Option<u64> {
        crate::current::running_op()
            .filter(|r| r.engine == self.key())
            .map(|r| r.op)
    }

    pub(crate) fn lane(&self, lane: Lane) -> &Mutex<LaneState> {
        &self.lanes[lane.index()]
    }

    pub(crate) fn ready(&self, lane: Lane) -> &ReadyQueues<P> {
        &self.ready[lane.index()]
    }

    /// Blocks the calling thread, with the host lock released (H2), until
    /// unparked or `deadline`; called outside every section.
    pub(crate) fn park(&self, deadline: Option<crate::sync::Instant>) {
        let deadline = match (deadline, self.bridge_poll()) {
            (d, None) => d,
            (None, Some(step)) => Some(self.clock.deadline_after(step)),
            (Some(d), Some(step)) => Some(d.min(self.clock.deadline_after(step))),
        };
        crate::host::released(&*self.bridge, || {
            crate::sync::park_until(&self.clock, deadline)
        });
    }

    /// How often a wait wakes to poll the host for an interrupt.
    fn bridge_poll(&self) -> Option<Duration> {
        if MODEL_BUILD {
            None
        } else {
            self.bridge.interrupt_poll()
        }
    }
}
