//! What the engine reports about a fork child's settle and a shutdown:
//! plain data, returned to callers ([`crate::CoreEngine::fork_report`],
//! [`crate::CoreEngine::shutdown`]).

use crate::op_info::OpInfo;

/// What a fork child inherited from its parent's engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkReport {
    /// The child's fork epoch.
    pub epoch: u64,
    /// Ops pending at the fork, completed in the child with
    /// [`crate::OpErrorKind::LostInFork`] on the vars they write, without running.
    pub lost: Vec<OpInfo>,
    /// Deletions of vars that were pending at the fork and were carried out.
    pub deletions: usize,
    /// The op whose body forked: it goes on in the child and completes
    /// normally.
    pub carried: Option<OpInfo>,
}

/// What a shutdown did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Ops still queued at the deadline, completed with
    /// [`crate::OpErrorKind::Cancelled`].
    pub cancelled: Vec<OpInfo>,
    /// Ops still running when shutdown returned (compute bodies cannot be
    /// stopped; they complete normally later, and call no host code).
    pub still_running: Vec<OpInfo>,
}
