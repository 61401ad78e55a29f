//! The fork gate. Every multi-step bookkeeping change (push, dispatch,
//! completion, deletion, waiter registration) runs inside a *section*; the
//! fork prepare step closes the gate and waits until no section is open, so
//! the OS copies a consistent state in which no engine lock is held
//! (I5, I6). Sections never wait on anything but other sections' short
//! locks, so prepare is bounded by the longest section.
//!
//! The gate is sharded: each shard is one atomic word holding a CLOSED bit
//! and the count of open sections, so entering is one read-modify-write on
//! a word shared only by threads of the same shard; there is no global lock
//! on the hot path.
//!
//! Debug builds also count, per thread, the sections it has open, so that
//! taking an engine lock outside every section panics
//! (`sync/lock_order.rs`): the rule above, checked on every lock rather
//! than only where a model's fork happens to land.
//!
//! # State
//!
//! Each shard word is *open* with a count of sections (`CLOSED` bit clear)
//! or *closed* (`CLOSED` set), with the count of the sections still open:
//!
//! | from | to | who | serves |
//! |---|---|---|---|
//! | open, n | open, n + 1 | a thread entering a section, by one compare-exchange from an open word ([`ForkGate::try_enter`]); refused on a closed word without touching the count | I5: a child never inherits a count no thread of it takes back |
//! | open, n + 1 | open, n | the section's end ([`Section`]'s drop) | — |
//! | open, n | closed, n | fork prepare ([`ForkGate::close`]), which then waits for n to reach 0 | I5, I6: the OS copies no half step |
//! | closed, n + 1 | closed, n | a section ending while closed; wakes the closer | prepare is bounded by the longest section |
//! | closed, 0 | open, 0 | fork parent, or a child's settle ([`ForkGate::open`]) | I6 |

#[cfg(not(loom))]
use crate::sync::spin_step;
#[cfg(loom)]
use crate::sync::{current_thread, park_current, Mutex, Thread};
use crate::sync::{thread_shard, AtomicUsize, CachePadded, Ordering, MODEL_BUILD};

pub(crate) const CLOSED: usize = 1 << (usize::BITS - 1);
const SHARDS: usize = if MODEL_BUILD { 1 } else { 16 };

/// Guards I5/I6: the state is copied at fork only between sections.
pub(crate) struct ForkGate {
    shards: [CachePadded<AtomicUsize>; SHARDS],
    /// loom builds: threads waiting for the gate to open or for sections
    /// to end park here instead of spinning. loom charges every spin round,
    /// and a spin across a long fork window exhausts its branch limit
    /// without any bug. Production (and shuttle, whose step bound is
    /// generous) spins: the wait is bounded by a fork or by one section.
    #[cfg(loom)]
    waiters: Mutex<Vec<Thread>>,
}

/// An open section; closes on drop.
pub(crate) struct Section<'a> {
    pub(crate) gate: &'a ForkGate,
    pub(crate) word: &'a AtomicUsize,
}

impl Drop for Section<'_> {
    fn drop(&mut self) {
        crate::sync::section_closed();
        let before = self.word.fetch_sub(1, Ordering::Release);
        if before & CLOSED != 0 {
            // A closer may be waiting for this section to end.
            self.gate.wake();
        }
    }
}

impl ForkGate {
    #[cfg(not(any(loom, shuttle)))]
    pub(crate) const fn new() -> Self {
        ForkGate {
            shards: [const { CachePadded::new(AtomicUsize::new(0)) }; SHARDS],
        }
    }

    #[cfg(any(loom, shuttle))]
    pub(crate) fn new() -> Self {
        ForkGate {
            shards: std::array::from_fn(|_| CachePadded::new(AtomicUsize::new(0))),
            #[cfg(loom)]
            waiters: Mutex::ranked(Vec::new(), crate::sync::LockRank::Leaf),
        }
    }

    /// Opens a section on this thread's shard, or returns `None` if the gate
    /// is closed (a fork is being prepared, or a child has not settled yet).
    ///
    /// A refused thread never touches the count: the count is raised only
    /// by a compare-exchange from an open word, so once `close` has seen a
    /// shard at zero it stays at zero until `open`, and the OS copies a
    /// zero into the child. (Counting in and backing out, as a
    /// `fetch_add`/`fetch_sub` pair would, left a count of one in a child
    /// forked between the two, with no thread to take it back: the child's
    /// own next fork waited for ever. FORK-SAFETY.md, L9.)
    pub(crate) fn try_enter(&self) -> Option<Section<'_>> {
        let word = &*self.shards[thread_shard(SHARDS)];
        control!(CountedRefusal => return crate::controls::counted_try_enter(self, word));
        // Expect the usual count, zero, rather than load first: one
        // read-modify-write when the shard is quiet, and a failed exchange
        // returns the newest word to retry from.
        let mut seen = 0;
        loop {
            match word.compare_exchange(seen, seen + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => {
                    crate::sync::section_opened();
                    return Some(Section { gate: self, word });
                }
                Err(now) if now & CLOSED != 0 => return None,
                Err(now) => seen = now,
            }
        }
    }

    /// Closes the gate and waits until every open section has ended.
    /// Bounded: sections only take other sections' short locks.
    pub(crate) fn close(&self) {
        for s in self.shards.iter() {
            s.fetch_or(CLOSED, Ordering::AcqRel);
        }
        for s in self.shards.iter() {
            let mut round = 0;
            let open_sections = || s.load(Ordering::Acquire) & !CLOSED != 0;
            while open_sections() {
                self.wait_while(round, open_sections);
                round = round.saturating_add(1);
            }
        }
    }

    /// Reopens the gate.
    pub(crate) fn open(&self) {
        for s in self.shards.iter() {
            s.fetch_and(!CLOSED, Ordering::AcqRel);
        }
        self.wake();
    }

    /// Model builds: the sections counted in, as a fork would copy them.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn counted(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.load(Ordering::Acquire) & !CLOSED)
            .sum()
    }

    /// Model builds: a fork child's gate starts with the count its parent's
    /// had at the fork point, as the OS copies the word.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn inherit(&self, counted: usize) {
        self.shards[0].fetch_add(counted, Ordering::AcqRel);
    }

    /// Whether the gate is closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.shards[0].load(Ordering::Acquire) & CLOSED != 0
    }

    /// One round of waiting while `blocked()` holds: a spin step in
    /// production and shuttle builds; in loom builds, park until the gate opens or a section
    /// ends (registered before `blocked` is checked again, so no wake-up is
    /// lost).
    pub(crate) fn wait_while(&self, round: u32, blocked: impl Fn() -> bool) {
        #[cfg(loom)]
        {
            let _ = round;
            self.waiters.lock().push(current_thread());
            if blocked() {
                park_current();
            }
        }
        #[cfg(not(loom))]
        {
            let _ = &blocked;
            spin_step(round);
        }
    }

    /// loom builds: wakes every waiting thread.
    pub(crate) fn wake(&self) {
        #[cfg(loom)]
        {
            let waiters: Vec<Thread> = self.waiters.lock().drain(..).collect();
            for t in waiters {
                t.unpark();
            }
        }
    }
}
