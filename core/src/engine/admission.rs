//! Admission, the first step of an op's path: a push's checks, the pending
//! bound, and the append to every var's queue in one step, so that push
//! order is the same on every var (I1). An op granted every var here goes
//! on to its lane's ready queues (`dispatch.rs`).
//!
//! # State
//!
//! Admission moves, in this order, the parts it reaches: a place under the
//! pending bound (`bound.rs`), each var's queue (`var.rs`, under all of the
//! op's var locks at once, in var-id order), the op's id (`ids.rs`, taken
//! under those locks), the live set (`live.rs`), the op's grants (`op.rs`).
//!
//! | step | moves | serves |
//! |---|---|---|
//! | reserve | a place under the bound, waiting for room unless inside an op | the bound rule (docs/DESIGN.md): a push from inside an op never waits, its own op may hold the last place |
//! | lock and check | every var lock, in var-id order; a deleted var refuses | I1: two pushes sharing vars are ordered alike on all of them |
//! | number | the next op id, under those locks | I1: "pushed before" is "id below" on every var |
//! | list | the op in the live set, before the state check | I2, I8: a shutdown's sweep sees it or it sees the shutdown |
//! | append | a use on each var's queue; the grants of the free ones and the pusher's own, in one step | I1; the op runs only once it is on every queue |
//! | hand on | a ready op to `dispatch.rs` | — |
//!
//! A push refused after its reserve gives its place back (`complete.rs`,
//! [`complete::give_back_place`]).

use super::complete::{self, Outcome, Which};
use super::dispatch::{dispatch, PushSide};
use super::shared::Shared;
use super::Payload;
use super::{finish, run, spawn, CoreEngine};
use crate::error::{Error, Result};
use crate::op::{Action, OpCell, MAX_OP_VARS};
use crate::op_info::Lane;
use crate::pool::Spawns;
use crate::spec::{OpSpec, Var};
use crate::sync::{current_thread, Arc, MutexGuard};
use crate::var::VarInner;
use smallvec::SmallVec;
use std::time::Duration;

impl<P: Payload> CoreEngine<P> {
    /// Pushes an op; returns its id. With a pending bound, waits for room
    /// with the host lock released (H2), except when called from inside an
    /// op of this engine: the calling op holds a place that only its own
    /// completion frees, so such a push never waits and returns
    /// [`Error::Full`] at once when the bound is reached (the bound rule,
    /// docs/DESIGN.md). Bad input is a typed error and nothing already
    /// accepted is affected.
    ///
    /// An op is accepted even if its lane has no worker left and none can
    /// start (a fork child whose OS refuses threads): it then completes at
    /// once with [`crate::OpErrorKind::WorkerStart`], reported by waits.
    pub fn push(&self, spec: OpSpec<P>) -> Result<u64> {
        push(&self.shared, spec, true)
    }

    /// Pushes an op, or returns [`Error::Full`] at once if the pending bound
    /// is reached.
    pub fn try_push(&self, spec: OpSpec<P>) -> Result<u64> {
        push(&self.shared, spec, false)
    }

    /// Deletes `var` once every op pushed on it so far has completed
    /// (deferred deletion). Later pushes naming it get
    /// [`Error::DeletedVar`].
    pub fn delete_var(&self, var: &Var<P>) -> Result<u64> {
        push(
            &self.shared,
            OpSpec::internal(Action::Delete, var, "delete_var"),
            true,
        )
    }

    /// Clears the var's poison (I7): an op ordered on the var like any other.
    pub fn clear_poison(&self, var: &Var<P>) -> Result<u64> {
        push(
            &self.shared,
            OpSpec::internal(Action::ClearPoison, var, "clear_poison"),
            true,
        )
    }
}

