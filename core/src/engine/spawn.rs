//! Bringing workers to life, up to their lane's limit (the pool's sizing
//! rule, [`crate::pool`]: a parked spare first, a new thread only when no
//! spare is left). A dispatch, a wait's stand-in or a resume plans the
//! workers under the lane lock; they are started here once the section
//! that planned them has ended. A thread runs the worker loop the engine
//! module wires in ([`Shared::worker_main`], `worker.rs`).
//!
//! # State
//!
//! A worker thread's states are the pool's (`pool.rs`, `# State`); this
//! file moves the first ones, each under the lane lock inside a section:
//!
//! | move | where | serves |
//! |---|---|---|
//! | planned → starting | [`start_workers`]: a recall wakes a spare; a spawn starts a thread, counted in `exits` while it starts | L8: a fork never catches a worker in std's start-up path |
//! | starting → gone (start failed) | `start_one`, then the ops it strands fail with `WorkerStart` (`fail_unrunnable`) | I2: no op waits for a worker that never comes |
//!
//! A completion plans the workers the ops it made ready want; `finish.rs`
//! completes an op and then starts them here.

use super::complete::{self, Outcome, Which};
use super::payload;
use super::shared::Shared;
use super::Payload;
use crate::error::{Error, OpErrorKind, Result};
use crate::op_info::Lane;
use crate::pool::{Spawns, Start};
use crate::sync::{spawn_named, Arc, Leaving};

/// Production builds: brings every lane's configured workers to life,
/// so that a worker the OS refuses fails [`super::Engine::new`] instead
/// of leaving a lane that never runs an op. Model builds start workers
/// at the first dispatch only (each idle thread multiplies a model's
/// schedules); the code that starts them is the same.
pub(crate) fn start_base_workers<P: Payload>(this: &Arc<Shared<P>>) -> Result<()> {
    let mut spawns = Spawns::new();
    {
        let _section = this.enter()?;
        for lane in Lane::ALL {
            let mut ls = this.lane(lane).lock();
            // No wait is blocked yet: the pool's limit is the lane's
            // configured size (one sizing rule, in the pool).
            while ls.pool().is_short() {
                spawns.push((lane, ls.pool_mut().add_worker()));
            }
        }
    }
    start_workers(this, spawns)
}

/// Brings the planned workers to life; outside every section. A worker
/// whose thread cannot start is taken off its lane's count, and if that
/// leaves ready ops with no worker free to run them, they fail with
/// [`OpErrorKind::WorkerStart`] rather than wait for ever (I2). Returns
/// the first start failure as [`Error::Spawn`].
#[inline]
pub(crate) fn start_workers<P: Payload>(this: &Arc<Shared<P>>, spawns: Spawns) -> Result<()> {
    // The per-op path: most completions and pushes plan no worker.
    if spawns.is_empty() {
        return Ok(());
    }
    start_planned(this, spawns)
}

/// [`start_workers`] with workers to start.
#[inline(never)]
fn start_planned<P: Payload>(this: &Arc<Shared<P>>, spawns: Spawns) -> Result<()> {
    let mut first_failure = None;
    let mut todo = spawns;
    // A loop, not recursion: failing ops makes others ready, whose
    // dispatch may plan (and fail) further starts.
    while !todo.is_empty() {
        for (lane, start) in std::mem::take(&mut todo) {
            let Err(why) = start_one(this, lane, start) else {
                continue;
            };
            todo.extend(fail_unrunnable(this, lane, &why));
            first_failure.get_or_insert(Error::Spawn(why));
        }
    }
    first_failure.map_or(Ok(()), Err)
}

/// Recalls a spare, or starts a new thread as worker `index` of `lane`;
/// on failure takes it off the count and says why.
fn start_one<P: Payload>(
    this: &Arc<Shared<P>>,
    lane: Lane,
    start: Start,
) -> std::result::Result<(), String> {
    let index = match start {
        Start::Recall(thread) => {
            if !control!(RecallWithoutWake) {
                thread.unpark();
            }
            return Ok(());
        }
        Start::Spawn(index) => index,
    };
    let shared = this.clone();
    let name = format!("{}-{:?}-{index}", this.config().thread_name, lane).to_lowercase();
    let leaving = Leaving::new();
    let last_step = leaving.clone();
    // Counted inside a section, so a fork prepare waits until this
    // thread is past std's start-up mutex (L8). Refused only to the
    // forking thread between prepare and parent/child: uncounted.
    let starting = this.enter().ok().map(|_section| this.exits().starting());
    let spawned = spawn_named(name, this.config().worker_stack_size, move || {
        drop(starting);
        // Set on unwind too: a worker that panicked is leaving as
        // well, and shutdown must not wait for its flag for ever.
        let _leaving = last_step.on_drop();
        (shared.worker_main())(shared.clone(), lane, index);
    });
    match spawned {
        Ok(handle) => {
            // Under a section, so a fork child finds the set's lock
            // free. Refused only to the forking thread between
            // prepare and parent/child: that worker goes untracked.
            if let Ok(_section) = this.enter() {
                this.exits().add(leaving, handle);
            }
            Ok(())
        }
        Err(e) => {
            if let Ok(_section) = this.enter() {
                this.lane(lane).lock().pool_mut().start_failed();
            }
            Err(e.to_string())
        }
    }
}

/// After a start failure on `lane`: if every counted worker of the lane
/// is blocked in a wait inside an op (or there is none), nothing can
/// run its queued ops, so each completes with
/// [`OpErrorKind::WorkerStart`], poisoning what it writes (I7). Returns
/// the workers the ops made ready by that want.
pub(super) fn fail_unrunnable<P: Payload>(this: &Arc<Shared<P>>, lane: Lane, why: &str) -> Spawns {
    let ops = match this.enter() {
        Ok(_section) => {
            let ls = this.lane(lane).lock();
            let ready = this.ready(lane);
            if ls.pool().workers() > ls.pool().blocked() || ls.is_stopped() || ready.held() {
                return Spawns::new();
            }
            ready.drain()
        }
        Err(_) => return Spawns::new(),
    };
    let mut spawns = Spawns::new();
    for op in ops {
        // As if it had run: an op on a poisoned var passes that error
        // on instead of raising its own (I7).
        let outcome = match payload::poison_of(this, &op) {
            Some(err) => Outcome::Passed(err),
            None => Outcome::Raised(op.error(OpErrorKind::WorkerStart(why.to_string()))),
        };
        let Ok(finished) = complete::complete(this, &op, outcome, None, Which::Unrunnable) else {
            continue;
        };
        let (_, done, planned) = finished.into_parts();
        spawns.extend(planned);
        if !done {
            continue;
        }
        // SAFETY: `complete` just moved the op out of QUEUED for
        // this call (`done`).
        if let Some(p) = unsafe { payload::take_cancelled_payload(this, &op) } {
            // Host code (H1): outside every engine lock.
            payload::drop_payload(this, lane, p, true);
        }
    }
    spawns
}
