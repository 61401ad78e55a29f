//! Negative controls: deliberately broken variants of the engine, compiled
//! only for the models (`--cfg loom`, `--cfg shuttle`). A model switches one
//! on with [`set`] and checks that loom or shuttle catches the bug; the
//! same scenario with every control off must pass.
//!
//! Every broken variant's code is here. Production files keep only a
//! one-line hook, the crate's `control!` macro, which expands to nothing
//! (or to `false`) outside model builds, so the code that ships has no
//! trace of them.
//!
//! The switch is a thread-local of the test's OS thread: loom and shuttle
//! run a model's threads as coroutines on that thread, so they all see it,
//! and tests running in parallel do not see each other's.

use crate::engine::Shared;
use crate::fork_gate::{ForkGate, Section, CLOSED};
use crate::lifecycle::State;
use crate::op::OpCell;
use crate::op_info::Lane;
use crate::sync::{AtomicUsize, Ordering};
use crate::Payload;

/// A broken variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutant {
    /// MXNet's protocol: fork prepare waits for running host ops to
    /// finish while the forking thread holds the host lock (breaks H2).
    DrainingPrepare,
    /// Completion forgets to wake `wait_for_var` and `wait_all` waiters.
    LostNotify,
    /// Push waits for a quiesce to end without releasing the host lock
    /// (breaks H2).
    PushWaitsForQuiesce,
    /// The fork child runs inherited ops instead of completing them with
    /// `LostInFork` (breaks I5).
    ChildRerun,
    /// A thread refused at a closed fork gate counts itself in for a moment
    /// before backing out, so the OS can copy a count no thread of the
    /// child will ever take back; the child's own fork then waits for ever
    /// (breaks I5: the child works).
    CountedRefusal,
    /// A spare worker recalled to stand in for a blocked wait is counted
    /// again but never woken: the op the wait needs stays queued for ever
    /// (a lost wake-up in the pool's recall; breaks I2).
    RecallWithoutWake,
    /// A push from inside an op waits for room under the pending bound,
    /// while its own op holds the last place (breaks the bound rule: the
    /// engine deadlocks on itself).
    PushInsideOpWaits,
    /// A fork prepare in a fork child does not settle the engine first:
    /// another thread of the child, settling it meanwhile, reopens the gate
    /// prepare closed, and the fork copies a half-settled engine (breaks
    /// I5: the child works, forking included).
    PrepareSkipsSettle,
    /// A completion wakes a var's `wait_for_var` waiters only when no
    /// write is left queued on the var: a waiter whose writes are all done
    /// sleeps on while a later write it does not wait for is queued
    /// (breaks I2's liveness: the wait may never return).
    WakeOnlyWhenNoWrites,
    /// A quiesce pauses dispatch before it checks the lifecycle state: a
    /// quiesce refused with `ShutDown` leaves the lanes paused, and the
    /// shutdown's queued ops never run (breaks I3 and I8).
    PauseBeforeStateCheck,
    /// A completion leaves its fork-gate section as soon as it has marked
    /// the op done, and does its bookkeeping (vars, errors, lane count,
    /// live index, dispatch) outside it: a fork can copy a half-done
    /// completion and an engine lock held by the completing thread (breaks
    /// I5 and I6; the fork-point check, docs/DESIGN.md "The fork point").
    CompletionOutsideSection,
    /// An op skipped because a var it touches is poisoned completes as if
    /// it succeeded: what it writes is not poisoned, and ops after it run
    /// on data the failed op never produced (breaks I7).
    SkippedOpPassesNothing,
    /// A body runs while its worker holds its home ready queue's lock
    /// (the lock a push onto the lane takes): a callback from the body
    /// into the engine that needs that lock waits for its own thread
    /// (breaks H1).
    BodyUnderQueueLock,
    /// A var grants its queued writer while readers still hold it (only a
    /// writer holding it stops the grant): the writer's body mutates data
    /// the readers are reading (breaks I9, the access grant, and I1).
    WriterJoinsReaders,
    /// A fork participant's prepare step that returns after its deadline
    /// is recorded as prepared: a child trusts a state the step may still
    /// have been changing when its deadline passed (breaks I5 for
    /// participants, `participant.rs`).
    TrustLatePrepare,
    /// The parent step of the fork participants is skipped: what their
    /// prepare steps hold (a closed work gate, say) stays held in the
    /// parent (breaks I6 for participants).
    SkipParticipantParent,
    /// A per-epoch value is reused in a fork child without checking its
    /// epoch: the child uses the parent's value, whose threads are gone
    /// (breaks I5 for `ForkLocal`).
    ForkLocalIgnoresEpoch,
    /// A use of a `GatedLocal` value already built skips the work gate,
    /// so a fork's prepare step does not wait for it and the child trusts
    /// a use half done (breaks I5 for a runtime's or a pool's work).
    GatedLocalSkipsPass,
    /// A work gate's prepare closes the gate but does not wait for work
    /// already in flight: the fork copies half-done work (breaks I5 for
    /// `WorkGate`).
    CloseWithoutWaiting,
    /// A worker registers as idle only after its last look at the ready
    /// queues: an op queued between that look and the registration finds
    /// nobody to wake, and the worker parks with it queued (a lost wake-up
    /// on the empty → non-empty edge; breaks I2).
    IdleAfterLastLook,
    /// A dispatch reads whether a worker is wanted before it queues the op
    /// instead of after: a worker that registers and looks in between
    /// misses the op, and the dispatch wakes nobody (the same lost wake-up
    /// from the pusher's side; breaks I2).
    WantedReadBeforeQueue,
    /// A quiesce pauses only a lane's first ready queue: a worker whose
    /// home is another queue starts an op there while the quiesce holds
    /// (breaks I3 across queues).
    PauseFirstQueueOnly,
    /// A pusher runs its ready op inline without checking whether a
    /// quiesce holds the queue: the body runs after the quiesce returned
    /// (breaks I3 for ops run inline, docs/DESIGN.md "Running inline").
    InlineIgnoresPause,
    /// A completion marks its op gone and then reads whether a `wait_all`
    /// caller waits on it with no SeqCst fence between: a waiter that
    /// recorded the op and then saw it still live, and a completion that
    /// saw no waiter, both park or move on, and the waiter sleeps for ever
    /// (the store-buffering lost wake-up, `live.rs`; breaks I2). Weak
    /// memory: loom only (shuttle runs sequentially consistent).
    CompletionSkipsFence,
    /// A wait inside an op covers only the ops pushed before the calling
    /// op: a body that pushes an op and waits for it returns before that op
    /// ran (breaks the wait rule: a wait never returns early).
    WaitSkipsOwnPushes,
    /// The wait graph lists every wait inside an op without searching for
    /// a path back to it: two such waits can each wait for an op queued
    /// behind the other, and both wait for ever (breaks the wait rule:
    /// never a deadlock).
    WaitGraphSkipsSearch,
}

