//! Per-lane ready queues with priority bands, and the lane's state beside
//! them: its worker pool ([`Pool`]), what is running, and the quiesce and
//! shutdown flags. All of it lives under the lane's lock
//! ([`crate::sync::LockRank::Lane`]), taken inside a fork-gate section.
//!
//! # State
//!
//! A ready op (every var granted) is *queued* in its priority band, then
//! *dispatched*: popped by a worker, counted in `running` until it
//! completes (I2, I3).
//!
//! | what | from | to | who | serves |
//! |---|---|---|---|---|
//! | op | — | queued | the grant that made it ready: its pusher or the completion that released its last var (`engine/worker.rs`, `dispatch`) | I1: only granted ops queue |
//! | op | queued | dispatched | a worker, unless `paused` or `stopped` (`next_ready`) | I3: nothing starts while a quiesce holds |
//! | op | dispatched | — | its completion (`running` falls; drain waiters woken) | I3: a quiesce drains |
//! | op | queued | — | shutdown's cancel sweep or the fork child's settle ([`LaneState::drain`]) | I8, I5 |
//! | lane | dispatching | paused | a quiesce, under the control lock (`engine/quiesce.rs`) | I3 |
//! | lane | paused | dispatching | the last quiesce released, a shutdown, or the fork child | I3, I8 |
//! | lane | any | stopped | shutdown, once the deadline passed (`engine/shutdown.rs`); never left but by a fork child of a running engine | I8 |
//!
//! `in_bridge` counts host workers inside or entering the host bridge;
//! shutdown waits for it to reach zero before it returns (I8: no host call
//! after shutdown). Priority picks among ready ops only, so it never
//! reorders two ops of one var (I1); [`STARVATION_LIMIT`] bounds how long
//! a low band waits.

use crate::op::OpCell;
use crate::pool::Pool;
use crate::sync::{Arc, Thread};
use std::collections::VecDeque;

/// After this many consecutive dispatches from higher bands while a lower
/// band waits, one op of the lowest waiting band is dispatched: a low op
/// waits at most `STARVATION_LIMIT` dispatches per band above it.
pub const STARVATION_LIMIT: u32 = 8;

/// One lane's ready ops and workers. Lives under the lane's lock. Guards I3
/// (`paused`, `running`) and I8 (`stopped`, `in_bridge`); its `pool` keeps
/// the sizing rule (see [`crate::pool`]).
pub(crate) struct LaneState<P> {
    bands: [VecDeque<Arc<OpCell<P>>>; 3],
    streak: u32,
    /// The lane's worker threads.
    pub(crate) pool: Pool,
    /// Ops dispatched and not complete (async ops until their token).
    pub(crate) running: usize,
    /// A quiesce holds: no op is popped.
    pub(crate) paused: bool,
    /// Shutdown finished: workers exit and nobody enters the host bridge.
    pub(crate) stopped: bool,
    /// Host workers inside or entering the host bridge.
    pub(crate) in_bridge: usize,
    /// Threads waiting for `running` or `in_bridge` to fall (quiesce,
    /// shutdown).
    pub(crate) drain_waiters: Vec<Thread>,
}

impl<P> LaneState<P> {
    /// An empty lane of `workers` workers, with at most `max_stand_ins`
    /// blocked waits inside ops at once.
    pub(crate) fn new(workers: usize, max_stand_ins: usize) -> Self {
        LaneState {
            bands: [VecDeque::new(), VecDeque::new(), VecDeque::new()],
            streak: 0,
            pool: Pool::new(workers, max_stand_ins),
            running: 0,
            paused: false,
            stopped: false,
            in_bridge: 0,
            drain_waiters: Vec::new(),
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
        self.bands.iter().flatten().map(|op| op.id).collect()
    }

    /// Removes and returns every queued op (shutdown, fork child).
    pub(crate) fn drain(&mut self) -> Vec<Arc<OpCell<P>>> {
        self.bands.iter_mut().flat_map(|b| b.drain(..)).collect()
    }
}
