//! Worker threads, the third step of an op's path: the loop each worker
//! runs, which takes a dispatched op from its lane's ready queues, runs it
//! (`run.rs`) and completes it (`complete.rs`), and parks while there is
//! nothing to take. A worker that the sizing rule makes surplus parks as a
//! spare; workers exit only once their lane has stopped. Threads are
//! started by `spawn.rs`.
//!
//! # State
//!
//! A worker thread's states are the pool's (`pool.rs`, `# State`); this
//! file moves them, each under the lane lock inside a section:
//!
//! | move | where | serves |
//! |---|---|---|
//! | busy → spinning → idle → busy | `next_ready`: spins a moment, registers idle, looks once more, parks | no lost wake-up (`ready/README.md`) |
//! | busy → spare → busy | `next_ready` and `wait_as_spare`: a surplus worker parks until recalled | L8: no engine thread exits while the engine lives |
//! | any → gone | the lane stopped (shutdown) | I8 |
//!
//! A compute worker also hands its completed op records back to its home
//! queue in batches ([`crate::ready::RETIRED_BATCH`]), for the pusher that
//! allocated them to free (`ready/retired.rs`).

use super::complete::{Outcome, Which};
use super::finish::finish_op;
use super::run;
use super::shared::Shared;
use super::Payload;
use crate::op::OpCell;
use crate::op_info::Lane;
use crate::ready::{Home, Take, RETIRED_BATCH};
use crate::sync::{current_thread, Arc, MODEL_BUILD};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Spin steps (see [`crate::sync::spin_step`]: 64 CPU hints, then yields) a
/// worker that found its lane empty waits for a newly queued op before it
/// registers as idle and parks. A pusher that finds no idle worker queues
/// the op without a wake-up system call, and the worker takes it without a
/// park/unpark round trip. None in model builds, whose schedules stay
/// small.
const SPIN_BEFORE_PARK: u32 = if MODEL_BUILD { 0 } else { 200 };

pub(crate) fn worker_main<P: Payload>(this: Arc<Shared<P>>, lane: Lane, index: usize) {
    if ABORT_ON_CHECK_FAILURE {
        let run = catch_unwind(AssertUnwindSafe(|| worker_loop(this, lane, index)));
        if let Err(panic) = run {
            let message = run::panic_message(&*panic);
            if crate::sync::is_debug_check_failure(&message) {
                abort_on_check_failure(&message);
            }
            // Any other panic ends this thread.
            std::panic::resume_unwind(panic);
        }
    } else {
        worker_loop(this, lane, index);
    }
}

fn worker_loop<P: Payload>(this: Arc<Shared<P>>, lane: Lane, index: usize) {
    this.bridge().worker_started();
    let mut next = None;
    let home = this.ready(lane).home(index);
    let mut retired = Vec::new();
    loop {
        let op = match next.take() {
            Some(op) => op,
            None => match next_ready(&this, lane, index) {
                Some(op) => op,
                None => {
                    // Outside every lock and section: the bridge may take
                    // the host lock here.
                    this.bridge().worker_exiting();
                    return;
                }
            },
        };
        next = execute(&this, &op, lane, index);
        // Host-lane records are freed here: a host payload left in one
        // (a body refused by the fork gate never takes it) may be
        // dropped only through the bridge.
        if lane == Lane::Host {
            continue;
        }
        // The pusher that allocated it frees it (`ready/queue.rs`,
        // `retired`).
        retired.push(op);
        if retired.len() >= RETIRED_BATCH {
            // Inside a section, as every queue lock is taken (I5: a
            // fork never copies a queue lock held; every plain debug test
            // checks it, `sync/lock_order.rs`).
            if let Ok(_section) = this.enter() {
                this.ready(lane).retire(home, &mut retired);
            }
            // Those the queue did not keep are freed here, outside the
            // section.
            retired.clear();
        }
    }
}

/// Runs one dispatched op on worker `worker` of `lane` and completes it
/// (sync) or leaves it to its token (async). Returns an op to run next
/// inline, if any.
fn execute<P: Payload>(
    this: &Arc<Shared<P>>,
    op: &Arc<OpCell<P>>,
    lane: Lane,
    worker: usize,
) -> Option<Arc<OpCell<P>>> {
    let outcome = run::run(this, op, lane, worker);
    let home = Home {
        lane,
        queue: this.ready(lane).home(worker),
    };
    match outcome {
        Outcome::Pending => None,
        outcome => {
            finish_op(this, op, outcome, Some(home), Which::AnyLive).map_or(None, |(next, _)| next)
        }
    }
}

