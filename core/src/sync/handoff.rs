//! Hand-overs from an op's payload to the thread that waits for the op.
//!
//! [`Handoff`]: a one-value hand-over from an op's body to the thread that
//! waits for the op (`forksafe::OpHandle`): the body puts, the waiter
//! takes after the op has completed. The engine's completion orders the
//! two (the waiter returns from its wait only after the op's completion),
//! so the lock here is never contended in practice; it is what makes the
//! hand-over sound whatever the order.
//!
//! [`DropFlag`]: set when a payload is gone (run or dropped), for a waiter
//! that must not return while the payload may still run its destructors
//! (`forksafe::Scope`: a scoped op's payload borrows the caller's stack).
//!
//! # State
//!
//! | type | from | to | who |
//! |---|---|---|---|
//! | [`Handoff`] | empty | full | the op's body ([`Handoff::put`]) |
//! | [`Handoff`] | full | empty | the waiter, after the op completed ([`Handoff::take`]) |
//! | [`DropFlag`] | unset | set | the payload's guard, when it drops (run or not) |

use super::{Arc, AtomicBool, Mutex, Ordering};

/// Holds at most one value; put by one thread, taken by another.
///
/// ```
/// use forksafe_core::sync::Handoff;
/// let h = Handoff::new();
/// assert_eq!(h.take(), None);
/// h.put(1);
/// h.put(2); // replaces the value not taken
/// assert_eq!(h.take(), Some(2));
/// assert_eq!(h.take(), None, "taken once");
/// ```
#[derive(Debug, Default)]
pub struct Handoff<T> {
    value: Mutex<Option<T>>,
}

impl<T> Handoff<T> {
    /// An empty hand-over.
    pub fn new() -> Self {
        Handoff {
            value: Mutex::new(None),
        }
    }

    /// Puts `value`, replacing any value not yet taken.
    pub fn put(&self, value: T) {
        *self.value.lock() = Some(value);
    }

    /// Takes the value, if one was put and not taken yet.
    pub fn take(&self) -> Option<T> {
        self.value.lock().take()
    }
}

/// A flag set when its [`DropFlagGuard`] drops (by return, unwind or drop).
///
/// ```
/// use forksafe_core::sync::DropFlag;
/// let flag = DropFlag::new();
/// let guard = flag.guard();
/// assert!(!flag.is_set(), "unset while the guard lives");
/// drop(guard);
/// assert!(flag.is_set());
/// ```
#[derive(Debug, Default, Clone)]
pub struct DropFlag(Arc<AtomicBool>);

/// Sets its [`DropFlag`] when dropped.
#[derive(Debug)]
pub struct DropFlagGuard(DropFlag);

impl DropFlag {
    /// An unset flag.
    pub fn new() -> Self {
        Self::default()
    }

    /// The guard that sets this flag when it drops.
    pub fn guard(&self) -> DropFlagGuard {
        DropFlagGuard(self.clone())
    }

    /// Whether the guard has dropped (its drop happens-before this `true`).
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

impl Drop for DropFlagGuard {
    fn drop(&mut self) {
        self.0 .0.store(true, Ordering::Release);
    }
}
