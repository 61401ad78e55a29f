//! shuttle negative controls: deliberately broken variants of
//! `forksafe-core` (`forksafe_core::controls`) that shuttle must catch.
//! Each `caught_*` test passes only if shuttle fails the model with the
//! expected kind of failure (deadlock, step bound of a livelock, or the
//! model's assertion); each `sound_*` test runs the same scenario without
//! the mutant and must pass. Deterministic: a fixed seed for the random
//! scheduler (same schedules on every run), never flaky.

#![cfg(shuttle)]

#[macro_use]
mod common;
mod pool_common;

use common::*;
use forksafe_core::controls::Mutant;
use forksafe_core::{Error, ForkSnapshot, Lane};
use std::sync::Arc;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(1);
/// The seed of every control: the schedules are the same on every run.
const SEED: u64 = 0x5eed_f04c;
/// Schedules tried per sound run.
const ITERS: usize = 2000;
/// Schedules a control may try: the search stops at its first failure, so
/// a wider bound costs only when the mutant escapes. (The lost-notify
/// deadlock needs a few thousand schedules of this seed.)
const CONTROL_ITERS: usize = 20_000;
/// Step bound: a spinning thread past it is a livelock.
const STEPS: usize = 20_000;

/// Runs `f` with `m` switched on and returns the panic message shuttle
/// failed with; panics if shuttle found nothing.
fn caught(m: Mutant, f: fn()) -> String {
    caught_seeded(m, f, SEED, CONTROL_ITERS, STEPS)
}

fn sound(f: fn()) {
    if let Some(schedule) = replay_schedule() {
        shuttle::replay(f, &schedule);
        return;
    }
    run_seeded(None, f, SEED, ITERS, STEPS);
}

fn op(label: u32, reads: &[usize], writes: &[usize], mode: Mode, lane: Lane) -> Op {
    Op::new(step(label, reads, writes), mode, lane)
}

/// (a) MXNet's protocol: the forking thread holds the GIL, a host op is
/// pending or running (needing the GIL), and prepare waits for the host
/// lane to drain without releasing the GIL.
fn draining_prepare() {
    let w = Arc::new(World::new(config(1, 1, None), 2));
    let forker = {
        let w = w.clone();
        shuttle::thread::spawn(move || {
            w.gil.lock().acquire();
            w.push(&op(1, &[], &[0], Mode::Sync, Lane::Host)).unwrap();
            shuttle::thread::yield_now();
            w.domain.prepare();
            let _snap = w.engine.fork_snapshot(&w.vars).unwrap();
            w.domain.parent();
            w.gil.lock().release();
        })
    };
    forker.join().unwrap();
    w.engine.wait_all().unwrap();
    w.engine.shutdown(LONG).unwrap();
}

#[test]
fn caught_draining_prepare() {
    let msg = caught(Mutant::DrainingPrepare, draining_prepare);
    // A hang: threads still spinning at the closed fork gate make it a
    // livelock that the step bound stops, else a plain deadlock.
    assert!(
        msg.contains("exceeded max_steps") || msg.contains("deadlock"),
        "expected a hang (step bound or deadlock), got: {msg}"
    );
}

#[test]
fn sound_draining_prepare() {
    sound(draining_prepare);
}

/// (b) A lost notify on the completion path: a waiter parks for ever.
fn lost_notify() {
    let w = World::new(config(2, 1, None), 2);
    w.push(&op(1, &[], &[0], Mode::Sync, Lane::Compute))
        .unwrap();
    w.push(&op(2, &[0], &[1], Mode::Async, Lane::Compute))
        .unwrap();
    w.engine.wait_for_var(&w.vars[1]).unwrap();
    w.engine.wait_all().unwrap();
    assert_eq!(w.oracle.ran(), vec![1, 2]);
    w.engine.shutdown(LONG).unwrap();
}

