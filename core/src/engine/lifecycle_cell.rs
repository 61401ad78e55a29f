//! The engine's lifecycle cell: where it is in its life, the quiesces held,
//! the errors waiting to be reported, the last fork report, and the threads
//! blocked in a bounded push. Off the per-op path: only lifecycle calls,
//! `wait_all`, failures and bounded pushes take its lock.
//!
//! # State
//!
//! The lifecycle [`State`] moves only through [`crate::lifecycle::next`]
//! (every edge in one table), applied here by [`LifecycleCell::apply`] under
//! the lifecycle lock, which also updates the lock-free mirror the per-op
//! path reads (a push refused after shutdown, I8).
//!
//! | event | who applies it | serves |
//! |---|---|---|
//! | `Quiesce`, `Drained` | a quiesce (`engine/quiesce.rs`), with the lanes paused under the same lock hold | I3 |
//! | `Resume`, `QuiesceTimeout` | a guard dropped, a missed deadline (`release_quiesce`) | I3: only its own hold |
//! | `Shutdown`, `Stopped` | `shutdown` (`engine/shutdown.rs`) | I8 |
//! | `ForkChild` | the child's settle (`engine/fork.rs`), on its only thread | I5 |
//!
//! `quiesces` counts the holds (nested quiesces); `errors` are the op
//! errors first raised since the last `wait_all` (I7); `push_waiters` are
//! woken when a place frees or the engine shuts down (the bound rule).

use crate::error::{Error, OpError};
use crate::lifecycle::{next, Event, State};
use crate::report::ForkReport;
use crate::sync::{AtomicUsize, LockRank, Mutex, MutexGuard, Ordering, Thread};

/// What the lifecycle lock guards. Guards I3, I7 and I8 (see the module's
/// `# State`).
pub(crate) struct LifecycleData {
    /// Moved only by [`LifecycleCell::apply`].
    state: State,
    quiesces: usize,
    /// Errors first raised since the previous `wait_all` (I7).
    errors: Vec<OpError>,
    report: Option<ForkReport>,
    /// Threads blocked in a bounded push.
    push_waiters: Vec<Thread>,
}

impl LifecycleData {
    /// The lifecycle state.
    pub(crate) fn state(&self) -> State {
        self.state
    }

    /// One more quiesce holds.
    pub(crate) fn hold_quiesce(&mut self) {
        self.quiesces += 1;
    }

    /// One quiesce hold ends: the holds left, or `None` if none was held.
    pub(crate) fn release_quiesce(&mut self) -> Option<usize> {
        self.quiesces = self.quiesces.checked_sub(1)?;
        Some(self.quiesces)
    }

    /// Every quiesce hold ends (shutdown).
    pub(crate) fn clear_quiesces(&mut self) {
        self.quiesces = 0;
    }

    /// Keeps an op's error for the next `wait_all` (I7).
    pub(crate) fn record_error(&mut self, error: OpError) {
        self.errors.push(error);
    }

    /// The errors kept since the previous `wait_all`, which `wait_all`
    /// reports once.
    pub(crate) fn take_errors(&mut self) -> Vec<OpError> {
        std::mem::take(&mut self.errors)
    }

    /// The report of the last fork child settling.
    pub(crate) fn report(&self) -> Option<&ForkReport> {
        self.report.as_ref()
    }

    /// Registers a thread blocked in a bounded push, woken when a place
    /// frees or the engine shuts down.
    pub(crate) fn add_push_waiter(&mut self, thread: Thread) {
        self.push_waiters.push(thread);
    }

    /// The threads blocked in a bounded push, to wake.
    pub(crate) fn take_push_waiters(&mut self) -> Vec<Thread> {
        std::mem::take(&mut self.push_waiters)
    }

    /// Model snapshots: the quiesce holds and the errors kept.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn copy(&self) -> (usize, Vec<OpError>) {
        (self.quiesces, self.errors.clone())
    }

    /// Model snapshots: a child model takes the copied holds and errors.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn restore_holds(&mut self, quiesces: usize, errors: Vec<OpError>) {
        self.quiesces = quiesces;
        self.errors = errors;
    }

    /// The fork child: no quiesce holds and no pusher waits there; the
    /// errors of the ops lost in the fork are kept for `wait_all`, beside
    /// the child's `report`.
    pub(crate) fn reset_in_child(&mut self, lost: Vec<OpError>, report: ForkReport) {
        self.quiesces = 0;
        self.errors.extend(lost);
        self.push_waiters.clear();
        self.report = Some(report);
    }
}

/// The lifecycle data behind its lock, with a lock-free mirror of the
/// lifecycle state for the per-op path.
pub(crate) struct LifecycleCell {
    ctl: Mutex<LifecycleData>,
    /// `ctl.state()`, readable without the lock.
    mirror: AtomicUsize,
}

impl LifecycleCell {
    /// A running engine's lifecycle cell.
    pub(crate) fn new() -> Self {
        LifecycleCell {
            ctl: Mutex::ranked(
                LifecycleData {
                    state: State::Running,
                    quiesces: 0,
                    errors: Vec::new(),
                    report: None,
                    push_waiters: Vec::new(),
                },
                LockRank::Lifecycle,
            ),
            mirror: AtomicUsize::new(State::Running.code()),
        }
    }

    /// Takes the lifecycle lock.
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, LifecycleData> {
        self.ctl.lock()
    }

    /// The lifecycle state, without the lock.
    #[inline]
    pub(crate) fn state(&self) -> State {
        State::from_code(self.mirror.load(Ordering::Acquire))
    }

    /// Moves the state by `event` (the lifecycle table); on an edge the
    /// table refuses, nothing changes and the error is returned.
    pub(crate) fn apply(&self, ctl: &mut LifecycleData, event: Event) -> Result<State, Error> {
        let state = next(ctl.state, event)?;
        ctl.state = state;
        self.mirror.store(state.code(), Ordering::Release);
        Ok(state)
    }

    /// Model builds: the lock itself, for the fork-point check.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn watched(&self) -> &dyn crate::sync::ForkWatched {
        &self.ctl
    }

    /// Model snapshots: a rebuilt child starts in the copied state.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn restore(&self, ctl: &mut LifecycleData, state: State) {
        ctl.state = state;
        self.mirror.store(state.code(), Ordering::Release);
    }
}
