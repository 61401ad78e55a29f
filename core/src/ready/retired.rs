//! The completed op records a ready queue keeps for a pusher to free. An op
//! record is allocated by its pusher; freed on that thread, its memory goes
//! back to that thread's allocator cache instead of crossing threads on
//! every op (BENCHMARKS.md has the measurement). Compute workers hand their
//! completed records to their home queue in batches, and the next pusher to
//! queue there takes a batch and frees it on its own thread, outside its
//! section (H1: a record may still hold a payload, whose drop is host code
//! only on the host lane, whose records workers free themselves).
//!
//! # State
//!
//! | what | move | who | serves |
//! |---|---|---|---|
//! | records | a worker's batch → kept | a compute worker, [`RETIRED_BATCH`] at a time, under its home queue's lock, unless [`RETIRED_MAX`] are kept already (then the worker frees them) | memory stays flat |
//! | records | kept → a pusher's | the next pusher queueing there, once a batch is kept ([`Retired::take`]) | freed where allocated |
//! | records | kept → leaked | the fork child's settle ([`Retired::leak`]) | I5: a record whose body the gate refused still holds its payload, and a child drops no inherited payload |

use crate::op::OpCell;
use crate::sync::{Arc, MODEL_BUILD};

/// Most op records a queue keeps for a pusher to free; past it workers free
/// their own. Model builds keep two, so a model of a few ops reaches the
/// full list too.
pub(crate) const RETIRED_MAX: usize = if MODEL_BUILD { 2 } else { 256 };

/// Records a worker collects before it hands them to its home queue, and
/// that a queue collects before a pusher takes them. One in model builds:
/// every completion of a model's compute op goes through the hand-back.
pub(crate) const RETIRED_BATCH: usize = if MODEL_BUILD { 1 } else { 32 };

/// The records one ready queue keeps (see the module's `# State`).
pub(crate) struct Retired<P> {
    records: Vec<Arc<OpCell<P>>>,
}

impl<P> Retired<P> {
    pub(crate) fn new() -> Self {
        Retired {
            records: Vec::new(),
        }
    }

    /// Keeps the records in `ops` (all of them, or none if enough are kept
    /// already: those stay in `ops`, for the worker to free).
    pub(crate) fn keep(&mut self, ops: &mut Vec<Arc<OpCell<P>>>) {
        if self.records.len() < RETIRED_MAX {
            self.records.append(ops);
        }
    }

    /// Moves the kept records to `out` once there are a batch's worth.
    pub(crate) fn take(&mut self, out: &mut Vec<Arc<OpCell<P>>>) {
        if self.records.len() >= RETIRED_BATCH {
            std::mem::swap(&mut self.records, out);
        }
    }

    /// The fork child: the inherited records are leaked, never dropped.
    pub(crate) fn leak(&mut self) {
        std::mem::forget(std::mem::take(&mut self.records));
    }
}
