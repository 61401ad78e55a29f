//! Running inline (`CoreConfig::run_inline_from`, docs/DESIGN.md "Running
//! inline"): which ops a pusher runs itself and which it leaves to the
//! workers, and that an op run inline behaves like one a worker ran
//! (errors at waits, quiesce, waits inside it). Which thread ran an op is
//! read from its trace event (worker 0: its pusher) or its thread id.

use forksafe::{Config, CoreConfig, Engine, Error, OpErrorKind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

const BOUND: Duration = Duration::from_secs(30);

fn engine(compute: usize, run_inline_from: Option<usize>) -> Arc<Engine> {
    Arc::new(
        Engine::new(Config {
            core: CoreConfig {
                compute_workers: compute,
                run_inline_from,
                ..CoreConfig::default()
            },
            ..Config::default()
        })
        .unwrap(),
    )
}

/// Where a body ran, recorded by the body.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Option<ThreadId>>>);

impl Recorder {
    /// A body that records the thread it runs on.
    fn body(&self) -> impl FnOnce() + Send + 'static {
        let ran_on = self.0.clone();
        move || *ran_on.lock().unwrap() = Some(std::thread::current().id())
    }

    /// The thread the body ran on, if it ran.
    fn ran_on(&self) -> Option<ThreadId> {
        *self.0.lock().unwrap()
    }
}

fn here() -> Option<ThreadId> {
    Some(std::thread::current().id())
}

/// With one worker busy and one op queued, a third ready op runs on its
/// pusher (the queue holds `run_inline_from` = 1 op); the queued one still
/// runs on the worker, and the trace says which ran where.
#[test]
fn a_ready_op_runs_on_its_pusher_once_its_queue_is_long() {
    let e = engine(1, Some(1));
    e.trace_start().unwrap();
    let (a, b, c) = (
        e.new_var().unwrap(),
        e.new_var().unwrap(),
        e.new_var().unwrap(),
    );
    let (started_tx, started) = channel();
    let (release, release_rx) = channel::<()>();
    e.op("hold")
        .writes(&[&a])
        .run(move || {
            started_tx.send(()).unwrap();
            release_rx.recv_timeout(BOUND).unwrap();
        })
        .unwrap();
    started.recv_timeout(BOUND).unwrap();
    let queued_on = Recorder::default();
    let inline_on = Recorder::default();
    e.op("queued").writes(&[&b]).run(queued_on.body()).unwrap();
    let id = e.op("inline").writes(&[&c]).run(inline_on.body()).unwrap();
    assert_eq!(inline_on.ran_on(), here(), "not run by its pusher");
    assert_eq!(queued_on.ran_on(), None, "the queued op ran early");
    release.send(()).unwrap();
    e.wait_all().unwrap();
    assert_ne!(queued_on.ran_on(), here());
    let trace = e.trace_take().unwrap();
    let event = trace.events.iter().find(|ev| ev.op == id).unwrap();
    assert_eq!(event.worker, 0);
    assert!(trace.worker_name(event).ends_with("-compute-pusher"));
    let queued = trace.events.iter().find(|ev| ev.name == "queued").unwrap();
    assert_eq!(queued.worker, 1);
}

/// Off (the default), a push never runs its op, however ready.
#[test]
fn off_by_default() {
    let e = engine(1, Config::default().core.run_inline_from);
    let v = e.new_var().unwrap();
    let ran_on = Recorder::default();
    e.op("x").writes(&[&v]).run(ran_on.body()).unwrap();
    e.wait_all().unwrap();
    assert_ne!(ran_on.ran_on(), here());
}

/// Host-lane ops never run inline.
#[test]
fn host_ops_never_run_inline() {
    let e = engine(1, Some(0));
    let v = e.new_var().unwrap();
    let ran_on = Recorder::default();
    e.op("host")
        .writes(&[&v])
        .host()
        .run(ran_on.body())
        .unwrap();
    e.wait_all().unwrap();
    let ran_on = ran_on.ran_on();
    assert!(ran_on.is_some() && ran_on != here());
}

/// An op not ready at its push (it waits for a var) is queued, never run
/// inline later by some other push.
#[test]
fn an_op_that_waits_for_a_var_goes_to_a_worker() {
    let e = engine(1, Some(0));
    let v = e.new_var().unwrap();
    let (release, release_rx) = channel::<()>();
    e.op("first")
        .writes(&[&v])
        .run_async(move |token| {
            std::thread::spawn(move || {
                release_rx.recv_timeout(BOUND).unwrap();
                token.complete(Ok(())).unwrap();
            });
        })
        .unwrap();
    let ran_on = Recorder::default();
    e.op("second").writes(&[&v]).run(ran_on.body()).unwrap();
    assert_eq!(ran_on.ran_on(), None);
    release.send(()).unwrap();
    e.wait_all().unwrap();
    let ran_on = ran_on.ran_on();
    assert!(ran_on.is_some() && ran_on != here());
}

