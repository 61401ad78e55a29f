//! Waits inside ops: which running op waits for what, and the search that
//! lets such a wait block only when everything it waits for can complete
//! before the waiting op does (docs/DESIGN.md, "Waiting inside an op").
//!
//! Two kinds of edge say that one live op cannot complete before another:
//!
//! - an *order edge*: an op whose use of a var is queued waits for every use
//!   ahead of it there (the holders, and the queued uses before it; FIFO,
//!   I1). Order edges are fixed when the op is pushed and point to ops
//!   pushed earlier; completions remove them, and a later push only queues
//!   behind, so no order edge is ever added out of an op already pushed;
//! - a *wait edge*: a running op blocked in a wait inside itself waits for
//!   what that wait covers. Only this registry holds them.
//!
//! # State
//!
//! The registry lists the waits inside ops that are blocked or about to
//! block, each with its op and its target, under one lock
//! ([`crate::sync::LockRank::WaitGraph`]):
//!
//! | from | to | who | serves |
//! |---|---|---|---|
//! | not listed | listed | the waiting op ([`WaitGraph::enter`]), under the lock, only if no path of edges leads from its target back to it | the wait rule: never a deadlock |
//! | listed | not listed | the same op, as its wait returns ([`WaitGraph::leave`]); a fork child's settle, for every wait ([`WaitGraph::clear`]) | the rule's search sees only waits that still block |
//!
//! The invariant kept: the edges among live ops form no cycle. Order edges
//! alone form none (they point to lower ids). A push adds order edges only
//! out of its new op, into which no edge leads yet (a listed target covers
//! only ops pushed before its wait began). Completions only remove edges.
//! And a wait edge is added only under the lock, after a search that saw
//! every other wait edge found no path back. So every listed wait waits for
//! ops that can complete without it: given workers (stand-ins, `pool.rs`),
//! they do, and the wait returns.
//!
//! The search visits each op at most once and, for each op whose use is
//! queued, takes that var's lock alone, one at a time. It leaves out ops
//! pushed before the oldest listed or calling op: such an op waits only for
//! ops older still, none of which waits, so no path from it can come back.
//! A wait outside every op lists nothing and searches nothing.

use super::Payload;
use crate::live::LiveIndex;
use crate::op::{OpCell, OpStatus};
use crate::sync::{Arc, LockRank, Mutex};
use std::collections::HashSet;

/// What one wait inside an op covers.
pub(crate) enum WaitTarget<P> {
    /// These ops (the pending writes of a var, `wait_for_var`).
    Ops(Vec<Arc<OpCell<P>>>),
    /// Every live op pushed before `limit` but the waiting op (`wait_all`).
    Below(u64),
}

struct Listed<P> {
    op: u64,
    target: WaitTarget<P>,
}

/// The waits inside ops that block. Guards the invariant in the module's
/// `# State`: no cycle of order and wait edges among live ops.
pub(crate) struct WaitGraph<P> {
    waits: Mutex<Vec<Listed<P>>>,
}

impl<P: Payload> WaitGraph<P> {
    pub(crate) fn new() -> Self {
        WaitGraph {
            waits: Mutex::ranked(Vec::new(), LockRank::WaitGraph),
        }
    }

    /// Lists `op`'s wait for `target`, unless something it covers cannot
    /// complete before `op` does: then lists nothing and returns that op
    /// (`op` itself, or an op a path of edges leads from to `op`). Inside a
    /// section; takes no lock of higher rank than a var's while it holds
    /// one.
    pub(crate) fn enter(
        &self,
        op: u64,
        target: WaitTarget<P>,
        live: &LiveIndex<P>,
    ) -> Result<(), Arc<OpCell<P>>> {
        let mut waits = self.waits.lock();
        let floor = waits.iter().map(|w| w.op).fold(op, u64::min);
        let mut search = Search {
            waits: &waits,
            live,
            caller: op,
            floor,
            seen: HashSet::new(),
        };
        let roots = if control!(WaitGraphSkipsSearch) {
            Vec::new()
        } else {
            search.covered(op, &target)
        };
        for root in roots {
            if search.reaches_caller(&root) {
                return Err(root);
            }
        }
        waits.push(Listed { op, target });
        Ok(())
    }

    /// Unlists `op`'s wait; inside a section.
    pub(crate) fn leave(&self, op: u64) {
        let mut waits = self.waits.lock();
        if let Some(i) = waits.iter().position(|w| w.op == op) {
            waits.swap_remove(i);
        }
    }

    /// Unlists every wait: a fork child's settle (no thread of the parent's
    /// waits there).
    pub(crate) fn clear(&self) {
        self.waits.lock().clear();
    }
}

struct Search<'a, P> {
    waits: &'a [Listed<P>],
    live: &'a LiveIndex<P>,
    caller: u64,
    floor: u64,
    seen: HashSet<u64>,
}

impl<P: Payload> Search<'_, P> {
    /// The live ops a wait of `waiter` for `target` waits on.
    fn covered(&self, waiter: u64, target: &WaitTarget<P>) -> Vec<Arc<OpCell<P>>> {
        match target {
            WaitTarget::Ops(ops) => ops.iter().filter(|o| !o.is_gone()).cloned().collect(),
            WaitTarget::Below(limit) => self
                .live
                .all()
                .into_iter()
                .filter(|o| o.id() < *limit && o.id() != waiter)
                .collect(),
        }
    }

    /// Whether a path of order and wait edges leads from `root` to the
    /// calling op (`root` being the caller counts).
    fn reaches_caller(&mut self, root: &Arc<OpCell<P>>) -> bool {
        let mut stack = vec![root.clone()];
        while let Some(op) = stack.pop() {
            if op.id() == self.caller {
                return true;
            }
            if op.id() < self.floor || op.is(OpStatus::Done) || !self.seen.insert(op.id()) {
                continue;
            }
            if op.is(OpStatus::Running) {
                if let Some(w) = self.waits.iter().find(|w| w.op == op.id()) {
                    stack.extend(self.covered(w.op, &w.target));
                }
                continue;
            }
            for (var, _) in op.vars() {
                let v = var.lock();
                stack.extend(v.ahead_of(&op));
            }
        }
        false
    }
}
