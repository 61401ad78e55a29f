//! One worker's ready queue: the ops queued on it, how many taken from it
//! are running, and whether it may hand ops out, under one lock
//! ([`crate::sync::LockRank::ReadyQueue`]). The count and the flags live
//! with the ops because I3 needs them under the same lock hold as a take:
//! an op moves from queued to counted as running in one critical section.
//! The completed records it keeps for a pusher to free are `retired.rs`'s.
//!
//! # State
//!
//! | what | move | who | serves |
//! |---|---|---|---|
//! | op | queued → taken, `running` + 1 | a worker's take, or a dispatch that starts an op at once ([`ReadyQueue::take`], [`ReadyQueue::start`], [`ReadyQueue::start_inline`]); refused while `paused` or `stopped` | I3: nothing starts while a quiesce holds |
//! | `running` | n + 1 → n | the completion of an op taken from here ([`ReadyQueue::finished`]); wakes the drain waiters | I3: a quiesce drains |
//! | `paused` | off ↔ on | a quiesce and its release, under the lane lock | I3 |
//! | `stopped` | off → on | shutdown, under the lane lock | I8 |
//! | drain waiters | ± a thread | a quiesce registers while it reads `running`; a completion takes them all | no lost wake-up |
//! | all | any → reset | the fork child's settle ([`ReadyQueue::reset_in_child`]) | I5 |

use super::bands::Bands;
use super::retired::Retired;
use crate::op::OpCell;
use crate::sync::{Arc, Thread};

/// What a worker found when it looked for an op.
pub(crate) enum Take<P> {
    /// An op, started and counted in the queue it came from.
    Op(Arc<OpCell<P>>),
    /// Nothing to take (or only ops cancelled while queued).
    Empty,
    /// A quiesce holds or the lane stopped: nothing may be taken.
    Held,
}

/// A ready queue of a lane, home to one of its workers (any worker may take
/// from it). Guards I3: an op leaves it for `running` only under its lock
/// and only while neither `paused` nor `stopped`, and `running` falls only
/// under the same lock, so a quiesce that reads every queue's `running`
/// after pausing every queue sees each op that can still run.
pub(crate) struct ReadyQueue<P> {
    ready: Bands<P>,
    /// Ops taken from this queue and not complete (async ops until their
    /// token). Counted here, not where they run: the op keeps the queue's
    /// index in its state word ([`OpCell::queue`]).
    running: usize,
    /// Of `running`, the ops their pushers run inline (docs/DESIGN.md
    /// "Running inline"): counted for a quiesce like any other, but not
    /// run by a worker of the pool.
    inline: usize,
    /// A quiesce holds: nothing is taken.
    paused: bool,
    /// The lane has stopped: nothing is taken any more.
    stopped: bool,
    /// Threads waiting for `running` to fall (quiesce).
    drain_waiters: Vec<Thread>,
    /// Completed compute op records for a pusher to free (`retired.rs`).
    retired: Retired<P>,
}

impl<P> ReadyQueue<P> {
    pub(crate) fn new() -> Self {
        ReadyQueue {
            ready: Bands::new(),
            running: 0,
            inline: 0,
            paused: false,
            stopped: false,
            drain_waiters: Vec::new(),
            retired: Retired::new(),
        }
    }

    /// Keeps the completed op records in `ops` for a pusher to free (see
    /// [`Retired::keep`]).
    pub(crate) fn retire(&mut self, ops: &mut Vec<Arc<OpCell<P>>>) {
        self.retired.keep(ops);
    }

    /// A pusher takes the records to free, once there are a batch's worth.
    pub(crate) fn take_retired(&mut self, out: &mut Vec<Arc<OpCell<P>>>) {
        self.retired.take(out);
    }

    /// Nothing may be taken: a quiesce holds or the lane has stopped.
    pub(crate) fn held(&self) -> bool {
        self.paused || self.stopped
    }

    pub(crate) fn push(&mut self, op: Arc<OpCell<P>>) {
        self.ready.push(op);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.ready.len()
    }

