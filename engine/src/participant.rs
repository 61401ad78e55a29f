//! Fork participants: how a component that is not an engine — a thread
//! pool, a cache, a connection — takes part in the process's fork protocol
//! next to the engines (design note: docs/PARTICIPANTS.md).
//!
//! - [`join_fork`] registers a [`ForkParticipant`]: its prepare step runs
//!   in the `pthread_atfork` prepare handler before any engine's fork gate
//!   closes, bounded by the bound given; its parent step runs after the
//!   fork in the parent. A step that panics is caught; a prepare that
//!   returns past its bound is marked. The fork goes ahead either way.
//! - There is no child step: in the child, rebuild at first use. A
//!   [`ForkLocal`] holds a value per fork epoch (the child builds its own,
//!   the parent's is never dropped there); [`Participation::inherited`]
//!   says whether the copied state was prepared, for a participant that
//!   can go on from it.
//! - A [`WorkGate`] counts long-running work, so a prepare step can hold
//!   new work and wait, bounded, for the work in flight.

use crate::atfork::{ensure_registered, DOMAIN};
use crate::Result;
use std::time::Duration;

pub use forksafe_core::{
    ForkParticipant, Inherited, Participation, PrepareDeadline, PrepareFailure, WorkGate, WorkPass,
};

/// Adds `participant` to every fork of this process from now on (see the
/// module docs), registering the `pthread_atfork` handlers if no engine
/// has yet. It takes part until the returned [`Participation`] drops.
///
/// Errors: [`crate::Error::ZeroTimeout`] for a zero bound;
/// [`crate::Error::ForkHandlers`] if the handlers cannot be registered;
/// [`crate::Error::ForkInProgress`] from a fork's own steps.
///
/// ```
/// use forksafe::{ForkParticipant, Inherited, PrepareDeadline};
/// use std::time::Duration;
///
/// struct Cache;
/// impl ForkParticipant for Cache {
///     fn name(&self) -> &str { "cache" }
///     fn prepare(&self, _deadline: &PrepareDeadline<'_>) { /* flush, hold writers */ }
///     fn parent(&self) { /* let writers go */ }
/// }
///
/// let p = forksafe::join_fork(Box::new(Cache), Duration::from_millis(200)).unwrap();
/// assert_eq!(p.inherited(), Inherited::Fresh);
/// ```
pub fn join_fork(participant: Box<dyn ForkParticipant>, bound: Duration) -> Result<Participation> {
    ensure_registered()?;
    DOMAIN.join(participant, bound)
}

/// Before a fork, from code that holds nothing (no host lock): waits,
/// within `timeout` in all, for every participant's work in flight to end
/// ([`ForkParticipant::drain`]), so the prepare steps in the
/// `pthread_atfork` handler, which run with whatever locks the forking
/// thread holds, find little to wait for. Returns whether every
/// participant drained in time. A Python extension's `os.register_at_fork`
/// before-hook calls this with the GIL released (`forksafe-pyo3`).
///
/// Errors: [`crate::Error::ZeroTimeout`]; [`crate::Error::ForkInProgress`]
/// from a fork's own steps.
///
/// ```
/// assert_eq!(forksafe::drain_participants(std::time::Duration::from_millis(10)), Ok(true));
/// ```
pub fn drain_participants(timeout: Duration) -> Result<bool> {
    DOMAIN.drain_participants(timeout)
}

/// When the process is about to exit (an `atexit` hook, no host lock
/// held): every participant holds new work for good and waits, within
/// `timeout` in all, for its work in flight ([`ForkParticipant::at_exit`]),
/// so no thread returns into a host that has finalised. Returns whether
/// every participant finished in time. `forksafe-pyo3`'s exit hook calls
/// this with the GIL released.
///
/// Errors: as [`drain_participants`].
pub fn exit_participants(timeout: Duration) -> Result<bool> {
    DOMAIN.exit_participants(timeout)
}

/// A value per fork epoch of this process: built by the first use in each
/// process, never used in a fork child (which builds its own), never
/// dropped there either. For state a fork cannot carry: a thread pool, a
/// connection.
///
/// ```
/// let pool_id = forksafe::ForkLocal::new();
/// let id = *pool_id.get_or_try_init(|| Ok::<_, ()>(std::process::id())).unwrap();
/// assert_eq!(id, std::process::id());
/// ```
#[derive(Debug)]
pub struct ForkLocal<T>(forksafe_core::ForkLocal<T>);

impl<T> Default for ForkLocal<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> ForkLocal<T> {
    /// An empty cell.
    pub fn new() -> Self {
        ForkLocal(forksafe_core::ForkLocal::new(&DOMAIN))
    }

    /// This process's value, if built here.
    pub fn get(&self) -> Option<&T> {
        self.0.get()
    }

    /// This process's value, built by `init` if not built here yet (see
    /// [`forksafe_core::ForkLocal::get_or_try_init`]).
    pub fn get_or_try_init<E>(
        &self,
        init: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<&T, E> {
        self.0.get_or_try_init(init)
    }
}

/// A value of each process's own whose long uses pass a work gate: the
/// shape of a thread pool or an async runtime joined to the fork protocol
/// (`forksafe-tokio`'s runtime). Its steps go in a [`ForkParticipant`]:
/// `prepare` and `parent` in the participant's, `drain` and
/// `close_for_exit` in its `drain` and `at_exit`. See
/// [`forksafe_core::GatedLocal`].
///
/// ```
/// let local: forksafe::GatedLocal<Vec<u32>> = forksafe::GatedLocal::new();
/// let n = local.with(|| Ok::<_, ()>(vec![1, 2, 3]), |v| v.len()).unwrap();
/// assert_eq!(n, 3);
/// ```
#[derive(Debug)]
pub struct GatedLocal<T>(forksafe_core::GatedLocal<T>);

impl<T> Default for GatedLocal<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> std::ops::Deref for GatedLocal<T> {
    type Target = forksafe_core::GatedLocal<T>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<T> GatedLocal<T> {
    /// An empty cell of this process lineage's fork epochs.
    pub fn new() -> Self {
        GatedLocal(forksafe_core::GatedLocal::new(&DOMAIN))
    }
}
