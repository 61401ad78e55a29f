//! The op the forking thread runs, remembered across a fork: prepare
//! records it, the parent forgets it, and the child's settle takes it, so
//! that op goes on in the child while every other inherited op is lost
//! (docs/DESIGN.md, "Forking inside an op").
//!
//! # State
//!
//! | move | who | serves |
//! |---|---|---|
//! | none → op | prepare, on the forking thread ([`CarriedOp::remember`]) | I5: the carried op completes normally in the child |
//! | op → none | parent ([`CarriedOp::forget`]) | I6: the parent is as before |
//! | op → none, returned | the child's settle ([`CarriedOp::take`]) | I5 |

use crate::sync::{AtomicU64, Ordering};

/// The op the forking thread is running, remembered by prepare for the
/// child's settle (see the module's `# State`): 0 for none, else 1 + its
/// id.
pub(crate) struct CarriedOp(AtomicU64);

impl CarriedOp {
    pub(crate) fn new() -> Self {
        CarriedOp(AtomicU64::new(0))
    }

    /// Prepare: the forking thread runs op `op`, if any.
    pub(crate) fn remember(&self, op: Option<u64>) {
        self.0.store(op.map_or(0, |id| id + 1), Ordering::Release);
    }

    /// Parent: no op is carried.
    pub(crate) fn forget(&self) {
        self.0.store(0, Ordering::Release);
    }

    /// The child's settle: the carried op, if any, forgotten at once.
    pub(crate) fn take(&self) -> Option<u64> {
        self.0.swap(0, Ordering::AcqRel).checked_sub(1)
    }

    /// Model snapshots: the raw word, to copy into a child model.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn word(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Model snapshots: a rebuilt child starts with the copied word.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn restore(&self, word: u64) {
        self.0.store(word, Ordering::Release);
    }
}