/// Pushes `spec`. A refused push drops its payload on the caller's
/// thread once every engine lock is released (H1), without taking the
/// host lock: taking it there would be a host call the engine makes
/// after a shutdown has returned (I8; the shuttle model
/// `i8_shutdown_random` catches that variant).
pub(crate) fn push<P: Payload>(this: &Arc<Shared<P>>, spec: OpSpec<P>, block: bool) -> Result<u64> {
    let key = this.key();
    if spec.vars.iter().any(|(v, _)| v.engine() != key) {
        return Err(Error::ForeignVar);
    }
    if spec.payload.is_none() && matches!(spec.action, Action::Sync | Action::Async) {
        return Err(Error::NoPayload);
    }
    let order = lock_order(&spec)?;
    if this.state().refuses_pushes() {
        return Err(Error::ShutDown);
    }
    control!(PushWaitsForQuiesce => crate::controls::wait_for_resume(this));
    reserve(this, block)?;
    let accepted = accept(this, spec, &order);
    if accepted.is_err() {
        match this.enter() {
            Ok(_section) => complete::give_back_place(this),
            Err(_) => {
                this.bound().release();
            }
        }
    }
    accepted
}

/// One of a push's var locks, held, with whether the op writes the var.
type LockedVar<'a, P> = (MutexGuard<'a, VarInner<OpCell<P>>>, bool);

