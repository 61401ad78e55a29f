//! The public API on real threads (no fork here: see tests/fork.rs).

use forksafe::{Config, CoreConfig, Engine, Error, Lane, OpErrorKind, Priority, State};
use forksafe_testkit::GilBridge;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn engine_with(compute: usize, host: usize) -> Engine {
    Engine::new(Config {
        core: CoreConfig {
            compute_workers: compute,
            host_workers: host,
            ..CoreConfig::default()
        },
        ..Config::default()
    })
    .unwrap()
}

#[test]
fn builder_orders_writes_and_reads() {
    let e = engine_with(4, 1);
    let v = e.new_var().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    for i in 0..100 {
        let log = log.clone();
        e.op(format!("w{i}"))
            .writes(&[&v])
            .priority(if i % 2 == 0 {
                Priority::High
            } else {
                Priority::Low
            })
            .run(move || log.lock().unwrap().push(i))
            .unwrap();
    }
    e.wait_for_var(&v).unwrap();
    assert_eq!(*log.lock().unwrap(), (0..100).collect::<Vec<_>>());
    assert_eq!(e.var_version(&v).unwrap(), 100);
    e.wait_all().unwrap();
}

/// Uses about `frames` KiB of stack (1 KiB per frame, kept by black_box).
fn deep_stack(frames: usize) -> u64 {
    let frame = std::hint::black_box([frames as u8; 1024]);
    if frames == 0 {
        u64::from(frame[0])
    } else {
        deep_stack(frames - 1) + u64::from(frame[1])
    }
}

/// `worker_stack_size` reaches the workers: a body needing about 8 MiB of
/// stack (std's default is 2 MiB: it would overflow and abort) runs on a
/// worker given 32 MiB, on both lanes.
#[test]
fn workers_get_the_configured_stack_size() {
    let e = Engine::new(Config {
        core: CoreConfig {
            worker_stack_size: Some(32 << 20),
            ..CoreConfig::default()
        },
        ..Config::default()
    })
    .unwrap();
    let v = e.new_var().unwrap();
    for lane in [Lane::Compute, Lane::Host] {
        e.op("deep")
            .writes(&[&v])
            .lane(lane)
            .run(|| {
                std::hint::black_box(deep_stack(8 * 1024));
            })
            .unwrap();
    }
    e.wait_all().unwrap();
    assert_eq!(e.var_version(&v).unwrap(), 2);
}

#[test]
fn config_out_of_range_is_invalid_config() {
    let bad = [
        Config {
            core: CoreConfig {
                compute_workers: 0,
                ..CoreConfig::default()
            },
            ..Config::default()
        },
        Config {
            core: CoreConfig {
                host_workers: 2000,
                ..CoreConfig::default()
            },
            ..Config::default()
        },
        Config {
            core: CoreConfig {
                max_pending: Some(0),
                ..CoreConfig::default()
            },
            ..Config::default()
        },
        Config {
            core: CoreConfig {
                thread_name: String::new(),
                ..CoreConfig::default()
            },
            ..Config::default()
        },
        Config {
            core: CoreConfig {
                thread_name: "a\0b".into(),
                ..CoreConfig::default()
            },
            ..Config::default()
        },
        Config {
            core: CoreConfig {
                thread_name: "x".repeat(33),
                ..CoreConfig::default()
            },
            ..Config::default()
        },
        Config {
            core: CoreConfig {
                worker_stack_size: Some(0),
                ..CoreConfig::default()
            },
            ..Config::default()
        },
        Config {
            fork_drain: Duration::ZERO,
            ..Config::default()
        },
        Config {
            shutdown_deadline: Duration::ZERO,
            ..Config::default()
        },
        Config {
            shutdown_deadline: Duration::from_secs(7200),
            ..Config::default()
        },
    ];
    for c in bad {
        assert!(
            matches!(Engine::new(c.clone()), Err(Error::InvalidConfig(_))),
            "{c:?}"
        );
    }
}

#[test]
fn zero_deadlines_are_typed_errors() {
    let e = engine_with(1, 1);
    let v = e.new_var().unwrap();
    assert_eq!(
        e.wait_for_var_timeout(&v, Duration::ZERO),
        Err(Error::ZeroTimeout)
    );
    assert_eq!(e.wait_all_timeout(Duration::ZERO), Err(Error::ZeroTimeout));
    assert!(matches!(e.quiesce(Duration::ZERO), Err(Error::ZeroTimeout)));
    assert_eq!(e.shutdown(Duration::ZERO).unwrap_err(), Error::ZeroTimeout);
    assert_eq!(forksafe::fork_with(Duration::ZERO), Err(Error::ZeroTimeout));
    // Nothing was affected: the engine still runs ops.
    e.op("after").writes(&[&v]).run(|| {}).unwrap();
    e.wait_for_var(&v).unwrap();
}