crate::sync::os_thread_local! {
    static ACTIVE: std::cell::Cell<Option<Mutant>> = const { std::cell::Cell::new(None) };
}

/// Switches `mutant` on (or every mutant off) for models run from this OS
/// thread.
pub fn set(mutant: Option<Mutant>) {
    ACTIVE.with(|a| a.set(mutant));
}

/// Whether `mutant` is switched on.
pub fn active(mutant: Mutant) -> bool {
    ACTIVE.with(|a| a.get()) == Some(mutant)
}

/// (a) `DrainingPrepare`, MXNet's protocol: fork prepare waits for the
/// host lane's running ops without releasing the host lock.
pub(crate) fn drain_host_lane<P: Payload>(shared: &Shared<P>) {
    let me = crate::sync::current_thread();
    while shared.ready(Lane::Host).running_or_register(&me) > 0 {
        crate::sync::park_until(shared.clock(), None);
    }
}

/// (c) `PushWaitsForQuiesce`: wait until no quiesce holds, keeping the
/// host lock.
pub(crate) fn wait_for_resume<P: Payload>(shared: &Shared<P>) {
    while matches!(shared.state(), State::Quiescing | State::Quiesced) {
        crate::sync::spin_step(0);
    }
}

/// (d) `ChildRerun`: the fork child runs an inherited op's body.
pub(crate) fn rerun<P: Payload>(op: &OpCell<P>) {
    // SAFETY: called only from the fork child's settle, on its only thread.
    if let Some(payload) = unsafe { op.take_payload() } {
        let _ = payload.run(None);
    }
}

/// (i) `WakeOnlyWhenNoWrites`: whether a write is queued on `var`, which
/// the broken completion takes as a reason not to wake its waiters yet.
pub(crate) fn write_queued<O>(var: &crate::var::VarInner<O>) -> bool {
    var.write_queued()
}

/// (j) `PauseBeforeStateCheck`: pause every lane before the state check.
pub(crate) fn pause_lanes<P: Payload>(shared: &Shared<P>) {
    for lane in Lane::ALL {
        let _ls = shared.lane(lane).lock();
        shared.ready(lane).set_paused(true);
    }
}

/// (e) `CountedRefusal`: count in, and back out if the gate was closed.
pub(crate) fn counted_try_enter<'a>(
    gate: &'a ForkGate,
    word: &'a AtomicUsize,
) -> Option<Section<'a>> {
    let before = word.fetch_add(1, Ordering::Acquire);
    if before & CLOSED == 0 {
        crate::sync::section_opened();
        return Some(Section { gate, word });
    }
    word.fetch_sub(1, Ordering::Release);
    gate.wake();
    None
}
