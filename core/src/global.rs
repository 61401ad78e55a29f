//! Process-wide one-time state for the engine crate, kept fork-safe: a
//! [`OnceFlag`] for the `pthread_atfork` registration and a [`LazySlot`]
//! for the lazily started default engine. Neither holds a lock: a fork can
//! copy them at any instant and the child finds a state it can go on from
//! (docs/DESIGN.md, "Production primitives in a fork child": no `Once` can be
//! half-done at fork).
//!
//! # State
//!
//! | type | from | to | who | serves |
//! |---|---|---|---|---|
//! | [`OnceFlag`] | new | running (the caller's pid) | the first caller, by compare-exchange | one registration per process lineage |
//! | [`OnceFlag`] | running (pid) | done, or back to new on error | that caller | — |
//! | [`OnceFlag`] | running (another pid) | running (this pid) | a fork child's caller: the parent's runner does not exist there | no child waits for a thread it does not have |
//! | [`LazySlot`] | empty | filled | the first initialiser to win the pointer's compare-and-swap; never emptied | a fork copies empty or full, never half |

use crate::sync::{spin_step, AtomicU64, AtomicUsize, Ordering};
use std::marker::PhantomData;

const NEW: u64 = 0;
const DONE: u64 = u64::MAX;

/// Runs a registration once per process lineage. While one thread runs it,
/// others of the same process wait (spinning: it is short). The running
/// state records the caller's process id, so a child forked while a thread
/// of its parent was running the registration (that thread does not exist
/// in the child) takes it over instead of waiting forever.
///
/// ```
/// use forksafe_core::global::OnceFlag;
/// let flag = OnceFlag::new();
/// let mut runs = 0;
/// flag.call_once(std::process::id().into(), || { runs += 1; Ok::<(), ()>(()) }).unwrap();
/// flag.call_once(std::process::id().into(), || { runs += 1; Ok::<(), ()>(()) }).unwrap();
/// assert_eq!(runs, 1);
/// assert!(flag.is_done());
/// ```
#[derive(Debug)]
pub struct OnceFlag {
    /// `NEW`, `DONE`, or the id of the process running the registration.
    state: AtomicU64,
}

impl Default for OnceFlag {
    fn default() -> Self {
        Self::new()
    }
}

impl OnceFlag {
    crate::sync::const_in_production! {
        /// A flag whose registration has not run.
        pub fn new() -> Self {
            OnceFlag { state: AtomicU64::new(NEW) }
        }
    }

    /// Whether the registration has completed.
    pub fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) == DONE
    }

    /// Runs `f` unless it has completed already (here or in an ancestor
    /// process before the fork). `process` identifies the calling process
    /// (its pid). If `f` fails, the flag goes back to not run and the error
    /// is returned; a later call tries again.
    ///
    /// A child forked in the instant between `f` finishing and the flag
    /// being marked done runs `f` again: `f` must check whether its work is
    /// already done (the engine crate's registration does: in such a child
    /// its own child handler has run, so the fork epoch is past 0).
    pub fn call_once<E>(&self, process: u64, f: impl FnOnce() -> Result<(), E>) -> Result<(), E> {
        let me = process.clamp(1, DONE - 1);
        let mut round = 0;
        loop {
            let s = self.state.load(Ordering::Acquire);
            if s == DONE {
                return Ok(());
            }
            // NEW, or left running by a thread of another (ancestor) process.
            if s != me
                && self
                    .state
                    .compare_exchange(s, me, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                return match f() {
                    Ok(()) => {
                        self.state.store(DONE, Ordering::Release);
                        Ok(())
                    }
                    Err(e) => {
                        self.state.store(NEW, Ordering::Release);
                        Err(e)
                    }
                };
            }
            spin_step(round);
            round = round.saturating_add(1);
        }
    }
}

/// A slot filled once, lazily, by whichever thread gets there first; the
/// value is then never dropped (it lives for the process, as a static
/// would). Filling is one atomic compare-and-swap of a pointer, so a fork
/// copies either an empty slot or a full one, never a half-initialised one.
/// Racing initialisers each build a value; one wins, the others' values are
/// dropped.
///
/// ```
/// use forksafe_core::global::LazySlot;
/// static SLOT: LazySlot<String> = LazySlot::new();
/// assert!(SLOT.get().is_none());
/// let v = SLOT.get_or_try_init(|| Ok::<_, ()>("hello".to_string())).unwrap();
/// assert_eq!(v, "hello");
/// assert_eq!(SLOT.get().map(String::as_str), Some("hello"));
/// ```
pub struct LazySlot<T> {
    /// 0, or a pointer from `Box::into_raw`.
    ptr: AtomicUsize,
    _value: PhantomData<*const T>,
}

impl<T> std::fmt::Debug for LazySlot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazySlot")
            .field("filled", &(self.ptr.load(Ordering::Acquire) != 0))
            .finish()
    }
}

// SAFETY: the slot hands out `&T` to any thread and its value may be built
// on one thread and used on others: exactly what `T: Send + Sync` allows.
unsafe impl<T: Send + Sync> Sync for LazySlot<T> {}
// SAFETY: as above; the slot owns at most one `T`, never dropped.
unsafe impl<T: Send + Sync> Send for LazySlot<T> {}

impl<T> Default for LazySlot<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> LazySlot<T> {
    crate::sync::const_in_production! {
        /// An empty slot.
        pub fn new() -> Self {
            LazySlot { ptr: AtomicUsize::new(0), _value: PhantomData }
        }
    }

    /// The value, if the slot is filled.
    pub fn get(&self) -> Option<&T> {
        let p = self.ptr.load(Ordering::Acquire);
        // SAFETY: a non-zero pointer came from `Box::into_raw` in
        // `get_or_try_init`, was published with Release (read with Acquire
        // here), and is never freed, so it is valid for `&self`'s lifetime.
        (p != 0).then(|| unsafe { &*(p as *const T) })
    }

    /// The value, building it with `init` if the slot is empty. `init` runs
    /// outside any lock and may run on several threads at once; one value
    /// wins and the others are dropped.
    pub fn get_or_try_init<E>(&self, init: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        if let Some(v) = self.get() {
            return Ok(v);
        }
        let fresh = Box::into_raw(Box::new(init()?));
        match self
            .ptr
            .compare_exchange(0, fresh as usize, Ordering::AcqRel, Ordering::Acquire)
        {
            // SAFETY: `fresh` is now published and never freed.
            Ok(_) => Ok(unsafe { &*fresh }),
            Err(existing) => {
                // SAFETY: `fresh` was never published, so this is its only
                // owner; `existing` is a published, never-freed value.
                unsafe {
                    drop(Box::from_raw(fresh));
                    Ok(&*(existing as *const T))
                }
            }
        }
    }
}
