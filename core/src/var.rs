//! A var's state and its queue of uses: the home of I1 (and of I7's
//! poison).
//!
//! Each var has its own lock; no global lock is taken on the push or
//! completion path. A push appends to the queues of all its vars while
//! holding their locks in var-id order, so two pushes are ordered the same
//! way on every var they share (no cross-var cycles), and each var grants in
//! FIFO order: one writer alone, or a run of consecutive readers together.
//!
//! The queue is generic over the op record `O` (the engine's is
//! `OpCell<P>`, through [`Grantee`]), so this file names no other part of
//! core and the op record can name vars without an import cycle.
//!
//! # State
//!
//! A use of the var by an op is *queued*, then *granted* (a holder), then
//! gone; all under the var's lock ([`crate::sync::LockRank::Var`]):
//!
//! | from | to | who | serves |
//! |---|---|---|---|
//! | — | queued or granted | the pusher ([`VarInner::append`]): granted at once only if nothing is queued and it is compatible with the holders | I1 |
//! | queued | granted | the completion of a holder ([`VarInner::remove`] grants the head: one writer alone, or a run of readers) | I1: FIFO |
//! | granted or queued | gone | the op's completion or cancel | I2 |
//!
//! The var itself is live, then *deleted* (no new pushes: a deletion is
//! queued), then *freed* (the deletion ran). `version` counts completed
//! writes; `poison` is set by a failed writer and cleared only by a
//! clear-poison op (I7).

use crate::error::OpError;
use crate::sync::{Arc, Mutex, MutexGuard, Thread};
use smallvec::SmallVec;
use std::collections::VecDeque;

/// What a var needs from the op records in its queue.
pub(crate) trait Grantee {
    /// The op's push sequence number.
    fn id(&self) -> u64;
    /// Records one more var grant; true when the op became ready.
    fn grant(&self) -> bool;
}

/// A var: its id and its lock-guarded state.
pub(crate) struct VarState<O> {
    id: u64,
    /// The engine the var belongs to: its domain and its id there.
    engine: (usize, u64),
    inner: Mutex<VarInner<O>>,
}

impl<O> VarState<O> {
    /// A new var `id` of `engine` with nothing queued.
    pub(crate) fn new(id: u64, engine: (usize, u64)) -> Self {
        VarState {
            id,
            engine,
            inner: Mutex::ranked(VarInner::new(), crate::sync::LockRank::Var),
        }
    }

    /// The var's id, unique within its engine.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The engine the var belongs to.
    pub(crate) fn engine(&self) -> (usize, u64) {
        self.engine
    }

    /// Takes the var's lock.
    pub(crate) fn lock(&self) -> MutexGuard<'_, VarInner<O>> {
        self.inner.lock()
    }

    /// Model builds: the var's lock, for the fork-point check.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn watched(&self) -> &dyn crate::sync::ForkWatched {
        &self.inner
    }
}

/// What a completed write does to its var besides counting a version.
pub(crate) enum WriteEffect<'a> {
    /// Nothing more (a write that succeeded).
    Plain,
    /// Poisons the var with this error unless it is poisoned already (I7).
    Poison(&'a OpError),
    /// Clears the poison (a clear-poison op that was not lost).
    Clear,
    /// The var is freed (its deletion ran).
    Free,
}

/// Ops a completion made ready: usually one or none, so no allocation.
pub(crate) type ReadyOps<O> = SmallVec<[Arc<O>; 4]>;

/// A use of a var by an op, granted or queued. Two words: every pending op
/// has one per var (README, "Benchmarks").
pub(crate) struct Use<O> {
    op: Arc<O>,
    write: bool,
}

/// Model snapshots read and rebuild uses.
#[cfg(any(loom, shuttle))]
impl<O> Use<O> {
    /// The op using the var.
    pub(crate) fn op(&self) -> &Arc<O> {
        &self.op
    }

    /// Whether the use is a write.
    pub(crate) fn is_write(&self) -> bool {
        self.write
    }

    /// Model snapshots: a use rebuilt in a child model.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn new(op: Arc<O>, write: bool) -> Self {
        Use { op, write }
    }
}

/// The state of one var. Guards I1 (grant order) and I7 (poison).
pub(crate) struct VarInner<O> {
    /// Granted uses: one writer, or any number of readers.
    holders: Vec<Use<O>>,
    /// Uses waiting for their turn, in push order.
    queue: VecDeque<Use<O>>,
    /// Writes completed so far: the var's version.
    version: u64,
    poison: Option<OpError>,
    /// No new pushes (a deletion is pending or done).
    deleted: bool,
    /// The deletion completed.
    freed: bool,
    /// Threads in `wait_for_var`; woken on every completion on this var.
    waiters: Vec<Thread>,
}

impl<O> VarInner<O> {
    pub(crate) fn new() -> Self {
        VarInner {
            holders: Vec::new(),
            queue: VecDeque::new(),
            version: 0,
            poison: None,
            deleted: false,
            freed: false,
            waiters: Vec::new(),
        }
    }

    /// Writes completed so far.
    pub(crate) fn version(&self) -> u64 {
        self.version
    }

