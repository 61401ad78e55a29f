//! A value on its own cache line(s), so that a word one set of threads
//! writes on every op does not share a line with a word other threads read
//! or write (false sharing: each write would pull the line away from the
//! readers). 128 bytes: adjacent-line prefetch on x86 pairs 64-byte lines,
//! which is also crossbeam's choice for `CachePadded` on x86_64.

/// `T` aligned (and so padded) to 128 bytes. Dereferences to `T`.
///
/// ```
/// use forksafe_core::sync::{AtomicUsize, CachePadded, Ordering};
/// let hot = CachePadded::new(AtomicUsize::new(0));
/// hot.fetch_add(1, Ordering::Relaxed);
/// assert_eq!(hot.load(Ordering::Relaxed), 1);
/// assert_eq!(std::mem::align_of_val(&hot), 128);
/// ```
#[repr(align(128))]
#[derive(Default)]
pub struct CachePadded<T>(T);

impl<T> CachePadded<T> {
    /// `value` on its own line.
    pub const fn new(value: T) -> Self {
        CachePadded(value)
    }
}

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for CachePadded<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}
