//! Pushing ops: validation, back-pressure, and appending to every var's
//! queue in one step so that push order is the same on every var (I1).

use super::worker::PushSide;
use super::Payload;
use super::{Engine, Shared};
use crate::error::{Error, Result};
use crate::op::{Action, OpCell, OpVar, VarList, MAX_OP_VARS};
use crate::op_info::Lane;
use crate::pool::Spawns;
use crate::spec::{OpSpec, Var};
use crate::sync::{current_thread, Arc, MutexGuard, Ordering};
use crate::var::VarInner;
use smallvec::SmallVec;
use std::time::Duration;

impl<P: Payload> Engine<P> {
    /// Pushes an op; returns its id. With a pending bound, waits for room
    /// with the host lock released (H2), except when called from inside an
    /// op of this engine: the calling op holds a slot that only its own
    /// completion frees, so such a push never waits and returns
    /// [`Error::Full`] at once when the bound is reached (the bound rule,
    /// docs/DESIGN.md). Bad input is a typed error and nothing already
    /// accepted is affected.
    ///
    /// An op is accepted even if its lane has no worker left and none can
    /// start (a fork child whose OS refuses threads): it then completes at
    /// once with [`crate::OpErrorKind::WorkerStart`], reported by waits.
    pub fn push(&self, spec: OpSpec<P>) -> Result<u64> {
        Shared::push(&self.shared, spec, true)
    }

    /// Pushes an op, or returns [`Error::Full`] at once if the pending bound
    /// is reached.
    pub fn try_push(&self, spec: OpSpec<P>) -> Result<u64> {
        Shared::push(&self.shared, spec, false)
    }

    /// Deletes `var` once every op pushed on it so far has completed
    /// (deferred deletion). Later pushes naming it get
    /// [`Error::DeletedVar`].
    pub fn delete_var(&self, var: &Var<P>) -> Result<u64> {
        Shared::push(
            &self.shared,
            OpSpec::internal(Action::Delete, var, "delete_var"),
            true,
        )
    }

    /// Clears the var's poison (I7): an op ordered on the var like any other.
    pub fn clear_poison(&self, var: &Var<P>) -> Result<u64> {
        Shared::push(
            &self.shared,
            OpSpec::internal(Action::ClearPoison, var, "clear_poison"),
            true,
        )
    }
}

impl<P: Payload> Shared<P> {
    /// Pushes `spec`. A refused push drops its payload on the caller's
    /// thread once every engine lock is released (H1), without taking the
    /// host lock: taking it there would be a host call the engine makes
    /// after a shutdown has returned (I8; the shuttle model
    /// `i8_shutdown_random` catches that variant).
    pub(crate) fn push(this: &Arc<Self>, spec: OpSpec<P>, block: bool) -> Result<u64> {
        for v in spec.reads.iter().chain(&spec.writes) {
            this.check_var(v)?;
        }
        let order = lock_order(&spec)?;
        if this.state().refuses_pushes() {
            return Err(Error::ShutDown);
        }
        control!(PushWaitsForQuiesce => crate::controls::wait_for_resume(this));
        this.reserve(block)?;
        let accepted = Shared::accept(this, spec, &order);
        if accepted.is_err() && this.config.max_pending.is_some() {
            match this.enter() {
                Ok(_section) => this.release_reservation(),
                Err(_) => {
                    this.pending.fetch_sub(1, Ordering::AcqRel);
                }
            }
        }
        accepted
    }

