//! The engine's own threads, so that shutdown can wait until they are gone.
//!
//! Why: a thread that has left the engine's code is still not gone. Rust's
//! std takes a process-wide mutex (`stack_overflow::thread_info`'s `LOCK`)
//! on the way out of every thread it started, and on the way in of every new
//! one. A raw `fork()` that catches an exiting thread holding it leaves the
//! child with that mutex locked for good: no thread std starts in the child
//! ever runs, the engine's workers included. Only a join (the kernel clears
//! the thread id after the last user-space step) tells that a thread is gone.
//!
//! The same mutex is taken on the way *in*, before the thread's closure
//! runs, so a fork that catches a worker starting has the same effect. Fork
//! prepare therefore waits until every worker counted as starting has
//! reached its closure ([`Exits::starting`], [`Exits::wait_for_starting`]):
//! bounded, since a starting thread runs only std's prologue, which waits
//! on no engine or host lock.
//!
//! Production builds keep each worker's handle with a flag the worker sets as
//! the last step of its closure, and a count of starting workers; model
//! builds keep nothing (their threads never really exit or take std's
//! mutex, and a model joins them itself).
//!
//! # State
//!
//! | what | move | who | serves |
//! |---|---|---|---|
//! | starting count | n → n + 1 → n | a worker being spawned, counted in a section ([`Exits::starting`]); the new thread, on entering its closure | L8: prepare waits until no worker is in std's start-up path ([`Exits::wait_for_starting`]) |
//! | handles | + (flag, handle) | the spawner, in a section ([`Exits::add`]) | shutdown can join |
//! | a handle's flag | unset → set | its thread, as the last step of its closure, unwinding included ([`Leaving`]) | a set flag means the thread runs no engine or host code |
//! | handles | flagged → joined | shutdown ([`Exits::take_leaving`], [`join_leaving`]) | L8: no engine thread is mid-exit when shutdown returns |
//! | all | any → forgotten | the fork child's settle ([`Exits::forget_all`]): the parent's threads do not exist there | I5: a child never joins a thread it does not have |

#[cfg(not(any(loom, shuttle)))]
use super::{spin_step, Arc, AtomicBool, AtomicUsize, Ordering};
use super::{JoinHandle, Mutex};

/// A flag a tracked thread sets as the last step of its closure.
#[derive(Debug, Default, Clone)]
pub struct Leaving(#[cfg(not(any(loom, shuttle)))] Arc<AtomicBool>);

impl Leaving {
    /// A new, unset flag.
    pub fn new() -> Self {
        Self::default()
    }

    /// Says the thread is leaving: it runs no engine or host code any more.
    pub fn set(&self) {
        #[cfg(not(any(loom, shuttle)))]
        self.0.store(true, Ordering::Release);
    }

    /// A guard that sets the flag when dropped, by return or by unwind.
    pub fn on_drop(self) -> SetOnDrop {
        SetOnDrop(self)
    }

    #[cfg(not(any(loom, shuttle)))]
    fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Sets its [`Leaving`] flag when dropped.
#[derive(Debug)]
pub struct SetOnDrop(Leaving);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.set();
    }
}

/// A thread counted as starting, from before it is spawned until the first
/// step of its closure (or until its spawn fails): dropping it takes it off
/// the count. Guards I5 against std's thread-start mutex (see the module
/// comment): prepare waits until no thread is counted.
#[derive(Debug)]
pub struct Starting(#[cfg(not(any(loom, shuttle)))] Arc<AtomicUsize>);

impl Drop for Starting {
    fn drop(&mut self) {
        #[cfg(not(any(loom, shuttle)))]
        self.0.fetch_sub(1, Ordering::Release);
    }
}

/// Handles of the threads a [`Leaving`] flag goes with, and the count of
/// threads starting. Guards I5 (a fork child can start threads) as far as
/// the engine's own threads go: see the module comment.
#[derive(Debug, Default)]
pub struct Exits {
    #[cfg_attr(any(loom, shuttle), allow(dead_code))]
    threads: Mutex<Vec<(Leaving, JoinHandle<()>)>>,
    #[cfg(not(any(loom, shuttle)))]
    starting: Arc<AtomicUsize>,
}

impl Exits {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Tracks a thread. Model builds drop (detach) the handle.
    pub fn add(&self, leaving: Leaving, handle: JoinHandle<()>) {
        #[cfg(not(any(loom, shuttle)))]
        self.threads.lock().push((leaving, handle));
        #[cfg(any(loom, shuttle))]
        drop((leaving, handle));
    }

    /// Takes out the threads that are leaving (their flag is set), and says
    /// how many tracked threads are left, not counting the calling thread.
    pub fn take_leaving(&self) -> (Vec<JoinHandle<()>>, usize) {
        #[cfg(not(any(loom, shuttle)))]
        {
            let me = std::thread::current().id();
            let mut threads = self.threads.lock();
            let mut taken = Vec::new();
            let mut i = 0;
            while i < threads.len() {
                if threads[i].0.is_set() && threads[i].1.thread().id() != me {
                    taken.push(threads.swap_remove(i).1);
                } else {
                    i += 1;
                }
            }
            let left = threads
                .iter()
                .filter(|(_, h)| h.thread().id() != me)
                .count();
            (taken, left)
        }
        #[cfg(any(loom, shuttle))]
        {
            (Vec::new(), 0)
        }
    }

    /// Counts a thread as starting until the returned guard is dropped. Call
    /// inside a section, so that a prepare (which waits for open sections
    /// first) sees the count; drop the guard as the thread's first step.
    pub fn starting(&self) -> Starting {
        #[cfg(not(any(loom, shuttle)))]
        {
            self.starting.fetch_add(1, Ordering::AcqRel);
            Starting(self.starting.clone())
        }
        #[cfg(any(loom, shuttle))]
        Starting()
    }

    /// Fork prepare, after the gate closed: waits until no thread is
    /// counted as starting. Bounded: each such thread was spawned, or is
    /// being spawned, by a thread outside every section, and std's
    /// prologue waits on no engine or host lock.
    pub fn wait_for_starting(&self) {
        #[cfg(not(any(loom, shuttle)))]
        {
            let mut round = 0;
            while self.starting.load(Ordering::Acquire) != 0 {
                spin_step(round);
                round = round.saturating_add(1);
            }
        }
    }

    /// Fork child: forgets every handle (never join, detach or drop a
    /// vanished thread's handle, docs/DESIGN.md). Only called with no section
    /// open, so no thread of the child holds the lock.
    pub fn forget_all(&self) {
        let threads = std::mem::take(&mut *self.threads.lock());
        std::mem::forget(threads);
    }
}

/// Joins threads that said they are leaving: each has run its last step of
/// engine code and holds no engine or host lock, so this waits only for
/// their exit. A thread that panicked is joined the same way.
pub fn join_leaving(handles: Vec<JoinHandle<()>>) {
    for h in handles {
        let _ = h.join();
    }
}
