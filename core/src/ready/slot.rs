//! One worker's ready queue: the ops queued on it, how many of them are
//! running, and whether it may hand ops out. Lives under its own lock
//! ([`crate::sync::LockRank::Slot`]); see the lane module's `# State` and
//! `README.md` for who moves what.

use super::bands::Bands;
use crate::op::OpCell;
use crate::sync::{Arc, Thread, MODEL_BUILD};

/// What a worker found when it looked for an op.
pub(crate) enum Take<P> {
    /// An op, started and counted in the slot it came from.
    Op(Arc<OpCell<P>>),
    /// Nothing to take (or only ops cancelled while queued).
    Empty,
    /// A quiesce holds or the lane stopped: nothing may be taken.
    Held,
}

/// A ready queue of a lane, home to one of its workers (any worker may take
/// from it). Guards I3: an op leaves it for `running` only under its lock
/// and only while neither `paused` nor `stopped`, and `running` falls only
/// under the same lock, so a quiesce that reads every slot's `running`
/// after pausing every slot sees each op that can still run.
pub(crate) struct Slot<P> {
    ready: Bands<P>,
    /// Ops taken from this slot and not complete (async ops until their
    /// token). Counted here, not where they run: the op keeps the slot's
    /// index in its state word ([`OpCell::slot`]).
    pub(crate) running: usize,
    /// Of `running`, the ops their pushers run inline (docs/DESIGN.md
    /// "Running inline"): counted for a quiesce like any other, but not
    /// run by a worker of the pool.
    pub(crate) inline: usize,
    /// A quiesce holds: nothing is taken.
    pub(crate) paused: bool,
    /// The lane has stopped: nothing is taken any more.
    pub(crate) stopped: bool,
    /// Threads waiting for `running` to fall (quiesce).
    pub(crate) drain_waiters: Vec<Thread>,
    /// Completed compute op records handed back by the workers, in batches,
    /// which the next pusher to queue here frees on its own thread, outside
    /// its section: an op record is allocated by its pusher, and freed
    /// there its memory goes back to that thread's allocator cache instead
    /// of crossing threads on every op (1.03-1.16x on the benchmarks,
    /// BENCHMARKS.md). At most [`RETIRED_MAX`] records. A fork child leaks
    /// what it inherited here, as it leaks the payloads of lost ops (I5): a
    /// record's payload is normally gone, but one whose body the fork gate
    /// refused still holds it.
    retired: Vec<Arc<OpCell<P>>>,
}

/// Most op records a slot keeps for a pusher to free; past it workers free
/// their own. Model builds keep two, so a model of a few ops reaches the
/// full slot too.
pub(crate) const RETIRED_MAX: usize = if MODEL_BUILD { 2 } else { 256 };

/// Records a worker collects before it hands them to its home slot, and
/// that a slot collects before a pusher takes them. One in model builds:
/// every completion of a model's compute op goes through the hand-back.
pub(crate) const RETIRED_BATCH: usize = if MODEL_BUILD { 1 } else { 32 };

impl<P> Slot<P> {
    pub(crate) fn new() -> Self {
        Slot {
            ready: Bands::new(),
            running: 0,
            inline: 0,
            paused: false,
            stopped: false,
            drain_waiters: Vec::new(),
            retired: Vec::new(),
        }
    }

    /// Keeps the completed op records in `ops` (all of them, or none if the
    /// slot holds enough) for a pusher to free.
    pub(crate) fn retire(&mut self, ops: &mut Vec<Arc<OpCell<P>>>) {
        if self.retired.len() < RETIRED_MAX {
            self.retired.append(ops);
        }
    }

    /// A pusher takes the records to free, once there are a batch's worth
    /// ([`RETIRED_BATCH`]).
    pub(crate) fn take_retired(&mut self, out: &mut Vec<Arc<OpCell<P>>>) {
        if self.retired.len() >= RETIRED_BATCH {
            std::mem::swap(&mut self.retired, out);
        }
    }

    /// The fork child: the inherited records are leaked, never dropped.
    pub(crate) fn leak_retired(&mut self) {
        std::mem::forget(std::mem::take(&mut self.retired));
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

    /// Starts `op` as taken from slot `index` by a worker, unless it was
    /// cancelled while queued: marked running and counted under this
    /// slot's lock (I3).
    pub(crate) fn start(&mut self, op: &OpCell<P>, index: usize) -> bool {
        self.start_as(op, index, false)
    }

    /// Starts `op`, ready and never queued, for its pusher to run inline,
    /// if this slot (index `index`) is not held and already holds at least
    /// `from` queued ops; counted under this slot's lock like a worker's
    /// take (I3).
    pub(crate) fn start_inline(&mut self, op: &OpCell<P>, index: usize, from: usize) -> bool {
        let held = self.held() && !control!(InlineIgnoresPause);
        !held && self.ready.len() >= from && self.start_as(op, index, true)
    }

    /// Moves `op` to running, taken from slot `index` (by its pusher if
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

    /// The next op to run from this slot (index `index`), unless the slot
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

    /// One op of the slot completed (`inline`: run by its pusher): wakes
    /// the quiesces waiting for it.
    pub(crate) fn finished(&mut self, inline: bool, wake: &mut Vec<Thread>) {
        self.running -= 1;
        self.inline -= usize::from(inline);
        wake.append(&mut self.drain_waiters);
    }

    #[cfg(any(loom, shuttle))]
    pub(crate) fn ids(&self) -> Vec<u64> {
        self.ready.ids()
    }

    /// Removes and returns every queued op (shutdown, fork child).
    pub(crate) fn drain(&mut self) -> Vec<Arc<OpCell<P>>> {
        self.ready.drain()
    }
}
