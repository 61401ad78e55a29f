//! The pending bound (`Config::max_pending`): how many ops are accepted
//! and not yet complete, counted only when the engine has a bound. The
//! pushers blocked for room wait in the lifecycle cell
//! (`engine/lifecycle_cell.rs`); the rule that a push from inside an op
//! never waits is admission's (`engine/admission.rs`).
//!
//! # State
//!
//! | move | who | serves |
//! |---|---|---|
//! | n → n + 1, only below the bound | a push that found room ([`PendingBound::try_reserve`], one compare-exchange) | at most `max_pending` ops accepted and not complete |
//! | n + 1 → n | the op's completion, or its push refused after the reserve ([`PendingBound::release`]) | the bound; the pushers waiting for room are woken by the caller |
//! | any → the live ops | the fork child's settle ([`PendingBound::reset_in_child`]) | the child's bound counts what it kept |

use crate::sync::{AtomicUsize, CachePadded, Ordering};

/// The count under the pending bound (see the module's `# State`).
pub(crate) struct PendingBound {
    /// `Config::max_pending`.
    max: Option<usize>,
    /// Pending ops, counted only under a bound (then written by every push
    /// and completion: padded).
    count: CachePadded<AtomicUsize>,
}

impl PendingBound {
    /// The bound `max` (`None`: unbounded, nothing counted).
    pub(crate) fn new(max: Option<usize>) -> Self {
        PendingBound {
            max,
            count: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    /// The bound, if the engine has one.
    pub(crate) fn max(&self) -> Option<usize> {
        self.max
    }

    /// Takes a place under the bound `max` if one is free.
    pub(crate) fn try_reserve(&self, max: usize) -> bool {
        loop {
            let now = self.count.load(Ordering::Acquire);
            if now >= max {
                return false;
            }
            if self
                .count
                .compare_exchange(now, now + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return true;
            }
        }
    }

    /// Whether a place is free under the bound `max`.
    pub(crate) fn has_room(&self, max: usize) -> bool {
        self.count.load(Ordering::Acquire) < max
    }

    /// Gives back a place a push took; true if the engine has a bound (then
    /// a blocked pusher may now find room).
    pub(crate) fn release(&self) -> bool {
        if self.max.is_none() {
            return false;
        }
        self.count.fetch_sub(1, Ordering::AcqRel);
        true
    }

    /// The fork child: the bound counts the `live` ops the child kept.
    pub(crate) fn reset_in_child(&self, live: usize) {
        self.count.store(live, Ordering::Release);
    }
}
