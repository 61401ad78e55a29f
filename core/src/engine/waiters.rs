//! Threads waiting for the engine as a whole: `wait_all` and shutdown's
//! drain (woken when the op they wait on leaves the live set), and, in
//! model builds, threads in a timed wait (woken when the model fires a
//! deadline). Waiters of one var live in that var's state (`var.rs`);
//! waiters of a lane's running ops (quiesce drains) in its ready-queue
//! queues (`ready/queue.rs`).
//!
//! # State
//!
//! A thread is *registered* (in `all`, counted in `all_waiting`), then
//! *blocked on* an op (its id recorded), then *woken* (unparked, still
//! registered), then *gone*:
//!
//! | from | to | who | serves |
//! |---|---|---|---|
//! | — | registered | the waiter, in a section, before it first scans the live index ([`Waiters::join_all`]) | — |
//! | registered or blocked | blocked on op `id` | the waiter, in a section, after its scan found `id` live; then a SeqCst fence and one more look at the op ([`Waiters::block_on`]) | I2: no lost wake-up |
//! | blocked on `id` | woken | `id`'s completion, after it marked the op gone and a SeqCst fence ([`Waiters::wake_gone`]) | I2 |
//! | any | gone | the waiter, when its wait ends ([`Waiters::leave_all`]) | — |
//! | any | gone | the fork child's settle ([`Waiters::reset_in_child`]): the parent's waiters do not exist there | I5 |
//!
//! Why the two fences lose no wake-up: `live.rs`, "Why a waiter is never
//! left asleep". `all_waiting` lets a completion skip the waiter lock when
//! nobody waits; a waiter counts itself before it records its blocker, so a
//! completion that sees the blocker's record (fence order) also sees the
//! count.

use crate::op::OpCell;
use crate::sync::{fence, AtomicUsize, LockRank, Mutex, Ordering, Thread, MODEL_BUILD};

/// A thread waiting for every op below some limit to leave the live set,
/// and the live op it waits on now (0: none yet; ids start at 1).
struct AllWaiter {
    blocker: u64,
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

    /// Registers `thread` as a waiter for the live set; call inside a
    /// section, before the first scan.
    pub(crate) fn join_all(&self, thread: Thread) {
        self.all.lock().push(AllWaiter { blocker: 0, thread });
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

    /// Records that registered `thread` waits on `op`, which its scan found
    /// live; inside a section. Returns whether the op is still live after
    /// the record is visible to its completion (then the caller may park:
    /// the completion will wake it); `false`: scan again.
    pub(crate) fn block_on<P>(&self, thread: &Thread, op: &OpCell<P>) -> bool {
        if let Some(w) = self
            .all
            .lock()
            .iter_mut()
            .find(|w| w.thread.id() == thread.id())
        {
            w.blocker = op.id();
        }
        // Pairs with the completion's fence in `wake_gone`.
        fence(Ordering::SeqCst);
        !op.is_gone()
    }

    /// After a completion marked op `id` gone, inside its section: adds to
    /// `wake` every waiter blocked on it.
    #[inline]
    pub(crate) fn wake_gone(&self, id: u64, wake: &mut Vec<Thread>) {
        // Pairs with the waiter's fence in `block_on`.
        if !control!(CompletionSkipsFence) {
            fence(Ordering::SeqCst);
        }
        if self.all_waiting.load(Ordering::Relaxed) == 0 || control!(LostNotify) {
            return;
        }
        for w in self.all.lock().iter() {
            if w.blocker == id {
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
