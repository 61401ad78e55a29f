//! Completion: the one place an op becomes done (I2), poisons what it writes
//! (I7), hands its vars to the next ops in push order (I1), and wakes the
//! waiters that may now return. No wake-up is lost: each waiter registers
//! before it checks, and each completer changes state before it wakes.

use super::Payload;
use super::Shared;
use crate::error::{Error, OpError, Result};
use crate::op::{Action, OpCell, OpStatus};
use crate::pool::Spawns;
use crate::ready::Home;
use crate::sync::{Arc, Thread};
use crate::var::ReadyOps;

/// How an op ended.
pub(crate) enum Outcome {
    /// It succeeded.
    Ok,
    /// It raised this error first (recorded for `wait_all`).
    Raised(OpError),
    /// It was skipped, passing on the error a var it touches was poisoned
    /// with.
    Passed(OpError),
    /// An async body returned; its token completes it.
    Pending,
}

/// What [`Shared::finish_planned`] did.
pub(crate) struct Finished<P> {
    /// A newly ready op the calling worker runs next.
    pub(crate) inline: Option<Arc<OpCell<P>>>,
    /// Whether this call completed the op.
    pub(crate) done: bool,
    /// Workers the completion planned, to bring to life outside the section.
    pub(crate) spawns: Spawns,
}

/// Which ops a completion may finish.
#[derive(PartialEq, Eq)]
pub(crate) enum Finish {
    /// Any op not yet done (bodies, tokens).
    Any,
    /// Only an op not yet dispatched (cancellation).
    OnlyQueued,
    /// Only an op not yet dispatched, whose lane cannot run it (no worker
    /// free, none can start): unlike a cancellation it poisons what it
    /// writes, since it was ready, so every op before it on its vars is
    /// done.
    Unrunnable,
}

impl<P: Payload> Shared<P> {
    /// Completes `op` from its token: a typed error if it is done already or
    /// belongs to an earlier fork epoch.
    pub(crate) fn complete_from_token(
        this: &Arc<Self>,
        op: &Arc<OpCell<P>>,
        outcome: std::result::Result<(), OpError>,
    ) -> Result<()> {
        let outcome = match outcome {
            Ok(()) => Outcome::Ok,
            Err(e) => Outcome::Raised(e),
        };
        Shared::finish(this, op, outcome, None).map(|_| ())
    }

    /// Completes `op` with `outcome`. `worker` is the lane and home slot of
    /// the calling worker, which may take one newly ready op to run inline
    /// (returned).
    pub(crate) fn finish(
        this: &Arc<Self>,
        op: &Arc<OpCell<P>>,
        outcome: Outcome,
        worker: Option<Home>,
    ) -> Result<Option<Arc<OpCell<P>>>> {
        Shared::finish_as(this, op, outcome, worker, Finish::Any).map(|(inline, _)| inline)
    }

    /// [`Shared::finish`], restricted by `which`; also returns whether this
    /// call completed the op.
    pub(crate) fn finish_as(
        this: &Arc<Self>,
        op: &Arc<OpCell<P>>,
        outcome: Outcome,
        worker: Option<Home>,
        which: Finish,
    ) -> Result<(Option<Arc<OpCell<P>>>, bool)> {
        let f = Shared::finish_planned(this, op, outcome, worker, which)?;
        // A start failure fails the ops it strands (see `start_workers`);
        // this completion itself is done.
        let _ = Shared::start_workers(this, f.spawns);
        Ok((f.inline, f.done))
    }

    /// [`Shared::finish_as`] without bringing workers to life: returns the
    /// ones the completion planned.
    pub(crate) fn finish_planned(
        this: &Arc<Self>,
        op: &Arc<OpCell<P>>,
        outcome: Outcome,
        worker: Option<Home>,
        which: Finish,
    ) -> Result<Finished<P>> {
        let mut spawns = Spawns::new();
        let mut wake: Vec<Thread> = Vec::new();
        let inline = {
            let _section = this.enter()?;
            if op.epoch() != this.epoch.get() {
                return Err(Error::StaleEpoch);
            }
            let before = match which {
                Finish::Any => op.try_finish(),
                Finish::OnlyQueued | Finish::Unrunnable => {
                    op.try_cancel().then_some(OpStatus::Queued)
                }
            };
            let Some(before) = before else {
                return match which {
                    Finish::Any => Err(Error::AlreadyCompleted),
                    Finish::OnlyQueued | Finish::Unrunnable => Ok(Finished {
                        inline: None,
                        done: false,
                        spawns,
                    }),
                };
            };
            // From here to the end of the section the completion is half
            // done: a fork must never copy it (I5, I6; the fork-point check).
            let _completing = this.completing.enter();
            control!(CompletionOutsideSection => drop(_section));
            let (error, raised) = match outcome {
                Outcome::Ok | Outcome::Pending => (None, false),
                Outcome::Raised(e) => (Some(e), true),
                Outcome::Passed(e) => (Some(e), false),
            };
            // A cancelled op is taken out of its queues ahead of earlier ops
            // that may not have checked for poison yet; poisoning its vars
            // would skip them (I1, I7). Its error still reaches `wait_all`
            // and the shutdown report.
            let poison = if which == Finish::OnlyQueued {
                None
            } else {
                error.as_ref()
            };
            let mut ready = ReadyOps::new();
            this.release_vars(op, poison, &mut ready, &mut wake);
            if let (Some(e), true) = (&error, raised) {
                this.control.lock().errors.push(e.clone());
            }
            if before == OpStatus::Running {
                let ready = this.ready(op.lane);
                ready
                    .slot(op.slot())
                    .lock()
                    .finished(op.runs_inline(), &mut wake);
            }
            this.leave_live(op, &mut wake);
            this.release_reservation();
            this.dispatch(ready, worker, &mut spawns, None)
        };
        for t in wake {
            t.unpark();
        }
        Ok(Finished {
            inline,
            done: true,
            spawns,
        })
    }

    /// Applies a completed op to its vars: version and poison of the vars it
    /// writes, then the next grants in push order; inside a section.
    pub(crate) fn release_vars(
        &self,
        op: &Arc<OpCell<P>>,
        error: Option<&OpError>,
        ready: &mut ReadyOps<OpCell<P>>,
        wake: &mut Vec<Thread>,
    ) {
        for (var, write) in op.vars() {
            let mut v = var.inner.lock();
            if write {
                match (op.action, error) {
                    // A clear lost in a fork child does not run: it
                    // poisons like any other lost op (I5).
                    (Action::ClearPoison, None) => v.poison = None,
                    (Action::Delete, _) => v.freed = true,
                    (_, Some(e)) if v.poison.is_none() => v.poison = Some(e.clone()),
                    _ => {}
                }
                v.version += 1;
                let hold = control!(WakeOnlyWhenNoWrites if crate::controls::write_queued(&v));
                if !control!(LostNotify) && !hold {
                    wake.append(&mut v.waiters);
                }
            }
            v.remove(op, ready);
        }
    }

    /// Marks a completed op gone from the live set, its completion applied
    /// in full, and wakes the `wait_all` callers blocked on it; the last
    /// step of a completion's section (`live.rs`, "Why a waiter is never
    /// left asleep").
    pub(crate) fn leave_live(&self, op: &OpCell<P>, wake: &mut Vec<Thread>) {
        op.mark_gone();
        self.waiters.wake_gone(op.id, wake);
    }
}
