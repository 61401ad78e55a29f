//! The fork domain: the process-wide fork epoch and the registry of live
//! engines and fork participants (`participant.rs`), whose fork steps the
//! `pthread_atfork` handlers call. Production
//! has one, in a const-initialised static of the engine crate (so no `Once`
//! can be half-done at fork); each model run builds its own.
//!
//! # State
//!
//! | what | move | who | serves |
//! |---|---|---|---|
//! | `forking` | free → held → free | the forking thread: prepare takes it (another forker waits its turn), parent or the child's settle frees it | two forks never interleave their steps |
//! | registry gate | open → closed → open | prepare, after the participants' prepare steps; parent, or the child's settle | I5, I6: no registry change is copied half done |
//! | `epoch` | n → n + 1 | the child handler ([`ForkDomain::child`]), one atomic add | I5: every engine and `ForkLocal` of the child sees it and settles |
//! | `members`, `participants` | ± one | `register`/`unregister` and `join`/`leave`, each in a registry section | — |
//! | `prepared` | empty → the participants prepared → empty | prepare, then parent (only the thread holding `forking`) | P2: each prepared participant gets its parent step |
//! | `settled` | old epoch → current | the child's first registry call ([`EpochCell`]) | I5: the child's registry forgets the parent's fork in progress |

use crate::current;
use crate::epoch::EpochCell;
use crate::fork_gate::ForkGate;
use crate::participant::{BoundedStep, Joined};
use crate::sync::{spin_step, Arc, AtomicBool, AtomicU64, Clock, Mutex, Ordering};

/// One engine as the domain sees it.
pub(crate) trait ForkMember: Send + Sync {
    fn id(&self) -> u64;
    fn prepare(&self);
    fn parent(&self);
    /// A second handle on the same engine, for use outside the registry
    /// lock (see `drain.rs`).
    fn handle(&self) -> Box<dyn ForkMember>;
    /// The engine's lifecycle state.
    fn state(&self) -> crate::lifecycle::State;
    /// Takes a quiesce of the engine; the guard, type-erased.
    fn quiesce(&self, timeout: std::time::Duration) -> crate::Result<Box<dyn Send>>;
}

/// The process-wide fork state. Guards I5 and I6: [`ForkDomain::prepare`]
/// closes every engine's fork gate so the OS copies a consistent state;
/// [`ForkDomain::child`] does one atomic add, and each engine settles at
/// its first call in the child.
///
/// ```
/// use forksafe_core::ForkDomain;
/// let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
/// assert_eq!(domain.epoch(), 0);
/// domain.prepare();
/// domain.child(); // as the atfork child handler would
/// assert_eq!(domain.epoch(), 1);
/// ```
pub struct ForkDomain {
    epoch: AtomicU64,
    next_engine: AtomicU64,
    /// Closed from prepare to parent/child: registry changes wait (the
    /// forking thread gets `ForkInProgress`).
    gate: ForkGate,
    members: Mutex<Vec<Box<dyn ForkMember>>>,
    /// Joined fork participants, in joining order: changed inside a
    /// registry section, like `members`.
    participants: Mutex<Vec<Arc<Joined>>>,
    /// The participants whose prepare step ran for the fork in progress,
    /// for its parent step. Only the thread holding `forking` touches it.
    prepared: Mutex<Vec<Arc<Joined>>>,
    /// The participants' prepare deadlines.
    clock: Clock,
    /// The epoch the registry was settled in (I5).
    settled: EpochCell,
    /// Held from prepare to parent (and, in a child, until it settles):
    /// two threads forking at once take turns instead of interleaving their
    /// prepare and parent steps.
    forking: AtomicBool,
}

impl std::fmt::Debug for ForkDomain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForkDomain")
            .field("epoch", &self.epoch())
            .finish_non_exhaustive()
    }
}

impl Default for ForkDomain {
    fn default() -> Self {
        Self::new()
    }
}

