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

use crate::sync::{spin_step, thread_shard, AtomicUsize, Ordering, MODEL_BUILD};

const CLOSED: usize = 1 << (usize::BITS - 1);
const SHARDS: usize = if MODEL_BUILD { 1 } else { 16 };

/// Guards I5/I6: the state is copied at fork only between sections.
pub(crate) struct ForkGate {
    shards: [Padded; SHARDS],
}

#[repr(align(128))]
struct Padded(AtomicUsize);

/// An open section; closes on drop.
pub(crate) struct Section<'a> {
    word: &'a AtomicUsize,
}

impl Drop for Section<'_> {
    fn drop(&mut self) {
        self.word.fetch_sub(1, Ordering::Release);
    }
}

impl ForkGate {
    #[cfg(not(any(loom, shuttle)))]
    pub(crate) const fn new() -> Self {
        ForkGate {
            shards: [const { Padded(AtomicUsize::new(0)) }; SHARDS],
        }
    }

    #[cfg(any(loom, shuttle))]
    pub(crate) fn new() -> Self {
        ForkGate {
            shards: std::array::from_fn(|_| Padded(AtomicUsize::new(0))),
        }
    }

    /// Opens a section on this thread's shard, or returns `None` if the gate
    /// is closed (a fork is being prepared, or a child has not settled yet).
    pub(crate) fn try_enter(&self) -> Option<Section<'_>> {
        let word = &self.shards[thread_shard(SHARDS)].0;
        let before = word.fetch_add(1, Ordering::Acquire);
        if before & CLOSED == 0 {
            Some(Section { word })
        } else {
            word.fetch_sub(1, Ordering::Release);
            None
        }
    }

    /// Closes the gate and waits until every open section has ended.
    /// Bounded: sections only take other sections' short locks.
    pub(crate) fn close(&self) {
        for s in self.shards.iter() {
            s.0.fetch_or(CLOSED, Ordering::AcqRel);
        }
        for s in self.shards.iter() {
            let mut round = 0;
            while s.0.load(Ordering::Acquire) & !CLOSED != 0 {
                spin_step(round);
                round = round.saturating_add(1);
            }
        }
    }

    /// Reopens the gate.
    pub(crate) fn open(&self) {
        for s in self.shards.iter() {
            s.0.fetch_and(!CLOSED, Ordering::AcqRel);
        }
    }
}
