//! loom negative controls: deliberately broken variants of forksafe-core
//! (`forksafe_core::controls`) that loom must catch, each next to the
//! same scenario without the mutant, which must pass.
//!
//! A loom failure here is usually a deadlock, and loom 0.7.3 then often
//! aborts the process (a loom object dropped while the deadlocked threads
//! unwind panics again: "panic in a destructor during cleanup"), so
//! `catch_unwind` cannot hold it. Each `caught_*` test therefore runs the
//! model in a child process — this test binary, filtered to the hidden
//! `mutant_run` test, with `FORKSAFE_LOOM_MUTANT` naming the mutant — and
//! passes only if that process fails with the expected message, which it
//! prints. Each `sound_*` test runs the same scenario in-process, mutant off.

#![cfg(loom)]

#[macro_use]
mod common;
mod pool_common;

use common::*;
use forksafe_core::controls::{self as mutant, Mutant};
use forksafe_core::{Error, Lane, State};
use std::sync::Arc;

/// (a) MXNet's protocol: the forking thread holds the GIL, a host op is
/// pending or running (needing the GIL), and prepare waits for the host lane
/// to drain. Threads: main (GIL) + 1 host.
fn draining_prepare() {
    check("draining_prepare", || {
        let w = World::new(config(1, 1, None), 1);
        w.gil.lock().acquire();
        w.push(&sync(step(1, &[], &[0]), Lane::Host)).unwrap();
        w.domain.prepare();
        let _snap = w.engine.fork_snapshot(&w.vars).unwrap();
        w.domain.parent();
        w.engine.wait_all().unwrap();
        w.engine.shutdown(LONG).unwrap();
        w.gil.lock().release();
        assert_eq!(w.ran(), vec![1]);
    });
}

/// (b) A waiter and a completion: with the lost notify, `wait_for_var`
/// parks for ever. Threads: main + 1 compute.
fn lost_notify() {
    check("lost_notify", || {
        let w = World::new(config(1, 1, None), 1);
        w.push(&sync(step(1, &[], &[0]), Lane::Compute)).unwrap();
        w.engine.wait_for_var(&w.vars[0]).unwrap();
        w.engine.wait_all().unwrap();
        assert_eq!(w.ran(), vec![1]);
        w.engine.shutdown(LONG).unwrap();
    });
}

/// (c) A quiesce waits for a running host op, which needs the GIL; a
/// GIL-holding pusher pushes meanwhile (with the mutant it waits for the
/// quiesce without releasing the GIL). Threads: main (GIL) + quiescer +
/// 1 host.
///
/// The order is forced rather than left to preemptions: main holds the GIL
/// from the start, waits (yielding) until the host worker has taken op 1
/// and blocks on the GIL, starts the quiesce, and waits until it has begun
/// before its second push. So the mutant's failing schedule needs no
/// preemption at all, and bound 1 keeps the sound twin small.
fn push_waits_for_quiesce() {
    check("push_waits_for_quiesce", || {
        let w = Arc::new(World::new(config(1, 1, None), 2));
        w.gil.lock().acquire();
        w.push(&sync(step(1, &[], &[0]), Lane::Host)).unwrap();
        while !w.gil.lock().contended() {
            loom::thread::yield_now();
        }
        let quiescer = {
            let w = w.clone();
            loom::thread::spawn(move || drop(w.engine.quiesce(LONG).unwrap()))
        };
        while w.engine.state() == State::Running {
            loom::thread::yield_now();
        }
        w.push(&sync(step(2, &[], &[1]), Lane::Compute)).unwrap();
        w.gil.lock().release();
        quiescer.join().unwrap();
        w.engine.wait_all().unwrap();
        assert_eq!(w.ran(), vec![1, 2]);
        w.engine.shutdown(LONG).unwrap();
    });
}