#[test]
fn bad_vars_are_typed_errors_and_nothing_accepted_is_lost() {
    let e = engine_with(2, 1);
    let other = engine_with(1, 1);
    let (a, b) = (e.new_var().unwrap(), e.new_var().unwrap());
    let foreign = other.new_var().unwrap();
    let ran = Arc::new(AtomicU32::new(0));
    let r = ran.clone();
    e.op("accepted")
        .writes(&[&a])
        .run(move || {
            std::thread::sleep(Duration::from_millis(20));
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    assert_eq!(
        e.op("x").writes(&[&foreign]).run(|| {}),
        Err(Error::ForeignVar)
    );
    assert_eq!(
        e.op("x").writes(&[&a, &a]).run(|| {}),
        Err(Error::DuplicateVar)
    );
    assert_eq!(
        e.op("x").reads(&[&b]).writes(&[&b]).run(|| {}),
        Err(Error::DuplicateVar)
    );
    e.delete_var(&b).unwrap();
    assert_eq!(e.op("x").writes(&[&b]).run(|| {}), Err(Error::DeletedVar));
    assert_eq!(e.wait_for_var(&foreign), Err(Error::ForeignVar));
    e.wait_all().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(e.var_version(&a).unwrap(), 1);
}

#[test]
fn failures_and_panics_poison_and_clear() {
    let e = engine_with(2, 1);
    let (a, b) = (e.new_var().unwrap(), e.new_var().unwrap());
    e.op("fails")
        .writes(&[&a])
        .try_run(|| Err("disk full"))
        .unwrap();
    e.op("panics")
        .writes(&[&b])
        .run(|| panic!("kaboom"))
        .unwrap();
    match e.wait_for_var(&a) {
        Err(Error::Poisoned(err)) => {
            assert_eq!(err.op().name, "fails");
            assert_eq!(err.kind(), &OpErrorKind::Failed("disk full".into()));
        }
        other => panic!("{other:?}"),
    }
    match e.wait_for_var(&b) {
        Err(Error::Poisoned(err)) => {
            assert_eq!(err.kind(), &OpErrorKind::Panicked("kaboom".into()))
        }
        other => panic!("{other:?}"),
    }
    match e.wait_all() {
        Err(Error::OpsFailed(errs)) => assert_eq!(errs.len(), 2),
        other => panic!("{other:?}"),
    }
    e.clear_poison(&a).unwrap();
    e.wait_for_var(&a).unwrap();
    let ran = Arc::new(AtomicU32::new(0));
    let r = ran.clone();
    e.op("on error")
        .reads(&[&b])
        .run_on_error()
        .run(move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    e.wait_all().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

/// A body's error keeps its type: the poison of every
/// var it reaches, passed on through a skipped dependent, carries the same
/// error value as `source()`, with that value's own source chain.
#[test]
fn body_errors_keep_their_type_and_source_chain() {
    #[derive(Debug)]
    struct ParseFailed {
        line: u32,
        cause: std::num::ParseIntError,
    }
    impl std::fmt::Display for ParseFailed {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "line {} is not a number", self.line)
        }
    }
    impl std::error::Error for ParseFailed {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.cause)
        }
    }
    let e = engine_with(2, 1);
    let (a, b) = (e.new_var().unwrap(), e.new_var().unwrap());
    e.op("parse")
        .writes(&[&a])
        .try_run(|| {
            "x1".parse::<u32>()
                .map(|_| ())
                .map_err(|cause| ParseFailed { line: 3, cause })
        })
        .unwrap();
    e.op("dependent")
        .reads(&[&a])
        .writes(&[&b])
        .run(|| ())
        .unwrap();
    for var in [&a, &b] {
        let Err(Error::Poisoned(err)) = e.wait_for_var(var) else {
            panic!("poisoned expected")
        };
        assert_eq!(err.op().name, "parse", "the poison names the first op");
        assert_eq!(
            err.kind(),
            &OpErrorKind::Failed("line 3 is not a number".into())
        );
        let parsed = err
            .body_error()
            .and_then(|b| b.downcast_ref::<ParseFailed>())
            .expect("the original error value");
        assert_eq!(parsed.line, 3);
        let source = std::error::Error::source(&err).expect("source()");
        let cause = source.source().expect("the chain goes on");
        assert!(cause.downcast_ref::<std::num::ParseIntError>().is_some());
    }
    assert!(matches!(e.wait_all(), Err(Error::OpsFailed(_))));
}

