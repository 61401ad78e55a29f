//! Waiting: `wait_for_var` and `wait_all` (I2), with deadlines, host-lock
//! release (H2) and host interrupts. A wait from inside an op covers what
//! the same wait outside would, the ops the calling op pushed itself
//! included; it blocks only once the wait graph (`wait_graph.rs`) has shown
//! that everything it covers can complete before the calling op, and fails
//! at once with `WaitOnSelf` otherwise (docs/DESIGN.md, "Waiting inside an
//! op").
//!
//! # State
//!
//! A wait moves no engine state of its own; while it blocks it is
//! registered where the completion that ends it looks:
//!
//! | wait | registered in | who wakes it | serves |
//! |---|---|---|---|
//! | `wait_for_var` | the var's waiters (`var.rs`), under the var's lock it read under | a completed write of the var | I2 |
//! | `wait_all`, `wait_for_op`, shutdown | the engine's waiters (`waiters.rs`), blocked on one live op | that op's completion | I2 |
//! | any, from inside an op | the wait graph (`wait_graph.rs`), listed before it blocks | — (unlisted when it ends) | the wait rule: no cycle of waits |
//! | any, from inside an op on a worker | the lane's blocked count (`pool.rs`), which lets a stand-in start | — (unblocked when it ends) | I2: the lane keeps a worker |

use super::wait_graph::WaitTarget;
use super::Payload;
use super::{CoreEngine, Shared};
use crate::error::{Error, Result};
use crate::op::OpCell;
use crate::op_info::{Lane, OpInfo};
use crate::pool::Spawns;
use crate::spec::Var;
use crate::sync::{current_thread, Arc, Instant, Thread};
use std::time::Duration;

impl<P: Payload> CoreEngine<P> {
    /// Returns once every write of `var` pushed before this call has
    /// completed; then the var's poison, if any, as [`Error::Poisoned`].
    /// From inside an op, the same, writes the op pushed itself included;
    /// [`Error::WaitOnSelf`] at once if one of those writes cannot complete
    /// before the calling op (it is the op, or waits for it).
    pub fn wait_for_var(&self, var: &Var<P>) -> Result<()> {
        wait_var(&self.shared, var, None)
    }

    /// [`CoreEngine::wait_for_var`] with a deadline: [`Error::Timeout`] lists the
    /// writes still pending when it passes.
    pub fn wait_for_var_timeout(&self, var: &Var<P>, timeout: Duration) -> Result<()> {
        let deadline = self.shared.deadline(timeout)?;
        wait_var(&self.shared, var, Some(deadline))
    }

    /// Returns once every op pushed before this call has completed; then
    /// every error first raised since the previous `wait_all`, as
    /// [`Error::OpsFailed`]. From inside an op: every such op but the
    /// calling one, [`Error::WaitOnSelf`] at once if one of them cannot
    /// complete before the calling op.
    pub fn wait_all(&self) -> Result<()> {
        wait_all(&self.shared, None)
    }

    /// [`CoreEngine::wait_all`] with a deadline: [`Error::Timeout`] lists the ops
    /// still pending when it passes.
    pub fn wait_all_timeout(&self, timeout: Duration) -> Result<()> {
        let deadline = self.shared.deadline(timeout)?;
        wait_all(&self.shared, Some(deadline))
    }

    /// Returns once op `id` (a value [`CoreEngine::push`] returned) has
    /// completed, or at once if it has or no such op is pending. Its outcome
    /// is not reported here: it is where the op put it (its vars' poison,
    /// the next `wait_all`). From inside an op: [`Error::WaitOnSelf`] at
    /// once if op `id` cannot complete before the calling op.
    pub fn wait_for_op(&self, id: u64) -> Result<()> {
        wait_for_op(&self.shared, id, None)
    }

    /// [`CoreEngine::wait_for_op`] with a deadline: [`Error::Timeout`] names the
    /// op if it is still pending when it passes.
    pub fn wait_for_op_timeout(&self, id: u64, timeout: Duration) -> Result<()> {
        let deadline = self.shared.deadline(timeout)?;
        wait_for_op(&self.shared, id, Some(deadline))
    }
}

