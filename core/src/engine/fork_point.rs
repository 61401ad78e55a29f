//! Model builds only: the fork-point check (docs/DESIGN.md, "The fork
//! point"). At the instant a model forks (prepare returned: the gate is
//! closed and no section is open), no thread may hold an engine lock and
//! none may be inside a completion: the OS would copy the lock held, with
//! no thread in the child to release it, and the completion half done.
//! The gate is what makes this true (I5, I6): every engine lock is taken
//! only inside a section, and a completion's bookkeeping is one section.
//!
//! [`fork_point`] reads both through the facade's fork watch
//! (`sync/fork_watch.rs`), which adds no scheduling point, so the check
//! observes the instant without changing what the model explores. The
//! snapshot keeps what it saw, and a child model built from it starts with
//! those locks held by nobody it has (`ForkWatched::inherit_held`), as the
//! real child would.
//!
//! # State
//!
//! None: the check reads, at one instant, the locks the fork watch says are
//! held and the threads inside a completion (`Shared::completing`), and
//! moves nothing.

use super::{Payload, Shared};
use crate::op_info::Lane;
use crate::spec::Var;
use crate::sync::ForkWatched;
use std::fmt;

/// A production engine lock, named so a child model can find its copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineLock {
    /// The lifecycle cell's lock.
    Lifecycle,
    /// A lane's lock.
    Lane(Lane),
    /// The lock of a lane's ready queue.
    ReadyQueue(Lane, usize),
    /// Shard `n` of the live index.
    LiveShard(usize),
    /// The `wait_all` waiters' lock.
    AllWaiters,
    /// The lock of the var with this id.
    Var(u64),
}

/// What a model saw at its fork point.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ForkPoint {
    /// Engine locks some thread held.
    pub held: Vec<EngineLock>,
    /// Threads inside a completion's bookkeeping.
    pub completing: usize,
}

impl ForkPoint {
    /// Whether a real child forked here would start consistent: no lock
    /// held, no completion half done.
    pub fn is_clean(&self) -> bool {
        self.held.is_empty() && self.completing == 0
    }
}

impl fmt::Display for ForkPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "locks held by other threads: {:?}; threads inside a completion: {}",
            self.held, self.completing
        )
    }
}

/// Every production engine lock a fork copies, with its name: the
/// engine's own and those of `vars`. (Not the op recorder's: model
/// builds never trace, so no model takes it.)
pub(crate) fn each_lock<P: Payload>(
    shared: &Shared<P>,
    vars: &[Var<P>],
    mut f: impl FnMut(EngineLock, &dyn ForkWatched),
) {
    f(EngineLock::Lifecycle, shared.lifecycle().watched());
    for lane in Lane::ALL {
        f(EngineLock::Lane(lane), shared.lane(lane));
        for (n, queue) in shared.ready(lane).watched().enumerate() {
            f(EngineLock::ReadyQueue(lane, n), queue);
        }
    }
    for (n, shard) in shared.live().watched().enumerate() {
        f(EngineLock::LiveShard(n), shard);
    }
    f(EngineLock::AllWaiters, shared.waiters().watched());
    for v in vars {
        f(EngineLock::Var(v.id()), v.state().watched());
    }
}

/// What a fork would copy now: the locks held and the completions in
/// progress. Takes no lock.
pub(crate) fn fork_point<P: Payload>(shared: &Shared<P>, vars: &[Var<P>]) -> ForkPoint {
    let mut held = Vec::new();
    each_lock(shared, vars, |name, lock| {
        if lock.held_at_fork() {
            held.push(name);
        }
    });
    ForkPoint {
        held,
        completing: shared.completing().inside(),
    }
}
