//! Quiesce (I3): stop dispatching, wait until every op dispatched before has
//! completed, hold until the last guard drops. Pushes go on being accepted
//! and are dispatched on resume.
//!
//! # State
//!
//! | what | move | who | serves |
//! |---|---|---|---|
//! | lifecycle | `Running`/`Quiescing` → `Quiescing` | [`quiesce`], one more hold, under the lifecycle lock, every ready queue paused under the same hold | I3: nothing new starts |
//! | lifecycle | `Quiescing` → `Quiesced` | [`quiesce`], once no op but the caller's runs (each queue's `running`, read while it registers as a drain waiter) | I3 |
//! | lifecycle | held → `Running` | the last guard dropped, or a missed deadline (`release_quiesce`), its own hold only; the queues unpaused and workers planned for what queued meanwhile | I3: dispatch resumes |
//! | a guard | live → inert | a shutdown or a fork child (the guard's epoch is old) | a guard never releases a hold it does not own |

use super::Payload;
use super::{CoreEngine, Shared};
use crate::error::{Error, Result};
use crate::lifecycle::{Event, State};
use crate::op_info::{Lane, OpInfo};
use crate::sync::{current_thread, Arc, Instant};
use std::time::Duration;

/// Holds a quiesce; dispatch resumes when the last guard of the engine
/// drops. A guard that outlives a shutdown or a fork into a child is inert.
/// Guards I3.
#[must_use = "the quiesce ends when the guard drops"]
pub struct QuiesceGuard<P: Payload> {
    shared: Arc<Shared<P>>,
    epoch: u64,
}

impl<P: Payload> std::fmt::Debug for QuiesceGuard<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "QuiesceGuard(engine {}, epoch {})",
            self.shared.id(),
            self.epoch
        )
    }
}

impl<P: Payload> CoreEngine<P> {
    /// Stops dispatch and waits, with the host lock released (H2), until
    /// every op dispatched before has completed (excluding the op this is
    /// called from). On the deadline this quiesce is dropped and
    /// [`Error::Timeout`] lists the ops still running.
    pub fn quiesce(&self, timeout: Duration) -> Result<QuiesceGuard<P>> {
        let deadline = self.shared.deadline(timeout)?;
        quiesce(&self.shared, deadline)
    }
}

pub(crate) fn quiesce<P: Payload>(
    this: &Arc<Shared<P>>,
    deadline: Instant,
) -> Result<QuiesceGuard<P>> {
    let (epoch, caller_lane) = {
        let _section = this.enter()?;
        // Inside the section: the live index's shard lock must not be
        // held by this thread when another one forks.
        let caller_lane = this
            .calling_op()
            .and_then(|c| this.live().get(c))
            .map(|op| op.lane);
        let mut ctl = this.lifecycle().lock();
        control!(PauseBeforeStateCheck => crate::controls::pause_lanes(this));
        this.lifecycle().apply(&mut ctl, Event::Quiesce)?;
        ctl.hold_quiesce();
        // Paused under `ctl`: a shutdown or a resume that takes `ctl`
        // next must see the lanes paused, or its unpause could come
        // before this pause and leave the lanes paused for ever (found
        // by the shuttle model drain_races_shutdown).
        for lane in Lane::ALL {
            let _ls = this.lane(lane).lock();
            this.ready(lane).set_paused(true);
        }
        drop(ctl);
        (this.epoch().get(), caller_lane)
    };
    loop {
        let Ok(section) = this.enter() else {
            release_quiesce(this, epoch, true);
            return Err(Error::ForkInProgress);
        };
        // Register as a drain waiter under the same queue lock hold that
        // reads its `running`: a completion between the check and a
        // later registration would find no waiter and the wake-up would
        // be lost (the shuttle model i3_quiesce_pct checks it). A stale
        // entry only costs a spurious wake-up.
        let mut busy = false;
        let me = current_thread();
        for lane in Lane::ALL {
            let running = this.ready(lane).running_or_register(&me);
            if running > usize::from(caller_lane == Some(lane)) {
                busy = true;
            }
        }
        if !busy {
            let mut ctl = this.lifecycle().lock();
            this.lifecycle().apply(&mut ctl, Event::Drained)?;
            return Ok(QuiesceGuard {
                shared: this.clone(),
                epoch,
            });
        }
        if let Some(e) = this.wait_expired(Some(deadline), || this.live().running()) {
            drop(section);
            release_quiesce(this, epoch, true);
            return Err(e);
        }
        this.waiters().register_timed(Some(deadline));
        drop(section);
        this.park(Some(deadline));
    }
}

