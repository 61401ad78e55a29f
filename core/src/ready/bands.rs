//! Priority bands: one queue's ready ops, highest band first, FIFO within a
//! band, with a bound on how long a low band waits. Priority picks among
//! ready ops only, so it never reorders two ops of one var (I1).
//!
//! # State
//!
//! Under the owning queue's lock. `streak` counts the dispatches from a
//! higher band since a lower band last got one while it waited: it rises
//! with each such dispatch and falls to zero when the lowest waiting band
//! is served (at [`STARVATION_LIMIT`]) or no lower band waits.

use crate::op::OpCell;
use crate::sync::Arc;
use std::collections::VecDeque;

/// After this many consecutive dispatches from higher bands while a lower
/// band waits, one op of the lowest waiting band is dispatched: within one
/// queue, a low op waits at most `STARVATION_LIMIT` dispatches per band
/// above it.
pub const STARVATION_LIMIT: u32 = 8;

/// The ready ops of one queue, by priority band.
pub(crate) struct Bands<P> {
    bands: [VecDeque<Arc<OpCell<P>>>; 3],
    streak: u32,
}

impl<P> Bands<P> {
    pub(crate) fn new() -> Self {
        Bands {
            bands: [VecDeque::new(), VecDeque::new(), VecDeque::new()],
            streak: 0,
        }
    }

    pub(crate) fn push(&mut self, op: Arc<OpCell<P>>) {
        self.bands[op.priority.index()].push_back(op);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.bands.iter().all(|b| b.is_empty())
    }

    pub(crate) fn len(&self) -> usize {
        self.bands.iter().map(|b| b.len()).sum()
    }

    /// The next op: highest band first, FIFO within a band, with the
    /// starvation bound above.
    pub(crate) fn pop(&mut self) -> Option<Arc<OpCell<P>>> {
        let first = self.bands.iter().position(|b| !b.is_empty())?;
        let lowest = self.bands.iter().rposition(|b| !b.is_empty())?;
        let band = if lowest != first && self.streak >= STARVATION_LIMIT {
            lowest
        } else {
            first
        };
        self.streak = if band == lowest { 0 } else { self.streak + 1 };
        self.bands[band].pop_front()
    }

    /// Ids of the queued ops, band by band.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn ids(&self) -> Vec<u64> {
        self.bands.iter().flatten().map(|op| op.id()).collect()
    }

    /// Removes and returns every queued op (shutdown, fork child).
    pub(crate) fn drain(&mut self) -> Vec<Arc<OpCell<P>>> {
        self.bands.iter_mut().flat_map(|b| b.drain(..)).collect()
    }
}
