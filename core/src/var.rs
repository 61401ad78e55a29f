//! Vars and their per-var queues: the home of I1.
//!
//! Each var has its own lock; no global lock is taken on the push or
//! completion path. A push appends to the queues of all its vars while
//! holding their locks in var-id order, so two pushes are ordered the same
//! way on every var they share (no cross-var cycles), and each var grants in
//! FIFO order: one writer alone, or a run of consecutive readers together.

use crate::error::OpError;
use crate::op::OpCell;
use crate::sync::{Arc, Mutex, Thread};
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::fmt;

/// A handle naming a resource of one engine. Cheap to clone. Vars survive a
/// fork: the child's engine keeps them, with the poison of ops lost there.
pub struct Var<P> {
    /// The owning engine: its domain and its id there.
    pub(crate) engine: (usize, u64),
    pub(crate) state: Arc<VarState<P>>,
}

impl<P> Clone for Var<P> {
    fn clone(&self) -> Self {
        Var {
            engine: self.engine,
            state: self.state.clone(),
        }
    }
}

impl<P> fmt::Debug for Var<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Var(engine {}, #{})", self.engine.1, self.state.id)
    }
}

impl<P> PartialEq for Var<P> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }
}
impl<P> Eq for Var<P> {}

impl<P> Var<P> {
    /// The var's id, unique within its engine.
    pub fn id(&self) -> u64 {
        self.state.id
    }
}

pub(crate) struct VarState<P> {
    pub(crate) id: u64,
    pub(crate) inner: Mutex<VarInner<P>>,
}

/// Ops a completion made ready: usually one or none, so no allocation.
pub(crate) type ReadyOps<P> = SmallVec<[Arc<OpCell<P>>; 4]>;

/// A use of a var by an op, granted or queued. Two words: every pending op
/// has one per var (README, "Benchmarks").
pub(crate) struct Use<P> {
    pub(crate) op: Arc<OpCell<P>>,
    pub(crate) write: bool,
}

/// The state of one var. Guards I1 (grant order) and I7 (poison).
pub(crate) struct VarInner<P> {
    /// Granted uses: one writer, or any number of readers.
    pub(crate) holders: Vec<Use<P>>,
    /// Uses waiting for their turn, in push order.
    pub(crate) queue: VecDeque<Use<P>>,
    /// Writes completed so far: the var's version.
    pub(crate) version: u64,
    pub(crate) poison: Option<OpError>,
    /// No new pushes (a deletion is pending or done).
    pub(crate) deleted: bool,
    /// The deletion completed.
    pub(crate) freed: bool,
    /// Threads in `wait_for_var`; woken on every completion on this var.
    pub(crate) waiters: Vec<Thread>,
}

impl<P> VarInner<P> {
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

    fn writer_holds(&self) -> bool {
        self.holders.first().is_some_and(|u| u.write)
    }

    /// Appends a use in push order; returns true if it is granted at once.
    pub(crate) fn append(&mut self, op: &Arc<OpCell<P>>, write: bool) -> bool {
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
    pub(crate) fn remove(&mut self, op: &Arc<OpCell<P>>, ready: &mut ReadyOps<P>) {
        if let Some(i) = self.holders.iter().position(|u| Arc::ptr_eq(&u.op, op)) {
            self.holders.swap_remove(i);
        } else if let Some(i) = self.queue.iter().position(|u| Arc::ptr_eq(&u.op, op)) {
            self.queue.remove(i);
        }
        self.grant_next(ready);
    }

    fn grant_next(&mut self, ready: &mut ReadyOps<P>) {
        while let Some(head) = self.queue.front() {
            let ok = if head.write {
                self.holders.is_empty()
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

    /// Writes not yet completed of ops with an id below `below`. Every op
    /// takes its id holding the locks of all its vars, so, read under this
    /// var's lock, the engine's next op id bounds exactly the ops already
    /// appended here.
    pub(crate) fn pending_writes(&self, below: u64) -> Vec<Arc<OpCell<P>>> {
        self.holders
            .iter()
            .chain(self.queue.iter())
            .filter(|u| u.write && u.op.id < below)
            .map(|u| u.op.clone())
            .collect()
    }
}
