//! Batch pushes (`push_batch`): each spec's result in its place, var order
//! as single pushes give it, the pending bound, shutdown and inline runs
//! (a batch across a fork: tests/fork.rs, `batch_pending_at_fork`).

use forksafe::{Config, CoreConfig, Engine, Error, Lane, OpSpec, Var};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn engine(core: CoreConfig) -> Engine {
    Engine::new(Config {
        core,
        ..Config::default()
    })
    .unwrap()
}

fn workers(compute: usize) -> CoreConfig {
    CoreConfig {
        compute_workers: compute,
        host_workers: 1,
        ..CoreConfig::default()
    }
}

/// `n` specs writing `var` that log their index, in push order.
fn logged(e: &Engine, var: &Var, n: usize, log: &Arc<Mutex<Vec<usize>>>) -> Vec<OpSpec> {
    (0..n)
        .map(|i| {
            let log = log.clone();
            e.op("logged")
                .writes(&[var])
                .into_spec(move || log.lock().unwrap().push(i))
        })
        .collect()
}

#[test]
fn a_batch_runs_in_push_order_on_each_var() {
    let e = engine(workers(4));
    let v = e.new_var().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let ids = e.push_batch(logged(&e, &v, 1000, &log));
    let ids: Vec<u64> = ids.into_iter().map(Result::unwrap).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ids rise in batch order"
    );
    e.wait_for_var(&v).unwrap();
    assert_eq!(*log.lock().unwrap(), (0..1000).collect::<Vec<_>>());
    assert_eq!(e.var_version(&v).unwrap(), 1000);
}

#[test]
fn independent_ops_of_a_batch_all_run_on_both_lanes() {
    let e = engine(workers(2));
    let vars: Vec<Var> = (0..64).map(|_| e.new_var().unwrap()).collect();
    let ran = Arc::new(AtomicUsize::new(0));
    let specs = (0..5000).map(|i| {
        let ran = ran.clone();
        let lane = if i % 7 == 0 {
            Lane::Host
        } else {
            Lane::Compute
        };
        e.op("indep")
            .writes(&[&vars[i % vars.len()]])
            .lane(lane)
            .into_spec(move || {
                ran.fetch_add(1, Ordering::Relaxed);
            })
    });
    assert!(e.push_batch(specs).iter().all(Result::is_ok));
    e.wait_all().unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), 5000);
    let versions: u64 = vars.iter().map(|v| e.var_version(v).unwrap()).sum();
    assert_eq!(versions, 5000);
}

#[test]
fn a_refused_spec_is_an_error_in_its_place_and_the_rest_run() {
    let e = engine(workers(2));
    let other = engine(workers(1));
    let (v, gone, foreign) = (
        e.new_var().unwrap(),
        e.new_var().unwrap(),
        other.new_var().unwrap(),
    );
    e.delete_var(&gone).unwrap();
    e.wait_all().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let good = |ran: &Arc<AtomicUsize>| {
        let ran = ran.clone();
        e.op("good").writes(&[&v]).into_spec(move || {
            ran.fetch_add(1, Ordering::Relaxed);
        })
    };
    let specs = vec![
        good(&ran),
        e.op("foreign").writes(&[&foreign]).into_spec(|| {}),
        good(&ran),
        e.op("twice").reads(&[&v]).writes(&[&v]).into_spec(|| {}),
        e.op("deleted").writes(&[&gone]).into_spec(|| {}),
        OpSpec::empty().writes(std::slice::from_ref(&v)),
        good(&ran),
    ];
    let results = e.push_batch(specs);
    let errors: Vec<Option<Error>> = results.iter().map(|r| r.clone().err()).collect();
    assert_eq!(
        errors,
        vec![
            None,
            Some(Error::ForeignVar),
            None,
            Some(Error::DuplicateVar),
            Some(Error::DeletedVar),
            Some(Error::NoPayload),
            None,
        ]
    );
    e.wait_for_var(&v).unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), 3);
    assert_eq!(e.var_version(&v).unwrap(), 3);
    assert_eq!(e.pending().unwrap(), 0);
}

