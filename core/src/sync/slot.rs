//! A one-value hand-over from an op's body to the thread that waits for
//! the op (`forksafe::OpHandle`): the body puts, the waiter takes after
//! the op has completed. The engine's completion orders the two (the
//! waiter returns from its wait only after the op's completion), so the
//! lock here is never contended in practice; it is what makes the
//! hand-over sound whatever the order.

use super::Mutex;

/// Holds at most one value; put by one thread, taken by another.
#[derive(Debug, Default)]
pub struct Slot<T> {
    value: Mutex<Option<T>>,
}

impl<T> Slot<T> {
    /// An empty slot.
    pub fn new() -> Self {
        Slot {
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