    /// Appends the op to its vars' queues, holding every var lock in id
    /// order (`order`: positions in the op's var list) so two pushes sharing
    /// vars are ordered alike on all of them.
    fn accept(this: &Arc<Self>, spec: OpSpec<P>, order: &[u32]) -> Result<u64> {
        let OpSpec {
            payload,
            reads,
            writes,
            lane,
            priority,
            name,
            run_on_error,
            action,
            handle: _,
        } = spec;
        let mut pusher = PushSide {
            freed: Vec::new(),
            inline_from: this.inline_from(lane),
        };
        let vars = VarList::new(
            reads.into_iter().map(|v| v.state),
            writes.into_iter().map(|v| v.state),
        );
        // The vars in lock order, with whether the op writes them: the
        // guards borrow these, as the list itself moves into the op.
        let locked: SmallVec<[(Arc<OpVar<P>>, bool); 4]> = order
            .iter()
            .map(|&i| vars.as_slice()[i as usize].clone())
            .collect();
        let section = this.enter()?;
        let mut guards: SmallVec<[MutexGuard<'_, VarInner<OpCell<P>>>; 4]> = SmallVec::new();
        for (var, _) in &locked {
            let g = var.inner.lock();
            if g.deleted {
                return Err(Error::DeletedVar);
            }
            guards.push(g);
        }
        let id = this.next_op.fetch_add(1, Ordering::Relaxed);
        // `lock_order` allows at most MAX_OP_VARS vars, so this fits.
        let missing = order.len() as u32 + 1;
        let op = Arc::new(OpCell::new(
            id,
            this.epoch.get(),
            name.unwrap_or_default(),
            lane,
            priority,
            action,
            run_on_error,
            vars,
            missing,
            payload,
        ));
        // In the live index before the state check: shutdown sets its state
        // before it sweeps the index, so either its sweep sees this op or
        // this check sees the shutdown (both go through the shard lock).
        this.live.insert(op.clone());
        if this.state().refuses_pushes() && op.try_cancel() {
            // SAFETY: this thread just cancelled the op (moved it out of
            // `Queued`), so nothing else takes its payload.
            let refused = unsafe { op.take_payload() };
            // A waiter may have seen the op in the index meanwhile.
            let mut wake = Vec::new();
            this.leave_live(&op, &mut wake);
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
        for (g, (_, write)) in guards.iter_mut().zip(&locked) {
            if action == Action::Delete {
                g.deleted = true;
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
            inline = this.dispatch(std::iter::once(op), None, &mut spawns, Some(&mut pusher));
        }
        drop(section);
        // Completed op records the workers handed back: freed on this
        // thread, which allocated them, outside the section.
        drop(pusher);
        // The op is accepted: a start failure that strands it fails it
        // with `WorkerStart`, reported at waits like any op error.
        let _ = Shared::start_workers(this, spawns);
        if let Some(op) = inline {
            // Outside the section: a body may fork, wait or take any time.
            Shared::run_inline(this, &op);
        }
        Ok(id)
    }

    /// Whether a push onto `lane` from this thread may run its op inline,
    /// and from which queue length (`Config::run_inline_from`; the rule,
    /// docs/DESIGN.md "Running inline"): compute-lane ops only, never
    /// from inside an op of any engine (a body run inline that pushes
    /// would nest bodies on one stack), and never while the pusher holds
    /// the host lock (a compute body must not hold it).
    fn inline_from(&self, lane: Lane) -> Option<usize> {
        let from = self.config.run_inline_from?;
        let allowed = lane == Lane::Compute
            && crate::current::running_op().is_none()
            && !self.bridge.holds_host_lock();
        allowed.then_some(from)
    }

    /// Takes a slot under the pending bound, waiting for one if `block`.
    fn reserve(&self, block: bool) -> Result<()> {
        let Some(max) = self.config.max_pending else {
            return Ok(());
        };
        // The bound rule: a push from inside an op of this engine never
        // waits for a slot (its own op may hold the last one). Checked only
        // under a bound: the unbounded push path reads no thread-local.
        let block = block && (self.calling_op().is_none() || control!(PushInsideOpWaits));
        loop {
            let now = self.pending.load(Ordering::Acquire);
            if now < max {
                if self
                    .pending
                    .compare_exchange(now, now + 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return Ok(());
                }
                continue;
            }
            if !block {
                return Err(Error::Full);
            }
            {
                let _section = self.enter()?;
                self.control.lock().push_waiters.push(current_thread());
                if self.pending.load(Ordering::Acquire) < max {
                    continue;
                }
                if self.state().refuses_pushes() {
                    return Err(Error::ShutDown);
                }
            }
            self.park(Some(self.clock.deadline_after(Duration::from_millis(50))));
        }
    }

    /// Gives back a slot taken by [`Shared::reserve`] and wakes a blocked
    /// pusher; called inside a section when an op completes or a push fails.
    pub(crate) fn release_reservation(&self) {
        if self.config.max_pending.is_none() {
            return;
        }
        self.pending.fetch_sub(1, Ordering::AcqRel);
        let waiters: Vec<_> = {
            let mut ctl = self.control.lock();
            ctl.push_waiters.drain(..).collect()
        };
        for t in waiters {
            t.unpark();
        }
    }
}

/// The positions of `spec`'s vars (reads, then writes) in var-id order: the
/// order a push takes their locks in. A var named twice, or more than
/// [`MAX_OP_VARS`] vars (a handle's var aside), is an error.
fn lock_order<P>(spec: &OpSpec<P>) -> Result<SmallVec<[u32; 4]>> {
    let n = spec.reads.len() + spec.writes.len();
    if n - usize::from(spec.handle) > MAX_OP_VARS {
        return Err(Error::TooManyVars);
    }
    let ids: SmallVec<[u64; 4]> = spec
        .reads
        .iter()
        .chain(&spec.writes)
        .map(|v| v.state.id)
        .collect();
    // `n <= MAX_OP_VARS + 1`, so every position fits.
    let mut order: SmallVec<[u32; 4]> = (0..n as u32).collect();
    order.sort_unstable_by_key(|&i| ids[i as usize]);
    if order
        .windows(2)
        .any(|w| ids[w[0] as usize] == ids[w[1] as usize])
    {
        return Err(Error::DuplicateVar);
    }
    Ok(order)
}
