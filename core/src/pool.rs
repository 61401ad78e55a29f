//! A lane's worker pool: how many worker threads the lane has, which of
//! them are parked idle or parked as spares, and how many are blocked in a
//! wait inside an op. Lives inside the lane's [`crate::ready::LaneState`],
//! under the lane's lock; the engine's dispatch, wait and worker code move
//! it only through the methods below.
//!
//! # The sizing rule
//!
//! A lane may have `base + blocked` *counted* workers ([`Pool::limit`]):
//! its configured size, plus one stand-in for each of its workers blocked
//! in a wait inside an op, so that such waits never starve the lane (a
//! waiter waits only for ops pushed before its own, which may sit in this
//! very lane). `blocked` is capped at [`Config::max_stand_ins`]
//! (`crate::Config`): a wait that would go past the cap fails with
//! [`crate::Error::StandInLimit`] instead of blocking, so the lane never has
//! more than `base + max_stand_ins` threads.
//!
//! # State
//!
//! Each worker thread is in exactly one of these states:
//!
//! | state | counted in | moved in by | moved out by |
//! |---|---|---|---|
//! | *starting* | `workers` | [`Pool::add_worker`] (a spawn planned) | the thread's first loop turn; or [`Pool::start_failed`] |
//! | *busy* (running an op, maybe blocked in a wait) | `workers` | the worker popping an op | the worker, after the op |
//! | *idle* (parked, waiting for an op) | `workers`, `idle` | [`Pool::park_idle`] | [`Pool::wake_idle`] (dispatch), [`Pool::stop`] |
//! | *spare* (parked, not counted) | `spares` | [`Pool::retire`] (surplus after a wait ended) | [`Pool::add_worker`] (recalled: counted again), [`Pool::stop`] |
//! | *gone* | — | the worker, once the lane is stopped | — |
//!
//! Which invariant each move serves:
//! - *busy → spare* instead of *busy → gone*: no engine thread exits while
//!   the engine lives except at shutdown, so a raw fork never catches one in
//!   std's thread-exit path (I5; FORK-SAFETY.md L8), and a spare's stack is
//!   reused, never leaked (the mapping count stays flat).
//! - [`Pool::add_worker`] recalls a spare before it plans a new thread: a
//!   lane's threads (`workers + spares`) only grow while
//!   `workers < limit()` and no spare is left, so they never exceed
//!   `base + max_stand_ins`.
//! - The count of starting and idle workers changes only under the lane's
//!   lock, inside a fork-gate section (I5, I6: a fork copies a consistent
//!   pool, and the child resets it with [`Pool::reset_in_child`]).
//! - [`Pool::block`] / [`Pool::unblock`] bracket a wait inside an op; the
//!   stand-in they allow keeps the lane live while its worker waits (I2:
//!   every accepted op completes).
//! - [`Pool::stop`] hands back every parked thread to wake: after shutdown
//!   no worker is left parked for ever (I8).
//! - Every move that changes the idle workers or whether the lane is short
//!   republishes the *wanted* word (idle workers, plus one while short)
//!   before the lane lock is released. A worker parks idle only after that
//!   word says so and it has looked at every ready queue once more, and a
//!   dispatch reads the word after it queued: so an op queued while every
//!   worker sleeps always finds the word non-zero and wakes one (I2; the
//!   protocol is in `ready/README.md`).

use crate::op_info::Lane;
use crate::sync::{Arc, AtomicUsize, CachePadded, Ordering, Thread};

/// Workers to bring to life once the section that decided it has ended:
/// the lane, and a thread to start or a spare to recall.
pub(crate) type Spawns = Vec<(Lane, Start)>;

/// What dispatch must do to bring a counted worker to life, outside the
/// lane's lock.
#[derive(Debug)]
pub(crate) enum Start {
    /// Start a new thread with this worker index.
    Spawn(usize),
    /// Unpark this spare: it was counted again.
    Recall(Thread),
}

