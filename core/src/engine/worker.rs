//! Dispatch and the worker loop: ready ops go to their lane's queue, idle
//! workers are woken one per op, and workers are brought to life up to the
//! lane's limit (the pool's sizing rule, [`crate::pool`]): a parked spare
//! first, a new thread only when no spare is left. A worker that the rule
//! makes surplus parks as a spare; workers exit only once their lane has
//! stopped.

use super::complete::{Finish, Outcome};
use super::token::CompletionToken;
use super::Payload;
use super::Shared;
use crate::current::{enter_op, RunningOp};
use crate::error::{Error, OpError, OpErrorKind, Result};
use crate::op::{Action, OpCell};
use crate::op_info::Lane;
use crate::pool::{Spawns, Start};
use crate::ready::{Home, Take, RETIRED_BATCH};
use crate::sync::{current_thread, spawn_named, Arc, Leaving, MODEL_BUILD};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Spin steps (see [`crate::sync::spin_step`]: 64 CPU hints, then yields) a
/// worker that found its lane empty waits for a newly queued op before it
/// registers as idle and parks. A pusher that finds no idle worker queues
/// the op without a wake-up system call, and the worker takes it without a
/// park/unpark round trip. None in model builds, whose schedules stay as
/// they were.
const SPIN_BEFORE_PARK: u32 = if MODEL_BUILD { 0 } else { 200 };

/// The worker number of a pushing thread that runs its op inline, in traces
/// ([`crate::TraceEvent::worker`]): workers are numbered from 1.
pub(crate) const INLINE_WORKER: usize = 0;

/// What a pushing thread brings to [`Shared::dispatch`].
pub(crate) struct PushSide<P> {
    /// Receives the completed op records a slot kept for a pusher to free
    /// (`ready/slot.rs`, `retired`), freed once the pusher left its
    /// section.
    pub(crate) freed: Vec<Arc<OpCell<P>>>,
    /// `Some(n)`: the pusher may run the op inline when its slot already
    /// holds `n` queued ops ([`Shared::inline_from`]).
    pub(crate) inline_from: Option<usize>,
}

impl<P: Payload> Shared<P> {
    /// Queues ready ops and wakes or plans workers; inside a section. A
    /// pushed op goes to the slot its id picks; an op made ready by a
    /// worker's completion (`home`) goes to that worker's home slot, and
    /// the worker takes one such op itself when nothing waits in its home
    /// slot (saves a queue round trip; never overtakes a queued op there).
    /// The lane lock is taken only when the pool wants it: an idle worker
    /// to wake or a worker to start (`ready/README.md`). A pusher passes
    /// its [`PushSide`]: the completed op records the slot kept for a
    /// pusher to free once it has left its section (`ready/slot.rs`,
    /// `retired`), and whether it may take the op to run inline (returned;
    /// docs/DESIGN.md "Running inline").
    pub(crate) fn dispatch(
        &self,
        ops: impl IntoIterator<Item = Arc<OpCell<P>>>,
        home: Option<Home>,
        spawns: &mut Spawns,
        mut pusher: Option<&mut PushSide<P>>,
    ) -> Option<Arc<OpCell<P>>> {
        let mut taken = None;
        for op in ops {
            let lane = op.lane;
            let ready = self.ready(lane);
            let own = home.filter(|h| h.lane == lane);
            let index = own.map_or_else(|| ready.slot_for(op.id), |h| h.slot);
            let early = control!(WantedReadBeforeQueue) && ready.wants_worker();
            {
                let mut slot = ready.slot(index).lock();
                let inline_from = pusher.as_ref().and_then(|p| p.inline_from);
                if let Some(from) = inline_from.filter(|_| taken.is_none()) {
                    // Decided and counted under the slot lock, as a take
                    // is: a quiesce that paused this slot is never passed
                    // (I3).
                    if slot.start_inline(&op, index, from) {
                        taken = Some(op);
                        continue;
                    }
                }
                if slot.held() {
                    slot.push(op);
                    continue;
                }
                if taken.is_none() && own.is_some() && slot.is_empty() {
                    // Counted under the slot lock, as a take is (I3).
                    if slot.start(&op, index) {
                        taken = Some(op);
                    }
                    continue;
                }
                slot.push(op);
                if let Some(pusher) = pusher.as_deref_mut() {
                    slot.take_retired(&mut pusher.freed);
                }
            }
            if !MODEL_BUILD {
                self.spin_hints[lane.index()].queued();
            }
            // After the slot's lock is released: a worker that registered
            // as idle before this push published it before it looked at
            // this slot (no lost wake-up, `ready/README.md`).
            let wants = if control!(WantedReadBeforeQueue) {
                early
            } else {
                ready.wants_worker()
            };
            if !wants {
                continue;
            }
            let mut ls = self.lane(lane).lock();
            if let Some(t) = ls.pool.wake_idle() {
                drop(ls);
                t.unpark();
            } else if ls.pool.is_short() && !ls.stopped {
                spawns.push((lane, ls.pool.add_worker()));
            }
        }
        taken
    }