fn wait_var<P: Payload>(
    this: &Arc<Shared<P>>,
    var: &Var<P>,
    deadline: Option<Instant>,
) -> Result<()> {
    this.check_var(var)?;
    let caller = this.calling_op();
    let mut target = None;
    let mut blocked = None;
    let mut listed = false;
    let result = loop {
        let section = match this.enter() {
            Ok(s) => s,
            Err(e) => break Err(e),
        };
        let mut v = var.state().lock();
        // Read under the var's lock: see `VarInner::pending_writes`.
        let target = *target.get_or_insert(this.ids().next_op_bound());
        if v.is_freed() {
            break Err(Error::DeletedVar);
        }
        let below = match caller {
            Some(c) if control!(WaitSkipsOwnPushes) => c.min(target),
            _ => target,
        };
        let pending = v.pending_writes(below);
        if pending.is_empty() {
            break match v.poison() {
                Some(e) => Err(Error::Poisoned(e.clone())),
                None => Ok(()),
            };
        }
        if let (Some(c), false) = (caller, listed) {
            // The search takes var locks itself (after the graph's).
            drop(v);
            match list_wait(this, c, WaitTarget::Ops(pending), Some(var.id())) {
                Ok(()) => listed = true,
                Err(e) => break Err(e),
            }
            continue;
        }
        if let Some(e) =
            this.wait_expired(deadline, || pending.iter().map(|op| op.info()).collect())
        {
            break Err(e);
        }
        v.add_waiter(current_thread());
        drop(v);
        if let Err(e) = block(this, section, caller, &mut blocked, deadline) {
            break Err(e);
        }
    };
    leave_wait_graph(this, caller.filter(|_| listed));
    unblock_caller(this, blocked);
    result
}

fn wait_all<P: Payload>(this: &Arc<Shared<P>>, deadline: Option<Instant>) -> Result<()> {
    let caller = this.calling_op();
    let next = this.ids().next_op_bound();
    let limit = match caller {
        Some(c) if control!(WaitSkipsOwnPushes) => c.min(next),
        _ => next,
    };
    if let Some(c) = caller {
        let _section = this.enter()?;
        list_wait(this, c, WaitTarget::Below(limit), None)?;
    }
    let result = wait_gone(
        this,
        caller,
        deadline,
        |s| s.live().blocker_below(limit, caller),
        |s| {
            let mut left = s.live().below(limit);
            left.retain(|op| Some(op.id) != caller);
            left
        },
    )
    .and_then(|()| {
        let _section = this.enter()?;
        let errors = this.lifecycle().lock().take_errors();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Error::OpsFailed(errors))
        }
    });
    leave_wait_graph(this, caller);
    result
}

fn wait_for_op<P: Payload>(
    this: &Arc<Shared<P>>,
    id: u64,
    deadline: Option<Instant>,
) -> Result<()> {
    let caller = this.calling_op();
    let live = |s: &Shared<P>| s.live().get(id).filter(|op| !op.is_gone());
    if let Some(c) = caller {
        let _section = this.enter()?;
        let Some(op) = live(this) else {
            return Ok(());
        };
        list_wait(this, c, WaitTarget::Ops(vec![op]), None)?;
    }
    let report = |s: &Shared<P>| live(s).map(|op| op.info()).into_iter().collect();
    let result = wait_gone(this, caller, deadline, live, report);
    leave_wait_graph(this, caller);
    result
}

/// Waits until `next` finds no op left to wait for, blocking on each op
/// it finds until that op is gone; `report` lists what is left for a
/// timeout.
fn wait_gone<P: Payload>(
    this: &Arc<Shared<P>>,
    caller: Option<u64>,
    deadline: Option<Instant>,
    next: impl Fn(&Shared<P>) -> Option<Arc<OpCell<P>>>,
    report: impl Fn(&Shared<P>) -> Vec<OpInfo>,
) -> Result<()> {
    let me = join_all_waiters(this)?;
    let mut blocked = None;
    let result = loop {
        let section = match this.enter() {
            Ok(s) => s,
            Err(e) => break Err(e),
        };
        // Only the op to wait on next: the list of them all (a copy of
        // each op's name) is made only for a timeout's report.
        let blocker = next(this);
        let Some(blocker) = blocker else {
            break Ok(());
        };
        match this.wait_expired(deadline, || report(this)) {
            // The ops left may all have completed between the check
            // and the report: then the wait is over, not timed out.
            Some(Error::Timeout { pending }) if pending.is_empty() => break Ok(()),
            Some(e) => break Err(e),
            None => {}
        }
        // Parks only if its completion is sure to see this waiter.
        if !this.waiters().block_on(&me, &blocker) {
            continue;
        }
        if let Err(e) = block(this, section, caller, &mut blocked, deadline) {
            break Err(e);
        }
    };
    unblock_caller(this, blocked);
    leave_all_waiters(this, &me);
    result
}

