//! The engine's control state: where it is in its life, the quiesces held,
//! the errors waiting to be reported, the last fork report, and the threads
//! blocked in a bounded push. Off the per-op path: only lifecycle calls,
//! `wait_all`, failures and bounded pushes take its lock.
//!
//! # State
//!
//! The lifecycle [`State`] moves only through [`crate::lifecycle::next`]
//! (every edge in one table), applied here by [`ControlCell::apply`] under
//! the control lock, which also updates the lock-free mirror the per-op
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
//! woken when a slot frees or the engine shuts down (the bound rule).

use super::fork::ForkReport;
use crate::error::{Error, OpError};
use crate::lifecycle::{next, Event, State};
use crate::sync::{AtomicUsize, LockRank, Mutex, MutexGuard, Ordering, Thread};

/// What the control lock guards. Guards I3, I7 and I8 (see the module's
/// `# State`).
pub(crate) struct Control {
    /// Moved only by [`ControlCell::apply`].
    state: State,
    pub(crate) quiesces: usize,
    /// Errors first raised since the previous `wait_all` (I7).
    pub(crate) errors: Vec<OpError>,
    pub(crate) report: Option<ForkReport>,
    /// Threads blocked in a bounded push.
    pub(crate) push_waiters: Vec<Thread>,
}

impl Control {
    /// The lifecycle state.
    pub(crate) fn state(&self) -> State {
        self.state
    }
}

/// The control state behind its lock, with a lock-free mirror of the
/// lifecycle state for the per-op path.
pub(crate) struct ControlCell {
    ctl: Mutex<Control>,
    /// `ctl.state()`, readable without the lock.
    mirror: AtomicUsize,
}

impl ControlCell {
    /// A running engine's control state.
    pub(crate) fn new() -> Self {
        ControlCell {
            ctl: Mutex::ranked(
                Control {
                    state: State::Running,
                    quiesces: 0,
                    errors: Vec::new(),
                    report: None,
                    push_waiters: Vec::new(),
                },
                LockRank::Control,
            ),
            mirror: AtomicUsize::new(State::Running.code()),
        }
    }

    /// Takes the control lock.
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, Control> {
        self.ctl.lock()
    }

    /// The lifecycle state, without the lock.
    #[inline]
    pub(crate) fn state(&self) -> State {
        State::from_code(self.mirror.load(Ordering::Acquire))
    }

    /// Moves the state by `event` (the lifecycle table); on an edge the
    /// table refuses, nothing changes and the error is returned.
    pub(crate) fn apply(&self, ctl: &mut Control, event: Event) -> Result<State, Error> {
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
    pub(crate) fn restore(&self, ctl: &mut Control, state: State) {
        ctl.state = state;
        self.mirror.store(state.code(), Ordering::Release);
    }
}
