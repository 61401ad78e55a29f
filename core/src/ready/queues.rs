//! A lane's ready queues: one [`ReadyQueue`] per configured worker, each on its
//! own cache line under its own lock, and the lane's *wanted* word, which
//! says whether a new ready op needs the lane lock at all (an idle worker
//! to wake, or a worker to start). The hand-off protocol and why no wake-up
//! is lost are in `README.md` beside this file.
//!
//! # State
//!
//! The queues themselves are fixed at construction (one per configured
//! worker); each queue's state is `queue.rs`'s. What moves here is the
//! *wanted* word, which the lane's pool writes under the lane lock (idle
//! workers, plus one while the lane is short of workers, `pool.rs`) and
//! every dispatch reads after it queued: a dispatch that reads zero takes
//! no lane lock (`README.md`, "No lost wake-up"). Operations on all queues
//! ([`ReadyQueues::set_paused`], [`ReadyQueues::stop`],
//! [`ReadyQueues::reset_in_child`]) take each queue's lock in turn, under
//! the lane lock, so the queues move together as seen by anyone who takes
//! the lane lock.

use super::queue::{ReadyQueue, Take};
use crate::op::OpCell;
use crate::sync::{Arc, AtomicUsize, CachePadded, LockRank, Mutex, Ordering, Thread};

/// The ready queues of one lane.
pub(crate) struct ReadyQueues<P> {
    queues: Box<[CachePadded<Mutex<ReadyQueue<P>>>]>,
    /// Written by the lane's pool under the lane lock (idle workers plus
    /// one if the lane is short of workers); read by every dispatch after
    /// it queued, so that a dispatch with nobody to wake takes no lane
    /// lock. Padded: read per op, written only when a worker parks, wakes
    /// or starts.
    wanted: Arc<CachePadded<AtomicUsize>>,
}

impl<P> ReadyQueues<P> {
    /// `queues` queues (at least one), reading the pool's `wanted` word.
    pub(crate) fn new(queues: usize, wanted: Arc<CachePadded<AtomicUsize>>) -> Self {
        ReadyQueues {
            queues: (0..queues.max(1))
                .map(|_| CachePadded::new(Mutex::ranked(ReadyQueue::new(), LockRank::ReadyQueue)))
                .collect(),
            wanted,
        }
    }

    pub(crate) fn queue(&self, index: usize) -> &Mutex<ReadyQueue<P>> {
        &self.queues[index]
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Mutex<ReadyQueue<P>>> {
        self.queues.iter().map(|s| &**s)
    }

    /// The home queue of worker `index` (workers are numbered from 1; a
    /// stand-in shares the home of a configured worker).
    pub(crate) fn home(&self, worker: usize) -> usize {
        worker.saturating_sub(1) % self.queues.len()
    }

    /// The queue a pushed op is queued on: spread by id, so consecutive
    /// pushes go to different workers' queues.
    pub(crate) fn queue_for(&self, id: u64) -> usize {
        (id % self.queues.len() as u64) as usize
    }

    /// Whether a dispatch that just queued an op must take the lane lock:
    /// a worker is parked idle or one is missing. Read after the queue's
    /// lock was released (see `README.md`, "No lost wake-up").
    pub(crate) fn wants_worker(&self) -> bool {
        self.wanted.load(Ordering::Acquire) > 0
    }

    /// An op for a worker whose home is `home`: from its home queue first,
    /// then from the others in turn (stealing).
    pub(crate) fn take(&self, home: usize) -> Take<P> {
        let n = self.queues.len();
        for k in 0..n {
            let index = (home + k) % n;
            match self.queues[index].lock().take(index) {
                Take::Empty => continue,
                found => return found,
            }
        }
        Take::Empty
    }

    /// A worker hands its completed op records to its home queue, for a
    /// pusher to free; inside a section. What the queue does not keep stays
    /// in `ops`, for the worker to free once it has left the section.
    pub(crate) fn retire(&self, home: usize, ops: &mut Vec<Arc<OpCell<P>>>) {
        self.queue(home).lock().retire(ops);
    }

    /// Ops queued on every queue.
    pub(crate) fn len(&self) -> usize {
        self.iter().map(|s| s.lock().len()).sum()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.iter().all(|s| s.lock().is_empty())
    }

    /// Ops taken by the lane's workers and not complete: every queue's
    /// `running` without the ops their pushers run inline.
    pub(crate) fn running_on_workers(&self) -> usize {
        self.iter().map(|s| s.lock().running_on_workers()).sum()
    }

    /// Pauses or resumes every queue (a quiesce; under the lane lock).
    pub(crate) fn set_paused(&self, paused: bool) {
        let queues = if control!(PauseFirstQueueOnly) && paused {
            1
        } else {
            self.queues.len()
        };
        for s in self.iter().take(queues) {
            s.lock().set_paused(paused);
        }
    }

    /// Stops every queue (shutdown; under the lane lock).
    pub(crate) fn stop(&self) {
        for s in self.iter() {
            s.lock().stop();
        }
    }

    /// Whether the queues are held (a quiesce or a stop); all queues move
    /// together under the lane lock, so the first one says.
    pub(crate) fn held(&self) -> bool {
        self.queues[0].lock().held()
    }

    /// Removes and returns every queued op (shutdown, fork child, a lane
    /// that cannot run them).
    pub(crate) fn drain(&self) -> Vec<Arc<OpCell<P>>> {
        self.iter().flat_map(|s| s.lock().drain()).collect()
    }

    /// The fork child: every queue emptied and unheld (stopped if the lane
    /// is), nothing running but the carried op, counted in its queue
    /// (`carried`: the queue, and whether the forking thread runs it inline).
    pub(crate) fn reset_in_child(&self, carried: Option<(usize, bool)>, stopped: bool) {
        for (i, s) in self.iter().enumerate() {
            let here = carried.filter(|c| c.0 == i).map(|c| c.1);
            s.lock().reset_in_child(here, stopped);
        }
    }

    /// Registers `me` on every queue with an op running, and returns how
    /// many are running: a completion after this read wakes `me` (the
    /// quiesce's drain wait).
    pub(crate) fn running_or_register(&self, me: &Thread) -> usize {
        self.iter().map(|s| s.lock().running_or_register(me)).sum()
    }

    /// Model builds: the queues' locks, for the fork-point check.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn watched(&self) -> impl Iterator<Item = &dyn crate::sync::ForkWatched> {
        self.queues
            .iter()
            .map(|s| &**s as &dyn crate::sync::ForkWatched)
    }
}