control_pairs! {
    caught: caught, sound: sound;
    caught_lost_notify, sound_lost_notify: LostNotify, lost_notify, "a deadlock", ["deadlock"];
    caught_push_waits_for_quiesce, sound_push_waits_for_quiesce: PushWaitsForQuiesce, push_waits_for_quiesce, "a livelock (step bound) or deadlock", ["exceeded max_steps", "deadlock"];
    caught_child_rerun, sound_child_rerun: ChildRerun, child_rerun, "the I5 assertion", ["the child ran an inherited op"];
    /// (e) A thread refused at the closed fork gate counts itself in for a
    /// moment: the snapshot can copy that count, and the child's own fork spins
    /// for ever waiting for a section no thread of the child holds.
    caught_counted_refusal, _: CountedRefusal, child_rerun, "the step bound (a livelock)", ["exceeded max_steps"];
    caught_recall_without_wake, sound_recall_without_wake: RecallWithoutWake, recall_without_wake, "a deadlock", ["deadlock"];
    caught_prepare_skips_settle, sound_prepare_skips_settle: PrepareSkipsSettle, prepare_skips_settle, "the fork-point assertion", ["half-settled engine"];
    /// (i) `common::wait_with_a_later_write_queued`: with the mutant the
    /// waiter is not woken while a later write is queued.
    caught_wake_only_when_no_writes, sound_wake_only_when_no_writes: WakeOnlyWhenNoWrites, wait_with_a_later_write_queued, "a hang", ["deadlock", "exceeded max_steps"];
    /// (j) `common::quiesce_races_shutdown`: with the mutant a refused quiesce
    /// leaves dispatch paused and the shutdown waits for ever.
    caught_pause_before_state_check, sound_pause_before_state_check: PauseBeforeStateCheck, quiesce_races_shutdown, "a hang", ["deadlock", "exceeded max_steps"];
    caught_completion_outside_section, _: CompletionOutsideSection, completion_outside_section, "the fork-point check", ["fork-point check"];
    caught_completion_outside_section_by_the_child, _: CompletionOutsideSection, completion_outside_section_child, "the child to find a lock the fork point held", ["held at the fork point"];
    /// (l) `common::poison_passes_on`: with the mutant the skipped op passes
    /// no poison on.
    caught_skipped_op_passes_nothing, sound_skipped_op_passes_nothing: SkippedOpPassesNothing, poison_passes_on, "the I7 assertion", ["a skipped op passed no poison on"];
    /// (m) `common::body_pushes_onto_its_lane`: with the mutant the body runs
    /// under its lane's lock, and its push waits for its own thread.
    caught_body_under_queue_lock, sound_body_under_queue_lock: BodyUnderQueueLock, body_pushes_onto_its_lane, "a deadlock", ["deadlock"];
    /// (n) `common::data_access_follows_grants`: with the mutant op 4's write
    /// is granted while op 2 or 3 still reads.
    caught_writer_joins_readers, sound_writer_joins_readers: WriterJoinsReaders, data_access_follows_grants, "an overlapping or out-of-order access", ["access grant (I9) broken", "readers see op 1's write only"];
    caught_idle_after_last_look, _: IdleAfterLastLook, push_meets_a_parking_worker_one, "a deadlock", ["deadlock"];
    caught_idle_after_last_look_on_two_queues, _: IdleAfterLastLook, push_meets_parking_workers_on_two_queues, "a deadlock", ["deadlock"];
    caught_wanted_read_before_queue, _: WantedReadBeforeQueue, push_meets_a_parking_worker_one, "a deadlock", ["deadlock"];
    caught_idle_after_last_look_by_a_batch, _: IdleAfterLastLook, batch_push_meets_a_parking_worker, "a deadlock", ["deadlock"];
    caught_wanted_read_before_queue_by_a_batch, _: WantedReadBeforeQueue, batch_push_meets_a_parking_worker, "a deadlock", ["deadlock"];
    /// (u) I3 across slots: with the mutant a worker starts an op on the slot
    /// the quiesce did not pause.
    caught_pause_first_queue_only, sound_pause_first_queue_only: PauseFirstQueueOnly, quiesce_holds_every_slot, "the I3 assertion", ["an op ran while a quiesce held (I3)"];
    /// (v) I3 for ops run inline: with the mutant a pusher starts its op on a
    /// slot the quiesce paused.
    caught_inline_ignores_pause, sound_inline_ignores_pause: InlineIgnoresPause, inline_run_meets_a_quiesce, "the I3 assertion", ["an op ran while a quiesce held (I3)"];
    /// (x) `common::wait_covers_own_push`: with the mutant the body's wait
    /// returns before the op it pushed ran.
    caught_wait_skips_own_pushes, sound_wait_skips_own_pushes: WaitSkipsOwnPushes, wait_covers_own_push, "the wait rule's assertion", ["returned before an op it pushed"];
    /// (y) `common::waits_that_would_close_a_cycle`: with the mutant both
    /// waits are listed and each waits for an op queued behind the other.
    caught_wait_graph_skips_search, sound_wait_graph_skips_search: WaitGraphSkipsSearch, waits_that_would_close_a_cycle, "a deadlock", ["deadlock"];
}

/// (c) A GIL-holding pusher blocks on a quiesce that waits for a running
/// host op, which needs the GIL. The pusher spins (yields) for ever while
/// every other thread is blocked: shuttle stops it at the step bound.
fn push_waits_for_quiesce() {
    let w = Arc::new(World::new(config(1, 1, None), 2));
    w.push(&op(1, &[], &[0], Mode::Sync, Lane::Host)).unwrap();
    let quiescer = {
        let w = w.clone();
        shuttle::thread::spawn(move || {
            let guard = w.engine.quiesce(LONG).unwrap();
            drop(guard);
        })
    };
    let pusher = {
        let w = w.clone();
        shuttle::thread::spawn(move || {
            w.gil.lock().acquire();
            w.push(&op(2, &[], &[1], Mode::Sync, Lane::Compute))
                .unwrap();
            w.gil.lock().release();
        })
    };
    quiescer.join().unwrap();
    pusher.join().unwrap();
    w.engine.wait_all().unwrap();
    w.engine.shutdown(LONG).unwrap();
}

