//! A slot whose value is taken at most once, by the one thread that won the
//! right to take it elsewhere (an op's status compare-and-swap). It needs no
//! lock of its own: loom builds check, through loom's `UnsafeCell`, that no
//! two threads ever touch it without an ordering between them.
//!
//! # State
//!
//! Full (the payload) → empty, once, by the thread that won the op's
//! status move out of `Queued` (`op.rs`); never full again.

#[cfg(loom)]
use loom::cell::UnsafeCell;
#[cfg(not(loom))]
use std::cell::UnsafeCell;

/// Holds an op's payload until the thread that dispatches, cancels or loses
/// the op takes it. Guards I2 together with the op status: only the winner of
/// the status change that ends `QUEUED` takes the payload.
pub(crate) struct TakeOnce<T> {
    cell: UnsafeCell<Option<T>>,
}

// SAFETY: the value moves between threads (`T: Send`), and every access goes
// through `take`/`cloned`, whose callers guarantee that no two threads access
// the cell concurrently and that accesses are ordered (happens-before).
unsafe impl<T: Send> Sync for TakeOnce<T> {}

impl<T> TakeOnce<T> {
    /// A slot holding `value`.
    pub(crate) fn new(value: Option<T>) -> Self {
        TakeOnce {
            cell: UnsafeCell::new(value),
        }
    }

    /// Takes the value, leaving `None`.
    ///
    /// # Safety
    ///
    /// No other thread accesses the slot at the same time, and every earlier
    /// access by another thread happens-before this one. For an op: the
    /// caller won the status change out of `QUEUED` (acquire-release), or it
    /// is a fork child's only thread, or the fork gate is closed.
    pub(crate) unsafe fn take(&self) -> Option<T> {
        #[cfg(loom)]
        {
            // SAFETY: exclusive and ordered access, as the caller promises.
            self.cell.with_mut(|slot| unsafe { (*slot).take() })
        }
        #[cfg(not(loom))]
        {
            // SAFETY: exclusive and ordered access, as the caller promises.
            unsafe { (*self.cell.get()).take() }
        }
    }

    /// A copy of the value (model snapshots).
    ///
    /// # Safety
    ///
    /// As for [`TakeOnce::take`]: no thread takes the value meanwhile.
    #[cfg(any(loom, shuttle))]
    pub(crate) unsafe fn cloned(&self) -> Option<T>
    where
        T: Clone,
    {
        #[cfg(loom)]
        {
            // SAFETY: no concurrent take, as the caller promises.
            self.cell.with(|slot| unsafe { (*slot).clone() })
        }
        #[cfg(not(loom))]
        {
            // SAFETY: no concurrent take, as the caller promises.
            unsafe { (*self.cell.get()).clone() }
        }
    }
}
