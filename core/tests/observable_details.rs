//! Behaviours of the hot-path files that only these tests pin down (each
//! kills mutants of the full mutation run, FORK-SAFETY.md, "Mutation
//! testing"):
//! that a lane really has the workers it was configured with, what the
//! timeline records about threads and time, the text of errors, and that a
//! timeout too large for the clock means "no deadline", not "already past".

use crate::support::{
    engine_with as engine, push_running, spec as job, wait_until, Concurrency, Job,
};
use forksafe_core::{BodyError, CoreEngine, Error, Lane, OpError, OpErrorKind, OpInfo, Priority};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

/// Which OS thread ran each op, by op id.
type Ran = Arc<Mutex<HashMap<u64, ThreadId>>>;

/// Pushes an op that records its thread and then waits (up to a generous
/// bound, so a broken engine fails instead of hanging) until `peers` ops
/// of its group have started: with fewer workers than `peers` it fails.
fn push_rendezvous(e: &CoreEngine<Job>, ran: &Ran, arrived: &Arc<AtomicU32>, peers: u32) -> u64 {
    let (ran, arrived) = (ran.clone(), arrived.clone());
    let slot: Arc<Mutex<Option<u64>>> = Arc::default();
    let my_id = slot.clone();
    let id = e
        .push(
            job(move || {
                arrived.fetch_add(1, Ordering::SeqCst);
                if !wait_until(Duration::from_secs(20), || {
                    arrived.load(Ordering::SeqCst) >= peers
                }) {
                    return Err("a peer op never started".into());
                }
                std::thread::sleep(Duration::from_millis(2));
                let id = loop {
                    if let Some(id) = *my_id.lock().unwrap() {
                        break id;
                    }
                    std::thread::yield_now();
                };
                ran.lock().unwrap().insert(id, std::thread::current().id());
                Ok(())
            })
            .name("meet"),
        )
        .unwrap();
    *slot.lock().unwrap() = Some(id);
    id
}

/// Two compute workers run two ops at once, and the timeline names each
/// op's thread and worker consistently with the thread that really ran it.
#[test]
fn a_lane_runs_as_many_ops_at_once_as_it_has_workers_and_the_trace_names_them() {
    let e = engine(2);
    e.set_tracing(true).unwrap();
    let ran: Ran = Arc::default();
    let mut ids = Vec::new();
    for _round in 0..3 {
        let arrived = Arc::new(AtomicU32::new(0));
        ids.push(push_rendezvous(&e, &ran, &arrived, 2));
        ids.push(push_rendezvous(&e, &ran, &arrived, 2));
        e.wait_all().unwrap();
    }
    let events = e.take_trace().unwrap();
    assert_eq!(events.len(), ids.len(), "{events:?}");
    let ran = ran.lock().unwrap();
    for ev in &events {
        assert!(ids.contains(&ev.op), "{ev:?}");
        assert_eq!(ev.name, "meet");
        assert_eq!(ev.lane, Lane::Compute);
        // Each body sleeps 2 ms after meeting its peer.
        assert!(ev.dur_ns >= 2_000_000, "{ev:?}");
    }
    // Same OS thread <=> same thread number <=> same worker; six ops on
    // two workers, so some thread ran several and two threads ran some.
    let mut threads = std::collections::HashSet::new();
    for a in &events {
        threads.insert(ran[&a.op]);
        for b in &events {
            let same_os = ran[&a.op] == ran[&b.op];
            assert_eq!(same_os, a.thread == b.thread, "{a:?} {b:?}");
            assert_eq!(same_os, a.worker == b.worker, "{a:?} {b:?}");
        }
    }
    assert_eq!(threads.len(), 2);
}

/// Tracing off records nothing; on again, it keeps its time origin, so a
/// later op starts after every op of the first recording ended.
#[test]
fn the_trace_keeps_its_origin_across_a_pause_and_records_nothing_while_off() {
    let e = engine(1);
    e.set_tracing(true).unwrap();
    for _ in 0..3 {
        e.push(job(|| {
            std::thread::sleep(Duration::from_millis(2));
            Ok(())
        }))
        .unwrap();
    }
    e.wait_all().unwrap();
    let first = e.take_trace().unwrap();
    assert_eq!(first.len(), 3);
    let first_end = first
        .iter()
        .map(|ev| ev.start_ns + ev.dur_ns)
        .max()
        .unwrap();
    assert!(first_end >= 6_000_000, "{first:?}");

    e.set_tracing(false).unwrap();
    e.push(job(|| Ok(()))).unwrap();
    e.wait_all().unwrap();
    assert_eq!(e.take_trace().unwrap(), Vec::new());

    e.set_tracing(true).unwrap();
    e.push(job(|| Ok(())).name("later")).unwrap();
    e.wait_all().unwrap();
    let later = e.take_trace().unwrap();
    assert_eq!(later.len(), 1, "{later:?}");
    assert_eq!(later[0].name, "later");
    assert!(later[0].start_ns >= first_end, "{first:?} {later:?}");
}

