//! The fork epoch a part's state belongs to, and the settle-once step that
//! brings it up to date in a fork child: written once, used by the fork
//! domain's registry and by every engine.
//!
//! The process has one fork epoch, the domain's counter: the atfork child
//! handler adds one to it and does nothing else (I5: constant time,
//! async-signal-safe). Each part whose state a fork copies holds an
//! [`EpochCell`]: the epoch its state was last settled in. A part whose cell
//! is behind the domain's epoch is in a fork child and has not settled; its
//! first caller settles it, once.
//!
//! # State
//!
//! | state | meaning |
//! |---|---|
//! | *current*: `settled == epoch` | the state belongs to this process |
//! | *behind*: `settled < epoch`, not `settling` | a fork child that has not settled yet |
//! | *settling*: `settled < epoch`, `settling` | one thread is running the settle |
//!
//! | from | to | who | serves |
//! |---|---|---|---|
//! | current | behind | the child handler's epoch add (not this cell) | I5: constant-time child step |
//! | behind | settling | the first caller in the child to win the `settling` flag ([`EpochCell::settle_once`]) | I5: settled once |
//! | settling | current | that caller, after its settle step returned | I5 |
//!
//! Other callers wait (spinning, then yielding) while one settles; the
//! settle step waits on nothing (it runs on the child's first thread, with
//! every gate closed and every lock free), so the wait is bounded.

use crate::sync::{spin_step, AtomicBool, AtomicU64, Ordering};

/// The epoch a part's state was settled in (see the module's `# State`).
/// Guards I5's "settle once per epoch".
pub(crate) struct EpochCell {
    settled: AtomicU64,
    settling: AtomicBool,
}

impl EpochCell {
    crate::sync::const_in_production! {
        /// A cell whose state belongs to `epoch`.
        pub(crate) fn new(epoch: u64) -> EpochCell {
            EpochCell {
                settled: AtomicU64::new(epoch),
                settling: AtomicBool::new(false),
            }
        }
    }

    /// The epoch the state was last settled in.
    #[inline]
    pub(crate) fn get(&self) -> u64 {
        self.settled.load(Ordering::Acquire)
    }

    /// Whether the state belongs to `epoch`.
    #[inline]
    pub(crate) fn is(&self, epoch: u64) -> bool {
        self.get() == epoch
    }

    /// Brings the state up to `epoch()` if it is behind: the caller that
    /// wins runs `settle(epoch)` and then marks the cell current; other
    /// callers return once it has. `settle` may not wait on anything, and
    /// ends by reopening the part's fork gate: marking the cell only after
    /// that means a caller that waited here (a fork prepare in the child,
    /// say) finds the gate open, and closes it after the settle, never
    /// before it. A thread the open gate lets in meanwhile checks the cell
    /// first, so it waits here too.
    pub(crate) fn settle_once(&self, epoch: impl Fn() -> u64, settle: impl FnOnce(u64)) {
        let mut round = 0;
        loop {
            let now = epoch();
            if self.is(now) {
                return;
            }
            if self
                .settling
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // Another caller may have settled between the check and
                // the flag.
                if !self.is(now) {
                    settle(now);
                    self.settled.store(now, Ordering::Release);
                }
                self.settling.store(false, Ordering::Release);
                return;
            }
            spin_step(round);
            round = round.saturating_add(1);
        }
    }

    /// Model snapshots: the rebuilt child's state belongs to `epoch`.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn set(&self, epoch: u64) {
        self.settled.store(epoch, Ordering::Release);
    }
}

#[cfg(all(test, not(any(loom, shuttle))))]
mod tests {
    use super::EpochCell;
    use std::cell::Cell;

    #[test]
    fn settles_once_per_epoch_and_only_when_behind() {
        let cell = EpochCell::new(0);
        let runs = Cell::new(Vec::new());
        let record = |e: u64| {
            let mut v = runs.take();
            v.push(e);
            runs.set(v);
        };
        cell.settle_once(|| 0, record);
        assert_eq!(runs.take(), Vec::<u64>::new(), "current: nothing to settle");
        cell.settle_once(
            || 2,
            |e| {
                assert!(!cell.is(2), "marked current only after the settle step");
                record(e)
            },
        );
        cell.settle_once(|| 2, record);
        assert_eq!(
            runs.take(),
            vec![2],
            "behind: settled once, at the new epoch"
        );
        assert!(cell.is(2));
    }
}
