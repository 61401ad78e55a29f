//! Shutdown (I8): refuse pushes, let queued ops run until the deadline,
//! cancel the rest, stop the workers, and wait until no host worker is in or
//! entering the host bridge; after that the engine never calls host code.
//!
//! # State
//!
//! | what | move | who | serves |
//! |---|---|---|---|
//! | lifecycle | any → `ShuttingDown` | [`shutdown`](CoreEngine::shutdown): quiesce holds cleared, the queues unpaused, blocked pushers woken | I8: pushes refused, queued ops may still run |
//! | lanes, queues | running → stopped | `stop`, once no op but the caller's is live or the deadline passed | I8: workers exit |
//! | queued ops | queued → cancelled | `stop`'s sweep of the live set (`Cancelled`, payloads dropped outside every lock) | I2, I8 |
//! | host bridge | busy → empty | `stop` waits for the host lane's bridge count to fall | I8: no host call after shutdown |
//! | workers | idle → joined | `join_idle_workers` | L8 |
//! | lifecycle | `ShuttingDown` → `Stopped` | `stop`, last | I8 |

use super::complete::{Outcome, Which};
use super::Payload;
use super::{CoreEngine, Shared};
use crate::error::{OpErrorKind, Result};
use crate::lifecycle::{Event, State};
use crate::op_info::Lane;
use crate::report::ShutdownReport;
use crate::sync::{current_thread, join_leaving, pause_briefly, Arc, Instant};
use std::time::Duration;

impl<P: Payload> CoreEngine<P> {
    /// Shuts the engine down: pushes fail with [`crate::Error::ShutDown`]
    /// from now on, queued ops run until `timeout` and are then cancelled,
    /// and once this returns no host code is called again. Waits with the
    /// host lock released (H2). A second call returns an empty report.
    pub fn shutdown(&self, timeout: Duration) -> Result<ShutdownReport> {
        let deadline = self.shared.deadline(timeout)?;
        shutdown(&self.shared, deadline)
    }
}

fn shutdown<P: Payload>(this: &Arc<Shared<P>>, deadline: Instant) -> Result<ShutdownReport> {
    let caller = this.calling_op();
    let caller_op;
    {
        let section = this.enter()?;
        // Inside the section: the live index's shard lock must not be
        // held by this thread when another one forks.
        caller_op = caller.and_then(|c| this.live().get(c));
        let mut ctl = this.lifecycle().lock();
        if ctl.state() == State::Stopped {
            return Ok(ShutdownReport::default());
        }
        this.lifecycle().apply(&mut ctl, Event::Shutdown)?;
        ctl.clear_quiesces();
        let mut wake = ctl.take_push_waiters();
        // Unpaused under `ctl` (see `quiesce.rs`).
        wake.extend(super::quiesce::set_paused(this, false));
        drop(ctl);
        let spawns = super::quiesce::plan_workers_for_queued(this);
        drop(section);
        for t in wake {
            t.unpark();
        }
        // A start failure fails the ops it strands (`start_workers`).
        let _ = super::spawn::start_workers(this, spawns);
    }
    wait_live_until(this, caller, deadline);
    let report = stop(this, caller_op.map(|op| (op.lane, op.runs_inline())));
    Ok(report)
}

/// Waits until no live op but the caller's is left, or the deadline.
fn wait_live_until<P: Payload>(shared: &Shared<P>, caller: Option<u64>, deadline: Instant) {
    let Ok(me) = super::wait::join_all_waiters(shared) else {
        return;
    };
    loop {
        let Ok(section) = shared.enter() else {
            break;
        };
        let Some(left) = shared.live().blocker_below(u64::MAX, caller) else {
            break;
        };
        if shared.clock().passed(deadline) {
            break;
        }
        // Parks only if its completion is sure to see this waiter.
        if !shared.waiters().block_on(&me, &left) {
            continue;
        }
        shared.waiters().register_timed(Some(deadline));
        drop(section);
        shared.park(Some(deadline));
    }
    super::wait::leave_all_waiters(shared, &me);
}