/// A timeout too large to add to the clock waits without a deadline (it
/// must not wrap into the past and time out at once).
#[test]
fn a_huge_timeout_means_no_deadline() {
    let e = engine(1);
    let v = e.new_var().unwrap();
    let slow = || {
        job(|| {
            std::thread::sleep(Duration::from_millis(20));
            Ok(())
        })
    };
    e.push(slow().writes(std::slice::from_ref(&v))).unwrap();
    e.wait_for_var_timeout(&v, Duration::MAX).unwrap();
    e.push(slow()).unwrap();
    e.wait_all_timeout(Duration::MAX).unwrap();
    // A quiesce waits for running ops only: start one first.
    push_running(&e, 20);
    let guard = e.quiesce(Duration::MAX).unwrap();
    assert_eq!(e.pending().unwrap(), 0);
    drop(guard);
    e.push(slow()).unwrap();
    let report = e.shutdown(Duration::MAX).unwrap();
    assert!(report.cancelled.is_empty(), "{report:?}");
}

fn info(name: &str, id: u64) -> OpInfo {
    OpInfo {
        id,
        name: name.into(),
        lane: Lane::Host,
        priority: Priority::Low,
    }
}

/// Two errors are equal (and hash alike) when they name the same op and the
/// same kind, whatever error value they carry; a body's error value comes
/// back as `body_error` and `source()`.
#[test]
fn op_errors_compare_by_op_and_kind_and_keep_the_body_error() {
    use std::hash::{BuildHasher, RandomState};
    let hash = {
        let state = RandomState::new();
        move |e: &OpError| state.hash_one(e)
    };
    let disk = || OpErrorKind::Failed("disk full".into());
    let plain = OpError::new(info("load", 42), disk());
    let io = std::io::Error::other("disk full");
    let carried = OpError::failed(info("load", 42), BodyError::new(io));
    assert_eq!(plain, carried, "the carried value is not compared");
    assert_eq!(hash(&plain), hash(&carried));
    let other_op = OpError::new(info("load", 43), disk());
    let other_kind = OpError::new(info("load", 42), OpErrorKind::Cancelled);
    for different in [&other_op, &other_kind] {
        assert_ne!(&plain, different);
        assert_ne!(hash(&plain), hash(different));
    }
    assert_eq!(
        carried.kind(),
        &disk(),
        "the message is the error's Display"
    );
    let value = carried.body_error().expect("the body's error value");
    assert!(value.downcast_ref::<std::io::Error>().is_some());
    assert!(std::error::Error::source(&carried).is_some());
    assert!(plain.body_error().is_none());
    assert!(std::error::Error::source(&plain).is_none());
    let message_only: BodyError = "no disk".into();
    assert_eq!(message_only.message(), "no disk");
    assert!(message_only.error().is_none());
    assert_eq!(format!("{message_only:?}"), "BodyError(\"no disk\")");
}