    /// The error the var is poisoned with, if any (I7).
    pub(crate) fn poison(&self) -> Option<&OpError> {
        self.poison.as_ref()
    }

    /// Whether a deletion of the var is pending or done: no new pushes.
    pub(crate) fn is_deleted(&self) -> bool {
        self.deleted
    }

    /// A deletion is appended: no new pushes from now on.
    pub(crate) fn mark_deleted(&mut self) {
        self.deleted = true;
    }

    /// Whether the var's deletion ran.
    pub(crate) fn is_freed(&self) -> bool {
        self.freed
    }

    /// A write of the var completed with `effect` (I7): one more version.
    pub(crate) fn complete_write(&mut self, effect: WriteEffect<'_>) {
        match effect {
            WriteEffect::Plain => {}
            WriteEffect::Poison(e) => {
                if self.poison.is_none() {
                    self.poison = Some(e.clone());
                }
            }
            WriteEffect::Clear => self.poison = None,
            WriteEffect::Free => self.freed = true,
        }
        self.version += 1;
    }

    /// Registers a thread in `wait_for_var`, woken by the next completed
    /// write.
    pub(crate) fn add_waiter(&mut self, thread: Thread) {
        self.waiters.push(thread);
    }

    /// Moves the var's waiters to `wake`.
    pub(crate) fn take_waiters(&mut self, wake: &mut Vec<Thread>) {
        wake.append(&mut self.waiters);
    }

    /// Model builds: the var's waiters.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn waiters(&self) -> usize {
        self.waiters.len()
    }

    /// Model builds: whether a write is queued behind the holders.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn write_queued(&self) -> bool {
        self.queue.iter().any(|u| u.write)
    }

    /// Model snapshots: the var's uses (holders, then queued) and flags.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn parts(&self) -> (&[Use<O>], &VecDeque<Use<O>>, bool, bool) {
        (&self.holders, &self.queue, self.deleted, self.freed)
    }

    /// Model snapshots: a child model's var, rebuilt from a copy.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn restore(
        &mut self,
        holders: Vec<Use<O>>,
        queue: VecDeque<Use<O>>,
        version: u64,
        poison: Option<OpError>,
        flags: (bool, bool),
    ) {
        self.holders = holders;
        self.queue = queue;
        self.version = version;
        self.poison = poison;
        (self.deleted, self.freed) = flags;
    }
}

impl<O: Grantee> VarInner<O> {
    fn writer_holds(&self) -> bool {
        self.holders.first().is_some_and(|u| u.write)
    }

    /// Appends a use in push order; returns true if it is granted at once.
    pub(crate) fn append(&mut self, op: &Arc<O>, write: bool) -> bool {
        let u = Use {
            op: op.clone(),
            write,
        };
        let grant = self.queue.is_empty()
            && if write {
                self.holders.is_empty()
            } else {
                !self.writer_holds()
            };
        if grant {
            self.holders.push(u);
        } else {
            self.queue.push_back(u);
        }
        grant
    }

    /// Removes `op`'s use (granted or queued) and grants whatever may now
    /// run, appending ops that became ready to `ready`.
    pub(crate) fn remove(&mut self, op: &Arc<O>, ready: &mut ReadyOps<O>) {
        if let Some(i) = self.holders.iter().position(|u| Arc::ptr_eq(&u.op, op)) {
            self.holders.swap_remove(i);
        } else if let Some(i) = self.queue.iter().position(|u| Arc::ptr_eq(&u.op, op)) {
            self.queue.remove(i);
        }
        self.grant_next(ready);
    }

    fn grant_next(&mut self, ready: &mut ReadyOps<O>) {
        while let Some(head) = self.queue.front() {
            let ok = if head.write {
                self.holders.is_empty() || control!(WriterJoinsReaders if !self.writer_holds())
            } else {
                !self.writer_holds()
            };
            if !ok {
                break;
            }
            let u = self.queue.pop_front().expect("front exists");
            if u.op.grant() {
                ready.push(u.op.clone());
            }
            let was_write = u.write;
            self.holders.push(u);
            if was_write {
                break;
            }
        }
    }

    /// The ops `op` waits for on this var: if its use is queued, every use
    /// ahead of it (the holders, then the queued uses before it: FIFO); if
    /// it holds the var, or is not here, none. The order edges of the
    /// search for waits inside ops (`engine/wait_graph.rs`).
    pub(crate) fn ahead_of(&self, op: &Arc<O>) -> Vec<Arc<O>> {
        let Some(i) = self.queue.iter().position(|u| Arc::ptr_eq(&u.op, op)) else {
            return Vec::new();
        };
        let queued = self.queue.iter().take(i);
        self.holders
            .iter()
            .chain(queued)
            .map(|u| u.op.clone())
            .collect()
    }

    /// Writes not yet completed of ops with an id below `below`. Every op
    /// takes its id holding the locks of all its vars, so, read under this
    /// var's lock, the engine's next op id bounds exactly the ops already
    /// appended here.
    pub(crate) fn pending_writes(&self, below: u64) -> Vec<Arc<O>> {
        self.holders
            .iter()
            .chain(self.queue.iter())
            .filter(|u| u.write && u.op.id() < below)
            .map(|u| u.op.clone())
            .collect()
    }
}
