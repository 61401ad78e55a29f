//! One lane's workers and flags, under the lane's lock
//! ([`crate::sync::LockRank::Lane`]): its worker pool ([`Pool`], which
//! keeps the sizing rule), whether the lane has stopped, and how many host
//! workers are inside the host bridge. The ready queues beside it have
//! their own locks (`ready/`). Every change happens inside a fork-gate
//! section, taken when a worker parks, wakes or starts, not per op.
//!
//! # State
//!
//! | what | from | to | who | serves |
//! |---|---|---|---|---|
//! | worker | busy | idle | the worker, before it looks at every ready queue once more and parks (`engine/worker.rs`) | no lost wake-up (`ready/README.md`) |
//! | worker | idle | busy | a dispatch that read a non-zero *wanted* word ([`Pool::wake_idle`], `engine/dispatch.rs`) | I2: a queued op finds a worker |
//! | worker | — | starting | a dispatch, a wait's stand-in, a resume ([`Pool::add_worker`]) | I2: the pool's sizing rule |
//! | lane | running | stopped | shutdown, once its deadline passed ([`LaneState::stop`]); never left but by a fork child of a running engine | I8: workers exit, nobody enters the bridge |
//! | bridge count | n | n + 1 | a host worker about to run a body, unless the lane stopped or the host finalises ([`LaneState::enter_bridge`]) | I8 |
//! | bridge count | n + 1 | n | that worker, after the body; wakes the shutdown waiting for zero ([`LaneState::leave_bridge`]) | I8: no host call after shutdown |
//! | all | any | reset | the fork child's settle ([`LaneState::reset_in_child`]): the parent's threads are gone | I5 |

use crate::pool::{Pool, Start};
use crate::sync::{Arc, AtomicUsize, CachePadded, Thread};

/// One lane's workers and flags (see the module's `# State`). Guards I8
/// through `stopped` and the bridge count; its pool keeps the sizing rule
/// and publishes the *wanted* word the lane's dispatches read.
pub(crate) struct LaneState {
    pool: Pool,
    /// Shutdown finished: workers exit and nobody enters the host bridge.
    stopped: bool,
    /// Host workers inside or entering the host bridge.
    in_bridge: usize,
    /// Threads waiting for `in_bridge` to fall (shutdown).
    bridge_waiters: Vec<Thread>,
}

impl LaneState {
    /// A lane of `workers` workers, with at most `max_stand_ins` blocked
    /// waits inside ops at once.
    pub(crate) fn new(workers: usize, max_stand_ins: usize) -> Self {
        LaneState {
            pool: Pool::new(workers, max_stand_ins),
            stopped: false,
            in_bridge: 0,
            bridge_waiters: Vec::new(),
        }
    }

    /// The lane's worker pool.
    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The lane's worker pool, to move a worker's state.
    pub(crate) fn pool_mut(&mut self) -> &mut Pool {
        &mut self.pool
    }

    /// The pool's *wanted* word, which the lane's ready queues read.
    pub(crate) fn wanted(&self) -> Arc<CachePadded<AtomicUsize>> {
        self.pool.wanted()
    }

    /// Whether shutdown stopped the lane.
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Plans one more worker if the lane is short of one and still runs.
    pub(crate) fn grow(&mut self) -> Option<Start> {
        (self.pool.is_short() && !self.stopped).then(|| self.pool.add_worker())
    }

    /// Stops the lane (shutdown): returns the parked threads to wake, which
    /// then exit.
    pub(crate) fn stop(&mut self) -> Vec<Thread> {
        self.stopped = true;
        self.pool.stop()
    }

    /// Counts a host worker into the bridge unless the lane has stopped or
    /// the host is finalising (asked under the lane lock, I8).
    pub(crate) fn enter_bridge(&mut self, finalizing: impl FnOnce() -> bool) -> bool {
        if self.stopped || finalizing() {
            return false;
        }
        self.in_bridge += 1;
        true
    }

    /// A host worker left the bridge: returns the shutdowns to wake.
    pub(crate) fn leave_bridge(&mut self) -> Vec<Thread> {
        self.in_bridge -= 1;
        std::mem::take(&mut self.bridge_waiters)
    }

    /// Whether more than `own` host workers are in the bridge; if so,
    /// `me` is woken when one leaves.
    pub(crate) fn bridge_busy(&mut self, own: usize, me: Thread) -> bool {
        if self.in_bridge <= own {
            return false;
        }
        self.bridge_waiters.push(me);
        true
    }

    /// Model snapshots: the counted workers, `stopped`, the bridge count.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn copy(&self) -> (usize, bool, usize) {
        (self.pool.workers(), self.stopped, self.in_bridge)
    }

    /// Model snapshots: a child model's lane takes the copied values.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn restore(&mut self, workers: usize, stopped: bool, in_bridge: usize) {
        self.pool.set_workers(workers);
        self.stopped = stopped;
        self.in_bridge = in_bridge;
    }

    /// The fork child: the pool keeps only the forking thread if it is one
    /// of this lane's workers (`on_worker`), the bridge count only the
    /// carried host op (`in_bridge`), and the lane is stopped if the engine
    /// was.
    pub(crate) fn reset_in_child(&mut self, on_worker: usize, in_bridge: usize, stopped: bool) {
        self.pool.reset_in_child(on_worker);
        self.in_bridge = in_bridge;
        self.stopped = stopped;
        self.bridge_waiters.clear();
    }
}