/// Stops the lanes, cancels what is still queued, and waits for the host
/// bridge to empty. `caller`: the lane of the op calling shutdown,
/// which is itself inside the bridge if it is a host op, and whether
/// its pusher runs it inline (then it runs on no worker).
fn stop<P: Payload>(this: &Arc<Shared<P>>, caller: Option<(Lane, bool)>) -> ShutdownReport {
    let caller_lane = caller.map(|c| c.0);
    let mut report = ShutdownReport::default();
    if let Ok(_section) = this.enter() {
        let mut wake = Vec::new();
        for lane in Lane::ALL {
            let mut ls = this.lane(lane).lock();
            wake.extend(ls.stop());
            this.ready(lane).stop();
        }
        for t in wake {
            t.unpark();
        }
    }
    // No push is accepted any more, so the live set only shrinks: one
    // sweep cancels every op not yet dispatched.
    let ops = match this.enter() {
        Ok(_section) => this.live().all(),
        Err(_) => Vec::new(),
    };
    let mut payloads = Vec::new();
    for op in ops {
        let err = op.error(OpErrorKind::Cancelled);
        if let Ok((_, true)) =
            super::finish::finish_op(this, &op, Outcome::Raised(err), None, Which::QueuedOnly)
        {
            report.cancelled.push(op.info());
            // SAFETY: this call cancelled the op (moved it out of
            // QUEUED), so no worker takes its payload.
            if let Some(p) = unsafe { super::payload::take_cancelled_payload(this, &op) } {
                payloads.push((op.lane, p));
            }
        }
    }
    // Dropped closures are host code: dropped while the host is alive,
    // outside every engine lock (H1); leaked once it is finalising.
    for (lane, payload) in payloads {
        super::payload::drop_payload(this, lane, payload, true);
    }
    let own = usize::from(caller_lane == Some(Lane::Host));
    loop {
        let Ok(section) = this.enter() else {
            break;
        };
        let mut ls = this.lane(Lane::Host).lock();
        if !ls.bridge_busy(own, current_thread()) {
            break;
        }
        drop(ls);
        drop(section);
        this.park(None);
    }
    // With the host lock released: an exiting worker may take it
    // (`HostBridge::worker_exiting`).
    crate::host::released(this.bridge(), || {
        join_idle_workers(this, caller.is_some_and(|(_, inline)| !inline))
    });
    if let Ok(_section) = this.enter() {
        let mut ctl = this.lifecycle().lock();
        let _ = this.lifecycle().apply(&mut ctl, Event::Stopped);
        drop(ctl);
        report.still_running = this.live().running();
    }
    report
}

/// Joins every worker of this engine but those still running a body and
/// the calling thread, so that when shutdown returns no engine thread is
/// half-way out: a raw fork that catches one exiting can leave the child
/// unable to start any thread (std's thread-exit path holds a
/// process-wide lock, FORK-SAFETY.md). The lanes are stopped, so an idle
/// worker exits at once; a leaving worker holds no engine lock and takes
/// the host lock at most to free its host state, which the caller does
/// not hold (H2), so the wait is bounded by its exit. Not bounded by the
/// deadline: it never waits for a body.
/// `from_an_op`: the caller is a worker running an op of this engine;
/// that op counts as running but its thread is not among those to join
/// (`core/tests/worker_exits.rs` checks that no idle worker is left
/// unjoined then). Ops their pushers run inline are not counted: no worker
/// runs them.
fn join_idle_workers<P: Payload>(this: &Arc<Shared<P>>, from_an_op: bool) {
    let mut round = 0;
    loop {
        let (leaving, left) = this.exits().take_leaving();
        join_leaving(leaving);
        if left == 0 {
            break;
        }
        let running = match this.enter() {
            Ok(_section) => Lane::ALL
                .iter()
                .map(|l| this.ready(*l).running_on_workers())
                .sum::<usize>()
                .saturating_sub(usize::from(from_an_op)),
            Err(_) => break,
        };
        if left <= running {
            break;
        }
        pause_briefly(round);
        round = round.saturating_add(1);
    }
}
