//! A gate for a participant's long-running work (calls into a thread
//! pool, say): counts the calls in flight, and lets a fork participant's
//! prepare step hold new calls and wait, bounded, for the ones in flight,
//! so the child does not copy half-done work.
//!
//! Unlike the fork gate (`fork_gate.rs`), whose sections are short bookkeeping,
//! a pass here can last as long as the work: prepare waits for passes only
//! up to its deadline, and then lets the fork go ahead (the participant's
//! child reads [`crate::Inherited::Unprepared`]).
//!
//! # State
//!
//! One word: a CLOSED bit and the count of passes held.
//!
//! | from | to | who | serves |
//! |---|---|---|---|
//! | open, `n` | open, `n + 1` | [`WorkGate::enter`] (compare-and-swap from an open word only) | the count is what a prepare waits for |
//! | open/closed, `n` | same, `n - 1` | a [`WorkPass`]'s drop | |
//! | open, `n` | closed, `n` | [`WorkGate::close_and_wait`], in a prepare step | I5: no new work starts before the fork |
//! | closed, `n` | open, `n` | [`WorkGate::open`], in the parent step | I6: the parent goes on |
//!
//! A thread that finds the gate closed waits outside the count (as the
//! fork gate's refusal does, FORK-SAFETY.md L9), so a fork never copies a
//! count raised by a waiter. A closed gate copied into a child belongs to
//! the parent's epoch; the child builds its own with its own pool.

use crate::participant::PrepareDeadline;
use crate::sync::{pause_briefly, AtomicUsize, Ordering};

const CLOSED: usize = 1 << (usize::BITS - 1);

/// Counts work in flight; closable by a prepare step (see the module's
/// `# State`). Guards P4 (docs/DESIGN.md "Fork participants"), and so I5
/// for a participant's work: with the gate closed and the count at zero,
/// no work is half-done.
///
/// ```
/// use forksafe_core::WorkGate;
/// let gate = WorkGate::new();
/// let pass = gate.enter();
/// assert_eq!(gate.in_flight(), 1);
/// drop(pass);
/// assert_eq!(gate.in_flight(), 0);
/// ```
#[derive(Debug, Default)]
pub struct WorkGate {
    word: AtomicUsize,
}

/// One call in flight; ends on drop.
#[derive(Debug)]
#[must_use = "the work is in flight until this drops"]
pub struct WorkPass<'a> {
    gate: &'a WorkGate,
}

impl Drop for WorkPass<'_> {
    fn drop(&mut self) {
        self.gate.word.fetch_sub(1, Ordering::Release);
    }
}

impl WorkGate {
    crate::sync::const_in_production! {
        /// An open gate with nothing in flight.
        pub fn new() -> Self {
            WorkGate { word: AtomicUsize::new(0) }
        }
    }

    /// Counts a call in flight until the pass drops; while a fork is being
    /// prepared (the gate is closed), waits until the parent step opens it.
    /// The wait is bounded by the fork: prepare steps are bounded.
    pub fn enter(&self) -> WorkPass<'_> {
        let mut seen = 0;
        let mut round = 0;
        loop {
            if seen & CLOSED != 0 {
                pause_briefly(round);
                round = round.saturating_add(1);
                seen = self.word.load(Ordering::Acquire);
                continue;
            }
            match self
                .word
                .compare_exchange(seen, seen + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return WorkPass { gate: self },
                Err(now) => seen = now,
            }
        }
    }

    /// How many calls are in flight.
    pub fn in_flight(&self) -> usize {
        self.word.load(Ordering::Acquire) & !CLOSED
    }

    /// Whether a prepare step holds the gate closed.
    pub fn is_closed(&self) -> bool {
        self.word.load(Ordering::Acquire) & CLOSED != 0
    }

    /// For a prepare step: closes the gate (new calls wait) and waits until
    /// nothing is in flight or `deadline` passes. Returns whether the work
    /// drained. Call [`WorkGate::open`] from the parent step either way.
    pub fn close_and_wait(&self, deadline: &PrepareDeadline<'_>) -> bool {
        self.word.fetch_or(CLOSED, Ordering::AcqRel);
        if control!(CloseWithoutWaiting) {
            return true;
        }
        self.wait_idle(deadline)
    }

    /// For a drain step: waits, without closing the gate, until nothing is
    /// in flight or `deadline` passes. Returns whether nothing was.
    pub fn wait_idle(&self, deadline: &PrepareDeadline<'_>) -> bool {
        let mut round = 0;
        while self.in_flight() != 0 {
            if deadline.passed() {
                return false;
            }
            pause_briefly(round);
            round = round.saturating_add(1);
        }
        true
    }

    /// For a parent step: opens the gate again.
    pub fn open(&self) {
        self.word.fetch_and(!CLOSED, Ordering::AcqRel);
    }
}