/// Lists op `caller`'s wait for `target` (on `var`, if one) in the wait
/// graph, or gives the `WaitOnSelf` error naming what cannot complete
/// before it; inside a section.
fn list_wait<P: Payload>(
    shared: &Shared<P>,
    caller: u64,
    target: WaitTarget<P>,
    var: Option<u64>,
) -> Result<()> {
    shared
        .wait_graph()
        .enter(caller, target, shared.live())
        .map_err(|on| wait_on_self(shared, caller, &on, var))
}

/// The error of a wait inside op `caller` that covers `on`, which cannot
/// complete before it.
fn wait_on_self<P: Payload>(
    shared: &Shared<P>,
    caller: u64,
    on: &Arc<OpCell<P>>,
    var: Option<u64>,
) -> Error {
    let op = match shared.live().get(caller) {
        Some(c) => c.info(),
        None => on.info(),
    };
    Error::WaitOnSelf {
        op: Box::new(op),
        on: Box::new(on.info()),
        var,
    }
}

/// Unlists the wait of op `listed` from the wait graph, if it was listed.
fn leave_wait_graph<P: Payload>(shared: &Shared<P>, listed: Option<u64>) {
    if let (Some(c), Ok(_section)) = (listed, shared.enter()) {
        shared.wait_graph().leave(c);
    }
}

/// Registers the calling thread as a waiter for the live set; it must
/// register before it first scans.
pub(crate) fn join_all_waiters<P: Payload>(shared: &Shared<P>) -> Result<Thread> {
    let me = current_thread();
    let _section = shared.enter()?;
    shared.waiters().join_all(me.clone());
    Ok(me)
}

pub(crate) fn leave_all_waiters<P: Payload>(shared: &Shared<P>, me: &Thread) {
    if let Ok(_section) = shared.enter() {
        shared.waiters().leave_all(me);
    }
}

/// Ends `section` and parks until woken or `deadline`, after marking a
/// calling op's worker as blocked (so its lane can bring a stand-in to
/// life). Fails, without parking, when the lane is at its stand-in cap
/// ([`Error::StandInLimit`]) or the stand-in it needed could not start
/// ([`Error::Spawn`]): the wait returns that error rather than risk
/// waiting for ever.
fn block<P: Payload>(
    this: &Arc<Shared<P>>,
    section: crate::fork_gate::Section<'_>,
    caller: Option<u64>,
    blocked: &mut Option<Lane>,
    deadline: Option<Instant>,
) -> Result<()> {
    let spawns = block_caller(this, caller, blocked)?;
    this.waiters().register_timed(deadline);
    drop(section);
    super::spawn::start_workers(this, spawns)?;
    this.park(deadline);
    Ok(())
}

/// Marks the calling op's worker as blocked in a wait, once, and plans a
/// stand-in worker if the lane would otherwise be short; inside a
/// section. Refused at the lane's stand-in cap. A wait inside an op run
/// inline by its pusher marks nothing: no worker is blocked.
fn block_caller<P: Payload>(
    shared: &Shared<P>,
    caller: Option<u64>,
    blocked: &mut Option<Lane>,
) -> Result<Spawns> {
    let mut spawns = Spawns::new();
    if blocked.is_some() {
        return Ok(spawns);
    }
    // An op its pusher runs inline blocks no worker of the pool.
    let on_worker = caller
        .and_then(|c| shared.live().get(c))
        .filter(|op| !op.runs_inline());
    let Some(lane) = on_worker.map(|op| op.lane) else {
        return Ok(spawns);
    };
    let mut ls = shared.lane(lane).lock();
    ls.pool_mut()
        .block()
        .map_err(|limit| Error::StandInLimit { limit })?;
    *blocked = Some(lane);
    if !ls.pool().has_idle() && ls.pool().is_short() && !shared.ready(lane).is_empty() {
        spawns.push((lane, ls.pool_mut().add_worker()));
    }
    Ok(spawns)
}

fn unblock_caller<P: Payload>(shared: &Shared<P>, blocked: Option<Lane>) {
    if let Some(lane) = blocked {
        if let Ok(_section) = shared.enter() {
            shared.lane(lane).lock().pool_mut().unblock();
        }
    }
}