/// (d) A fork with an async op pending (its token is completed only after
/// the fork), then the child world of each distinct snapshot: with the
/// mutant the child re-runs the inherited op, which the child's oracle sees.
/// Threads: parent main + 1 compute; child main.
fn child_rerun() {
    let snaps = Snapshots::default();
    let s = snaps.clone();
    let m = active_mutant();
    // The parent stage only produces the snapshot: one execution (bound 0),
    // so the fork-window branch-limit issue (LOOM.md) cannot hit it.
    let mut b = builder();
    b.preemption_bound = Some(0);
    check_with("child_rerun_parent", b, move || {
        // The parent world runs sound; only the child is broken.
        mutant::set(None);
        let w = World::new(config(1, 1, None), 1);
        let p = asynchronous(step(1, &[], &[0]), Lane::Compute, Mode::Handoff(0));
        let id = w.push(&p).unwrap();
        w.domain.prepare();
        let snap = w.engine.fork_snapshot(&w.vars).unwrap();
        w.domain.parent();
        s.add(snap, vec![(id, p.step.clone())]);
        complete_handed(p.slot.as_ref().unwrap());
        w.engine.wait_all().unwrap();
        w.engine.shutdown(LONG).unwrap();
    });
    mutant::set(m);
    for (i, (snap, pushed)) in snaps.take().into_iter().enumerate() {
        check(&format!("child_rerun_child[{i}]"), move || {
            let w = child_world(0, &snap);
            check_child_inherited(&w, &snap, &pushed);
            w.engine.shutdown(LONG).unwrap();
        });
    }
}

/// (e) A worker completes a sync op while main forks. With the mutant, the
/// worker refused at the closed gate counts itself in for a moment; a
/// snapshot can copy that count, and the child's own fork then waits for a
/// section no thread of the child holds. Threads: parent main + 1 compute;
/// child main (its workers never start: it pushes nothing).
fn counted_refusal() {
    let snaps = Snapshots::default();
    let s = snaps.clone();
    check("counted_refusal_parent", move || {
        let w = World::new(config(1, 1, None), 1);
        let p = sync(step(1, &[], &[0]), Lane::Compute);
        let id = w.push(&p).unwrap();
        w.domain.prepare();
        let snap = w.engine.fork_snapshot(&w.vars).unwrap();
        w.domain.parent();
        s.add(snap, vec![(id, p.step.clone())]);
        w.engine.wait_all().unwrap();
        w.engine.shutdown(LONG).unwrap();
    });
    for (i, (snap, pushed)) in snaps.take().into_iter().enumerate() {
        check(&format!("counted_refusal_child[{i}]"), move || {
            let w = child_world(0, &snap);
            check_child_inherited(&w, &snap, &pushed);
            fork_again(&w);
            w.engine.shutdown(LONG).unwrap();
        });
    }
}

/// (f) The stand-in lifecycle, two rounds: the second round's wait needs
/// the spare the first retired. With the mutant the recalled spare is
/// counted but never woken, and the wait blocks for ever. Threads: main +
/// worker + stand-in.
fn recall_without_wake() {
    let mut b = builder();
    b.preemption_bound = Some(bound().min(1));
    check_with("recall_without_wake", b, || pool_common::stand_in_rounds(2));
}

/// (g) The bound rule: with `max_pending = 1`, an op's body pushes. With
/// the mutant the push waits for the slot its own op holds. Threads: main
/// + worker.
fn push_inside_op_waits() {
    check(
        "push_inside_op_waits",
        pool_common::push_inside_at_the_bound,
    );
}

/// (h) A fork child forks again from a second thread while its main thread
/// settles the engine (`common::fork_while_child_settles`). With the mutant
/// prepare does not settle first, and the settle reopens the gate inside
/// the fork window. The parent stage only produces the snapshot: one
/// execution (bound 0). Threads: child main + forker.
fn prepare_skips_settle() {
    let snaps = Snapshots::default();
    let s = snaps.clone();
    let m = active_mutant();
    let mut b = builder();
    b.preemption_bound = Some(0);
    check_with("prepare_skips_settle_parent", b, move || {
        mutant::set(None);
        s.add(quiet_parent_snapshot(), Vec::new());
    });
    mutant::set(m);
    for (i, (snap, _)) in snaps.take().into_iter().enumerate() {
        check(&format!("prepare_skips_settle_child[{i}]"), move || {
            fork_while_child_settles(&snap)
        });
    }
}

