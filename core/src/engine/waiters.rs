//! Threads waiting for the engine as a whole: `wait_all` and shutdown's
//! drain (woken when the live index empties below their limit), and, in
//! model builds, threads in a timed wait (woken when the model fires a
//! deadline). Waiters of one var live in that var's state (`var.rs`);
//! waiters of a lane's running ops (quiesce drains) in its ready-queue
//! slots (`ready/slot.rs`).
//!
//! # State
//!
//! A thread is *registered* (in `all`, counted in `all_waiting`), then
//! *woken* (unparked, still registered), then *gone*:
//!
//! | from | to | who | serves |
//! |---|---|---|---|
//! | — | registered | the waiter, in a section, before it first scans the live index ([`Waiters::join_all`]) | I2: no lost wake-up |
//! | registered | woken | a completion, under the live shard lock it removed the op from, if the lowest live id there is at or past the limit ([`Waiters::wake_all_past`]) | I2 |
//! | registered | gone | the waiter, when its wait ends ([`Waiters::leave_all`]) | — |
//! | any | gone | the fork child's settle ([`Waiters::reset_in_child`]): the parent's waiters do not exist there | I5 |
//!
//! `all_waiting` lets a completion skip the waiter lock when nobody waits;
//! it is read under the live shard lock after the removal, and a waiter
//! counts itself before it scans the shards (SeqCst on both sides), so
//! either the waiter's scan sees the removal or the completion sees the
//! waiter.

use crate::sync::{AtomicUsize, LockRank, Mutex, Ordering, Thread, MODEL_BUILD};

/// A thread waiting for every op below `limit` to complete.
struct AllWaiter {
    limit: u64,
    thread: Thread,
}

/// The engine-wide waiters (see the module's `# State`).
pub(crate) struct Waiters {
    all: Mutex<Vec<AllWaiter>>,
    all_waiting: AtomicUsize,
    /// Model builds: threads in a timed wait.
    timed: Mutex<Vec<Thread>>,
}

impl Waiters {
    pub(crate) fn new() -> Self {
        Waiters {
            all: Mutex::ranked(Vec::new(), LockRank::AllWaiters),
            all_waiting: AtomicUsize::new(0),
            timed: Mutex::ranked(Vec::new(), LockRank::Leaf),
        }
    }

    /// Registers `thread` to be woken once no live op below `limit` is
    /// left; call inside a section, before the first scan.
    pub(crate) fn join_all(&self, limit: u64, thread: Thread) {
        self.all.lock().push(AllWaiter { limit, thread });
        self.all_waiting.fetch_add(1, Ordering::SeqCst);
    }

    /// Takes `thread`'s registration back; inside a section.
    pub(crate) fn leave_all(&self, thread: &Thread) {
        let mut all = self.all.lock();
        if let Some(i) = all.iter().position(|w| w.thread.id() == thread.id()) {
            all.swap_remove(i);
            self.all_waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// After a completion removed an op from a live shard, with that
    /// shard's lock held: adds to `wake` every waiter whose limit the
    /// shard's lowest live id (`None`: empty) is at or past.
    #[inline]
    pub(crate) fn wake_all_past(&self, lowest: Option<u64>, wake: &mut Vec<Thread>) {
        if self.all_waiting.load(Ordering::SeqCst) == 0 || control!(LostNotify) {
            return;
        }
        for w in self.all.lock().iter() {
            if lowest.is_none_or(|l| l >= w.limit) {
                wake.push(w.thread.clone());
            }
        }
    }

    /// Model builds: registers the calling thread for a deadline event.
    #[inline]
    pub(crate) fn register_timed(&self, deadline: Option<crate::sync::Instant>) {
        if MODEL_BUILD && deadline.is_some() {
            self.timed.lock().push(crate::sync::current_thread());
        }
    }

    /// Model builds: the threads in a timed wait, to wake when the model
    /// fires a deadline.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn take_timed(&self) -> Vec<Thread> {
        self.timed.lock().drain(..).collect()
    }

    /// Model builds: the `wait_all` waiters' lock, for the fork-point
    /// check. (The timed waiters' lock exists only in model builds, so a
    /// real fork never copies it.)
    #[cfg(any(loom, shuttle))]
    pub(crate) fn watched(&self) -> &dyn crate::sync::ForkWatched {
        &self.all
    }

    /// Fork child: the parent's waiters are gone.
    pub(crate) fn reset_in_child(&self) {
        self.all.lock().clear();
        self.all_waiting.store(0, Ordering::SeqCst);
        self.timed.lock().clear();
    }
}
