//! The engine's fork steps. Prepare closes the fork gate (no draining);
//! parent reopens it, leaving the engine exactly as before (I6); the child
//! handler only bumps the domain epoch, and the first engine call in the
//! child settles the engine here (I5).

use super::Shared;
use crate::error::OpErrorKind;
use crate::lifecycle::{next, Event, State};
use crate::op::{Action, Lane, OpCell, OpInfo, Payload};
use crate::sync::mutant::{self, Mutant};
use crate::sync::{spin_step, Arc, Ordering};
use crate::var::ReadyOps;

/// What a fork child inherited from its parent's engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkReport {
    /// The child's fork epoch.
    pub epoch: u64,
    /// Ops pending at the fork, completed in the child with
    /// [`OpErrorKind::LostInFork`] on the vars they write, without running.
    pub lost: Vec<OpInfo>,
    /// Deletions of vars that were pending at the fork and were carried out.
    pub deletions: usize,
    /// The op whose body forked: it goes on in the child and completes
    /// normally.
    pub carried: Option<OpInfo>,
}

impl<P: Payload> Shared<P> {
    /// Prepare, on the forking thread, after the domain's gate closed: wait
    /// for open sections (bounded: sections wait on nothing but short engine
    /// locks) and for workers still starting (bounded: see
    /// [`crate::sync::Exits::wait_for_starting`]), and remember the op the
    /// forking thread is running.
    pub(crate) fn prepare(&self) {
        self.gate.close();
        self.exits.wait_for_starting();
        let carried = self.calling_op().map_or(0, |id| id + 1);
        self.carried.store(carried, Ordering::Release);
        if mutant::active(Mutant::DrainingPrepare) {
            self.mutant_drain_host_lane();
        }
    }

    /// Negative control (a), the seed's protocol: wait for the host lane's
    /// running ops without releasing the host lock.
    fn mutant_drain_host_lane(&self) {
        loop {
            {
                let mut ls = self.lane(Lane::Host).lock();
                if ls.running == 0 {
                    return;
                }
                ls.drain_waiters.push(crate::sync::current_thread());
            }
            crate::sync::park_until(&self.clock, None);
        }
    }

    /// Parent: back to exactly the pre-fork state.
    pub(crate) fn parent(&self) {
        self.carried.store(0, Ordering::Release);
        self.gate.open();
    }

    /// Settles the engine in a fork child, once per epoch; other threads of
    /// the child wait for the settling thread.
    pub(crate) fn settle_child(&self) {
        let mut round = 0;
        loop {
            let epoch = self.domain.epoch();
            if self.epoch.load(Ordering::Acquire) == epoch {
                return;
            }
            if self
                .settling
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                if self.epoch.load(Ordering::Acquire) != epoch {
                    self.settle(epoch);
                }
                self.settling.store(false, Ordering::Release);
                return;
            }
            spin_step(round);
            round = round.saturating_add(1);
        }
    }

    /// Rebuilds the engine's state for the child. No section is open: the
    /// gate was closed at prepare and the threads that could open one are
    /// gone, so every engine lock is free. Inherited ops complete with
    /// `LostInFork` without running; their payloads are leaked, since their
    /// drop is host code and the host is not re-initialised yet (H1).
    fn settle(&self, epoch: u64) {
        let carried_id = self.carried.swap(0, Ordering::AcqRel).checked_sub(1);
        let mut report = ForkReport {
            epoch,
            lost: Vec::new(),
            deletions: 0,
            carried: None,
        };
        let mut errors = Vec::new();
        let mut carried_lane = None;
        for op in self.live_ops() {
            if Some(op.id) == carried_id {
                op.set_epoch(epoch);
                carried_lane = Some(op.lane);
                report.carried = Some(op.info());
                continue;
            }
            if mutant::active(Mutant::ChildRerun) {
                self.mutant_rerun(&op);
            }
            let err = (op.action != Action::Delete).then(|| op.error(OpErrorKind::LostInFork));
            self.lose(&op, err.as_ref());
            match err {
                Some(e) => {
                    report.lost.push(op.info());
                    errors.push(e);
                }
                None => report.deletions += 1,
            }
        }
        let mut ctl = self.ctl.lock();
        let state = next(ctl.state, Event::ForkChild).unwrap_or(State::Stopped);
        self.set_state(&mut ctl, state);
        ctl.quiesces = 0;
        ctl.errors.extend(errors);
        ctl.push_waiters.clear();
        ctl.report = Some(report);
        drop(ctl);
        for lane in Lane::ALL {
            let mut ls = self.lane(lane).lock();
            // Ready ops were all in the live index and are done by now.
            drop(ls.drain());
            let carried_here = usize::from(carried_lane == Some(lane));
            ls.pool.reset_in_child(carried_here);
            ls.running = carried_here;
            ls.in_bridge = if lane == Lane::Host { carried_here } else { 0 };
            ls.paused = false;
            ls.stopped = state == State::Stopped;
            ls.drain_waiters.clear();
        }
        self.all_waiters.lock().clear();
        // The old workers vanished: forget their handles, never join them.
        self.exits.forget_all();
        self.all_waiting.store(0, Ordering::SeqCst);
        self.timed.lock().clear();
        let live: usize = self.live.iter().map(|s| s.lock().len()).sum();
        self.pending.store(live, Ordering::Release);
        self.epoch.store(epoch, Ordering::Release);
        self.gate.open();
    }

    /// Negative control (d): the child runs an inherited op's body.
    fn mutant_rerun(&self, op: &Arc<OpCell<P>>) {
        // SAFETY: the fork child's only thread, settling the engine.
        if let Some(payload) = unsafe { op.take_payload() } {
            let _ = payload.run(None);
        }
    }

    /// Completes an inherited op in the child without running it.
    fn lose(&self, op: &Arc<OpCell<P>>, error: Option<&crate::error::OpError>) {
        op.try_finish();
        // SAFETY: the fork child's only thread, settling the engine.
        if let Some(payload) = unsafe { op.take_payload() } {
            std::mem::forget(payload);
        }
        let mut granted = ReadyOps::new();
        let mut waiters = Vec::new();
        self.release_vars(op, error, &mut granted, &mut waiters);
        // Waiters of the parent are gone; ops granted here are lost too.
        drop(waiters);
        drop(granted);
        self.live_shard(op.id).lock().remove(op.id);
    }
}