/// (i) `common::wait_with_a_later_write_queued`: with the mutant the
/// completion of op 1 does not wake the waiter while op 2 is queued, and
/// op 2's token is completed only after the wait returns.
fn wake_only_when_no_writes() {
    check("wake_only_when_no_writes", wait_with_a_later_write_queued);
}

/// (j) `common::quiesce_races_shutdown`: with the mutant a refused quiesce
/// leaves dispatch paused and the shutdown waits for ever.
fn pause_before_state_check() {
    check("pause_before_state_check", quiesce_races_shutdown);
}

/// (k) `common::completion_races_fork`: with the mutant a completion does
/// its bookkeeping outside its gate section, and the fork-point check
/// finds a completion half done or an engine lock held. Threads: main +
/// 1 compute.
fn completion_outside_section() {
    check("completion_outside_section", || {
        completion_races_fork(true);
    });
}

/// (k), the child layer on its own: the parent takes its snapshots
/// without the fork-point check, and each child model inherits the locks
/// its fork point held; the child's settle takes them and fails where the
/// real child would hang. Threads: parent main + 1 compute; child main.
fn completion_outside_section_child() {
    let snaps = Snapshots::default();
    let s = snaps.clone();
    check("completion_outside_section_parent", move || {
        let (snap, pushed) = completion_races_fork(false);
        s.add(snap, pushed);
    });
    for (i, (snap, _)) in snaps.take().into_iter().enumerate() {
        check(
            &format!("completion_outside_section_child[{i}]"),
            move || child_of_completion_race(&snap),
        );
    }
}

/// (l) `common::poison_passes_on`: with the mutant the skipped op passes
/// no poison on. Threads: main + 1 compute.
fn skipped_op_passes_nothing() {
    check("skipped_op_passes_nothing", poison_passes_on);
}

/// (m) `common::body_pushes_onto_its_lane`: with the mutant the body runs
/// under its lane's lock, and its push waits for its own thread. Threads:
/// main + 1 compute.
fn body_under_queue_lock() {
    check("body_under_queue_lock", body_pushes_onto_its_lane);
}

/// (n) `common::data_access_follows_grants`: with the mutant op 4's write
/// is granted while op 2 or 3 still reads. Threads: main + 1 compute + 1
/// host.
fn writer_joins_readers() {
    check("writer_joins_readers", data_access_follows_grants);
}

fn active_mutant() -> Option<Mutant> {
    [
        Mutant::DrainingPrepare,
        Mutant::LostNotify,
        Mutant::PushWaitsForQuiesce,
        Mutant::ChildRerun,
        Mutant::CountedRefusal,
        Mutant::RecallWithoutWake,
        Mutant::PushInsideOpWaits,
        Mutant::PrepareSkipsSettle,
        Mutant::WakeOnlyWhenNoWrites,
        Mutant::PauseBeforeStateCheck,
        Mutant::CompletionOutsideSection,
        Mutant::SkippedOpPassesNothing,
        Mutant::BodyUnderQueueLock,
        Mutant::WriterJoinsReaders,
        Mutant::IdleAfterLastLook,
        Mutant::WantedReadBeforeQueue,
        Mutant::PauseFirstQueueOnly,
        Mutant::InlineIgnoresPause,
        Mutant::CompletionSkipsFence,
        Mutant::WaitSkipsOwnPushes,
        Mutant::WaitGraphSkipsSearch,
    ]
    .into_iter()
    .find(|m| mutant::active(*m))
}

