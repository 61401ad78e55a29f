//! The engine's fork steps. Prepare closes the fork gate (no draining);
//! parent reopens it, leaving the engine exactly as before (I6); the child
//! handler only bumps the domain epoch, and the first engine call in the
//! child settles the engine here (I5).
//!
//! # State
//!
//! | what | move | who | serves |
//! |---|---|---|---|
//! | gate | open → closed | prepare, on the forking thread, after the domain's gate closed; waits for open sections and starting workers | I5, I6: the OS copies no lock held, no half step |
//! | carried op | none → the op the forking thread runs (`carried.rs`) | prepare | I5: that op goes on in the child |
//! | carried op, gate | back to none, open | parent | I6: the parent is exactly as before |
//! | every part | parent's → child's | the first engine call in the child (`settle`, once per epoch, on the child's only engine thread) | I5: inherited ops complete with `LostInFork`, the carried op goes on, waiters and workers of the parent are forgotten |

use super::Payload;
use super::Shared;
use crate::error::OpErrorKind;
use crate::lifecycle::{Event, State};
use crate::op::{Action, OpCell};
use crate::op_info::Lane;
use crate::report::ForkReport;
use crate::sync::Arc;
use crate::var::ReadyOps;

/// Prepare, on the forking thread, after the domain's gate closed: wait
/// for open sections (bounded: sections wait on nothing but short engine
/// locks) and for workers still starting (bounded: see
/// [`crate::sync::Exits::wait_for_starting`]), and remember the op the
/// forking thread is running.
pub(crate) fn prepare<P: Payload>(shared: &Shared<P>) {
    // In a child another thread may be settling the engine: wait for
    // it (bounded: settling waits on nothing), so the gate is closed
    // after the settle reopened it, and the fork never copies a
    // half-settled engine.
    if !control!(PrepareSkipsSettle) {
        settle_child(shared);
    }
    shared.gate().close();
    shared.exits().wait_for_starting();
    shared.carried().remember(shared.calling_op());
    control!(DrainingPrepare => crate::controls::drain_host_lane(shared));
}

/// Parent: back to exactly the pre-fork state.
pub(crate) fn parent<P: Payload>(shared: &Shared<P>) {
    shared.carried().forget();
    shared.gate().open();
}

/// Settles the engine in a fork child, once per epoch; other threads of
/// the child wait for the settling thread (`crate::epoch`).
pub(crate) fn settle_child<P: Payload>(shared: &Shared<P>) {
    // The gate is closed and this is the child's only engine thread:
    // no fork can copy the locks the settle takes outside a section.
    shared.epoch().settle_once(
        || shared.domain().epoch(),
        |epoch| crate::sync::without_section(|| settle(shared, epoch)),
    );
}

/// Rebuilds the engine's state for the child. No section is open: the
/// gate was closed at prepare and the threads that could open one are
/// gone, so every engine lock is free. Inherited ops complete with
/// `LostInFork` without running; their payloads are leaked, since their
/// drop is host code and the host is not re-initialised yet (H1).
fn settle<P: Payload>(shared: &Shared<P>, epoch: u64) {
    let carried_id = shared.carried().take();
    let mut report = ForkReport {
        epoch,
        lost: Vec::new(),
        deletions: 0,
        carried: None,
    };
    let mut errors = Vec::new();
    let mut carried = None;
    for op in shared.live().all() {
        if Some(op.id()) == carried_id {
            op.set_epoch(epoch);
            carried = Some((op.lane, op.queue(), op.runs_inline()));
            report.carried = Some(op.info());
            continue;
        }
        control!(ChildRerun => crate::controls::rerun(&op));
        let err = (op.action != Action::Delete).then(|| op.error(OpErrorKind::LostInFork));
        lose(&op, err.as_ref());
        match err {
            Some(e) => {
                report.lost.push(op.info());
                errors.push(e);
            }
            None => report.deletions += 1,
        }
    }
    let mut ctl = shared.lifecycle().lock();
    // The table has a `ForkChild` edge from every state.
    let state = shared
        .lifecycle()
        .apply(&mut ctl, Event::ForkChild)
        .unwrap_or_else(|_| ctl.state());
    ctl.reset_in_child(errors, report);
    drop(ctl);
    // The parent's waits inside ops are not the child's.
    shared.wait_graph().clear();
    for lane in Lane::ALL {
        let mut ls = shared.lane(lane).lock();
        // Ready ops were all in the live index and are done by now.
        let carried_queue = carried.filter(|c| c.0 == lane).map(|c| (c.1, c.2));
        let carried_here = usize::from(carried_queue.is_some());
        shared
            .ready(lane)
            .reset_in_child(carried_queue, state == State::Stopped);
        // The forking thread is a worker of the child's pool only if it
        // is one: a pusher running the carried op inline goes back to
        // its caller, and the child's next dispatch starts a worker.
        let on_worker = carried_queue.is_some_and(|(_, inline)| !inline);
        let in_bridge = if lane == Lane::Host { carried_here } else { 0 };
        ls.reset_in_child(usize::from(on_worker), in_bridge, state == State::Stopped);
    }
    shared.waiters().reset_in_child();
    // The old workers vanished: forget their handles, never join them.
    shared.exits().forget_all();
    let live = shared.live().len();
    shared.bound().reset_in_child(live);
    shared.gate().open();
}

/// Completes an inherited op in the child without running it.
fn lose<P: Payload>(op: &Arc<OpCell<P>>, error: Option<&crate::error::OpError>) {
    op.try_finish();
    // SAFETY: the fork child's only thread, settling the engine.
    if let Some(payload) = unsafe { op.take_payload() } {
        std::mem::forget(payload);
    }
    let mut granted = ReadyOps::new();
    let mut waiters = Vec::new();
    super::complete::release_vars(op, error, &mut granted, &mut waiters);
    // Waiters of the parent are gone; ops granted here are lost too.
    drop(waiters);
    drop(granted);
    op.mark_gone();
}