#[test]
fn async_ops_complete_by_token_once() {
    let e = engine_with(1, 1);
    let v = e.new_var().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    e.op("async")
        .writes(&[&v])
        .run_async(move |token| tx.send(token).unwrap())
        .unwrap();
    let token = rx.recv().unwrap();
    assert!(matches!(
        e.wait_for_var_timeout(&v, Duration::from_millis(20)),
        Err(Error::Timeout { .. })
    ));
    token.complete(Ok(())).unwrap();
    assert_eq!(token.complete(Ok(())), Err(Error::AlreadyCompleted));
    e.wait_for_var(&v).unwrap();
    // A dropped token fails the op instead of hanging.
    e.op("dropped").writes(&[&v]).run_async(drop).unwrap();
    assert!(matches!(e.wait_for_var(&v), Err(Error::Poisoned(_))));
}

#[test]
fn pending_bound_gives_full() {
    let e = Engine::new(Config {
        core: CoreConfig {
            compute_workers: 1,
            max_pending: Some(1),
            ..CoreConfig::default()
        },
        ..Config::default()
    })
    .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    e.op("blocker")
        .run(move || {
            let _ = rx.recv_timeout(Duration::from_secs(10));
        })
        .unwrap();
    assert_eq!(e.op("second").fail_if_full().run(|| {}), Err(Error::Full));
    tx.send(()).unwrap();
    e.wait_all().unwrap();
    e.op("third").fail_if_full().run(|| {}).unwrap();
    e.wait_all().unwrap();
}

