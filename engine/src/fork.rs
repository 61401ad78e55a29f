//! Drained fork: quiesce every live engine (host lock released through each
//! engine's bridge), bounded, then fork. Raw `fork()` by code that knows
//! nothing of forksafe works too: the `pthread_atfork` handlers keep every
//! engine consistent, and each settles at its first call in the child.

use crate::atfork::{ensure_registered, DOMAIN};
use crate::{default::default_engine_if_started, Config, Error, OpInfo, Result};
use nix::unistd::ForkResult;
use std::time::Duration;

/// What the drain before a fork achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainReport {
    /// How many engines were held quiesced across the fork.
    pub engines: usize,
    /// Engines (by id) whose running ops did not finish within the drain
    /// bound, with those ops: the child inherits them and completes them
    /// with `LostInFork`.
    pub timed_out: Vec<(u64, Vec<OpInfo>)>,
}

impl DrainReport {
    /// Whether every engine drained in time (no op was running at the fork).
    pub fn drained(&self) -> bool {
        self.timed_out.is_empty()
    }
}

/// Which side of a fork the caller is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forked {
    /// The parent: every engine goes on exactly as before.
    Parent {
        /// The child's process id (a `pid_t`: pass it to `waitpid`).
        child: i32,
        /// What the drain achieved.
        drain: DrainReport,
    },
    /// The child: a copy with one thread. Ops queued at the fork complete
    /// here with `LostInFork` without running (see
    /// [`CoreEngine::fork_report`](forksafe_core::CoreEngine::fork_report)); new pushes run normally. Leave with
    /// `_exit` (or exec) unless the child owns the process from now on.
    Child {
        /// What the drain achieved before the fork.
        drain: DrainReport,
    },
}

/// Forks after quiescing every live engine, bounded by the default
/// engine's [`Config::fork_drain`] (or the default config's, if the default
/// engine has not started). See [`fork_with`].
///
/// ```no_run
/// match forksafe::fork().unwrap() {
///     forksafe::Forked::Parent { child, .. } => {
///         nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child), None).unwrap();
///     }
///     forksafe::Forked::Child { .. } => {
///         // SAFETY: leaving the child without running the parent's exit hooks.
///         unsafe { libc::_exit(0) }
///     }
/// }
/// ```
pub fn fork() -> Result<Forked> {
    let drain = default_engine_if_started()
        .map(|e| e.config().fork_drain)
        .unwrap_or_else(|| Config::default().fork_drain);
    fork_with(drain)
}

/// Forks after quiescing every live engine within `drain`: each engine
/// stops dispatching and waits, with the host lock released through its
/// bridge, for its running ops (the op calling this excepted). If the bound
/// passes, it forks anyway and the report lists what was still running.
/// The host lock, if the caller holds it, is held again at the fork and
/// stays held by the calling thread in the child (as CPython's GIL does).
/// Dispatch resumes in the parent once the fork returns.
///
/// Errors: [`Error::ZeroTimeout`] for a zero bound; [`Error::ShutDown`] if
/// an engine is shutting down; [`Error::ForkInProgress`] from another
/// fork's handlers; [`Error::ForkFailed`] if the OS refuses the fork.
///
/// ```
/// use forksafe::Error;
/// assert_eq!(forksafe::fork_with(std::time::Duration::ZERO), Err(Error::ZeroTimeout));
/// ```
pub fn fork_with(drain: Duration) -> Result<Forked> {
    if drain.is_zero() {
        return Err(Error::ZeroTimeout);
    }
    ensure_registered()?;
    let held = DOMAIN.quiesce_all(drain)?;
    let report = DrainReport {
        engines: held.engines(),
        timed_out: held.timed_out().to_vec(),
    };
    // SAFETY: `fork` is sound to call; what the child may do afterwards is
    // the caller's contract (documented on `Forked::Child`): the engines
    // themselves are consistent there (the atfork handlers closed every
    // fork gate) and settle at their first call.
    let forked = unsafe { nix::unistd::fork() };
    // Parent: dispatch resumes. Child: the guards belong to the parent's
    // epoch and are inert.
    drop(held);
    match forked {
        Ok(ForkResult::Parent { child }) => Ok(Forked::Parent {
            child: child.as_raw(),
            drain: report,
        }),
        Ok(ForkResult::Child) => Ok(Forked::Child { drain: report }),
        Err(errno) => Err(Error::ForkFailed(errno.to_string())),
    }
}
