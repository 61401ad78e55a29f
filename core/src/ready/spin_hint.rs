//! A lane's spin hint: lets a worker that found the lane empty wait a
//! moment for a newly queued op before it registers as idle and parks, so a
//! busy pusher hands ops over with no park or wake system call. A hint
//! only: every decision is taken again under the queues' locks, and a hint
//! missed costs one spin period, never an op (`README.md`).
//!
//! # State
//!
//! `spinners` counts the lane's workers spinning now; `queued` is bumped
//! by a dispatch that queued an op while one spins:
//!
//! | what | from | to | who | serves |
//! |---|---|---|---|---|
//! | `spinners` | n | n + 1 | a worker about to look at the queues a last time before spinning ([`SpinHint::start`]) | — |
//! | `spinners` | n + 1 | n | that worker, when it stops spinning ([`Spinning`]'s drop) | — |
//! | `queued` | g | g + 1 | a dispatch that queued an op and read `spinners > 0` ([`SpinHint::queued`]) | a spinning worker sees the op without a wake-up |
//!
//! Why a dispatch may skip the bump when it reads no spinner: the worker
//! counts itself and reads `queued` *before* its look, which locks the queue
//! a dispatch queues under. A dispatch whose queue lock comes after that
//! look therefore reads the count (lock order) and its bump comes after
//! the worker's read; one whose lock comes before it is seen by the look.
//! So no global word is written per op while every worker is busy: the
//! per-op path stays off shared lines (docs/DESIGN.md, "The per-op path
//! and the live set"). Not in model builds: they do not spin
//! (`engine/worker.rs`, `SPIN_BEFORE_PARK`).

use crate::sync::{spin_step, AtomicUsize, CachePadded, Ordering};

/// One lane's spin hint (see the module's `# State`).
pub(crate) struct SpinHint {
    /// Padded apart: `spinners` is read by every dispatch and written only
    /// when a worker starts or stops spinning; `queued` is written only
    /// while one spins.
    spinners: CachePadded<AtomicUsize>,
    queued: CachePadded<AtomicUsize>,
}

impl SpinHint {
    pub(crate) fn new() -> Self {
        SpinHint {
            spinners: CachePadded::new(AtomicUsize::new(0)),
            queued: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    /// After a dispatch queued an op (its queue lock released): tells a
    /// spinning worker, if there is one.
    #[inline]
    pub(crate) fn queued(&self) {
        if self.spinners.load(Ordering::Relaxed) > 0 {
            self.queued.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts the calling worker as spinning; call before its last look at
    /// the queues, and spin with [`Spinning::wait`] only after that look.
    pub(crate) fn start(&self) -> Spinning<'_> {
        self.spinners.fetch_add(1, Ordering::Relaxed);
        Spinning {
            hint: self,
            seen: self.queued.load(Ordering::Relaxed),
        }
    }
}

/// A worker counted as spinning; uncounted when dropped.
pub(crate) struct Spinning<'a> {
    hint: &'a SpinHint,
    seen: usize,
}

impl Spinning<'_> {
    /// Spins up to `rounds` rounds, until a dispatch has queued an op
    /// since [`SpinHint::start`].
    pub(crate) fn wait(&self, rounds: u32) {
        let mut round = 0;
        while round < rounds && self.hint.queued.load(Ordering::Relaxed) == self.seen {
            spin_step(round);
            round += 1;
        }
    }
}

impl Drop for Spinning<'_> {
    fn drop(&mut self) {
        self.hint.spinners.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::SpinHint;

    /// A dispatch bumps the hint only while a worker spins, and a spinner
    /// returns as soon as one did.
    #[test]
    fn the_hint_is_written_only_while_a_worker_spins() {
        let hint = SpinHint::new();
        hint.queued();
        assert_eq!(hint.queued.load(super::Ordering::Relaxed), 0);
        let spinning = hint.start();
        hint.queued();
        assert_eq!(hint.queued.load(super::Ordering::Relaxed), 1);
        // Returns at once: the op came after `start`.
        spinning.wait(u32::MAX);
        drop(spinning);
        hint.queued();
        assert_eq!(hint.queued.load(super::Ordering::Relaxed), 1);
    }
}