/// Errors say which op raised them and what happened, in both forms.
#[test]
fn errors_name_their_op_and_what_happened() {
    let cases = [
        (OpErrorKind::Failed("disk full".into()), "failed: disk full"),
        (OpErrorKind::Panicked("boom".into()), "panicked: boom"),
        (OpErrorKind::LostInFork, "pending at fork"),
        (OpErrorKind::Cancelled, "cancelled by shutdown"),
        (OpErrorKind::TokenDropped, "token dropped"),
        (
            OpErrorKind::WorkerStart("EAGAIN".into()),
            "had no worker: cannot start one: EAGAIN",
        ),
    ];
    for (kind, what) in cases {
        let err = OpError::new(info("load", 42), kind.clone());
        assert_eq!(err.op(), &info("load", 42));
        assert_eq!(err.kind(), &kind);
        let shown = err.to_string();
        assert!(shown.starts_with("op 'load' (#42) "), "{shown}");
        assert!(shown.contains(what), "{shown}");
        let debug = format!("{err:?}");
        assert!(
            debug.contains("load #42") && debug.contains(&format!("{kind:?}")),
            "{debug}"
        );
    }
    let failed = OpError::new(info("a", 1), OpErrorKind::Failed("x".into()));
    let texts = [
        (Error::ForeignVar, "another engine".to_string()),
        (Error::DeletedVar, "deleted".into()),
        (Error::DuplicateVar, "more than once".into()),
        (Error::TooManyVars, "more than 65535 vars".into()),
        (Error::ShutDown, "shut down".into()),
        (Error::Full, "bound".into()),
        (Error::ForkInProgress, "fork".into()),
        (
            Error::WaitOnSelf {
                op: Box::new(info("a", 1)),
                on: Box::new(info("a", 1)),
                var: Some(3),
            },
            "op #1 'a' waits for var #3, which waits for the op itself".into(),
        ),
        (
            Error::WaitOnSelf {
                op: Box::new(info("a", 1)),
                on: Box::new(info("b", 2)),
                var: None,
            },
            "includes op #2 'b' that cannot complete before it".into(),
        ),
        (
            Error::Timeout {
                pending: vec![info("a", 1), info("b", 2)],
            },
            "2 ops pending".into(),
        ),
        (Error::Interrupted, "interrupted".into()),
        (Error::ZeroTimeout, "positive".into()),
        (
            Error::Poisoned(failed.clone()),
            format!("poisoned: {failed}"),
        ),
        (
            Error::OpsFailed(vec![failed.clone(), failed.clone()]),
            format!("2 op(s) failed; {failed}; {failed}"),
        ),
        (Error::AlreadyCompleted, "already completed".into()),
        (Error::StaleEpoch, "earlier fork epoch".into()),
        (Error::InvalidConfig("workers"), "config: workers".into()),
        (Error::Spawn("EAGAIN".into()), "thread: EAGAIN".into()),
        (
            Error::StandInLimit { limit: 7 },
            "refused: 7 workers".into(),
        ),
        (
            Error::ForkFailed("ENOMEM".into()),
            "fork failed: ENOMEM".into(),
        ),
        (
            Error::ForkHandlers("ENOMEM".into()),
            "fork handlers: ENOMEM".into(),
        ),
        (
            Error::DefaultEngineStarted,
            "default engine has already".into(),
        ),
    ];
    for (err, what) in texts {
        let shown = err.to_string();
        assert!(shown.contains(&what), "{shown:?} lacks {what:?}");
    }
}

/// An engine's debug form names it and its state.
#[test]
fn an_engine_debug_form_shows_its_id_and_state() {
    let e = engine(1);
    let shown = format!("{e:?}");
    assert!(
        shown.starts_with("CoreEngine") && shown.contains(&format!("id: {}", e.id())),
        "{shown}"
    );
    assert!(shown.contains("Running"), "{shown}");
}

/// Every thread of the process may use an engine, however many threads
/// came before it: threads are spread over the fork gate's shards by their
/// process-wide number, which keeps growing.
#[test]
fn a_process_that_started_hundreds_of_threads_can_still_use_an_engine() {
    let e = Arc::new(engine(1));
    for _ in 0..300 {
        let e = e.clone();
        std::thread::spawn(move || {
            e.push(job(|| Ok(()))).unwrap();
            e.pending().unwrap()
        })
        .join()
        .unwrap();
    }
    e.wait_all().unwrap();
}

/// Ops queued under a quiesce before any worker started get as many
/// workers as the lane has when the quiesce is released.
#[test]
fn a_resume_starts_enough_workers_for_the_ops_queued_meanwhile() {
    let e = engine(2);
    e.set_tracing(true).unwrap();
    let guard = e.quiesce(Duration::from_secs(10)).unwrap();
    let ran: Ran = Arc::default();
    let arrived = Arc::new(AtomicU32::new(0));
    push_rendezvous(&e, &ran, &arrived, 2);
    push_rendezvous(&e, &ran, &arrived, 2);
    drop(guard);
    e.wait_all().unwrap();
    assert_eq!(ran.lock().unwrap().len(), 2);
    // Two workers, each with its own index.
    let events = e.take_trace().unwrap();
    assert_eq!(events.len(), 2);
    assert_ne!(events[0].worker, events[1].worker, "{events:?}");
}

/// Vars have distinct ids within an engine, shown in their debug form with
/// the engine's id.
#[test]
fn vars_have_distinct_ids_shown_in_their_debug_form() {
    let e = engine(1);
    let vars: Vec<_> = (0..3).map(|_| e.new_var().unwrap()).collect();
    let ids: std::collections::HashSet<u64> = vars.iter().map(|v| v.id()).collect();
    assert_eq!(ids.len(), 3);
    for v in &vars {
        assert_eq!(
            format!("{v:?}"),
            format!("Var(engine {}, #{})", e.id(), v.id())
        );
    }
}