    /// Production builds: brings every lane's configured workers to life,
    /// so that a worker the OS refuses fails [`super::Engine::new`] instead
    /// of leaving a lane that never runs an op. Model builds start workers
    /// at the first dispatch only (each idle thread multiplies a model's
    /// schedules); the code that starts them is the same.
    pub(crate) fn start_base_workers(this: &Arc<Self>) -> Result<()> {
        let mut spawns = Spawns::new();
        {
            let _section = this.enter()?;
            for lane in Lane::ALL {
                let mut ls = this.lane(lane).lock();
                // No wait is blocked yet: the pool's limit is the lane's
                // configured size (one sizing rule, in the pool).
                while ls.pool.is_short() {
                    spawns.push((lane, ls.pool.add_worker()));
                }
            }
        }
        Shared::start_workers(this, spawns)
    }

    /// Brings the planned workers to life; outside every section. A worker
    /// whose thread cannot start is taken off its lane's count, and if that
    /// leaves ready ops with no worker free to run them, they fail with
    /// [`OpErrorKind::WorkerStart`] rather than wait for ever (I2). Returns
    /// the first start failure as [`Error::Spawn`].
    #[inline]
    pub(crate) fn start_workers(this: &Arc<Self>, spawns: Spawns) -> Result<()> {
        // The per-op path: most completions and pushes plan no worker.
        if spawns.is_empty() {
            return Ok(());
        }
        Shared::start_planned(this, spawns)
    }

    /// [`Shared::start_workers`] with workers to start.
    #[inline(never)]
    fn start_planned(this: &Arc<Self>, spawns: Spawns) -> Result<()> {
        let mut first_failure = None;
        let mut todo = spawns;
        // A loop, not recursion: failing ops makes others ready, whose
        // dispatch may plan (and fail) further starts.
        while !todo.is_empty() {
            for (lane, start) in std::mem::take(&mut todo) {
                let Err(why) = Shared::start_one(this, lane, start) else {
                    continue;
                };
                todo.extend(Shared::fail_unrunnable(this, lane, &why));
                first_failure.get_or_insert(Error::Spawn(why));
            }
        }
        first_failure.map_or(Ok(()), Err)
    }

