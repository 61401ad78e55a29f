//! Running one op, the fourth step of its path: on the worker that took it
//! (or on its pusher, inline), its body runs outside every engine lock
//! (H1), host bodies inside the host bridge. The outcome goes back to the
//! caller, which completes the op (`complete.rs`).
//!
//! # State
//!
//! | what | move | who | serves |
//! |---|---|---|---|
//! | payload | in the record → taken | the thread that moved the op out of `Queued` (`op.rs`), in a section | I2: run at most once |
//! | calling thread | outside → inside op `id` | the body's run ([`crate::current`]), undone when it returns | waits inside ops see their caller (docs/DESIGN.md) |
//! | host bridge count | n → n + 1 → n | a host body's run (`lane.rs`) | I8: shutdown waits for it to fall |
//! | trace | — → one event | a body that ran while tracing is on (`trace.rs`) | the timeline |

use super::complete::Outcome;
use super::payload;
use super::shared::Shared;
use super::token::CompletionToken;
use super::Payload;
use crate::current::{enter_op, RunningOp};
use crate::error::{OpError, OpErrorKind};
use crate::op::{Action, OpCell};
use crate::op_info::Lane;
use crate::sync::Arc;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The worker number of a pushing thread that runs its op inline, in traces
/// ([`crate::TraceEvent::worker`]): workers are numbered from 1.
pub(crate) const INLINE_WORKER: usize = 0;

/// Runs a started op: its body, or nothing for the engine's own
/// actions.
pub(crate) fn run<P: Payload>(
    this: &Arc<Shared<P>>,
    op: &Arc<OpCell<P>>,
    lane: Lane,
    worker: usize,
) -> Outcome {
    match op.action {
        Action::ClearPoison | Action::Delete => Outcome::Ok,
        Action::Sync | Action::Async => run_body(this, op, lane, worker),
    }
}

/// Runs the body of a sync or async op, outside every engine lock (H1).
fn run_body<P: Payload>(
    this: &Arc<Shared<P>>,
    op: &Arc<OpCell<P>>,
    lane: Lane,
    worker: usize,
) -> Outcome {
    let Ok(section) = this.enter() else {
        return Outcome::Raised(op.error(OpErrorKind::LostInFork));
    };
    let poison = payload::poison_of_in_section(op);
    // SAFETY: this thread moved the op out of QUEUED (a take in
    // `dispatch.rs` or `worker.rs`) and runs it once.
    let payload = unsafe { op.take_payload() };
    let host_allowed = lane == Lane::Compute || enter_bridge(this);
    drop(section);

    let Some(payload) = payload else {
        return Outcome::Ok;
    };
    if let Some(err) = poison {
        payload::drop_payload(this, lane, payload, host_allowed);
        if lane == Lane::Host && host_allowed {
            leave_bridge(this);
        }
        control!(SkippedOpPassesNothing => return Outcome::Ok);
        return Outcome::Passed(err);
    }
    if !host_allowed {
        // Stopped or finalising: the host is not called again; its
        // payload is leaked, since dropping it is host code (H1, I8).
        std::mem::forget(payload);
        return Outcome::Raised(op.error(OpErrorKind::Cancelled));
    }
    let token =
        (op.action == Action::Async).then(|| CompletionToken::new(this.clone(), op.clone()));
    let running = enter_op(RunningOp {
        engine: this.key(),
        op: op.id(),
    });
    let traced = this.tracer().start();
    control!(BodyUnderQueueLock => let held_queue = this.ready(lane).queue(this.ready(lane).home(worker)).lock());
    let result = match lane {
        Lane::Compute => catch_unwind(AssertUnwindSafe(|| payload.run(token))),
        Lane::Host => crate::host::with_host(this.bridge(), || {
            catch_unwind(AssertUnwindSafe(|| payload.run(token)))
        }),
    };
    drop(running);
    control!(BodyUnderQueueLock => drop(held_queue));
    if let Some(start) = traced {
        // In a section, so no thread holds the recorder's lock at a fork.
        if let Ok(_section) = this.enter() {
            this.tracer().record(op, worker, start);
        }
    }
    if lane == Lane::Host {
        leave_bridge(this);
    }
    match result {
        Ok(Ok(())) if op.action == Action::Async => Outcome::Pending,
        Ok(Ok(())) => Outcome::Ok,
        Ok(Err(failure)) => Outcome::Raised(OpError::failed(op.info(), failure)),
        Err(panic) => Outcome::Raised(op.error(OpErrorKind::Panicked(panic_message(&*panic)))),
    }
}

/// Counts a host worker into the bridge unless the lane has stopped or
/// the host is finalising (I8); inside a section.
fn enter_bridge<P: Payload>(shared: &Shared<P>) -> bool {
    shared
        .lane(Lane::Host)
        .lock()
        .enter_bridge(|| shared.bridge().is_finalizing())
}

fn leave_bridge<P: Payload>(shared: &Shared<P>) {
    let waiters = match shared.enter() {
        Ok(_section) => shared.lane(Lane::Host).lock().leave_bridge(),
        Err(_) => Vec::new(),
    };
    for t in waiters {
        t.unpark();
    }
}

/// The text of a panic's payload.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}