    /// Starts `op` as taken from queue `index` by a worker, unless it was
    /// cancelled while queued: marked running and counted under this
    /// queue's lock (I3).
    pub(crate) fn start(&mut self, op: &OpCell<P>, index: usize) -> bool {
        self.start_as(op, index, false)
    }

    /// Starts `op`, ready and never queued, for its pusher to run inline,
    /// if this queue (index `index`) is not held and already holds at least
    /// `from` queued ops; counted under this queue's lock like a worker's
    /// take (I3).
    pub(crate) fn start_inline(&mut self, op: &OpCell<P>, index: usize, from: usize) -> bool {
        let held = self.held() && !control!(InlineIgnoresPause);
        !held && self.ready.len() >= from && self.start_as(op, index, true)
    }

    /// Moves `op` to running, taken from queue `index` (by its pusher if
    /// `inline`), and counts it here in the same lock hold (I3); false if
    /// it was cancelled while queued.
    fn start_as(&mut self, op: &OpCell<P>, index: usize, inline: bool) -> bool {
        if !op.try_start(index, inline) {
            return false;
        }
        self.running += 1;
        self.inline += usize::from(inline);
        true
    }

    /// The next op to run from this queue (index `index`), unless the queue
    /// is held; ops cancelled while queued are dropped on the way.
    pub(crate) fn take(&mut self, index: usize) -> Take<P> {
        if self.held() {
            return Take::Held;
        }
        while let Some(op) = self.ready.pop() {
            if self.start(&op, index) {
                return Take::Op(op);
            }
        }
        Take::Empty
    }

    /// One op of the queue completed (`inline`: run by its pusher): wakes
    /// the quiesces waiting for it.
    pub(crate) fn finished(&mut self, inline: bool, wake: &mut Vec<Thread>) {
        self.running -= 1;
        self.inline -= usize::from(inline);
        wake.append(&mut self.drain_waiters);
    }

    /// Model snapshots: the queued ops' ids, then `running`, `inline`,
    /// `paused` and `stopped`.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn copy(&self) -> (Vec<u64>, usize, usize, bool, bool) {
        let ids = self.ready.ids();
        (ids, self.running, self.inline, self.paused, self.stopped)
    }

    /// Model snapshots: a child model's queue takes the copied counts and
    /// flags (its queued ops are pushed again).
    #[cfg(any(loom, shuttle))]
    pub(crate) fn restore(&mut self, running: usize, inline: usize, paused: bool, stopped: bool) {
        (self.running, self.inline, self.paused, self.stopped) = (running, inline, paused, stopped);
    }

    /// Removes and returns every queued op (shutdown, fork child).
    pub(crate) fn drain(&mut self) -> Vec<Arc<OpCell<P>>> {
        self.ready.drain()
    }

    /// Ops taken from this queue by the lane's workers and not complete
    /// (those their pushers run inline left out).
    pub(crate) fn running_on_workers(&self) -> usize {
        self.running - self.inline
    }

    /// A quiesce pauses the queue or resumes it (under the lane lock).
    pub(crate) fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
    }

    /// Shutdown stops the queue for good (under the lane lock).
    pub(crate) fn stop(&mut self) {
        self.stopped = true;
    }

    /// How many ops taken from this queue are running; if any, `me` is
    /// registered to be woken when one completes (a quiesce's drain wait).
    pub(crate) fn running_or_register(&mut self, me: &Thread) -> usize {
        if self.running > 0 {
            self.drain_waiters.push(me.clone());
        }
        self.running
    }

    /// The fork child: emptied and unheld (stopped if the lane is), nothing
    /// running but the carried op if it was taken from here (`carried`:
    /// whether its forking thread runs it inline). The inherited queued ops
    /// and records are leaked, never dropped.
    pub(crate) fn reset_in_child(&mut self, carried: Option<bool>, stopped: bool) {
        drop(self.drain());
        self.retired.leak();
        self.running = usize::from(carried.is_some());
        self.inline = usize::from(carried == Some(true));
        self.paused = false;
        self.stopped = stopped;
        self.drain_waiters.clear();
    }
}