/// One lane's worker threads. See the module docs for the states.
pub(crate) struct Pool {
    /// The lane's configured size.
    base: usize,
    /// At most this many workers blocked in a wait inside an op at once.
    max_stand_ins: usize,
    /// Counted workers: starting, busy or idle.
    workers: usize,
    /// Index of the last worker started (indices start at 1).
    spawned: usize,
    /// Counted workers blocked in a wait inside an op.
    blocked: usize,
    /// Idle workers by index, woken one per ready op.
    idle: Vec<(usize, Thread)>,
    /// Idle workers, plus one while the lane is short of workers: what a
    /// dispatch reads to decide whether it needs the lane lock
    /// ([`crate::ready::ReadyQueues::wants_worker`]). Republished by every
    /// method below that changes either, under the lane lock.
    wanted: Arc<CachePadded<AtomicUsize>>,
    /// Spare workers by index: parked, not counted, reused before any new
    /// thread is started.
    spares: Vec<(usize, Thread)>,
}

impl Pool {
    pub(crate) fn new(base: usize, max_stand_ins: usize) -> Self {
        Pool {
            base,
            max_stand_ins,
            workers: 0,
            spawned: 0,
            blocked: 0,
            idle: Vec::new(),
            spares: Vec::new(),
            wanted: Arc::new(CachePadded::new(AtomicUsize::new(usize::from(base > 0)))),
        }
    }

    /// The word this pool publishes what it wants in, for the lane's ready
    /// queues to read.
    pub(crate) fn wanted(&self) -> Arc<CachePadded<AtomicUsize>> {
        self.wanted.clone()
    }

    /// Republishes the *wanted* word; after every change to `idle`,
    /// `workers` or `blocked`.
    fn publish(&self) {
        let wanted = self.idle.len() + usize::from(self.is_short());
        self.wanted.store(wanted, Ordering::Release);
    }

    /// The sizing rule: how many counted workers the lane may have.
    pub(crate) fn limit(&self) -> usize {
        self.base + self.blocked
    }

    /// Whether the lane may bring one more worker to life.
    pub(crate) fn is_short(&self) -> bool {
        self.workers < self.limit()
    }

    /// Whether the lane has a worker more than it may have (a wait inside
    /// an op ended while its stand-in was alive).
    pub(crate) fn is_surplus(&self) -> bool {
        self.workers > self.limit()
    }

    /// Counted workers.
    pub(crate) fn workers(&self) -> usize {
        self.workers
    }

    /// Worker threads alive: counted ones and spares.
    #[cfg(any(test, loom, shuttle))]
    pub(crate) fn threads(&self) -> usize {
        self.workers + self.spares.len()
    }

    /// Counted workers blocked in a wait inside an op.
    pub(crate) fn blocked(&self) -> usize {
        self.blocked
    }

    /// Whether some worker is parked idle.
    pub(crate) fn has_idle(&self) -> bool {
        !self.idle.is_empty()
    }

    /// Counts one more worker: a recalled spare if there is one, else a new
    /// thread to start.
    pub(crate) fn add_worker(&mut self) -> Start {
        self.workers += 1;
        self.publish();
        match self.spares.pop() {
            Some((_, thread)) => Start::Recall(thread),
            None => {
                self.spawned += 1;
                Start::Spawn(self.spawned)
            }
        }
    }

    /// A planned worker's thread could not be started.
    pub(crate) fn start_failed(&mut self) {
        self.workers -= 1;
        self.publish();
    }

    /// Takes one idle worker to wake for a ready op.
    pub(crate) fn wake_idle(&mut self) -> Option<Thread> {
        let woken = self.idle.pop().map(|(_, t)| t);
        self.publish();
        woken
    }

    /// Takes every idle worker to wake (a resume: they look again).
    pub(crate) fn wake_all_idle(&mut self) -> Vec<Thread> {
        let woken = self.idle.drain(..).map(|(_, t)| t).collect();
        self.publish();
        woken
    }

    /// Registers worker `index` as idle (once).
    pub(crate) fn park_idle(&mut self, index: usize, thread: Thread) {
        if !self.idle.iter().any(|(i, _)| *i == index) {
            self.idle.push((index, thread));
        }
        self.publish();
    }

    /// Worker `index` is busy: it is no longer idle.
    pub(crate) fn busy(&mut self, index: usize) {
        self.idle.retain(|(i, _)| *i != index);
        self.publish();
    }

    /// Surplus worker `index` parks as a spare: no longer counted.
    pub(crate) fn retire(&mut self, index: usize, thread: Thread) {
        self.busy(index);
        self.workers -= 1;
        self.spares.push((index, thread));
        self.publish();
    }

    /// Whether worker `index` is still a spare (not recalled).
    pub(crate) fn is_spare(&self, index: usize) -> bool {
        self.spares.iter().any(|(i, _)| *i == index)
    }

