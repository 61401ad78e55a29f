//! Pushing ops: validation, back-pressure, and appending to every var's
//! queue in one step so that push order is the same on every var (I1).

use super::worker::Spawns;
use super::{sorted_unique, Engine, Shared};
use crate::error::{Error, Result};
use crate::op::{Action, OpCell, OpInfo, OpSpec, Payload, QUEUED};
use crate::sync::mutant::{self, Mutant};
use crate::sync::{current_thread, Arc, AtomicU64, AtomicUsize, Mutex, Ordering};
use crate::var::Var;
use std::time::Duration;

impl<P: Payload> Engine<P> {
    /// Pushes an op; returns its id. With a pending bound, waits for room
    /// with the host lock released (H2). Bad input is a typed error and
    /// nothing already accepted is affected.
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
        let mut vars: Vec<(Var<P>, bool)> =
            Vec::with_capacity(spec.reads.len() + spec.writes.len());
        vars.extend(spec.reads.iter().map(|v| (v.clone(), false)));
        vars.extend(spec.writes.iter().map(|v| (v.clone(), true)));
        for (v, _) in &vars {
            this.check_var(v)?;
        }
        sorted_unique(&mut vars)?;
        if this.state().refuses_pushes() {
            return Err(Error::ShutDown);
        }
        if mutant::active(Mutant::PushWaitsForQuiesce) {
            this.mutant_wait_for_resume();
        }
        this.reserve(block)?;
        let accepted = Shared::accept(this, spec, vars);
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
    /// order so two pushes sharing vars are ordered alike on all of them.
    fn accept(this: &Arc<Self>, mut spec: OpSpec<P>, vars: Vec<(Var<P>, bool)>) -> Result<u64> {
        let section = this.enter()?;
        let mut guards = Vec::with_capacity(vars.len());
        for (v, _) in &vars {
            let g = v.state.inner.lock();
            if g.deleted {
                return Err(Error::DeletedVar);
            }
            guards.push(g);
        }
        let id = this.next_op.fetch_add(1, Ordering::Relaxed);
        let op = Arc::new(OpCell {
            info: OpInfo {
                id,
                name: spec.name.take().unwrap_or_else(|| "op".to_string()),
                lane: spec.lane,
                priority: spec.priority,
            },
            epoch: AtomicU64::new(this.epoch.load(Ordering::Relaxed)),
            reads: std::mem::take(&mut spec.reads),
            writes: std::mem::take(&mut spec.writes),
            run_on_error: spec.run_on_error,
            action: spec.action,
            missing: AtomicUsize::new(vars.len() + 1),
            status: AtomicUsize::new(QUEUED),
            payload: Mutex::new(spec.payload.take()),
        });
        // In the live index before the state check: shutdown sets its state
        // before it sweeps the index, so either its sweep sees this op or
        // this check sees the shutdown (both go through the shard lock).
        this.live_shard(id).lock().insert(id, op.clone());
        if this.state().refuses_pushes() && op.try_cancel() {
            // A waiter may have seen the op in the index meanwhile.
            let mut wake = Vec::new();
            this.forget_live(id, &mut wake);
            drop(guards);
            drop(section);
            for t in wake {
                t.unpark();
            }
            return Err(Error::ShutDown);
        }
        // Otherwise accepted (perhaps already cancelled by the sweep, which
        // waits for these var locks before it releases the op's uses).
        for (g, (_, write)) in guards.iter_mut().zip(&vars) {
            if spec.action == crate::op::Action::Delete {
                g.deleted = true;
            }
            if g.append(&op, *write) {
                op.grant();
            }
        }
        drop(guards);
        // The pusher's own grant: the op may run only once it is on every
        // var's queue and in the live index.
        let mut spawns = Spawns::new();
        if op.grant() {
            this.dispatch(std::iter::once(op), None, &mut spawns);
        }
        drop(section);
        Shared::spawn_workers(this, spawns);
        Ok(id)
    }

    /// Negative control (c): wait until no quiesce holds, keeping the host
    /// lock.
    fn mutant_wait_for_resume(&self) {
        use crate::lifecycle::State;
        while matches!(self.state(), State::Quiescing | State::Quiesced) {
            crate::sync::spin_step(0);
        }
    }

    /// Takes a slot under the pending bound, waiting for one if `block`.
    fn reserve(&self, block: bool) -> Result<()> {
        let Some(max) = self.config.max_pending else {
            return Ok(());
        };
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
                self.ctl.lock().push_waiters.push(current_thread());
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
            let mut ctl = self.ctl.lock();
            ctl.push_waiters.drain(..).collect()
        };
        for t in waiters {
            t.unpark();
        }
    }
}
