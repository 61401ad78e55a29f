//! What a model sees at its fork point: which engine locks are held, and
//! how many threads are inside a completion (docs/DESIGN.md, "The fork
//! point"). The OS copies both into a real child: a lock held by another
//! thread stays held there for ever (that thread does not exist in the
//! child), and a completion half done stays half done.
//!
//! Model builds keep both in plain std atomics that loom and shuttle do not
//! model: they add no scheduling point on the paths that lock or complete,
//! so no model explores more schedules because of them. A plain read is
//! exact because loom and shuttle run a model's threads as coroutines on
//! one OS thread: at any instant exactly one model thread runs, and it sees
//! every earlier write.
//!
//! Exact is not enough for loom, which explores the orders of two threads'
//! steps only where it sees both touch one object (DPOR). So at the fork
//! point a loom build asks each lock with `try_lock`, a step on the lock
//! that loom orders against every other thread's `lock`. The completion
//! [`Tally`] needs no such step: in sound code it moves only inside a
//! gate section, whose enter and exit loom orders against prepare's
//! close; a completion that leaves its section early is caught by the
//! lock it then takes, or by the tally where loom's order puts the fork
//! right after the section's end.
//!
//! Production builds keep nothing: [`Tally`] is a zero-sized type and
//! [`LockAtFork`] does not exist.
//!
//! # State
//!
//! A lock's [`LockAtFork`] word:
//!
//! | state | moved to by | meaning |
//! |---|---|---|
//! | `FREE` | a guard's drop | nobody holds the lock |
//! | `HELD` | `Mutex::lock`, once acquired | a thread of this world holds it |
//! | `ORPHANED` | `ForkWatched::inherit_held`, building a child model | held at the fork point by a thread the child does not have: the real child would wait for it for ever, so the model's `lock` fails instead (I5: the child works) |
//!
//! A [`Tally`] counts the threads between the two ends of a multi-step
//! change that must never be copied half done (I5, I6).

#[cfg(any(loom, shuttle))]
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// Model builds: whether a lock is free, held, or inherited held by a
/// fork child model (see the module's `# State`).
#[cfg(any(loom, shuttle))]
#[derive(Debug, Default)]
pub(crate) struct LockAtFork(AtomicU8);

#[cfg(any(loom, shuttle))]
const FREE: u8 = 0;
#[cfg(any(loom, shuttle))]
const HELD: u8 = 1;
#[cfg(any(loom, shuttle))]
const ORPHANED: u8 = 2;

#[cfg(any(loom, shuttle))]
impl LockAtFork {
    /// Before waiting for the lock: fails the model if the lock was
    /// inherited held, where the real child would hang.
    pub(crate) fn before_lock(&self, what: &dyn std::fmt::Debug) {
        assert!(
            self.0.load(Ordering::Relaxed) != ORPHANED,
            "fork child: a {what:?} lock was held at the fork point by a thread the child \
             does not have; the real child waits here for ever (docs/DESIGN.md, \
             \"The fork point\")"
        );
    }

    /// Once the lock is acquired.
    pub(crate) fn acquired(&self) {
        self.0.store(HELD, Ordering::Relaxed);
    }

    /// As the guard drops, before the lock is released.
    pub(crate) fn released(&self) {
        self.0.store(FREE, Ordering::Relaxed);
    }

    /// Whether a thread holds the lock (loom builds ask the lock itself
    /// instead: see the module doc).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn is_held(&self) -> bool {
        self.0.load(Ordering::Relaxed) != FREE
    }

    pub(crate) fn orphan(&self) {
        self.0.store(ORPHANED, Ordering::Relaxed);
    }

    /// Whether a fork child model inherited the lock held (see `orphan`).
    pub(crate) fn is_orphaned(&self) -> bool {
        self.0.load(Ordering::Relaxed) == ORPHANED
    }
}

/// Model builds: a lock as a fork sees it, whatever it protects (so a
/// model can walk an engine's locks of different types).
#[cfg(any(loom, shuttle))]
pub trait ForkWatched {
    /// Whether some thread holds the lock now.
    fn held_at_fork(&self) -> bool;
    /// Fork child model: the lock was held at the fork point by a thread
    /// the child does not have; every later `lock` fails the model.
    fn inherit_held(&self);
}

/// The number of threads inside a multi-step change (a completion), which
/// a model reads at its fork point. Production builds: zero-sized, and
/// [`Tally::enter`] compiles to nothing.
#[derive(Debug, Default)]
pub struct Tally {
    #[cfg(any(loom, shuttle))]
    inside: AtomicUsize,
}

/// One thread inside a [`Tally`]; leaves on drop.
pub struct TallyGuard<'a> {
    #[cfg(any(loom, shuttle))]
    tally: &'a Tally,
    #[cfg(not(any(loom, shuttle)))]
    _tally: std::marker::PhantomData<&'a Tally>,
}

impl Tally {
    /// An empty tally.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts the calling thread in until the guard drops.
    #[inline]
    pub fn enter(&self) -> TallyGuard<'_> {
        #[cfg(any(loom, shuttle))]
        {
            self.inside.fetch_add(1, Ordering::Relaxed);
            TallyGuard { tally: self }
        }
        #[cfg(not(any(loom, shuttle)))]
        TallyGuard {
            _tally: std::marker::PhantomData,
        }
    }

    /// Model builds: threads counted in now.
    #[cfg(any(loom, shuttle))]
    pub fn inside(&self) -> usize {
        self.inside.load(Ordering::Relaxed)
    }
}

#[cfg(any(loom, shuttle))]
impl Drop for TallyGuard<'_> {
    fn drop(&mut self) {
        self.tally.inside.fetch_sub(1, Ordering::Relaxed);
    }
}