/// Appends the op to its vars' queues, holding every var lock in id
/// order (`order`: positions in the op's var list) so two pushes sharing
/// vars are ordered alike on all of them.
fn accept<P: Payload>(this: &Arc<Shared<P>>, spec: OpSpec<P>, order: &[u32]) -> Result<u64> {
    let OpSpec {
        payload,
        vars,
        reads: _,
        lane,
        priority,
        name,
        run_on_error,
        action,
        handle: _,
    } = spec;
    let mut pusher = PushSide::new(inline_from(this, lane));
    // `lock_order` allows at most MAX_OP_VARS vars, so this fits.
    let missing = order.len() as u32 + 1;
    // The section first: in a fork child it settles the engine, which
    // moves the epoch the record is built in.
    let section = this.enter()?;
    // The record is built before its id is known and numbered under the
    // var locks, so the locks borrow the vars from the record itself: the
    // spec's list moves in as it is.
    let op = Arc::new(OpCell::new(
        0,
        this.epoch().get(),
        name.unwrap_or_default(),
        lane,
        priority,
        action,
        run_on_error,
        vars,
        missing,
        payload,
    ));
    let mut guards: SmallVec<[LockedVar<'_, P>; 4]> = SmallVec::new();
    for &i in order {
        let (var, write) = op.var(i as usize);
        let g = var.lock();
        if g.is_deleted() {
            // The refused payload is host code: dropped with the record
            // on this thread, after the locks and the section (H1).
            drop(g);
            drop(guards);
            drop(section);
            return Err(Error::DeletedVar);
        }
        guards.push((g, write));
    }
    op.set_id(this.ids().next_op_id());
    let id = op.id();
    // In the live index before the state check: shutdown sets its state
    // before it sweeps the index, so either its sweep sees this op or
    // this check sees the shutdown (both go through the shard lock).
    this.live().insert(op.clone());
    if this.state().refuses_pushes() && op.try_cancel() {
        // SAFETY: this thread just cancelled the op (moved it out of
        // `Queued`), so nothing else takes its payload.
        let refused = unsafe { op.take_payload() };
        // A waiter may have seen the op in the index meanwhile.
        let mut wake = Vec::new();
        complete::leave_live(this, &op, &mut wake);
        drop(guards);
        drop(section);
        for t in wake {
            t.unpark();
        }
        // Host code, dropped on this thread outside every engine lock
        // (H1): the index keeps the op's record until it is trimmed.
        drop(refused);
        return Err(Error::ShutDown);
    }
    // Otherwise accepted (perhaps already cancelled by the sweep, which
    // waits for these var locks before it releases the op's uses).
    let mut granted = 0;
    for (g, write) in guards.iter_mut() {
        if action == Action::Delete {
            g.mark_deleted();
        }
        granted += u32::from(g.append(&op, *write));
    }
    drop(guards);
    // The grants of the vars that were free, with the pusher's own, in
    // one step: the op may run only once it is on every var's queue and
    // in the live index. Until this step no other grant can bring the
    // count to zero (the pusher's own is still missing), so applying
    // the append grants here rather than under the var locks changes
    // nothing another thread can see.
    let mut spawns = Spawns::new();
    let mut inline = None;
    if op.grant_many(granted + 1) {
        inline = dispatch(
            this,
            std::iter::once(op),
            None,
            &mut spawns,
            Some(&mut pusher),
        );
    }
    drop(section);
    // Completed op records the workers handed back: freed on this
    // thread, which allocated them, outside the section.
    drop(pusher);
    // The op is accepted: a start failure that strands it fails it
    // with `WorkerStart`, reported at waits like any op error.
    let _ = spawn::start_workers(this, spawns);
    if let Some(op) = inline {
        // Outside the section: a body may fork, wait or take any time.
        run_inline(this, &op);
    }
    Ok(id)
}

/// Runs an op its pusher took to run inline (`dispatch.rs`,
/// docs/DESIGN.md "Running inline") on the pushing thread, outside
/// every section, and completes it as a worker would. The ops its
/// completion makes ready are queued for the workers: the pusher goes
/// back to its caller.
fn run_inline<P: Payload>(this: &Arc<Shared<P>>, op: &Arc<OpCell<P>>) {
    let outcome = run::run(this, op, op.lane, run::INLINE_WORKER);
    if !matches!(outcome, Outcome::Pending) {
        // An error here is the fork gate's refusal, which only the
        // forking thread meets; a worker ignores it the same way.
        let _ = finish::finish_op(this, op, outcome, None, Which::AnyLive);
    }
}

/// Whether a push onto `lane` from this thread may run its op inline,
/// and from which queue length (`Config::run_inline_from`; the rule,
/// docs/DESIGN.md "Running inline"): compute-lane ops only, never
/// from inside an op of any engine (a body run inline that pushes
/// would nest bodies on one stack), and never while the pusher holds
/// the host lock (a compute body must not hold it).
fn inline_from<P: Payload>(shared: &Shared<P>, lane: Lane) -> Option<usize> {
    let from = shared.config().run_inline_from?;
    let allowed = lane == Lane::Compute
        && crate::current::running_op().is_none()
        && !shared.bridge().holds_host_lock();
    allowed.then_some(from)
}

/// Takes a place under the pending bound, waiting for one if `block`.
fn reserve<P: Payload>(shared: &Shared<P>, block: bool) -> Result<()> {
    let bound = shared.bound();
    let Some(max) = bound.max() else {
        return Ok(());
    };
    // The bound rule: a push from inside an op of this engine never
    // waits for a place (its own op may hold the last one). Checked only
    // under a bound: the unbounded push path reads no thread-local.
    let block = block && (shared.calling_op().is_none() || control!(PushInsideOpWaits));
    loop {
        if bound.try_reserve(max) {
            return Ok(());
        }
        if !block {
            return Err(Error::Full);
        }
        {
            let _section = shared.enter()?;
            shared.lifecycle().lock().add_push_waiter(current_thread());
            if bound.has_room(max) {
                continue;
            }
            if shared.state().refuses_pushes() {
                return Err(Error::ShutDown);
            }
        }
        shared.park(Some(
            shared.clock().deadline_after(Duration::from_millis(50)),
        ));
    }
}

/// The positions of `spec`'s vars (reads, then writes) in var-id order: the
/// order a push takes their locks in. A var named twice, or more than
/// [`MAX_OP_VARS`] vars (a handle's var aside), is an error.
fn lock_order<P>(spec: &OpSpec<P>) -> Result<SmallVec<[u32; 4]>> {
    let n = spec.vars.len();
    if n - usize::from(spec.handle) > MAX_OP_VARS {
        return Err(Error::TooManyVars);
    }
    let id = |i: u32| spec.vars[i as usize].0.id();
    // `n <= MAX_OP_VARS + 1`, so every position fits.
    let mut order: SmallVec<[u32; 4]> = (0..n as u32).collect();
    order.sort_unstable_by_key(|&i| id(i));
    if order.windows(2).any(|w| id(w[0]) == id(w[1])) {
        return Err(Error::DuplicateVar);
    }
    Ok(order)
}
