//! What the calling thread is doing, as far as the engine cares: the op it
//! is running (so a wait from inside an op excludes that op and its
//! dependents), and whether it is the thread that is forking (so its calls
//! between prepare and parent/child get `ForkInProgress`, never a hang).
//!
//! # State
//!
//! Both are thread-locals of the calling thread, so only that thread moves
//! them:
//!
//! | what | move | who | serves |
//! |---|---|---|---|
//! | running op | outer → op → outer | a body's run ([`enter_op`]; the guard restores the outer op, so bodies nest) | waits inside ops see their caller; the bound rule |
//! | forking | none → (domain, epoch) → none | the domain's prepare, then its parent or child step | the forking thread's engine calls fail with `ForkInProgress` instead of waiting on its own fork |

use std::cell::Cell;

/// The op a thread is running: engine id and op id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunningOp {
    pub(crate) engine: (usize, u64),
    pub(crate) op: u64,
}

// loom's `thread_local!` takes no `const` initialiser; production's does.
#[cfg(not(any(loom, shuttle)))]
crate::sync::thread_local! {
    static RUNNING: Cell<Option<RunningOp>> = const { Cell::new(None) };
    /// `Some((domain, epoch))` while this thread is between a fork prepare
    /// and its parent/child step in that domain.
    static FORKING: Cell<Option<(usize, u64)>> = const { Cell::new(None) };
}

#[cfg(any(loom, shuttle))]
crate::sync::thread_local! {
    static RUNNING: Cell<Option<RunningOp>> = Cell::new(None);
    static FORKING: Cell<Option<(usize, u64)>> = Cell::new(None);
}

/// The op this thread is running, if any.
pub(crate) fn running_op() -> Option<RunningOp> {
    RUNNING.with(|c| c.get())
}

/// Marks the thread as running `op` until the returned guard drops; restores
/// the outer op, so a body that runs another engine's op inline nests.
pub(crate) fn enter_op(op: RunningOp) -> RunningGuard {
    let outer = RUNNING.with(|c| c.replace(Some(op)));
    RunningGuard { outer }
}

/// Restores the thread's previous running op on drop.
pub(crate) struct RunningGuard {
    outer: Option<RunningOp>,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        RUNNING.with(|c| c.set(self.outer));
    }
}

/// Records that this thread is forking in `domain` at `epoch`.
pub(crate) fn set_forking(domain: usize, epoch: u64) {
    FORKING.with(|c| c.set(Some((domain, epoch))));
}

/// Clears the forking mark (parent step).
pub(crate) fn clear_forking() {
    FORKING.with(|c| c.set(None));
}

/// Whether this thread is forking in `domain` at `epoch`: in the child the
/// epoch has moved on, so the stale mark no longer matches.
pub(crate) fn is_forking(domain: usize, epoch: u64) -> bool {
    FORKING.with(|c| c.get()) == Some((domain, epoch))
}
