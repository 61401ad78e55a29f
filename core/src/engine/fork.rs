//! The engine's fork steps. Prepare closes the fork gate (no draining);
//! parent reopens it, leaving the engine exactly as before (I6); the child
//! handler only bumps the domain epoch, and the first engine call in the
//! child settles the engine here (I5).

use super::Payload;
use super::Shared;
use crate::error::OpErrorKind;
use crate::lifecycle::{Event, State};
use crate::op::{Action, OpCell};
use crate::op_info::{Lane, OpInfo};
use crate::sync::{Arc, Ordering};
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
        // In a child another thread may be settling the engine: wait for
        // it (bounded: settling waits on nothing), so the gate is closed
        // after the settle reopened it, and the fork never copies a
        // half-settled engine.
        if !control!(PrepareSkipsSettle) {
            self.settle_child();
        }
        self.gate.close();
        self.exits.wait_for_starting();
        let carried = self.calling_op().map_or(0, |id| id + 1);
        self.carried.store(carried, Ordering::Release);
        control!(DrainingPrepare => crate::controls::drain_host_lane(self));
    }

    /// Parent: back to exactly the pre-fork state.
    pub(crate) fn parent(&self) {
        self.carried.store(0, Ordering::Release);
        self.gate.open();
    }

    /// Settles the engine in a fork child, once per epoch; other threads of
    /// the child wait for the settling thread (`crate::epoch`).
    pub(crate) fn settle_child(&self) {
        // The gate is closed and this is the child's only engine thread:
        // no fork can copy the locks the settle takes outside a section.
        self.epoch.settle_once(
            || self.domain.epoch(),
            |epoch| crate::sync::without_section(|| self.settle(epoch)),
        );
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
        let mut carried = None;
        for op in self.live.all() {
            if Some(op.id) == carried_id {
                op.set_epoch(epoch);
                carried = Some((op.lane, op.slot(), op.runs_inline()));
                report.carried = Some(op.info());
                continue;
            }
            control!(ChildRerun => crate::controls::rerun(&op));
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
        let mut ctl = self.control.lock();
        // The table has a `ForkChild` edge from every state.
        let state = self
            .control
            .apply(&mut ctl, Event::ForkChild)
            .unwrap_or_else(|_| ctl.state());
        ctl.quiesces = 0;
        ctl.errors.extend(errors);
        ctl.push_waiters.clear();
        ctl.report = Some(report);
        drop(ctl);
        // The parent's waits inside ops are not the child's.
        self.wait_graph.clear();
        for lane in Lane::ALL {
            let mut ls = self.lane(lane).lock();
            // Ready ops were all in the live index and are done by now.
            let carried_slot = carried.filter(|c| c.0 == lane).map(|c| (c.1, c.2));
            let carried_here = usize::from(carried_slot.is_some());
            self.ready(lane)
                .reset_in_child(carried_slot, state == State::Stopped);
            // The forking thread is a worker of the child's pool only if it
            // is one: a pusher running the carried op inline goes back to
            // its caller, and the child's next dispatch starts a worker.
            let on_worker = carried_slot.is_some_and(|(_, inline)| !inline);
            ls.pool.reset_in_child(usize::from(on_worker));
            ls.in_bridge = if lane == Lane::Host { carried_here } else { 0 };
            ls.stopped = state == State::Stopped;
            ls.drain_waiters.clear();
        }
        self.waiters.reset_in_child();
        // The old workers vanished: forget their handles, never join them.
        self.exits.forget_all();
        let live = self.live.len();
        self.pending.store(live, Ordering::Release);
        self.gate.open();
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
        op.mark_gone();
    }
}