fn scenario(m: Mutant) -> fn() {
    match m {
        Mutant::DrainingPrepare => draining_prepare,
        Mutant::LostNotify => lost_notify,
        Mutant::PushWaitsForQuiesce => push_waits_for_quiesce,
        Mutant::ChildRerun => child_rerun,
        Mutant::CountedRefusal => counted_refusal,
        Mutant::RecallWithoutWake => recall_without_wake,
        Mutant::PushInsideOpWaits => push_inside_op_waits,
        Mutant::PrepareSkipsSettle => prepare_skips_settle,
        Mutant::WakeOnlyWhenNoWrites => wake_only_when_no_writes,
        Mutant::PauseBeforeStateCheck => pause_before_state_check,
        Mutant::CompletionOutsideSection => completion_outside_section,
        Mutant::SkippedOpPassesNothing => skipped_op_passes_nothing,
        Mutant::BodyUnderQueueLock => body_under_queue_lock,
        Mutant::WriterJoinsReaders => writer_joins_readers,
        Mutant::IdleAfterLastLook | Mutant::WantedReadBeforeQueue => {
            push_meets_a_parking_worker_one
        }
        Mutant::PauseFirstQueueOnly => pause_first_queue_only,
        Mutant::InlineIgnoresPause => inline_ignores_pause,
        Mutant::CompletionSkipsFence => completion_skips_fence,
        Mutant::WaitSkipsOwnPushes => wait_skips_own_pushes,
        Mutant::WaitGraphSkipsSearch => wait_graph_skips_search,
        // The fork participants' controls run from loom_participants.rs.
        Mutant::TrustLatePrepare
        | Mutant::SkipParticipantParent
        | Mutant::ForkLocalIgnoresEpoch
        | Mutant::GatedLocalSkipsPass
        | Mutant::CloseWithoutWaiting => {
            panic!("{m:?} is a control of loom_participants.rs")
        }
    }
}

/// (s), (t) The ready queues' empty -> non-empty edge, one worker.
/// Threads: main + 1 compute.
fn push_meets_a_parking_worker_one() {
    check("push_meets_a_parking_worker_one", || {
        common::push_meets_a_parking_worker(1)
    });
}

/// (u) A quiesce holds while ops are queued on two slots. Threads: main +
/// 2 compute.
fn pause_first_queue_only() {
    check("quiesce_holds_every_slot", common::quiesce_holds_every_slot);
}

/// (v) Ops run inline by their pusher race a quiesce. Threads: main +
/// quiescer + 1 compute.
fn inline_ignores_pause() {
    check("inline_run_meets_a_quiesce", inline_run_meets_a_quiesce);
}

/// (w) A `wait_all` and the completion it waits on, nothing else between
/// them: with the mutant the completion can read "nobody waits" while the
/// waiter reads "still live" (store buffering), and the waiter parks for
/// ever. Threads: main + 1 compute.
///
/// Bound 3 (at least): the lost wake-up needs the completion preempted
/// between its gone mark and its read, and the waiter between its record
/// and its look (loom finds it at 3, not at 2).
fn completion_skips_fence() {
    let mut b = builder();
    b.preemption_bound = Some(bound().max(3));
    check_with("wait_all_meets_its_completion", b, || {
        let w = World::new(config(1, 1, None), 1);
        w.push(&sync(step(1, &[], &[0]), Lane::Compute)).unwrap();
        w.engine.wait_all().unwrap();
        assert_eq!(w.ran(), vec![1]);
        w.engine.shutdown(LONG).unwrap();
    });
}

/// (x) `common::wait_covers_own_push`: with the mutant the body's wait
/// returns before the op it pushed ran. Threads: main + 1 compute + 1
/// stand-in.
fn wait_skips_own_pushes() {
    check("wait_covers_own_push", wait_covers_own_push);
}

/// (y) `common::waits_that_would_close_a_cycle`: with the mutant both waits
/// are listed and each waits for an op queued behind the other. Threads:
/// main + 1 compute + 1 host (+ a stand-in).
fn wait_graph_skips_search() {
    check(
        "waits_that_would_close_a_cycle",
        waits_that_would_close_a_cycle,
    );
}