impl ForkDomain {
    crate::sync::const_in_production! {
        /// An empty domain at epoch 0.
        pub fn new() -> Self {
            ForkDomain {
                epoch: AtomicU64::new(0),
                next_engine: AtomicU64::new(1),
                gate: ForkGate::new(),
                members: Mutex::new(Vec::new()),
                participants: Mutex::new(Vec::new()),
                prepared: Mutex::new(Vec::new()),
                clock: Clock::new(),
                settled: EpochCell::new(0),
                forking: AtomicBool::new(false),
            }
        }
    }

    /// The fork epoch: how many times this process (or its ancestors since
    /// the domain was made) forked into a child.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    pub(crate) fn key(&self) -> usize {
        self as *const ForkDomain as usize
    }

    pub(crate) fn next_engine_id(&self) -> u64 {
        self.next_engine.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether the calling thread is the one forking, between prepare and
    /// parent/child.
    pub(crate) fn forking_here(&self) -> bool {
        current::is_forking(self.key(), self.epoch())
    }

    /// The fork **prepare** step, for the atfork prepare handler. First
    /// each fork participant's prepare step runs, each bounded by its own
    /// bound (`participant.rs`). Then, with no draining (docs/DESIGN.md), it
    /// closes the registry's and every engine's fork gate, waiting only for
    /// bookkeeping sections already open, and records what is pending:
    /// bounded by the longest section; never waits for an op or for the
    /// host lock.
    pub fn prepare(&self) {
        // The registry settles first if this process is a child that has not
        // touched it yet, so a grandchild inherits a consistent registry.
        self.settle_if_child();
        let mut round = 0;
        while self
            .forking
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            spin_step(round);
            round = round.saturating_add(1);
        }
        // Participants first, with every gate open (they may use engines),
        // before this thread is marked as forking.
        let participants = self.participants.lock().clone();
        for p in &participants {
            p.prepare(&self.clock, self.epoch());
        }
        *self.prepared.lock() = participants;
        current::set_forking(self.key(), self.epoch());
        self.gate.close();
        let members = self.members.lock();
        for m in members.iter() {
            m.prepare();
        }
    }

    /// The fork **parent** step, for the atfork parent handler: every engine
    /// goes back to exactly its pre-fork state (I6).
    pub fn parent(&self) {
        {
            let members = self.members.lock();
            for m in members.iter() {
                m.parent();
            }
        }
        self.gate.open();
        current::clear_forking();
        // Participants last, in joining order, with every gate open; still
        // holding `forking`, so no other fork prepares meanwhile.
        let prepared = std::mem::take(&mut *self.prepared.lock());
        if !control!(SkipParticipantParent) {
            for p in &prepared {
                p.parent();
            }
        }
        drop(prepared);
        self.forking.store(false, Ordering::Release);
    }

    /// The fork **child** step, for the atfork child handler. Constant time
    /// and async-signal-safe: one atomic add, nothing else (I5). Every gate
    /// stays closed; each engine settles at its first call in the child.
    ///
    /// Calls made: `AtomicU64::fetch_add` (a single lock-free instruction).
    pub fn child(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// In a child whose registry has not settled: reopens the registry gate
    /// (only this thread and threads spawned in the child exist; none holds
    /// the registry lock).
    fn settle_if_child(&self) {
        self.settled.settle_once(
            || self.epoch(),
            |_| {
                // The parent's prepared list: no parent step runs in a
                // child. (Its records are the registry's too: dropping the
                // list only drops references.)
                drop(std::mem::take(&mut *self.prepared.lock()));
                self.gate.open();
                // The fork that made this child ended here.
                self.forking.store(false, Ordering::Release);
            },
        );
    }

    /// Runs `f` on the engine registry inside a registry section.
    fn with_members<R>(
        &self,
        f: impl FnOnce(&mut Vec<Box<dyn ForkMember>>) -> R,
    ) -> crate::Result<R> {
        self.in_section(|| f(&mut self.members.lock()))
    }

    /// Runs `f` inside a registry section.
    fn in_section<R>(&self, f: impl FnOnce() -> R) -> crate::Result<R> {
        let mut round = 0;
        loop {
            self.settle_if_child();
            if let Some(_section) = self.gate.try_enter() {
                return Ok(f());
            }
            if self.forking_here() {
                return Err(crate::Error::ForkInProgress);
            }
            self.gate.wait_while(round, || {
                self.gate.is_closed() && self.settled.is(self.epoch())
            });
            round = round.saturating_add(1);
        }
    }

    pub(crate) fn register(&self, member: Box<dyn ForkMember>) -> crate::Result<()> {
        self.with_members(|m| m.push(member))
    }

    pub(crate) fn unregister(&self, engine: u64) -> crate::Result<()> {
        let removed = self.with_members(|m| {
            m.iter()
                .position(|x| x.id() == engine)
                .map(|i| m.swap_remove(i))
        })?;
        // The member holds an engine reference: drop it outside the registry
        // lock (dropping an engine's last reference may drop payloads).
        drop(removed);
        Ok(())
    }

    /// Handles on every registered engine, taken inside a registry section
    /// and used outside it (`drain.rs`).
    pub(crate) fn member_handles(&self) -> crate::Result<Vec<Box<dyn ForkMember>>> {
        self.with_members(|m| m.iter().map(|x| x.handle()).collect())
    }

    pub(crate) fn add_participant(&self, joined: Arc<Joined>) -> crate::Result<()> {
        self.in_section(|| self.participants.lock().push(joined))
    }

    pub(crate) fn leave(&self, id: u64) -> crate::Result<()> {
        let removed = self.in_section(|| {
            let mut participants = self.participants.lock();
            participants
                .iter()
                .position(|x| x.id == id)
                .map(|i| participants.remove(i))
        })?;
        // Dropped outside the registry lock: the participant's own drop
        // may take its locks.
        drop(removed);
        Ok(())
    }

    /// Before a fork, from code that holds nothing (the host lock
    /// released): runs every participant's drain step
    /// ([`crate::ForkParticipant::drain`]), within `timeout` in all.
    /// Returns whether every step returned in time. Errors:
    /// [`crate::Error::ZeroTimeout`]; [`crate::Error::ForkInProgress`] from
    /// a fork's own steps.
    pub fn drain_participants(&self, timeout: std::time::Duration) -> crate::Result<bool> {
        self.run_participants(BoundedStep::Drain, timeout)
    }

    /// Before the process exits (an `atexit` hook, the host lock
    /// released): runs every participant's exit step
    /// ([`crate::ForkParticipant::at_exit`]), within `timeout` in all.
    /// Returns and errs as [`ForkDomain::drain_participants`].
    pub fn exit_participants(&self, timeout: std::time::Duration) -> crate::Result<bool> {
        self.run_participants(BoundedStep::AtExit, timeout)
    }

    fn run_participants(
        &self,
        step: BoundedStep,
        timeout: std::time::Duration,
    ) -> crate::Result<bool> {
        if timeout.is_zero() {
            return Err(crate::Error::ZeroTimeout);
        }
        let participants = self.in_section(|| self.participants.lock().clone())?;
        let deadline = self.clock.deadline_after(timeout);
        let mut all = true;
        for p in &participants {
            let left = self.clock.remaining(deadline);
            all &= !left.is_zero() && p.run(step, &self.clock, left);
        }
        Ok(all)
    }

    /// The number of fork participants joined.
    pub fn participants(&self) -> usize {
        self.in_section(|| self.participants.lock().len())
            .unwrap_or(0)
    }

    /// Model builds: moves the participants' clock on one tick, so a model
    /// fires a prepare deadline as an event.
    #[cfg(any(loom, shuttle))]
    pub fn advance_clock(&self) {
        self.clock.advance();
    }

    /// The number of live engines registered.
    pub fn engines(&self) -> usize {
        self.with_members(|m| m.len()).unwrap_or(0)
    }
}
