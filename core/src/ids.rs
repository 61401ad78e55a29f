//! An engine's sequence numbers: op ids and var ids.
//!
//! # State
//!
//! | what | move | who | serves |
//! |---|---|---|---|
//! | next op id | n → n + 1 | a push, holding every var lock of its op ([`Ids::next_op_id`]) | I1: ids follow the order of appends on every var, so "pushed before" is "id below"; read under a var's lock, [`Ids::next_op_bound`] bounds exactly the ops already on its queue |
//! | next var id | n → n + 1 | `new_var` ([`Ids::next_var_id`]) | var ids order a push's var locks |
//!
//! Neither moves back, not even in a fork child: the child's ops and vars
//! go on from the parent's numbers.

use crate::sync::{AtomicU64, CachePadded, Ordering};

/// The engine's op and var sequence numbers (see the module's `# State`).
pub(crate) struct Ids {
    /// Padded: written by every push, so it shares no line with what
    /// workers read per op (the lifecycle state, the epoch).
    next_op: CachePadded<AtomicU64>,
    next_var: AtomicU64,
}

impl Ids {
    /// Ids from 1 (0 means "none" where an id is optional).
    pub(crate) fn new() -> Self {
        Ids {
            next_op: CachePadded::new(AtomicU64::new(1)),
            next_var: AtomicU64::new(1),
        }
    }

    /// The id of the op being pushed; taken while its var locks are held.
    pub(crate) fn next_op_id(&self) -> u64 {
        self.next_op.fetch_add(1, Ordering::Relaxed)
    }

    /// The id the next push gets: every op below it was pushed before.
    pub(crate) fn next_op_bound(&self) -> u64 {
        self.next_op.load(Ordering::Acquire)
    }

    /// The id of a new var.
    pub(crate) fn next_var_id(&self) -> u64 {
        self.next_var.fetch_add(1, Ordering::Relaxed)
    }

    /// Model snapshots: the numbers, to copy into a child model.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn copy(&self) -> (u64, u64) {
        (
            self.next_op.load(Ordering::Acquire),
            self.next_var.load(Ordering::Acquire),
        )
    }

    /// Model snapshots: a rebuilt child starts with the copied numbers.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn restore(&self, next_op: u64, next_var: u64) {
        self.next_op.store(next_op, Ordering::Release);
        self.next_var.store(next_var, Ordering::Release);
    }
}