    /// Recalls a spare, or starts a new thread as worker `index` of `lane`;
    /// on failure takes it off the count and says why.
    fn start_one(this: &Arc<Self>, lane: Lane, start: Start) -> std::result::Result<(), String> {
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
        let name = format!("{}-{:?}-{index}", this.config.thread_name, lane).to_lowercase();
        let leaving = Leaving::new();
        let last_step = leaving.clone();
        // Counted inside a section, so a fork prepare waits until this
        // thread is past std's start-up mutex (L8). Refused only to the
        // forking thread between prepare and parent/child: uncounted.
        let starting = this.enter().ok().map(|_section| this.exits.starting());
        let spawned = spawn_named(name, this.config.worker_stack_size, move || {
            drop(starting);
            // Set on unwind too: a worker that panicked is leaving as
            // well, and shutdown must not wait for its flag for ever.
            let _leaving = last_step.on_drop();
            Shared::worker_main(shared, lane, index);
        });
        match spawned {
            Ok(handle) => {
                // Under a section, so a fork child finds the set's lock
                // free. Refused only to the forking thread between
                // prepare and parent/child: that worker goes untracked.
                if let Ok(_section) = this.enter() {
                    this.exits.add(leaving, handle);
                }
                Ok(())
            }
            Err(e) => {
                if let Ok(_section) = this.enter() {
                    this.lane(lane).lock().pool.start_failed();
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
    pub(super) fn fail_unrunnable(this: &Arc<Self>, lane: Lane, why: &str) -> Spawns {
        let ops = match this.enter() {
            Ok(_section) => {
                let ls = this.lane(lane).lock();
                let ready = this.ready(lane);
                if ls.pool.workers() > ls.pool.blocked() || ls.stopped || ready.held() {
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
            let outcome = match this.poison_of(&op) {
                Some(err) => Outcome::Passed(err),
                None => Outcome::Raised(op.error(OpErrorKind::WorkerStart(why.to_string()))),
            };
            let Ok(finished) = Shared::finish_planned(this, &op, outcome, None, Finish::Unrunnable)
            else {
                continue;
            };
            spawns.extend(finished.spawns);
            if !finished.done {
                continue;
            }
            // SAFETY: `finish_planned` just moved the op out of QUEUED for
            // this call (`done`).
            if let Some(p) = unsafe { this.take_cancelled_payload(&op) } {
                // Host code (H1): outside every engine lock.
                this.drop_payload(lane, p, true);
            }
        }
        spawns
    }

    /// Takes the payload of an op that the calling thread moved out of
    /// QUEUED without running it (cancelled, or failed for want of a
    /// worker), inside a section; `None` if the fork gate refuses (only the
    /// forking thread).
    ///
    /// # Safety
    ///
    /// The calling thread's own completion moved `op` out of QUEUED, so no
    /// worker has taken or will take its payload.
    pub(crate) unsafe fn take_cancelled_payload(&self, op: &OpCell<P>) -> Option<P> {
        let _section = self.enter().ok()?;
        // SAFETY: the caller's contract: no other thread takes it.
        unsafe { op.take_payload() }
    }

    /// The error a var of `op` is poisoned with, unless the op runs on
    /// error; `None` if the fork gate refuses (only the forking thread).
    fn poison_of(&self, op: &OpCell<P>) -> Option<crate::error::OpError> {
        let _section = self.enter().ok()?;
        self.poison_of_in_section(op)
    }

    /// [`Shared::poison_of`], inside a section (per op: inlined into the
    /// body path as it was before it was shared).
    #[inline]
    fn poison_of_in_section(&self, op: &OpCell<P>) -> Option<crate::error::OpError> {
        if op.run_on_error {
            return None;
        }
        op.vars().find_map(|(v, _)| v.inner.lock().poison.clone())
    }

    fn worker_main(this: Arc<Self>, lane: Lane, index: usize) {
        if ABORT_ON_CHECK_FAILURE {
            let run = catch_unwind(AssertUnwindSafe(|| Shared::worker_loop(this, lane, index)));
            if let Err(panic) = run {
                let message = panic_message(&*panic);
                if crate::sync::is_debug_check_failure(&message) {
                    abort_on_check_failure(&message);
                }
                // Any other panic ends this thread as it always did.
                std::panic::resume_unwind(panic);
            }
        } else {
            Shared::worker_loop(this, lane, index);
        }
    }

    fn worker_loop(this: Arc<Self>, lane: Lane, index: usize) {
        let mut next = None;
        let home = this.ready(lane).home(index);
        let mut retired = Vec::new();
        loop {
            let op = match next.take() {
                Some(op) => op,
                None => match this.next_ready(lane, index) {
                    Some(op) => op,
                    None => return,
                },
            };
            next = Shared::execute(&this, &op, lane, index);
            // Host-lane records are freed here: a host payload left in one
            // (a body refused by the fork gate never takes it) may be
            // dropped only through the bridge.
            if lane == Lane::Host {
                continue;
            }
            // The pusher that allocated it frees it (`ready/slot.rs`,
            // `retired`).
            retired.push(op);
            if retired.len() >= RETIRED_BATCH {
                // Inside a section, as every slot lock is taken (I5: a
                // fork never copies a slot lock held). The plain test
                // `fork_again_in_child` caught the first version, which
                // took it outside; the models could not (a fork lands
                // inside a critical section only at a checker's switch
                // point, and this one has none), and now every plain
                // debug test does (`sync/lock_order.rs`).
                if let Ok(_section) = this.enter() {
                    this.ready(lane).retire(home, &mut retired);
                }
                // Those the slot did not keep are freed here, outside the
                // section.
                retired.clear();
            }
        }
    }

    /// The next op for worker `index` of `lane`, parking while there is none
    /// (idle, or as a spare while the lane has a worker too many); `None`
    /// when the lane has stopped and the worker should exit.
    fn next_ready(&self, lane: Lane, index: usize) -> Option<Arc<OpCell<P>>> {
        let ready = self.ready(lane);
        let home = ready.home(index);
        let mut spin = SPIN_BEFORE_PARK;
        loop {
            let Ok(section) = self.enter() else {
                // Only the forking thread is refused, and a worker forks only
                // from inside a body, which has returned by now.
                crate::sync::spin_step(0);
                continue;
            };
            // Counted as spinning before the look: a dispatch that queues
            // after it then bumps the hint (`ready/spin_hint.rs`).
            let spinning = (spin > 0).then(|| self.spin_hints[lane.index()].start());
            // Status and `running` change together under a slot lock, so
            // a quiesce that counts an op as running can list it (I3). An
            // op cancelled by shutdown while queued is skipped.
            let held = match ready.take(home) {
                Take::Op(op) => return Some(op),
                Take::Empty => false,
                Take::Held => true,
            };
            {
                let mut ls = self.lane(lane).lock();
                if ls.stopped {
                    ls.pool.leave(index);
                    return None;
                }
                if ls.pool.is_surplus() {
                    ls.pool.retire(index, current_thread());
                    drop(ls);
                    drop(section);
                    if !self.wait_as_spare(lane, index) {
                        return None;
                    }
                    continue;
                }
                if spin == 0 || held {
                    // Idle before the last look: a dispatch that queues
                    // after that look reads this in `wanted` and wakes
                    // this worker (`ready/README.md`).
                    if !control!(IdleAfterLastLook) {
                        ls.pool.park_idle(index, current_thread());
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
                self.lane(lane).lock().pool.busy(index);
                return Some(op);
            }
            control!(IdleAfterLastLook => self.lane(lane).lock().pool.park_idle(index, current_thread()));
            drop(section);
            crate::sync::park_until(&self.clock, None);
        }
    }

    /// Parks spare worker `index` until it is recalled (true: counted
    /// again) or its lane stops (false: it has left the pool).
    fn wait_as_spare(&self, lane: Lane, index: usize) -> bool {
        loop {
            crate::sync::park_until(&self.clock, None);
            let Ok(_section) = self.enter() else {
                continue;
            };
            let mut ls = self.lane(lane).lock();
            if ls.stopped {
                ls.pool.leave(index);
                return false;
            }
            if !ls.pool.is_spare(index) {
                return true;
            }
        }
    }

    /// Runs one dispatched op and completes it (sync) or leaves it to its
    /// token (async). Returns an op to run next inline, if any.
    pub(crate) fn execute(
        this: &Arc<Self>,
        op: &Arc<OpCell<P>>,
        lane: Lane,
        worker: usize,
    ) -> Option<Arc<OpCell<P>>> {
        let outcome = Shared::run(this, op, lane, worker);
        let home = Home {
            lane,
            slot: this.ready(lane).home(worker),
        };
        match outcome {
            Outcome::Pending => None,
            outcome => Shared::finish(this, op, outcome, Some(home)).unwrap_or(None),
        }
    }

    /// Runs an op its pusher took to run inline ([`Shared::dispatch`],
    /// docs/DESIGN.md "Running inline") on the pushing thread, outside
    /// every section, and completes it as a worker would. The ops its
    /// completion makes ready are queued for the workers: the pusher goes
    /// back to its caller.
    pub(crate) fn run_inline(this: &Arc<Self>, op: &Arc<OpCell<P>>) {
        let outcome = Shared::run(this, op, op.lane, INLINE_WORKER);
        if !matches!(outcome, Outcome::Pending) {
            // An error here is the fork gate's refusal, which only the
            // forking thread meets; a worker ignores it the same way.
            let _ = Shared::finish(this, op, outcome, None);
        }
    }

    /// Runs a started op: its body, or nothing for the engine's own
    /// actions.
    fn run(this: &Arc<Self>, op: &Arc<OpCell<P>>, lane: Lane, worker: usize) -> Outcome {
        match op.action {
            Action::ClearPoison | Action::Delete => Outcome::Ok,
            Action::Sync | Action::Async => Shared::run_body(this, op, lane, worker),
        }
    }

    /// Runs the body of a sync or async op, outside every engine lock (H1).
    fn run_body(this: &Arc<Self>, op: &Arc<OpCell<P>>, lane: Lane, worker: usize) -> Outcome {
        let Ok(section) = this.enter() else {
            return Outcome::Raised(op.error(OpErrorKind::LostInFork));
        };
        let poison = this.poison_of_in_section(op);
        // SAFETY: this worker moved the op out of QUEUED (`try_start` in
        // `dispatch` or `next_op`) and runs it once.
        let payload = unsafe { op.take_payload() };
        let host_allowed = lane == Lane::Compute || this.enter_bridge();
        drop(section);

        let Some(payload) = payload else {
            return Outcome::Ok;
        };
        if let Some(err) = poison {
            this.drop_payload(lane, payload, host_allowed);
            if lane == Lane::Host && host_allowed {
                this.leave_bridge();
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
        let token = (op.action == Action::Async).then(|| CompletionToken {
            shared: this.clone(),
            op: op.clone(),
        });
        let running = enter_op(RunningOp {
            engine: this.key(),
            op: op.id,
        });
        let traced = this.tracer.start();
        control!(BodyUnderSlotLock => let held_slot = this.ready(lane).slot(this.ready(lane).home(worker)).lock());
        let result = match lane {
            Lane::Compute => catch_unwind(AssertUnwindSafe(|| payload.run(token))),
            Lane::Host => crate::host::with_host(&*this.bridge, || {
                catch_unwind(AssertUnwindSafe(|| payload.run(token)))
            }),
        };
        drop(running);
        control!(BodyUnderSlotLock => drop(held_slot));
        if let Some(start) = traced {
            // In a section, so no thread holds the recorder's lock at a fork.
            if let Ok(_section) = this.enter() {
                this.tracer.record(op, worker, start);
            }
        }
        if lane == Lane::Host {
            this.leave_bridge();
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
    fn enter_bridge(&self) -> bool {
        let mut ls = self.lane(Lane::Host).lock();
        if ls.stopped || self.bridge.is_finalizing() {
            return false;
        }
        ls.in_bridge += 1;
        true
    }

    fn leave_bridge(&self) {
        let waiters = match self.enter() {
            Ok(_section) => {
                let mut ls = self.lane(Lane::Host).lock();
                ls.in_bridge -= 1;
                std::mem::take(&mut ls.drain_waiters)
            }
            Err(_) => Vec::new(),
        };
        for t in waiters {
            t.unpark();
        }
    }

    /// Drops a payload that will not run: host payloads through the bridge
    /// while the host is alive, leaked once it is finalising (H1, I8).
    pub(crate) fn drop_payload(&self, lane: Lane, payload: P, host_allowed: bool) {
        match lane {
            Lane::Compute => drop(payload),
            Lane::Host if host_allowed && !self.bridge.is_finalizing() => {
                crate::host::with_host(&*self.bridge, move || drop(payload))
            }
            Lane::Host => std::mem::forget(payload),
        }
    }
}

/// Debug builds outside the models: when a debug check of the sync facade
/// fires on a worker (the lock order, an engine lock taken outside a
/// fork-gate section, `sync/lock_order.rs`), the worker aborts the process,
/// so a test fails at once, where a dead worker would leave it waiting for
/// ever for the ops the worker would have run. Other panics outside a body
/// end the worker's thread as before. (Aborting on every such panic was
/// tried: the simulated fork children of `core/tests/fork_steps.rs` keep
/// the parent's worker threads, which a real child does not have, and one
/// of them leaving the child's reset pool underflows its count.)
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

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}