    /// Worker `index` leaves the stopped lane: out of every list, and off
    /// the count unless it was a spare.
    pub(crate) fn leave(&mut self, index: usize) {
        if self.is_spare(index) {
            self.spares.retain(|(i, _)| *i != index);
        } else {
            self.busy(index);
            self.workers -= 1;
        }
        self.publish();
    }

    /// Marks one more worker blocked in a wait inside an op; refused at the
    /// cap.
    pub(crate) fn block(&mut self) -> Result<(), usize> {
        if self.blocked >= self.max_stand_ins {
            return Err(self.max_stand_ins);
        }
        self.blocked += 1;
        self.publish();
        Ok(())
    }

    /// A wait inside an op ended.
    pub(crate) fn unblock(&mut self) {
        self.blocked = self.blocked.saturating_sub(1);
        self.publish();
    }

    /// The lane stopped: every parked thread (idle and spare) to wake, so
    /// each sees the stop and leaves.
    pub(crate) fn stop(&mut self) -> Vec<Thread> {
        let mut wake = self.wake_all_idle();
        wake.extend(self.spares.iter().map(|(_, t)| t.clone()));
        wake
    }

    /// A fork child: the parent's threads are gone, except the forking one
    /// when it was running an op of this lane (`carried`).
    pub(crate) fn reset_in_child(&mut self, carried: usize) {
        self.idle.clear();
        self.spares.clear();
        self.workers = carried;
        self.blocked = 0;
        self.publish();
    }

    /// Model builds: a rebuilt child's worker count.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn set_workers(&mut self, workers: usize) {
        self.workers = workers;
        self.publish();
    }

    /// Unit tests: workers registered idle.
    #[cfg(test)]
    pub(crate) fn idle_len(&self) -> usize {
        self.idle.len()
    }

    /// Unit tests: start attempts so far.
    #[cfg(test)]
    pub(crate) fn spawned(&self) -> usize {
        self.spawned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread() -> Thread {
        crate::sync::current_thread()
    }

    #[test]
    fn a_spare_is_recalled_before_a_new_thread_starts() {
        let mut p = Pool::new(1, 4);
        assert!(matches!(p.add_worker(), Start::Spawn(1)));
        p.block().unwrap();
        assert!(p.is_short());
        assert!(matches!(p.add_worker(), Start::Spawn(2)));
        p.unblock();
        assert!(p.is_surplus());
        p.retire(2, thread());
        assert!(!p.is_surplus() && !p.is_short());
        assert_eq!((p.workers(), p.threads()), (1, 2));
        p.block().unwrap();
        assert!(matches!(p.add_worker(), Start::Recall(_)));
        assert!(!p.is_spare(2));
        assert_eq!((p.workers(), p.threads(), p.spawned()), (2, 2, 2));
    }

    #[test]
    fn blocked_waits_stop_at_the_cap() {
        let mut p = Pool::new(1, 2);
        assert_eq!(p.block(), Ok(()));
        assert_eq!(p.block(), Ok(()));
        assert_eq!(p.block(), Err(2));
        assert_eq!(p.blocked(), 2);
        assert_eq!(p.limit(), 3);
        p.unblock();
        assert_eq!(p.block(), Ok(()));
    }

    #[test]
    fn stop_wakes_idle_and_spare_threads_and_leave_counts_right() {
        let mut p = Pool::new(2, 2);
        let _ = p.add_worker();
        let _ = p.add_worker();
        p.block().unwrap();
        let _ = p.add_worker();
        p.unblock();
        p.retire(3, thread());
        p.park_idle(1, thread());
        p.park_idle(1, thread());
        assert_eq!(p.stop().len(), 2);
        p.leave(3);
        assert_eq!((p.workers(), p.threads()), (2, 2));
        p.leave(1);
        p.leave(2);
        assert_eq!(p.threads(), 0);
    }

    #[test]
    fn a_child_keeps_only_the_carried_worker() {
        let mut p = Pool::new(1, 2);
        let _ = p.add_worker();
        p.block().unwrap();
        let _ = p.add_worker();
        p.unblock();
        p.retire(2, thread());
        p.reset_in_child(1);
        assert_eq!((p.workers(), p.threads(), p.blocked()), (1, 1, 0));
        assert!(!p.has_idle());
    }
}
