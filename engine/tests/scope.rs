//! Scoped ops on real threads: borrows from the caller's stack, the wait
//! for every op (errors and panics included), and what a scope refuses.

use forksafe::{Config, CoreConfig, Engine, Error, OpErrorKind};
use std::sync::mpsc;
use std::time::Duration;

fn engine() -> Engine {
    Engine::new(Config {
        core: CoreConfig {
            compute_workers: 2,
            ..CoreConfig::default()
        },
        ..Config::default()
    })
    .expect("engine")
}

#[test]
fn scoped_ops_borrow_the_stack_and_the_scope_waits_for_them() {
    let e = engine();
    let data: Vec<u64> = (1..=1000).collect();
    let mut halves = [0_u64; 2];
    let (lo, hi) = halves.split_at_mut(1);
    let v = e.new_var().unwrap();
    e.scope(|s| {
        let (data, lo, hi) = (&data, &mut lo[0], &mut hi[0]);
        s.op("low")
            .run(move |_| *lo = data[..500].iter().sum())
            .unwrap();
        s.op("high")
            .writes(&[&v])
            .run(move |_| {
                // Slow on purpose: the scope must wait, not the test.
                std::thread::sleep(Duration::from_millis(20));
                *hi = data[500..].iter().sum();
            })
            .unwrap();
    })
    .unwrap();
    assert_eq!(halves[0] + halves[1], 500_500);
}

#[test]
fn data_vars_work_inside_a_scope() {
    let e = engine();
    let d = e.data(vec![1, 2, 3]).unwrap();
    let mut total = 0;
    e.scope(|s| {
        let (d, total) = (&d, &mut total);
        s.op("sum")
            .reads(&[d.var()])
            .run(move |acc| *total = acc.read(d).unwrap().iter().sum())
            .unwrap();
    })
    .unwrap();
    assert_eq!(total, 6);
}

#[test]
fn a_failing_scoped_op_is_reported_by_the_scope_after_the_others_finish() {
    let e = engine();
    let mut after = false;
    let r = e.scope(|s| {
        let after = &mut after;
        s.op("boom").run(|_| panic!("scoped boom")).unwrap();
        s.op("slow")
            .run(move |_| {
                std::thread::sleep(Duration::from_millis(20));
                *after = true;
            })
            .unwrap();
        7
    });
    match r {
        Err(Error::OpsFailed(errs)) => {
            assert_eq!(errs.len(), 1);
            assert_eq!(errs[0].op().name, "boom");
            assert!(matches!(errs[0].kind(), OpErrorKind::Panicked(_)));
        }
        other => panic!("scope gave {other:?}"),
    }
    assert!(after, "the scope returned before its other op finished");
}

#[test]
fn a_panic_in_the_scope_closure_waits_for_the_ops_then_resumes() {
    let e = engine();
    let (tx, rx) = mpsc::channel();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        e.scope(|s| {
            let tx = &tx;
            s.op("sends")
                .run(move |_| {
                    std::thread::sleep(Duration::from_millis(20));
                    tx.send(1).unwrap();
                })
                .unwrap();
            panic!("closure gives up");
        })
    }));
    assert!(caught.is_err());
    assert_eq!(
        rx.try_recv(),
        Ok(1),
        "the op finished before the panic resumed"
    );
}

#[test]
fn a_scope_inside_an_op_is_refused() {
    let e = std::sync::Arc::new(engine());
    let inner = e.clone();
    let (tx, rx) = mpsc::channel();
    e.op("outer")
        .run(move || {
            let r = inner.scope(|_| ()).err();
            tx.send(r).unwrap();
        })
        .unwrap();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(30)).unwrap(),
        Some(Error::ScopeInsideOp)
    );
}

#[test]
fn ops_cancelled_by_shutdown_are_waited_for_and_reported() {
    let e = Engine::new(Config {
        core: CoreConfig {
            compute_workers: 1,
            ..CoreConfig::default()
        },
        ..Config::default()
    })
    .unwrap();
    let (go, wait) = mpsc::channel::<()>();
    let blocker = e.op("blocker").run(move || {
        let _ = wait.recv();
    });
    blocker.unwrap();
    let mut touched = false;
    let r = e.scope(|s| {
        let touched = &mut touched;
        s.op("queued").run(move |_| *touched = true).unwrap();
        // The queued op is cancelled at the deadline; the blocker runs on.
        e.shutdown(Duration::from_millis(1)).unwrap();
        let _ = go.send(());
    });
    match r {
        Err(Error::OpsFailed(errs)) => {
            assert_eq!(errs.len(), 1);
            assert_eq!(errs[0].op().name, "queued");
            assert_eq!(errs[0].kind(), &OpErrorKind::Cancelled);
        }
        other => panic!("scope gave {other:?}"),
    }
    assert!(!touched, "a cancelled op ran");
}
