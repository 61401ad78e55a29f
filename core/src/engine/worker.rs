//! Dispatch and the worker loop: ready ops go to their lane's queue, idle
//! workers are woken one per op, and workers start lazily up to the lane's
//! size (plus one per worker blocked in a wait inside an op, so such waits
//! never starve the pool).

use super::complete::Outcome;
use super::Shared;
use crate::current::{enter_op, RunningOp};
use crate::error::OpErrorKind;
use crate::op::{Action, Lane, OpCell, Payload};
use crate::sync::{current_thread, spawn_named, Arc, Leaving, Ordering, MODEL_BUILD};
use crate::token::CompletionToken;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Workers to start once the section that decided it has ended: lane and
/// worker index.
pub(crate) type Spawns = Vec<(Lane, usize)>;

/// Spin steps (see [`crate::sync::spin_step`]: 64 CPU hints, then yields) a
/// worker that found its lane empty waits for a newly queued op before it
/// registers as idle and parks. A pusher that finds no idle worker queues
/// the op without a wake-up system call, and the worker takes it without a
/// park/unpark round trip. None in model builds, whose schedules stay as
/// they were.
const SPIN_BEFORE_PARK: u32 = if MODEL_BUILD { 0 } else { 200 };

impl<P: Payload> Shared<P> {
    /// Queues ready ops and wakes or plans workers; inside a section. A
    /// worker of `inline` calls this after completing an op and takes one
    /// ready op of its own lane itself when nothing else waits in that lane
    /// (saves a queue round trip; never overtakes a queued op).
    pub(crate) fn dispatch(
        &self,
        ops: impl IntoIterator<Item = Arc<OpCell<P>>>,
        inline: Option<Lane>,
        spawns: &mut Spawns,
    ) -> Option<Arc<OpCell<P>>> {
        let mut taken = None;
        for op in ops {
            let lane = op.lane;
            let mut ls = self.lane(lane).lock();
            if ls.paused || ls.stopped {
                ls.push(op);
                continue;
            }
            if taken.is_none() && inline == Some(lane) && ls.is_empty() {
                // Marked running under the lane lock, as a pop does (I3).
                if op.try_start() {
                    ls.running += 1;
                    taken = Some(op);
                }
                continue;
            }
            ls.push(op);
            if !MODEL_BUILD {
                self.queued_gen[lane.index()].fetch_add(1, Ordering::Relaxed);
            }
            if let Some((_, t)) = ls.idle.pop() {
                drop(ls);
                t.unpark();
            } else if ls.workers < self.config.workers(lane) + ls.blocked {
                ls.workers += 1;
                ls.spawned += 1;
                spawns.push((lane, ls.spawned));
            }
        }
        taken
    }

    /// Starts the planned workers; outside every section. A worker that
    /// cannot start is taken off the count, and a later dispatch tries again.
    pub(crate) fn spawn_workers(this: &Arc<Self>, spawns: Spawns) {
        for (lane, index) in spawns {
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
                }
                Err(_) => {
                    if let Ok(_section) = this.enter() {
                        this.lane(lane).lock().workers -= 1;
                    }
                }
            }
        }
    }

    fn worker_main(this: Arc<Self>, lane: Lane, index: usize) {
        let mut next = None;
        loop {
            let op = match next.take() {
                Some(op) => op,
                None => match this.next_ready(lane, index) {
                    Some(op) => op,
                    None => return,
                },
            };
            next = Shared::execute(&this, op, lane, index);
        }
    }

    /// The next op for worker `index` of `lane`, parking while there is none;
    /// `None` when the worker should exit (stopped, or surplus after a
    /// blocked wait ended).
    fn next_ready(&self, lane: Lane, index: usize) -> Option<Arc<OpCell<P>>> {
        let mut spin = SPIN_BEFORE_PARK;
        loop {
            let Ok(section) = self.enter() else {
                // Only the forking thread is refused, and a worker forks only
                // from inside a body, which has returned by now.
                crate::sync::spin_step(0);
                continue;
            };
            let mut ls = self.lane(lane).lock();
            let surplus = ls.workers > self.config.workers(lane) + ls.blocked;
            if ls.stopped || (surplus && ls.is_empty()) {
                ls.workers -= 1;
                ls.idle.retain(|(i, _)| *i != index);
                return None;
            }
            if !ls.paused {
                // Status and `running` change together under the lane lock,
                // so a quiesce that counts an op as running can list it (I3).
                // An op cancelled by shutdown while queued is skipped.
                while let Some(op) = ls.pop() {
                    if op.try_start() {
                        ls.running += 1;
                        ls.idle.retain(|(i, _)| *i != index);
                        return Some(op);
                    }
                }
            }
            if spin > 0 && !ls.paused {
                // Not registered as idle while spinning: dispatch queues
                // without waking anyone, and this loop looks again under
                // the lock before it parks.
                let seen = self.queued_gen[lane.index()].load(Ordering::Relaxed);
                drop(ls);
                drop(section);
                let mut round = 0;
                while round < spin && self.queued_gen[lane.index()].load(Ordering::Relaxed) == seen
                {
                    crate::sync::spin_step(round);
                    round += 1;
                }
                spin = 0;
                continue;
            }
            if !ls.idle.iter().any(|(i, _)| *i == index) {
                ls.idle.push((index, current_thread()));
            }
            drop(ls);
            drop(section);
            crate::sync::park_until(&self.clock, None);
        }
    }

    /// Runs one dispatched op and completes it (sync) or leaves it to its
    /// token (async). Returns an op to run next inline, if any.
    pub(crate) fn execute(
        this: &Arc<Self>,
        op: Arc<OpCell<P>>,
        lane: Lane,
        worker: usize,
    ) -> Option<Arc<OpCell<P>>> {
        let outcome = match op.action {
            Action::ClearPoison | Action::Delete => Outcome::Ok,
            Action::Sync | Action::Async => Shared::run_body(this, &op, lane, worker),
        };
        match outcome {
            Outcome::Pending => None,
            outcome => Shared::finish(this, &op, outcome, Some(lane)).unwrap_or(None),
        }
    }

    /// Runs the body of a sync or async op, outside every engine lock (H1).
    fn run_body(this: &Arc<Self>, op: &Arc<OpCell<P>>, lane: Lane, worker: usize) -> Outcome {
        let Ok(section) = this.enter() else {
            return Outcome::Raised(op.error(OpErrorKind::LostInFork));
        };
        let poison = if op.run_on_error {
            None
        } else {
            op.vars().find_map(|(v, _)| v.inner.lock().poison.clone())
        };
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
        let result = match lane {
            Lane::Compute => catch_unwind(AssertUnwindSafe(|| payload.run(token))),
            Lane::Host => crate::host::with_host(&*this.bridge, || {
                catch_unwind(AssertUnwindSafe(|| payload.run(token)))
            }),
        };
        drop(running);
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
            Ok(Err(message)) => Outcome::Raised(op.error(OpErrorKind::Failed(message))),
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

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}