/// The next op for worker `index` of `lane`, parking while there is none
/// (idle, or as a spare while the lane has a worker too many); `None`
/// when the lane has stopped and the worker should exit.
fn next_ready<P: Payload>(shared: &Shared<P>, lane: Lane, index: usize) -> Option<Arc<OpCell<P>>> {
    let ready = shared.ready(lane);
    let home = ready.home(index);
    let mut spin = SPIN_BEFORE_PARK;
    loop {
        let Ok(section) = shared.enter() else {
            // Only the forking thread is refused, and a worker forks only
            // from inside a body, which has returned by now.
            crate::sync::spin_step(0);
            continue;
        };
        // Counted as spinning before the look: a dispatch that queues
        // after it then bumps the hint (`ready/spin_hint.rs`).
        let spinning = (spin > 0).then(|| shared.spin_hint(lane).start());
        // Status and `running` change together under a queue lock, so
        // a quiesce that counts an op as running can list it (I3). An
        // op cancelled by shutdown while queued is skipped.
        let held = match ready.take(home) {
            Take::Op(op) => return Some(op),
            Take::Empty => false,
            Take::Held => true,
        };
        {
            let mut ls = shared.lane(lane).lock();
            if ls.is_stopped() {
                ls.pool_mut().leave(index);
                return None;
            }
            if ls.pool().is_surplus() {
                ls.pool_mut().retire(index, current_thread());
                drop(ls);
                drop(section);
                if !wait_as_spare(shared, lane, index) {
                    return None;
                }
                continue;
            }
            if spin == 0 || held {
                // Idle before the last look: a dispatch that queues
                // after that look reads this in `wanted` and wakes
                // this worker (`ready/README.md`).
                if !control!(IdleAfterLastLook) {
                    ls.pool_mut().park_idle(index, current_thread());
                }
            }
        }
        if let Some(spinning) = spinning.filter(|_| !held) {
            // Not registered as idle while spinning: dispatch queues
            // without waking anyone, and this loop looks again before
            // it parks.
            drop(section);
            spinning.wait(spin);
            spin = 0;
            continue;
        }
        // The last look, now that this worker is registered as idle.
        if let Take::Op(op) = ready.take(home) {
            shared.lane(lane).lock().pool_mut().busy(index);
            return Some(op);
        }
        control!(IdleAfterLastLook => shared.lane(lane).lock().pool_mut().park_idle(index, current_thread()));
        drop(section);
        crate::sync::park_until(shared.clock(), None);
    }
}

/// Parks spare worker `index` until it is recalled (true: counted
/// again) or its lane stops (false: it has left the pool).
fn wait_as_spare<P: Payload>(shared: &Shared<P>, lane: Lane, index: usize) -> bool {
    loop {
        crate::sync::park_until(shared.clock(), None);
        let Ok(_section) = shared.enter() else {
            continue;
        };
        let mut ls = shared.lane(lane).lock();
        if ls.is_stopped() {
            ls.pool_mut().leave(index);
            return false;
        }
        if !ls.pool().is_spare(index) {
            return true;
        }
    }
}

/// Debug builds outside the models: when a debug check of the sync facade
/// fires on a worker (the lock order, an engine lock taken outside a
/// fork-gate section, `sync/lock_order.rs`), the worker aborts the process,
/// so a test fails at once, where a dead worker would leave it waiting for
/// ever for the ops the worker would have run. Other panics outside a body
/// end the worker's thread: the simulated fork children of
/// `core/tests/fork_steps.rs` keep the parent's worker threads, which a
/// real child does not have, and one of them leaving the child's reset pool
/// must not abort the test.
const ABORT_ON_CHECK_FAILURE: bool = cfg!(all(debug_assertions, not(any(loom, shuttle))));

/// Writes the check's panic message to the process's stderr (not to a
/// test's captured output, which the abort would lose) and aborts.
fn abort_on_check_failure(message: &str) -> ! {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "forksafe: a debug check failed on a worker: {message}; aborting"
    );
    std::process::abort()
}