/// Pauses or resumes dispatch on every lane; on resume wakes the idle
/// workers and plans new ones for queued ops. Inside a section.
pub(crate) fn set_paused<P: Payload>(shared: &Shared<P>, paused: bool) -> Vec<crate::sync::Thread> {
    let mut wake = Vec::new();
    for lane in Lane::ALL {
        let mut ls = shared.lane(lane).lock();
        shared.ready(lane).set_paused(paused);
        if !paused {
            wake.extend(ls.pool_mut().wake_all_idle());
        }
    }
    wake
}

/// Releases one quiesce: its guard dropped, or its deadline passed.
fn release_quiesce<P: Payload>(this: &Arc<Shared<P>>, epoch: u64, timed_out: bool) {
    let Ok(section) = this.enter() else {
        return;
    };
    if this.epoch().get() != epoch {
        return;
    }
    let mut ctl = this.lifecycle().lock();
    if !matches!(ctl.state(), State::Quiescing | State::Quiesced) {
        return;
    }
    let Some(left) = ctl.release_quiesce() else {
        return;
    };
    let others_held = left > 0;
    let event = if timed_out {
        Event::QuiesceTimeout { others_held }
    } else {
        Event::Resume { others_held }
    };
    if this.lifecycle().apply(&mut ctl, event).is_err() {
        return;
    }
    // Unpaused under `ctl`, so a quiesce that follows pauses after it.
    let wake = if others_held {
        Vec::new()
    } else {
        set_paused(this, false)
    };
    drop(ctl);
    let spawns = if others_held {
        Vec::new()
    } else {
        plan_workers_for_queued(this)
    };
    drop(section);
    for t in wake {
        t.unpark();
    }
    // A start failure fails the ops it strands (`start_workers`).
    let _ = super::spawn::start_workers(this, spawns);
}

/// Plans workers for ops queued while no worker was free; inside a
/// section. The workers wanted are those busy with a dispatched op (a
/// worker blocked in a wait inside its op included) plus one per queued
/// op, up to the lane's size plus its blocked workers: counting every
/// live worker as free left an op blocked in a wait without the
/// stand-in it needed when the op it waits for became ready during a
/// quiesce (`core/tests/inside_ops.rs`). Async ops whose bodies have
/// returned count as busy too, which can only start a worker early.
pub(crate) fn plan_workers_for_queued<P: Payload>(shared: &Shared<P>) -> crate::pool::Spawns {
    let mut spawns = Vec::new();
    for lane in Lane::ALL {
        let mut ls = shared.lane(lane).lock();
        let ready = shared.ready(lane);
        let want = (ready.running_on_workers() + ready.len()).min(ls.pool().limit());
        while ls.pool().workers() < want {
            spawns.push((lane, ls.pool_mut().add_worker()));
        }
    }
    spawns
}

impl<P: Payload> Drop for QuiesceGuard<P> {
    fn drop(&mut self) {
        release_quiesce(&self.shared, self.epoch, false);
    }
}

impl Error {
    /// The ops listed by a [`Error::Timeout`], if this is one.
    pub fn pending_ops(&self) -> &[OpInfo] {
        match self {
            Error::Timeout { pending } => pending,
            _ => &[],
        }
    }
}
