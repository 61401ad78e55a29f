//! A value owned per fork epoch: built lazily by the first use in each
//! process, never carried into a fork child. For what a fork cannot copy
//! into a working state — a thread pool (its threads are not copied), a
//! connection — the child builds its own at first use (I5: nothing eager
//! in the child step) and leaves the parent's copy alone.
//!
//! # State
//!
//! One atomic word: empty, or a pointer to an entry `(epoch, value)`.
//!
//! | from | to | who | serves |
//! |---|---|---|---|
//! | empty | entry of epoch `e` | the first [`ForkLocal::get_or_try_init`] in a process at epoch `e` (one compare-and-swap; racing builders drop their value) | one value per process |
//! | entry of `e` | entry of `c > e` | the first use in a fork child at epoch `c` | I5: the child never uses what the parent's threads own |
//! | entry of `c` | freed | [`ForkLocal`]'s drop, in the process of epoch `c` | no leak within a process |
//!
//! A fork copies the word as it is: the parent's entry or none. Within one
//! process the word changes at most once (empty → its own entry, or the
//! parent's entry → its own), so a reference handed out stays valid for
//! the `ForkLocal`'s lifetime. The parent's entry is never dropped or freed
//! in the child — dropping a pool whose threads do not exist can wait for
//! ever — so each fork generation leaks that one entry, in the child only.

use crate::domain::ForkDomain;
use crate::sync::{AtomicUsize, Ordering};
use std::marker::PhantomData;

struct Entry<T> {
    epoch: u64,
    value: T,
}

/// A value per fork epoch of `domain` (see the module's `# State`).
/// Guards P3 (docs/DESIGN.md "Fork participants"), I5 for foreign state:
/// a child never uses its parent's value.
///
/// ```
/// use forksafe_core::{ForkDomain, ForkLocal};
/// let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
/// let local = ForkLocal::new(domain);
/// let first: *const String = local.get_or_try_init(|| Ok::<_, ()>("parent".to_string())).unwrap();
/// assert_eq!(local.get().map(String::as_str), Some("parent"));
/// domain.prepare();
/// domain.child(); // now this is the child's view
/// assert!(local.get().is_none(), "the parent's value is not the child's");
/// let v = local.get_or_try_init(|| Ok::<_, ()>("child".to_string())).unwrap();
/// assert_eq!(v, "child");
/// assert_ne!(v as *const String, first);
/// ```
pub struct ForkLocal<T> {
    domain: &'static ForkDomain,
    /// 0, or a pointer from `Box::into_raw(Box<Entry<T>>)`.
    entry: AtomicUsize,
    _value: PhantomData<Box<Entry<T>>>,
}

// SAFETY: the value is built on one thread and used by reference on any:
// exactly what `T: Send + Sync` allows; the entry is owned by the cell.
unsafe impl<T: Send + Sync> Sync for ForkLocal<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Send for ForkLocal<T> {}

impl<T> std::fmt::Debug for ForkLocal<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForkLocal")
            .field("built_here", &self.get().is_some())
            .finish()
    }
}

impl<T> ForkLocal<T> {
    crate::sync::const_in_production! {
        /// An empty cell of `domain`'s epochs.
        pub fn new(domain: &'static ForkDomain) -> Self {
            ForkLocal { domain, entry: AtomicUsize::new(0), _value: PhantomData }
        }
    }

    fn entry(&self) -> Option<&Entry<T>> {
        let p = self.entry.load(Ordering::Acquire);
        // SAFETY: a non-zero word is a pointer from `Box::into_raw`,
        // published with Release (read with Acquire here); an entry is
        // freed only by `drop(&mut self)`, so it lives as long as `&self`.
        (p != 0).then(|| unsafe { &*(p as *const Entry<T>) })
    }

    /// This process's value, if it has been built here.
    pub fn get(&self) -> Option<&T> {
        let epoch = self.domain.epoch();
        self.entry()
            .filter(|e| e.epoch == epoch || control!(ForkLocalIgnoresEpoch))
            .map(|e| &e.value)
    }

    /// This process's value, built by `init` if it has not been built in
    /// this process yet. `init` runs outside any lock and may run on
    /// several threads at once: one value wins, the others are dropped.
    pub fn get_or_try_init<E>(&self, init: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        if let Some(v) = self.get() {
            return Ok(v);
        }
        let epoch = self.domain.epoch();
        let fresh = Box::into_raw(Box::new(Entry {
            epoch,
            value: init()?,
        }));
        let mut seen = self.entry.load(Ordering::Acquire);
        loop {
            // SAFETY: as in `entry`.
            let current = (seen != 0).then(|| unsafe { &*(seen as *const Entry<T>) });
            if let Some(e) = current.filter(|e| e.epoch == epoch) {
                // Another builder of this process won: ours was never
                // published, so this is its only owner.
                // SAFETY: `fresh` came from `Box::into_raw` just above.
                drop(unsafe { Box::from_raw(fresh) });
                return Ok(&e.value);
            }
            match self.entry.compare_exchange(
                seen,
                fresh as usize,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                // The entry replaced, if any, is an ancestor's: left alone.
                // SAFETY: `fresh` is published now, freed only by drop.
                Ok(_) => return Ok(unsafe { &(*fresh).value }),
                Err(now) => seen = now,
            }
        }
    }
}

impl<T> Drop for ForkLocal<T> {
    fn drop(&mut self) {
        let p = self.entry.load(Ordering::Acquire);
        if p == 0 {
            return;
        }
        // SAFETY: a pointer from `Box::into_raw`; `&mut self` means no
        // reference handed out is still alive.
        let entry = unsafe { Box::from_raw(p as *mut Entry<T>) };
        if entry.epoch != self.domain.epoch() {
            // An ancestor's value: its threads are not in this process.
            std::mem::forget(entry);
        }
    }
}