/// Waiting inside an op (on a var, or on everything) with one worker per
/// lane: the engine starts a stand-in worker, so nothing deadlocks.
#[test]
fn waits_inside_ops_never_deadlock_one_worker_per_lane() {
    let e = Arc::new(engine_with(1, 1));
    let (a, b, c) = (
        e.new_var().unwrap(),
        e.new_var().unwrap(),
        e.new_var().unwrap(),
    );
    let done = Arc::new(AtomicU32::new(0));
    // An op that waits for a var written by an op pushed before it, which
    // cannot start until the waiter's worker... is replaced.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let e1 = e.clone();
    let a1 = a.clone();
    let d = done.clone();
    e.op("waits on a")
        .writes(&[&b])
        .run(move || {
            // `slow` (pushed before this op, on another var) gets a
            // worker only if the pool grows while this one waits.
            rx.recv().unwrap();
            e1.wait_for_var(&a1).unwrap();
            d.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let d = done.clone();
    e.op("writes a")
        .writes(&[&a])
        .run(move || {
            d.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    tx.send(()).unwrap();
    // wait_all from inside an op, on the host lane.
    let e2 = e.clone();
    let d = done.clone();
    e.op("host wait_all")
        .writes(&[&c])
        .host()
        .run(move || {
            e2.wait_all().unwrap();
            d.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    // Waiting on its own write is a typed error, not a hang.
    // Its own var: queued behind "host wait_all" on `c`, it would make
    // that wait fail whenever it was pushed before the wait began.
    let own = e.new_var().unwrap();
    let e3 = e.clone();
    let c3 = own.clone();
    let (etx, erx) = std::sync::mpsc::channel();
    e.op("waits on self")
        .writes(&[&own])
        .run(move || etx.send(e3.wait_for_var(&c3)).unwrap())
        .unwrap();
    // A deadline, so a deadlock fails the test instead of hanging it.
    e.wait_all_timeout(Duration::from_secs(20)).unwrap();
    let got = erx.recv().unwrap();
    assert!(
        matches!(&got, Err(Error::WaitOnSelf { op, on, var: Some(_) }) if op.id == on.id),
        "{got:?}"
    );
    assert_eq!(done.load(Ordering::SeqCst), 3);
}

/// The seed's shape without a fork: the test thread holds the GIL-like
/// lock while host ops wait for it; every engine call still returns
/// because waits release the lock through the bridge (H2).
#[test]
fn waits_release_the_host_lock() {
    let gil = Arc::new(GilBridge::new());
    let e = Engine::with_bridge(Config::default(), Box::new(gil.clone())).unwrap();
    let v = e.new_var().unwrap();
    gil.lock().acquire();
    for i in 0..10 {
        e.op(format!("host {i}"))
            .writes(&[&v])
            .host()
            .run(|| {})
            .unwrap();
    }
    e.wait_for_var(&v).unwrap();
    let q = e.quiesce(Duration::from_secs(10)).unwrap();
    drop(q);
    e.wait_all().unwrap();
    assert!(gil.lock().held_by_me());
    gil.lock().release();
    assert_eq!(gil.calls(), 10);
}

#[test]
fn shutdown_refuses_pushes_and_fork_during_shutdown_is_refused() {
    let e = engine_with(1, 1);
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
    e.op("slow")
        .run(move || {
            started_tx.send(()).unwrap();
            let _ = rx.recv_timeout(Duration::from_secs(10));
        })
        .unwrap();
    started_rx.recv().unwrap();
    std::thread::scope(|s| {
        let h = s.spawn(|| e.shutdown(Duration::from_secs(10)).unwrap());
        while e.state() != State::ShuttingDown {
            std::thread::yield_now();
        }
        assert_eq!(
            forksafe::fork_with(Duration::from_secs(1)),
            Err(Error::ShutDown)
        );
        assert_eq!(e.op("late").run(|| {}), Err(Error::ShutDown));
        tx.send(()).unwrap();
        let report = h.join().unwrap();
        assert!(report.cancelled.is_empty());
    });
    assert_eq!(e.state(), State::Stopped);
    // A stopped engine does not block forks (nothing forks here: the bound
    // error shows the call got past the shutdown check).
    assert!(matches!(
        e.quiesce(Duration::from_secs(1)),
        Err(Error::ShutDown)
    ));
}

#[test]
fn exit_guard_and_drop_cancel_queued_host_ops_without_host_calls_after() {
    let gil = Arc::new(GilBridge::new());
    let e = Engine::with_bridge(
        Config {
            shutdown_deadline: Duration::from_millis(50),
            ..Config::default()
        },
        Box::new(gil.clone()),
    )
    .unwrap();
    let v = e.new_var().unwrap();
    gil.lock().acquire(); // host ops cannot run: the "interpreter" is busy
    for i in 0..5 {
        e.op(format!("host {i}"))
            .writes(&[&v])
            .host()
            .run(|| {})
            .unwrap();
    }
    {
        let _guard = e.exit_guard();
    }
    assert_eq!(e.state(), State::Stopped);
    let calls = gil.calls();
    gil.set_finalizing(true);
    gil.lock().release();
    drop(e);
    assert_eq!(gil.calls_after_finalize(), 0);
    assert!(gil.calls() >= calls);
}

#[test]
fn default_engine_is_shared_and_not_replaced() {
    let a = forksafe::default_engine().unwrap();
    let b = forksafe::default_engine().unwrap();
    assert!(std::ptr::eq(a, b));
    assert!(matches!(
        forksafe::init_default(Config::default(), Box::new(forksafe::NoHost)),
        Err(Error::DefaultEngineStarted)
    ));
    let v = a.new_var().unwrap();
    a.op("default").writes(&[&v]).run(|| {}).unwrap();
    a.wait_for_var(&v).unwrap();
}

/// std::process::Command keeps working with engines busy, both through
/// posix_spawn and through fork+exec (pre_exec forces the fork path, so our
/// atfork handlers run).
#[test]
fn process_command_keeps_working() {
    use std::os::unix::process::CommandExt;
    let e = engine_with(2, 1);
    let v = e.new_var().unwrap();
    for _ in 0..50 {
        e.op("busy")
            .writes(&[&v])
            .run(|| std::thread::sleep(Duration::from_millis(1)))
            .unwrap();
    }
    let status = std::process::Command::new("true").status().unwrap();
    assert!(status.success());
    let mut cmd = std::process::Command::new("true");
    // SAFETY: the closure only returns Ok; it runs in the forked child.
    unsafe {
        cmd.pre_exec(|| Ok(()));
    }
    let before = forksafe::fork_epoch();
    assert!(cmd.status().unwrap().success());
    assert_eq!(
        forksafe::fork_epoch(),
        before,
        "the parent's epoch never moves"
    );
    e.wait_all().unwrap();
    assert_eq!(e.var_version(&v).unwrap(), 50);
}
