//! A lane's ready queues: one [`Slot`] per configured worker, each on its
//! own cache line under its own lock, and the lane's *wanted* word, which
//! says whether a new ready op needs the lane lock at all (an idle worker
//! to wake, or a worker to start). The hand-off protocol and why no wake-up
//! is lost are in `README.md` beside this file.

use super::slot::{Slot, Take};
use crate::op::OpCell;
use crate::sync::{Arc, AtomicUsize, CachePadded, LockRank, Mutex, Ordering, Thread};

/// The ready queues of one lane.
pub(crate) struct ReadyQueues<P> {
    slots: Box<[CachePadded<Mutex<Slot<P>>>]>,
    /// Written by the lane's pool under the lane lock (idle workers plus
    /// one if the lane is short of workers); read by every dispatch after
    /// it queued, so that a dispatch with nobody to wake takes no lane
    /// lock. Padded: read per op, written only when a worker parks, wakes
    /// or starts.
    wanted: Arc<CachePadded<AtomicUsize>>,
}

impl<P> ReadyQueues<P> {
    /// `slots` queues (at least one), reading the pool's `wanted` word.
    pub(crate) fn new(slots: usize, wanted: Arc<CachePadded<AtomicUsize>>) -> Self {
        ReadyQueues {
            slots: (0..slots.max(1))
                .map(|_| CachePadded::new(Mutex::ranked(Slot::new(), LockRank::Slot)))
                .collect(),
            wanted,
        }
    }

    pub(crate) fn slot(&self, index: usize) -> &Mutex<Slot<P>> {
        &self.slots[index]
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Mutex<Slot<P>>> {
        self.slots.iter().map(|s| &**s)
    }

    /// The home slot of worker `index` (workers are numbered from 1; a
    /// stand-in shares the home of a configured worker).
    pub(crate) fn home(&self, worker: usize) -> usize {
        worker.saturating_sub(1) % self.slots.len()
    }

    /// The slot a pushed op is queued on: spread by id, so consecutive
    /// pushes go to different workers' slots.
    pub(crate) fn slot_for(&self, id: u64) -> usize {
        (id % self.slots.len() as u64) as usize
    }

    /// Whether a dispatch that just queued an op must take the lane lock:
    /// a worker is parked idle or one is missing. Read after the slot's
    /// lock was released (see `README.md`, "No lost wake-up").
    pub(crate) fn wants_worker(&self) -> bool {
        self.wanted.load(Ordering::Acquire) > 0
    }

    /// An op for a worker whose home is `home`: from its home slot first,
    /// then from the others in turn (stealing).
    pub(crate) fn take(&self, home: usize) -> Take<P> {
        let n = self.slots.len();
        for k in 0..n {
            let index = (home + k) % n;
            match self.slots[index].lock().take(index) {
                Take::Empty => continue,
                found => return found,
            }
        }
        Take::Empty
    }

    /// A worker hands its completed op records to its home slot, for a
    /// pusher to free; inside a section. What the slot does not keep stays
    /// in `ops`, for the worker to free once it has left the section.
    pub(crate) fn retire(&self, home: usize, ops: &mut Vec<Arc<OpCell<P>>>) {
        self.slot(home).lock().retire(ops);
    }

    /// Ops queued on every slot.
    pub(crate) fn len(&self) -> usize {
        self.iter().map(|s| s.lock().len()).sum()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.iter().all(|s| s.lock().is_empty())
    }

    /// Ops taken by the lane's workers and not complete: every slot's
    /// `running` without the ops their pushers run inline.
    pub(crate) fn running_on_workers(&self) -> usize {
        self.iter()
            .map(|s| {
                let s = s.lock();
                s.running - s.inline
            })
            .sum()
    }

    /// Pauses or resumes every slot (a quiesce; under the lane lock).
    pub(crate) fn set_paused(&self, paused: bool) {
        let slots = if control!(PauseFirstSlotOnly) && paused {
            1
        } else {
            self.slots.len()
        };
        for s in self.iter().take(slots) {
            s.lock().paused = paused;
        }
    }

    /// Stops every slot (shutdown; under the lane lock).
    pub(crate) fn stop(&self) {
        for s in self.iter() {
            s.lock().stopped = true;
        }
    }

    /// Whether the slots are held (a quiesce or a stop); all slots move
    /// together under the lane lock, so the first one says.
    pub(crate) fn held(&self) -> bool {
        self.slots[0].lock().held()
    }

    /// Removes and returns every queued op (shutdown, fork child, a lane
    /// that cannot run them).
    pub(crate) fn drain(&self) -> Vec<Arc<OpCell<P>>> {
        self.iter().flat_map(|s| s.lock().drain()).collect()
    }

    /// The fork child: every slot emptied and unheld (stopped if the lane
    /// is), nothing running but the carried op, counted in its slot
    /// (`carried`: the slot, and whether the forking thread runs it inline).
    pub(crate) fn reset_in_child(&self, carried: Option<(usize, bool)>, stopped: bool) {
        for (i, s) in self.iter().enumerate() {
            let mut s = s.lock();
            drop(s.drain());
            s.leak_retired();
            let here = carried.filter(|c| c.0 == i);
            s.running = usize::from(here.is_some());
            s.inline = usize::from(here.is_some_and(|c| c.1));
            s.paused = false;
            s.stopped = stopped;
            s.drain_waiters.clear();
        }
    }

    /// Registers `me` on every slot with an op running, and returns how
    /// many are running: a completion after this read wakes `me` (the
    /// quiesce's drain wait).
    pub(crate) fn running_or_register(&self, me: &Thread) -> usize {
        let mut total = 0;
        for s in self.iter() {
            let mut s = s.lock();
            if s.running > 0 {
                total += s.running;
                s.drain_waiters.push(me.clone());
            }
        }
        total
    }

    /// Model builds: the slots' locks, for the fork-point check.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn watched(&self) -> impl Iterator<Item = &dyn crate::sync::ForkWatched> {
        self.slots
            .iter()
            .map(|s| &**s as &dyn crate::sync::ForkWatched)
    }
}