control_pairs! {
    caught: |m, _scenario: fn()| caught(m), sound: |scenario: fn()| scenario();
    caught_wait_skips_own_pushes, sound_wait_skips_own_pushes: WaitSkipsOwnPushes, wait_skips_own_pushes, "the wait rule's assertion", ["returned before an op it pushed"];
    caught_wait_graph_skips_search, sound_wait_graph_skips_search: WaitGraphSkipsSearch, wait_graph_skips_search, "a deadlock", ["deadlock"];
    caught_draining_prepare, sound_draining_prepare: DrainingPrepare, draining_prepare, "a deadlock or livelock", ["deadlock", "maximum number of branches"];
    caught_lost_notify, sound_lost_notify: LostNotify, lost_notify, "a deadlock", ["deadlock"];
    caught_push_waits_for_quiesce, sound_push_waits_for_quiesce: PushWaitsForQuiesce, push_waits_for_quiesce, "a deadlock or livelock", ["deadlock", "maximum number of branches"];
    caught_child_rerun, sound_child_rerun: ChildRerun, child_rerun, "the I5 assertion", ["the child ran an inherited op"];
    caught_counted_refusal, sound_counted_refusal: CountedRefusal, counted_refusal, "a deadlock", ["deadlock"];
    caught_recall_without_wake, sound_recall_without_wake: RecallWithoutWake, recall_without_wake, "a deadlock", ["deadlock"];
    caught_push_inside_op_waits, sound_push_inside_op_waits: PushInsideOpWaits, push_inside_op_waits, "a deadlock", ["deadlock"];
    caught_prepare_skips_settle, sound_prepare_skips_settle: PrepareSkipsSettle, prepare_skips_settle, "the fork-point assertion", ["half-settled engine"];
    caught_wake_only_when_no_writes, sound_wake_only_when_no_writes: WakeOnlyWhenNoWrites, wake_only_when_no_writes, "a deadlock or livelock", ["deadlock", "maximum number of branches"];
    caught_pause_before_state_check, sound_pause_before_state_check: PauseBeforeStateCheck, pause_before_state_check, "a deadlock or livelock", ["deadlock", "maximum number of branches"];
    caught_completion_outside_section, _: CompletionOutsideSection, completion_outside_section, "the fork-point check", ["fork-point check"];
    caught_skipped_op_passes_nothing, sound_skipped_op_passes_nothing: SkippedOpPassesNothing, skipped_op_passes_nothing, "the I7 assertion", ["a skipped op passed no poison on"];
    caught_body_under_queue_lock, sound_body_under_queue_lock: BodyUnderQueueLock, body_under_queue_lock, "a deadlock", ["deadlock"];
    caught_writer_joins_readers, sound_writer_joins_readers: WriterJoinsReaders, writer_joins_readers, "an overlapping access", ["access grant (I9) broken", "Causality violation"];
    caught_idle_after_last_look, _: IdleAfterLastLook, push_meets_a_parking_worker_one, "a deadlock", ["deadlock"];
    caught_wanted_read_before_queue, _: WantedReadBeforeQueue, push_meets_a_parking_worker_one, "a deadlock", ["deadlock"];
    caught_idle_after_last_look_by_a_batch, _: IdleAfterLastLook, batch_push_meets_a_parking_worker, "a deadlock", ["deadlock"];
    caught_wanted_read_before_queue_by_a_batch, _: WantedReadBeforeQueue, batch_push_meets_a_parking_worker, "a deadlock", ["deadlock"];
    caught_pause_first_queue_only, sound_pause_first_queue_only: PauseFirstQueueOnly, pause_first_queue_only, "the I3 assertion", ["an op ran while a quiesce held (I3)"];
    caught_inline_ignores_pause, sound_inline_ignores_pause: InlineIgnoresPause, inline_ignores_pause, "the I3 assertion", ["an op ran while a quiesce held (I3)"];
    caught_completion_skips_fence, sound_completion_skips_fence: CompletionSkipsFence, completion_skips_fence, "a deadlock", ["deadlock"];
}

const MUTANT_ENV: &str = "FORKSAFE_LOOM_MUTANT";
/// Set (to anything) to run a mutant's child-layer scenario instead.
const CHILD_LAYER_ENV: &str = "FORKSAFE_LOOM_CHILD_LAYER";

