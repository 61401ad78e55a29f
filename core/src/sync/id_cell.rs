//! An op's id in its record: written once, by the pusher, while it holds
//! every lock of the op's vars and before the record is shared with any
//! other thread; read by everyone after. The sharing (the record's append
//! to a var's queue under that var's lock, its listing in the live set
//! under a shard lock) orders the write before every read, so the cell
//! needs no ordering of its own, and the model checkers do not model it: a
//! read is a plain load, not a scheduling point.
//!
//! # State
//!
//! Unset (0) → the op's id, once, by its pusher ([`IdCell::set`]); never
//! changed after.

/// The id of one op record (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct IdCell(std::sync::atomic::AtomicU64);

impl IdCell {
    /// A cell holding `id` (0: not yet set).
    pub(crate) fn new(id: u64) -> Self {
        IdCell(std::sync::atomic::AtomicU64::new(id))
    }

    /// The id.
    #[inline]
    pub(crate) fn get(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets the id: only the pusher, before the record is shared.
    #[inline]
    pub(crate) fn set(&self, id: u64) {
        self.0.store(id, std::sync::atomic::Ordering::Relaxed);
    }
}