/// A push from inside an op never runs the new op inline (bodies would
/// nest on one stack): with one worker, busy with the outer op, the inner
/// one runs only after the outer body returned.
#[test]
fn a_push_from_inside_an_op_is_never_run_inline() {
    let e = engine(1, Some(0));
    let (u, v) = (e.new_var().unwrap(), e.new_var().unwrap());
    let in_outer = Arc::new(AtomicBool::new(false));
    let nested = Arc::new(AtomicBool::new(false));
    let (e2, in_outer2, nested2) = (e.clone(), in_outer.clone(), nested.clone());
    // Pushed from a helper thread's op body: the outer op itself runs
    // inline on this thread, and the push inside it must not.
    e.op("outer")
        .writes(&[&u])
        .run(move || {
            in_outer2.store(true, Ordering::SeqCst);
            let (in_outer3, nested3) = (in_outer2.clone(), nested2.clone());
            e2.op("inner")
                .writes(&[&v])
                .run(move || nested3.store(in_outer3.load(Ordering::SeqCst), Ordering::SeqCst))
                .unwrap();
            in_outer2.store(false, Ordering::SeqCst);
        })
        .unwrap();
    e.wait_all().unwrap();
    assert!(
        !nested.load(Ordering::SeqCst),
        "the inner op ran inside the outer body"
    );
}

/// A panic in a body run inline is the op's error, reported at waits; the
/// pusher is not unwound and the engine goes on.
#[test]
fn a_panic_in_an_inline_body_is_an_op_error() {
    let e = engine(1, Some(0));
    let v = e.new_var().unwrap();
    e.op("boom")
        .writes(&[&v])
        .run(|| panic!("inline boom"))
        .unwrap();
    match e.wait_all() {
        Err(Error::OpsFailed(errors)) => {
            assert_eq!(errors.len(), 1);
            assert!(
                matches!(errors[0].kind(), OpErrorKind::Panicked(m) if m.contains("inline boom")),
                "{errors:?}"
            );
        }
        other => panic!("expected OpsFailed, got {other:?}"),
    }
    assert!(
        e.var_poison(&v).unwrap().is_some(),
        "I7: the op poisons what it writes"
    );
    e.clear_poison(&v).unwrap();
    let ran_on = Recorder::default();
    e.op("after").writes(&[&v]).run(ran_on.body()).unwrap();
    e.wait_all().unwrap();
    assert_eq!(ran_on.ran_on(), here());
}

/// While a quiesce holds, a push queues its op even if it could run it
/// inline (I3); it runs on a worker once the quiesce ends.
#[test]
fn a_quiesce_holds_inline_runs() {
    let e = engine(1, Some(0));
    let v = e.new_var().unwrap();
    let guard = e.quiesce(BOUND).unwrap();
    let ran_on = Recorder::default();
    e.op("held").writes(&[&v]).run(ran_on.body()).unwrap();
    assert_eq!(ran_on.ran_on(), None, "ran while the quiesce held");
    drop(guard);
    e.wait_all().unwrap();
    let ran_on = ran_on.ran_on();
    assert!(ran_on.is_some() && ran_on != here());
}

/// A wait inside an op run inline blocks no worker, so it needs no stand-in:
/// with a stand-in cap of 0 it still waits (on a worker it would fail with
/// `StandInLimit`). The op it waits for is a host op a helper thread
/// releases after a while, so the wait does block.
#[test]
fn a_wait_inside_an_inline_op_needs_no_stand_in() {
    let e = Arc::new(
        Engine::new(Config {
            core: CoreConfig {
                compute_workers: 1,
                max_stand_ins: 0,
                run_inline_from: Some(0),
                ..CoreConfig::default()
            },
            ..Config::default()
        })
        .unwrap(),
    );
    let (u, w) = (e.new_var().unwrap(), e.new_var().unwrap());
    let (release, release_rx) = channel::<()>();
    e.op("slow host")
        .writes(&[&u])
        .host()
        .run(move || release_rx.recv_timeout(BOUND).unwrap())
        .unwrap();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        release.send(()).unwrap();
    });
    let waited = Arc::new(Mutex::new(None));
    let (e2, u2, waited2) = (e.clone(), u.clone(), waited.clone());
    e.op("waits")
        .writes(&[&w])
        .run(move || *waited2.lock().unwrap() = Some(e2.wait_for_var(&u2)))
        .unwrap();
    releaser.join().unwrap();
    e.wait_all().unwrap();
    assert_eq!(*waited.lock().unwrap(), Some(Ok(())));
}