/// Not a control by itself: the child process of a `caught_*` test runs
/// the scenario of the mutant named in `FORKSAFE_LOOM_MUTANT` here, with
/// the mutant on. Does nothing when the variable is unset.
#[test]
fn mutant_run() {
    let Ok(name) = std::env::var(MUTANT_ENV) else {
        return;
    };
    let m = match name.as_str() {
        "DrainingPrepare" => Mutant::DrainingPrepare,
        "LostNotify" => Mutant::LostNotify,
        "PushWaitsForQuiesce" => Mutant::PushWaitsForQuiesce,
        "ChildRerun" => Mutant::ChildRerun,
        "CountedRefusal" => Mutant::CountedRefusal,
        "RecallWithoutWake" => Mutant::RecallWithoutWake,
        "PushInsideOpWaits" => Mutant::PushInsideOpWaits,
        "PrepareSkipsSettle" => Mutant::PrepareSkipsSettle,
        "WakeOnlyWhenNoWrites" => Mutant::WakeOnlyWhenNoWrites,
        "PauseBeforeStateCheck" => Mutant::PauseBeforeStateCheck,
        "CompletionOutsideSection" => Mutant::CompletionOutsideSection,
        "SkippedOpPassesNothing" => Mutant::SkippedOpPassesNothing,
        "BodyUnderQueueLock" => Mutant::BodyUnderQueueLock,
        "WriterJoinsReaders" => Mutant::WriterJoinsReaders,
        "IdleAfterLastLook" => Mutant::IdleAfterLastLook,
        "WantedReadBeforeQueue" => Mutant::WantedReadBeforeQueue,
        "PauseFirstQueueOnly" => Mutant::PauseFirstQueueOnly,
        "InlineIgnoresPause" => Mutant::InlineIgnoresPause,
        "CompletionSkipsFence" => Mutant::CompletionSkipsFence,
        "WaitSkipsOwnPushes" => Mutant::WaitSkipsOwnPushes,
        "WaitGraphSkipsSearch" => Mutant::WaitGraphSkipsSearch,
        other => panic!("unknown mutant {other}"),
    };
    mutant::set(Some(m));
    match (m, std::env::var_os(CHILD_LAYER_ENV).is_some()) {
        (Mutant::CompletionOutsideSection, true) => completion_outside_section_child(),
        (_, true) => panic!("{name} has no child-layer scenario"),
        (_, false) => scenario(m)(),
    }
    mutant::set(None);
    eprintln!("MUTANT NOT CAUGHT: {name}");
}

/// Runs the scenario of `m` in a child process with `m` on; returns the
/// panic messages loom failed with. Panics if the child succeeded.
fn caught(m: Mutant) -> String {
    caught_in(m, false)
}

/// [`caught`], running `m`'s child-layer scenario if `child_layer`.
fn caught_in(m: Mutant, child_layer: bool) -> String {
    let extra: &[(&str, &str)] = if child_layer {
        &[(CHILD_LAYER_ENV, "1")]
    } else {
        &[]
    };
    mutant_in_child("mutant_run", MUTANT_ENV, m, extra)
}

#[test]
fn caught_completion_outside_section_by_the_child() {
    let msg = caught_in(Mutant::CompletionOutsideSection, true);
    assert!(
        msg.contains("held at the fork point"),
        "expected the child to find a lock the fork point held, got: {msg}"
    );
}

#[test]
fn sound_completion_outside_section() {
    completion_outside_section();
    completion_outside_section_child();
}

/// The bad-input path of the fork window, for completeness: the forking
/// thread's own calls are refused, never hang (H2).
#[test]
fn sound_fork_window_refuses_forker() {
    check("fork_window_refuses_forker", || {
        let w = World::new(config(1, 1, None), 1);
        w.domain.prepare();
        assert_eq!(w.engine.new_var().map(|_| ()), Err(Error::ForkInProgress));
        w.domain.parent();
        w.engine.shutdown(LONG).unwrap();
    });
}

#[test]
fn sound_push_meets_a_parking_worker() {
    push_meets_a_parking_worker_one();
}

/// (s), (t) The same edge met by a batch push: two ops queued in one hold
/// of the queue's lock. Threads: main + 1 compute.
fn batch_push_meets_a_parking_worker() {
    check("batch_push_meets_a_parking_worker", || {
        common::batch_push_meets_a_parking_worker()
    });
}

#[test]
fn sound_batch_push_meets_a_parking_worker() {
    batch_push_meets_a_parking_worker();
}

/// The same edge with two workers and two slots: a worker whose home slot
/// is empty takes from the other's. Threads: main + 2 compute.
#[test]
fn sound_push_meets_parking_workers_on_two_queues() {
    check("push_meets_parking_workers_on_two_queues", || {
        common::push_meets_a_parking_worker(2)
    });
}
