//! Basic behaviour on real threads.

use crate::support::{job, Job};
use forksafe_core::{
    CompletionToken, Config, CoreEngine, Error, ForkDomain, OpErrorKind, OpSpec, MAX_OP_VARS,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn engine() -> CoreEngine<Job> {
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    CoreEngine::new(domain, Config::default()).unwrap()
}

#[test]
fn writes_apply_in_push_order() {
    let e = engine();
    let v = e.new_var().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    for i in 0..200 {
        let log = log.clone();
        e.push(
            OpSpec::new(job(move || {
                log.lock().unwrap().push(i);
                Ok(())
            }))
            .writes(std::slice::from_ref(&v)),
        )
        .unwrap();
    }
    e.wait_for_var(&v).unwrap();
    assert_eq!(*log.lock().unwrap(), (0..200).collect::<Vec<_>>());
    assert_eq!(e.var_version(&v).unwrap(), 200);
    e.wait_all().unwrap();
}

/// `wait_all_timeout` lists exactly the ops still pending below its limit
/// (names included), and returns once they are done: the wait checks only
/// whether any is left, and builds the list only for the report.
#[test]
fn wait_all_timeout_lists_what_is_left() {
    let e = engine();
    let vars: Vec<_> = (0..40).map(|_| e.new_var().unwrap()).collect();
    let slot: Arc<Mutex<Option<CompletionToken<Job>>>> = Arc::new(Mutex::new(None));
    let s = slot.clone();
    let held = e
        .push(
            OpSpec::new(Job(Box::new(move |t| {
                *s.lock().unwrap() = t;
                Ok(())
            })))
            .name("held")
            .writes(std::slice::from_ref(&vars[0]))
            .asynchronous(),
        )
        .unwrap();
    // Ops behind the held one on its var, and ops on other vars that
    // complete: ids spread over every shard of the live index.
    let mut behind = vec![held];
    for (i, v) in vars.iter().enumerate() {
        let spec = OpSpec::new(job(|| Ok(()))).name("behind");
        let id = e.push(spec.writes(std::slice::from_ref(&vars[0]))).unwrap();
        behind.push(id);
        if i > 0 {
            e.push(OpSpec::new(job(|| Ok(()))).writes(std::slice::from_ref(v)))
                .unwrap();
        }
    }
    let Err(Error::Timeout { pending }) = e.wait_all_timeout(Duration::from_millis(50)) else {
        panic!("wait_all returned with an async op pending");
    };
    let ids: Vec<u64> = pending.iter().map(|i| i.id).collect();
    assert_eq!(ids, behind);
    assert_eq!(pending[0].name, "held");
    assert!(pending[1..].iter().all(|i| i.name == "behind"));
    let token = loop {
        if let Some(t) = slot.lock().unwrap().take() {
            break t;
        }
        std::thread::yield_now();
    };
    token.complete(Ok(())).unwrap();
    e.wait_all_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(e.pending().unwrap(), 0);
}

#[test]
fn failure_poisons_and_propagates_until_cleared() {
    let e = engine();
    let a = e.new_var().unwrap();
    let b = e.new_var().unwrap();
    e.push(
        OpSpec::new(job(|| Err("boom".into())))
            .writes(std::slice::from_ref(&a))
            .name("bad"),
    )
    .unwrap();
    let ran = Arc::new(AtomicU64::new(0));
    let r = ran.clone();
    e.push(
        OpSpec::new(job(move || {
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }))
        .reads(std::slice::from_ref(&a))
        .writes(std::slice::from_ref(&b)),
    )
    .unwrap();
    let err = e.wait_for_var(&b).unwrap_err();
    match err {
        Error::Poisoned(e) => {
            assert_eq!(e.op().name, "bad");
            assert_eq!(e.kind(), &OpErrorKind::Failed("boom".into()));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert!(matches!(e.wait_for_var(&a), Err(Error::Poisoned(_))));
    match e.wait_all() {
        Err(Error::OpsFailed(errs)) => assert_eq!(errs.len(), 1),
        other => panic!("{other:?}"),
    }
    e.wait_all().unwrap();
    e.clear_poison(&a).unwrap();
    e.wait_for_var(&a).unwrap();
}

#[test]
fn async_token_and_bad_input() {
    let e = engine();
    let v = e.new_var().unwrap();
    let slot: Arc<Mutex<Option<CompletionToken<Job>>>> = Arc::new(Mutex::new(None));
    let s = slot.clone();
    e.push(
        OpSpec::new(Job(Box::new(move |t| {
            *s.lock().unwrap() = t;
            Ok(())
        })))
        .writes(std::slice::from_ref(&v))
        .asynchronous(),
    )
    .unwrap();
    assert!(matches!(
        e.wait_for_var_timeout(&v, Duration::from_millis(50)),
        Err(Error::Timeout { .. })
    ));
    let token = loop {
        if let Some(t) = slot.lock().unwrap().take() {
            break t;
        }
        std::thread::yield_now();
    };
    token.complete(Ok(())).unwrap();
    assert_eq!(token.complete(Ok(())), Err(Error::AlreadyCompleted));
    e.wait_for_var(&v).unwrap();

    assert_eq!(
        e.push(
            OpSpec::new(job(|| Ok(())))
                .reads(std::slice::from_ref(&v))
                .writes(std::slice::from_ref(&v))
        )
        .unwrap_err(),
        Error::DuplicateVar
    );
    let other = engine();
    let w = other.new_var().unwrap();
    assert_eq!(
        e.push(OpSpec::new(job(|| Ok(()))).writes(&[w]))
            .unwrap_err(),
        Error::ForeignVar
    );
    e.delete_var(&v).unwrap();
    assert_eq!(
        e.push(OpSpec::new(job(|| Ok(()))).writes(std::slice::from_ref(&v)))
            .unwrap_err(),
        Error::DeletedVar
    );
    e.shutdown(Duration::from_secs(1)).unwrap();
    assert_eq!(
        e.push(OpSpec::new(job(|| Ok(())))).unwrap_err(),
        Error::ShutDown
    );
}

#[test]
fn dropped_token_completes_with_error() {
    let e = engine();
    let v = e.new_var().unwrap();
    e.push(
        OpSpec::new(Job(Box::new(|t| {
            drop(t);
            Ok(())
        })))
        .writes(std::slice::from_ref(&v))
        .asynchronous(),
    )
    .unwrap();
    match e.wait_for_var(&v) {
        Err(Error::Poisoned(err)) => assert_eq!(err.kind(), &OpErrorKind::TokenDropped),
        other => panic!("{other:?}"),
    }
}

#[test]
fn wait_inside_op_with_one_worker() {
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    let e = Arc::new(
        CoreEngine::<Job>::new(
            domain,
            Config {
                compute_workers: 1,
                ..Config::default()
            },
        )
        .unwrap(),
    );
    let a = e.new_var().unwrap();
    let b = e.new_var().unwrap();
    e.push(OpSpec::new(job(|| Ok(()))).writes(std::slice::from_ref(&a)))
        .unwrap();
    let e2 = e.clone();
    let (a2, b2) = (a.clone(), b.clone());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    e.push(
        OpSpec::new(job(move || {
            s.lock()
                .unwrap()
                .push(format!("{:?}", e2.wait_for_var(&a2)));
            let own = match e2.wait_for_var(&b2) {
                Err(Error::WaitOnSelf { op, on, .. }) if op.id == on.id => "Err(WaitOnSelf)".into(),
                other => format!("{other:?}"),
            };
            s.lock().unwrap().push(own);
            s.lock().unwrap().push(format!("{:?}", e2.wait_all()));
            Ok(())
        }))
        .writes(std::slice::from_ref(&b)),
    )
    .unwrap();
    e.wait_all().unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec!["Ok(())", "Err(WaitOnSelf)", "Ok(())"]
    );
}

#[test]
fn quiesce_holds_dispatch_and_pushes_are_deferred() {
    let e = engine();
    let v = e.new_var().unwrap();
    let ran = Arc::new(AtomicU64::new(0));
    let g = e.quiesce(Duration::from_secs(5)).unwrap();
    let r = ran.clone();
    e.push(
        OpSpec::new(job(move || {
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }))
        .writes(std::slice::from_ref(&v)),
    )
    .unwrap();
    assert!(e
        .wait_for_var_timeout(&v, Duration::from_millis(30))
        .is_err());
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    drop(g);
    e.wait_for_var(&v).unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[test]
fn bad_input_is_a_typed_error_and_loses_nothing() {
    let e = engine();
    let v = e.new_var().unwrap();
    let ran = Arc::new(AtomicU64::new(0));
    let r = ran.clone();
    // An accepted op, still queued behind a quiesce while the bad calls come.
    let g = e.quiesce(Duration::from_secs(5)).unwrap();
    e.push(
        OpSpec::new(job(move || {
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }))
        .writes(std::slice::from_ref(&v)),
    )
    .unwrap();
    let twice = OpSpec::new(job(|| Ok(()))).writes(&[v.clone(), v.clone()]);
    assert_eq!(e.push(twice).unwrap_err(), Error::DuplicateVar);
    // The most vars one op may name is accepted; one more is refused.
    let many: Vec<_> = (0..=MAX_OP_VARS).map(|_| e.new_var().unwrap()).collect();
    let (most, last) = many.split_at(MAX_OP_VARS);
    let over = OpSpec::new(job(|| Ok(()))).reads(most).writes(last);
    assert_eq!(e.push(over).unwrap_err(), Error::TooManyVars);
    e.push(
        OpSpec::new(job(|| Ok(())))
            .reads(&most[1..])
            .writes(&most[..1]),
    )
    .unwrap();
    // A handle's var is not counted: the most vars and a handle's fit.
    e.push(
        OpSpec::new(job(|| Ok(())))
            .reads(&most[1..])
            .writes(&most[..1])
            .handle_var(last[0].clone()),
    )
    .unwrap();
    assert_eq!(
        e.wait_all_timeout(Duration::ZERO).unwrap_err(),
        Error::ZeroTimeout
    );
    assert_eq!(e.quiesce(Duration::ZERO).unwrap_err(), Error::ZeroTimeout);
    assert_eq!(e.shutdown(Duration::ZERO).unwrap_err(), Error::ZeroTimeout);
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    let bad = [
        Config {
            max_pending: Some(0),
            ..Config::default()
        },
        // std would panic starting a worker with this name.
        Config {
            thread_name: "a\0b".into(),
            ..Config::default()
        },
        Config {
            worker_stack_size: Some(0),
            ..Config::default()
        },
        Config {
            thread_name: String::new(),
            ..Config::default()
        },
        Config {
            thread_name: "x".repeat(33),
            ..Config::default()
        },
    ];
    let longest = Config {
        thread_name: "x".repeat(32),
        ..Config::default()
    };
    assert_eq!(longest.validate(), Ok(()));
    for c in bad {
        assert!(
            matches!(
                CoreEngine::<Job>::new(domain, c.clone()),
                Err(Error::InvalidConfig(_))
            ),
            "{c:?}"
        );
    }
    drop(g);
    e.wait_all().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(e.var_version(&v).unwrap(), 1);
}

#[test]
fn try_push_reports_full_at_the_bound() {
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    let config = Config {
        max_pending: Some(2),
        ..Config::default()
    };
    let e = CoreEngine::<Job>::new(domain, config).unwrap();
    let g = e.quiesce(Duration::from_secs(5)).unwrap();
    e.try_push(OpSpec::new(job(|| Ok(())))).unwrap();
    e.try_push(OpSpec::new(job(|| Ok(())))).unwrap();
    assert_eq!(
        e.try_push(OpSpec::new(job(|| Ok(())))).unwrap_err(),
        Error::Full
    );
    drop(g);
    e.wait_all().unwrap();
    e.try_push(OpSpec::new(job(|| Ok(())))).unwrap();
    e.wait_all().unwrap();
}