#[test]
fn a_batch_longer_than_the_pending_bound_waits_for_room() {
    let e = engine(CoreConfig {
        max_pending: Some(4),
        ..workers(2)
    });
    let v = e.new_var().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let results = e.push_batch(logged(&e, &v, 300, &log));
    assert!(results.iter().all(Result::is_ok));
    e.wait_for_var(&v).unwrap();
    assert_eq!(*log.lock().unwrap(), (0..300).collect::<Vec<_>>());
}

#[test]
fn fail_if_full_specs_of_a_batch_fail_at_the_bound() {
    let e = engine(CoreConfig {
        max_pending: Some(3),
        ..workers(1)
    });
    let v = e.new_var().unwrap();
    let guard = e.quiesce(Duration::from_secs(5)).unwrap();
    let specs = (0..5).map(|_| e.op("f").writes(&[&v]).fail_if_full().into_spec(|| {}));
    let errors: Vec<Option<Error>> = e.push_batch(specs).into_iter().map(Result::err).collect();
    assert_eq!(
        errors,
        vec![None, None, None, Some(Error::Full), Some(Error::Full)]
    );
    assert_eq!(e.pending().unwrap(), 3);
    drop(guard);
    e.wait_for_var(&v).unwrap();
    assert_eq!(e.var_version(&v).unwrap(), 3);
}

#[test]
fn a_batch_from_inside_an_op_never_waits_at_the_bound() {
    let e = Arc::new(engine(CoreConfig {
        max_pending: Some(3),
        ..workers(2)
    }));
    let v = e.new_var().unwrap();
    let outcome = Arc::new(Mutex::new(Vec::new()));
    let (e2, v2, out) = (e.clone(), v.clone(), outcome.clone());
    e.op("outer")
        .run(move || {
            let specs = (0..4).map(|_| e2.op("inner").writes(&[&v2]).into_spec(|| {}));
            let guard = e2.quiesce(Duration::from_secs(5));
            *out.lock().unwrap() = e2.push_batch(specs).into_iter().map(Result::err).collect();
            drop(guard);
        })
        .unwrap();
    e.wait_all().unwrap();
    let errors = outcome.lock().unwrap().clone();
    // The outer op holds one place; two are free, then the bound is met.
    assert_eq!(errors.len(), 4);
    assert_eq!(&errors[..2], &[None, None]);
    assert!(
        errors[2..].iter().all(|e| *e == Some(Error::Full)),
        "{errors:?}"
    );
}

#[test]
fn a_batch_after_shutdown_is_refused_op_by_op() {
    let e = engine(workers(1));
    let v = e.new_var().unwrap();
    e.shutdown(Duration::from_secs(1)).unwrap();
    let specs = (0..3).map(|_| e.op("late").writes(&[&v]).into_spec(|| {}));
    let results = e.push_batch(specs);
    assert_eq!(results, vec![Err(Error::ShutDown); 3]);
}

#[test]
fn a_batch_runs_inline_ops_in_order() {
    let e = engine(CoreConfig {
        run_inline_from: Some(0),
        ..workers(2)
    });
    let v = e.new_var().unwrap();
    let free: Vec<Var> = (0..100).map(|_| e.new_var().unwrap()).collect();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut specs = logged(&e, &v, 100, &log);
    let inline_here = Arc::new(AtomicUsize::new(0));
    let me = std::thread::current().id();
    specs.extend(free.iter().map(|f| {
        let inline_here = inline_here.clone();
        e.op("free").writes(&[f]).into_spec(move || {
            if std::thread::current().id() == me {
                inline_here.fetch_add(1, Ordering::Relaxed);
            }
        })
    }));
    assert!(e.push_batch(specs).iter().all(Result::is_ok));
    e.wait_all().unwrap();
    assert_eq!(*log.lock().unwrap(), (0..100).collect::<Vec<_>>());
    // Ops on free vars are ready at once: the pusher runs them itself.
    assert!(inline_here.load(Ordering::Relaxed) > 0);
}
