//! A value whose accesses the engine's var grants order (I9, the access
//! grant: while an op's body runs, the op holds a grant on each var it
//! names; a writer's grant is exclusive, readers' grants are shared with
//! readers only — docs/DESIGN.md). [`DataCell`] has no lock of its own:
//! whoever reads or writes it promises to hold such a grant, which is why
//! both accessors are `unsafe`.
//!
//! The promise is checked in model builds. loom builds keep the value in
//! loom's `UnsafeCell`, which fails the model on two accesses that are not
//! ordered by a happens-before edge (one of them a write). Shuttle builds
//! (and loom builds too) also keep a borrow count in a plain atomic the
//! checker does not model, and fail the model on a write that overlaps any
//! other access in time; exact, since a model's threads are coroutines on
//! one OS thread. Production builds keep the value and nothing else.
//!
//! # State
//!
//! The borrow count (model builds only):
//!
//! | state | moved to by | invariant |
//! |---|---|---|
//! | 0: free | the last guard's drop | — |
//! | n > 0: n readers | [`DataCell::read`] from free or readers | I9: readers share |
//! | writer | [`DataCell::write`] from free only | I9: a writer is alone |

#[cfg(any(loom, shuttle))]
use std::sync::atomic::{AtomicUsize, Ordering};

#[cfg(loom)]
use loom::cell::{ConstPtr, MutPtr, UnsafeCell};
#[cfg(not(loom))]
use std::cell::UnsafeCell;

/// The borrow count's writer mark.
#[cfg(any(loom, shuttle))]
const WRITER: usize = usize::MAX;

/// A value read and written only by ops holding a grant on its var (I9).
pub struct DataCell<T> {
    value: UnsafeCell<T>,
    #[cfg(any(loom, shuttle))]
    borrows: AtomicUsize,
}

// SAFETY: the value moves between threads through `write` (`T: Send`) and
// is shared by concurrent readers through `read` (`T: Sync`); the callers
// of both promise the grant that orders them (I9).
unsafe impl<T: Send + Sync> Sync for DataCell<T> {}
// SAFETY: as above: owning the cell owns the value.
unsafe impl<T: Send> Send for DataCell<T> {}

/// A shared borrow of a [`DataCell`]'s value.
pub struct DataRef<'a, T> {
    #[cfg(loom)]
    ptr: ConstPtr<T>,
    #[cfg(not(loom))]
    value: &'a T,
    #[cfg(any(loom, shuttle))]
    cell: &'a DataCell<T>,
}

/// The exclusive borrow of a [`DataCell`]'s value.
pub struct DataMut<'a, T> {
    #[cfg(loom)]
    ptr: MutPtr<T>,
    #[cfg(not(loom))]
    value: &'a mut T,
    #[cfg(any(loom, shuttle))]
    cell: &'a DataCell<T>,
}

impl<T> DataCell<T> {
    /// A cell holding `value`.
    pub fn new(value: T) -> Self {
        DataCell {
            value: UnsafeCell::new(value),
            #[cfg(any(loom, shuttle))]
            borrows: AtomicUsize::new(0),
        }
    }

    /// The value, by move: nobody else can hold a borrow of an owned cell.
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }

    /// Borrows the value shared.
    ///
    /// # Safety
    ///
    /// The caller holds, until the returned borrow drops, a read or write
    /// grant on the var this cell belongs to (I9), so no writer runs
    /// meanwhile.
    pub unsafe fn read(&self) -> DataRef<'_, T> {
        #[cfg(any(loom, shuttle))]
        {
            let seen = self.borrows.load(Ordering::Relaxed);
            assert!(
                seen != WRITER,
                "access grant (I9) broken: a read overlaps a write of the same data"
            );
            self.borrows.store(seen + 1, Ordering::Relaxed);
        }
        DataRef {
            #[cfg(loom)]
            ptr: self.value.get(),
            // SAFETY: the caller's grant excludes writers (I9).
            #[cfg(not(loom))]
            value: unsafe { &*self.value.get() },
            #[cfg(any(loom, shuttle))]
            cell: self,
        }
    }

    /// Borrows the value exclusively.
    ///
    /// # Safety
    ///
    /// The caller holds, until the returned borrow drops, the write grant
    /// on the var this cell belongs to (I9), so no other op accesses it,
    /// and takes no other borrow of this cell meanwhile.
    pub unsafe fn write(&self) -> DataMut<'_, T> {
        #[cfg(any(loom, shuttle))]
        {
            let seen = self.borrows.load(Ordering::Relaxed);
            assert!(
                seen == 0,
                "access grant (I9) broken: a write overlaps another access of the same data \
                 ({seen} borrows held)"
            );
            self.borrows.store(WRITER, Ordering::Relaxed);
        }
        DataMut {
            #[cfg(loom)]
            ptr: self.value.get_mut(),
            // SAFETY: the caller's write grant makes this the only access (I9).
            #[cfg(not(loom))]
            value: unsafe { &mut *self.value.get() },
            #[cfg(any(loom, shuttle))]
            cell: self,
        }
    }
}

impl<T> std::ops::Deref for DataRef<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        #[cfg(loom)]
        {
            // SAFETY: loom tracks the access while `ptr` lives; the grant
            // promised at `read` excludes writers (I9).
            unsafe { self.ptr.deref() }
        }
        #[cfg(not(loom))]
        {
            self.value
        }
    }
}

impl<T> std::ops::Deref for DataMut<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        #[cfg(loom)]
        {
            // SAFETY: as in `deref_mut`.
            unsafe { &*self.ptr.deref() }
        }
        #[cfg(not(loom))]
        {
            self.value
        }
    }
}

impl<T> std::ops::DerefMut for DataMut<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        #[cfg(loom)]
        {
            // SAFETY: loom tracks the access while `ptr` lives; the write
            // grant promised at `write` makes it the only one (I9), and
            // `&mut self` the only borrow through this guard.
            unsafe { self.ptr.deref() }
        }
        #[cfg(not(loom))]
        {
            self.value
        }
    }
}

#[cfg(any(loom, shuttle))]
impl<T> Drop for DataRef<'_, T> {
    fn drop(&mut self) {
        self.cell.borrows.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(any(loom, shuttle))]
impl<T> Drop for DataMut<'_, T> {
    fn drop(&mut self) {
        self.cell.borrows.store(0, Ordering::Relaxed);
    }
}

impl<T> std::fmt::Debug for DataCell<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataCell(..)")
    }
}

#[cfg(all(test, not(any(loom, shuttle))))]
mod tests {
    use super::DataCell;

    #[test]
    fn reads_see_the_last_write_and_into_inner_gives_it_back() {
        let cell = DataCell::new(vec![1, 2]);
        // SAFETY: one thread, no other borrow: the grant is trivially held.
        unsafe {
            cell.write().push(3);
            let (a, b) = (cell.read(), cell.read());
            assert_eq!((a.len(), b[2]), (3, 3));
        }
        assert_eq!(cell.into_inner(), vec![1, 2, 3]);
    }
}