/// `wait_for_var` waits for the writes pushed before the call, not for a
/// write pushed while it waits (which here could only run after the wait
/// returned).
#[test]
fn a_wait_for_var_does_not_wait_for_writes_pushed_after_it_began() {
    let e = Arc::new(engine(1));
    let v = e.new_var().unwrap();
    let first_go = Arc::new(AtomicU32::new(0));
    let wait_returned = Arc::new(AtomicU32::new(0));
    let gate = |flag: &Arc<AtomicU32>| {
        let flag = flag.clone();
        job(move || {
            if wait_until(Duration::from_secs(10), || flag.load(Ordering::SeqCst) == 1) {
                Ok(())
            } else {
                Err("never released".into())
            }
        })
        .writes(std::slice::from_ref(&v))
    };
    e.push(gate(&first_go)).unwrap();
    let (e2, v2, returned) = (e.clone(), v.clone(), wait_returned.clone());
    let waiter = std::thread::spawn(move || {
        let r = e2.wait_for_var(&v2);
        returned.store(1, Ordering::SeqCst);
        r
    });
    // Let the waiter start waiting (not an assertion on time: however long
    // this sleeps, a correct wait returns once the first write completes).
    std::thread::sleep(Duration::from_millis(30));
    e.push(gate(&wait_returned)).unwrap();
    first_go.store(1, Ordering::SeqCst);
    assert_eq!(waiter.join().unwrap(), Ok(()));
    e.wait_all().unwrap();
    assert_eq!(e.var_version(&v).unwrap(), 2);
}

/// A domain drain gives each engine what is left of its one deadline, so
/// an op that runs a few milliseconds is waited for, not reported.
#[test]
fn a_domain_drain_waits_for_a_short_running_op() {
    let domain = crate::support::domain();
    let e = CoreEngine::<Job>::new(domain, forksafe_core::Config::default()).unwrap();
    push_running(&e, 30);
    let held = domain.quiesce_all(Duration::from_secs(20)).unwrap();
    assert!(held.drained(), "{held:?}");
    assert_eq!(e.pending().unwrap(), 0);
}

/// `wait_all` returns once the ops pushed before it completed, even when
/// ops pushed after it began stay in every shard of the live index (and
/// can only run after it returned).
#[test]
fn wait_all_is_woken_past_later_ops_in_the_live_index() {
    let e = Arc::new(engine(1));
    let go = Arc::new(AtomicU32::new(0));
    let returned = Arc::new(AtomicU32::new(0));
    // Once one later op gives up, the rest fail at once (a broken engine
    // fails the test in seconds instead of hanging it).
    let gave_up = Arc::new(AtomicU32::new(0));
    let wait_for = |flag: &Arc<AtomicU32>, bound: Duration| {
        let (flag, gave_up) = (flag.clone(), gave_up.clone());
        job(move || {
            wait_until(bound, || {
                flag.load(Ordering::SeqCst) == 1 || gave_up.load(Ordering::SeqCst) == 1
            });
            if flag.load(Ordering::SeqCst) == 1 {
                Ok(())
            } else {
                gave_up.store(1, Ordering::SeqCst);
                Err("never released".into())
            }
        })
    };
    e.push(wait_for(&go, Duration::from_secs(10))).unwrap();
    let (e2, r) = (e.clone(), returned.clone());
    let waiter = std::thread::spawn(move || {
        let result = e2.wait_all();
        r.store(1, Ordering::SeqCst);
        result
    });
    // Let the waiter take its limit (not an assertion on time: however
    // long this sleeps, the later ops are not waited for).
    std::thread::sleep(Duration::from_millis(30));
    for _ in 0..20 {
        e.push(wait_for(&returned, Duration::from_secs(3))).unwrap();
    }
    go.store(1, Ordering::SeqCst);
    assert_eq!(waiter.join().unwrap(), Ok(()));
    assert_eq!(
        e.wait_all(),
        Ok(()),
        "a later op ran before wait_all returned"
    );
}

/// A quiesce guard's debug form names its engine and fork epoch.
#[test]
fn a_quiesce_guard_debug_form_names_its_engine_and_epoch() {
    let e = engine(1);
    let guard = e.quiesce(Duration::from_secs(10)).unwrap();
    assert_eq!(
        format!("{guard:?}"),
        format!("QuiesceGuard(engine {}, epoch 0)", e.id())
    );
}

/// A resume starts workers for the queued ops only up to the lane's size:
/// with one compute worker, no two ops ever run at once.
#[test]
fn a_resume_never_runs_more_ops_at_once_than_the_lane_has_workers() {
    let e = engine(1);
    let guard = e.quiesce(Duration::from_secs(10)).unwrap();
    let counted = Concurrency::default();
    for _ in 0..6 {
        e.push(counted.op()).unwrap();
    }
    drop(guard);
    e.wait_all().unwrap();
    assert_eq!(counted.most(), 1);
}

/// `Error::pending_ops` lists a timeout's ops, and nothing for others.
#[test]
fn pending_ops_lists_a_timeouts_ops_only() {
    let pending = vec![info("a", 1), info("b", 2)];
    let timeout = Error::Timeout {
        pending: pending.clone(),
    };
    assert_eq!(timeout.pending_ops(), &pending[..]);
    assert!(Error::ShutDown.pending_ops().is_empty());
}
