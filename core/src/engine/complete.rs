//! Completion, the last step of an op's path: the one place an op becomes
//! done (I2), poisons what it writes (I7), hands its vars to the next ops
//! in push order (I1; those ops go to `dispatch.rs`, the start of their own
//! path), gives its place under the pending bound back, and wakes the
//! waiters that may now return. No wake-up is lost: each waiter registers
//! before it checks, and each completer changes state before it wakes.
//!
//! # State
//!
//! One completion, in one section, in this order (each row names the part
//! whose state it moves):
//!
//! | step | part | serves |
//! |---|---|---|
//! | `Queued`/`Running` → `Done` | the op's status (`op.rs`), one read-modify-write | I2: exactly once |
//! | version, poison, freed; the next grants; var waiters woken | each var (`var.rs`), in the op's var order | I1, I7 |
//! | the error kept | the lifecycle cell (`lifecycle_cell.rs`) | I7: `wait_all` reports it |
//! | `running` falls | the queue the op was taken from (`ready/queue.rs`) | I3: a quiesce drains |
//! | gone; `wait_all` waiters woken | the op's gone bit (`op.rs`), the waiters (`waiters.rs`) | I2: a waiter never sees half a completion |
//! | pending falls; blocked pushers woken | admission (`admission.rs`), control | the bound |
//! | newly ready ops queued | `dispatch.rs` | I2 |
//!
//! Model builds count the threads inside these steps (`completing`), and
//! the fork-point check finds none at a fork (I5, I6).

use super::dispatch::dispatch;
use super::shared::Shared;
use super::Payload;
use crate::error::{Error, OpError, Result};
use crate::op::{Action, OpCell, OpStatus};
use crate::pool::Spawns;
use crate::ready::Home;
use crate::sync::{Arc, Thread};
use crate::var::{ReadyOps, WriteEffect};

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

/// What [`complete`] did.
pub(crate) struct Completed<P> {
    /// A newly ready op the calling worker runs next.
    next: Option<Arc<OpCell<P>>>,
    /// Whether this call completed the op.
    done: bool,
    /// Workers the completion planned, to bring to life outside the section.
    spawns: Spawns,
}

impl<P> Completed<P> {
    /// The newly ready op the calling worker runs next, whether this call
    /// completed the op, and the workers it planned.
    pub(crate) fn into_parts(self) -> (Option<Arc<OpCell<P>>>, bool, Spawns) {
        (self.next, self.done, self.spawns)
    }
}

/// Which ops a completion may complete.
#[derive(PartialEq, Eq)]
pub(crate) enum Which {
    /// Any op not yet done (bodies, tokens).
    AnyLive,
    /// Only an op not yet dispatched (cancellation).
    QueuedOnly,
    /// Only an op not yet dispatched, whose lane cannot run it (no worker
    /// free, none can start): unlike a cancellation it poisons what it
    /// writes, since it was ready, so every op before it on its vars is
    /// done.
    Unrunnable,
}

/// Completes `op` with `outcome`, restricted by `which`: the one place an
/// op becomes done (see the module's `# State`). `worker` is the lane and
/// home queue of the calling worker, which may take one newly ready op to
/// run next. The workers the ops made ready want are returned, to bring to
/// life once the section has ended (`spawn.rs`).
pub(crate) fn complete<P: Payload>(
    this: &Arc<Shared<P>>,
    op: &Arc<OpCell<P>>,
    outcome: Outcome,
    worker: Option<Home>,
    which: Which,
) -> Result<Completed<P>> {
    let mut spawns = Spawns::new();
    let mut wake: Vec<Thread> = Vec::new();
    let next = {
        let _section = this.enter()?;
        if op.epoch() != this.epoch().get() {
            return Err(Error::StaleEpoch);
        }
        let before = match which {
            Which::AnyLive => op.try_finish(),
            Which::QueuedOnly | Which::Unrunnable => op.try_cancel().then_some(OpStatus::Queued),
        };
        let Some(before) = before else {
            return match which {
                Which::AnyLive => Err(Error::AlreadyCompleted),
                Which::QueuedOnly | Which::Unrunnable => Ok(Completed {
                    next: None,
                    done: false,
                    spawns,
                }),
            };
        };
        // From here to the end of the section the completion is half
        // done: a fork must never copy it (I5, I6; the fork-point check).
        let _completing = this.completing().enter();
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
        let poison = if which == Which::QueuedOnly {
            None
        } else {
            error.as_ref()
        };
        let mut ready = ReadyOps::new();
        release_vars(op, poison, &mut ready, &mut wake);
        if let (Some(e), true) = (&error, raised) {
            this.lifecycle().lock().record_error(e.clone());
        }
        if before == OpStatus::Running {
            let ready = this.ready(op.lane);
            ready
                .queue(op.queue())
                .lock()
                .finished(op.runs_inline(), &mut wake);
        }
        leave_live(this, op, &mut wake);
        give_back_place(this);
        dispatch(this, ready, worker, &mut spawns, None)
    };
    for t in wake {
        t.unpark();
    }
    Ok(Completed {
        next,
        done: true,
        spawns,
    })
}

/// Applies a completed op to its vars: version and poison of the vars it
/// writes, then the next grants in push order; inside a section.
pub(crate) fn release_vars<P>(
    op: &Arc<OpCell<P>>,
    error: Option<&OpError>,
    ready: &mut ReadyOps<OpCell<P>>,
    wake: &mut Vec<Thread>,
) {
    for (var, write) in op.vars() {
        let mut v = var.lock();
        if write {
            v.complete_write(match (op.action, error) {
                // A clear lost in a fork child does not run: it
                // poisons like any other lost op (I5).
                (Action::ClearPoison, None) => WriteEffect::Clear,
                (Action::Delete, _) => WriteEffect::Free,
                (_, Some(e)) => WriteEffect::Poison(e),
                (_, None) => WriteEffect::Plain,
            });
            let hold = control!(WakeOnlyWhenNoWrites if crate::controls::write_queued(&v));
            if !control!(LostNotify) && !hold {
                v.take_waiters(wake);
            }
        }
        v.remove(op, ready);
    }
}

/// Marks a completed op gone from the live set, its completion applied
/// in full, and wakes the `wait_all` callers blocked on it; the last
/// step of a completion's section (`live.rs`, "Why a waiter is never
/// left asleep").
pub(crate) fn leave_live<P: Payload>(shared: &Shared<P>, op: &OpCell<P>, wake: &mut Vec<Thread>) {
    op.mark_gone();
    shared.waiters().wake_gone(op.id(), wake);
}

/// Gives back a place taken under the pending bound and wakes the pushers
/// blocked for room; inside a section, when an op completes or a push that
/// took a place fails.
pub(crate) fn give_back_place<P: Payload>(shared: &Shared<P>) {
    if !shared.bound().release() {
        return;
    }
    let waiters = shared.lifecycle().lock().take_push_waiters();
    for t in waiters {
        t.unpark();
    }
}