/// (d) A child that re-runs an inherited op. An async op handed to a
/// completer, and its dependent, a host op: main holds the host lock from
/// before the pushes until after the fork, so the host op is pending at
/// the fork point on every schedule (the engine never waits for it there:
/// H2). Also the scenario of (e): the completer may complete during the
/// fork window, and the child forks again at the end.
fn child_rerun() {
    let mut w = World::new(config(1, 1, None), 2);
    let completers = w.start_completers(&[1]);
    let w = Arc::new(w);
    let a = op(1, &[], &[0], Mode::Handoff(0), Lane::Compute);
    let b = op(2, &[0], &[1], Mode::Sync, Lane::Host);
    w.gil.lock().acquire();
    let mut pushed = vec![(w.push(&a).unwrap(), a), (w.push(&b).unwrap(), b)];
    w.domain.prepare();
    assert_eq!(w.engine.pending(), Err(Error::ForkInProgress));
    let snap: ForkSnapshot<Job> = w.engine.fork_snapshot(&w.vars).unwrap();
    w.domain.parent();
    w.gil.lock().release();
    for t in completers {
        t.join().unwrap();
    }
    let raised = failed_labels(&w.engine.wait_all());
    check_world(&w, &mut pushed, &raised);
    w.engine.shutdown(LONG).unwrap();
    assert!(!snap.pending_ops().is_empty());
    child_check(&w, &snap, &pushed);
}

/// The child world of `snap`: the inherited ops must not run, and the
/// child can fork in its turn.
fn child_check(w: &World, snap: &ForkSnapshot<Job>, pushed: &[(u64, Op)]) {
    use forksafe_core::sync::Arc as SArc;
    use forksafe_core::{CoreEngine, ForkDomain};
    use forksafe_testkit::GilBridge;
    let domain: &'static ForkDomain =
        Box::leak(Box::new(ForkDomain::with_epoch(w.domain.epoch() + 1)));
    let (engine, vars) = CoreEngine::from_fork_snapshot(
        domain,
        config(1, 1, None),
        Box::new(SArc::new(GilBridge::new())),
        snap,
    )
    .unwrap();
    let oracle = forksafe_models::Oracle::new(vars.len());
    enter_child_world(&oracle);
    let report = engine.fork_report().unwrap().expect("settled");
    assert_eq!(
        oracle.ran(),
        Vec::<u32>::new(),
        "the child ran an inherited op (I5)"
    );
    let lost: Vec<u64> = report.lost.iter().map(|i| i.id).collect();
    assert_eq!(lost, snap.pending_ops());
    assert!(lost.iter().all(|id| pushed.iter().any(|(p, _)| p == id)));
    // The child forks in its turn (control (e)).
    domain.prepare();
    domain.parent();
    engine.shutdown(LONG).unwrap();
}

/// (f) The stand-in lifecycle, two rounds: the second round's wait needs
/// the spare the first retired; with the mutant the recalled spare is
/// never woken and the wait blocks for ever.
fn recall_without_wake() {
    pool_common::stand_in_rounds(2);
}

/// (g) The bound rule: with `max_pending = 1` an op's body pushes; with
/// the mutant the push waits for the slot its own op holds.
#[test]
fn caught_push_inside_op_waits() {
    let msg = caught(
        Mutant::PushInsideOpWaits,
        pool_common::push_inside_at_the_bound,
    );
    assert!(msg.contains("deadlock"), "expected a deadlock, got: {msg}");
}

#[test]
fn sound_push_inside_op_waits() {
    sound(pool_common::push_inside_at_the_bound);
}

/// (h) A fork child forks again from a second thread while its main thread
/// settles the engine (`common::fork_while_child_settles`); with the
/// mutant prepare does not settle first, and the settle reopens the gate
/// inside the fork window.
fn prepare_skips_settle() {
    fork_while_child_settles(&quiet_parent_snapshot());
}

/// (k) `common::completion_races_fork`: with the mutant a completion does
/// its bookkeeping outside its gate section, and the fork-point check
/// finds a completion half done or an engine lock held.
fn completion_outside_section() {
    completion_races_fork(true);
}

/// (k), the child layer on its own: the snapshot is taken without the
/// fork-point check, and the child world built from it inherits the
/// locks its fork point held; its settle takes them and fails where the
/// real child would hang.
fn completion_outside_section_child() {
    let (snap, _) = completion_races_fork(false);
    child_of_completion_race(&snap);
}

#[test]
fn sound_completion_outside_section() {
    sound(completion_outside_section);
    sound(completion_outside_section_child);
}

/// (s), (t) The ready queues' empty -> non-empty edge: with either mutant
/// the pushed op finds no worker awake and `wait_all` blocks for ever.
fn push_meets_a_parking_worker_one() {
    push_meets_a_parking_worker(1);
}

fn push_meets_parking_workers_on_two_queues() {
    push_meets_a_parking_worker(2);
}

#[test]
fn sound_push_meets_a_parking_worker() {
    sound(push_meets_a_parking_worker_one);
}

#[test]
fn sound_push_meets_parking_workers_on_two_queues() {
    sound(push_meets_parking_workers_on_two_queues);
}

#[test]
fn sound_batch_push_meets_a_parking_worker() {
    sound(batch_push_meets_a_parking_worker);
}
