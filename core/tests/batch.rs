//! Batch pushes (`CoreEngine::push_batch`): each spec's result in its
//! place, push order on every var, runs of ready ops that reach the
//! workers, the pending bound (waiting outside the section, never from
//! inside an op, `fail_if_full`), shutdown, and ops run inline. The engine
//! crate's builder side is `engine/tests/batch.rs`.

use crate::support::{domain, engine_with, spec, Job};
use forksafe_core::{Config, CoreEngine, Error, Lane, OpSpec, Var};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn engine(config: Config) -> CoreEngine<Job> {
    CoreEngine::new(domain(), config).unwrap()
}

/// `n` specs writing `var`, each logging its index.
fn logged(var: &Var<Job>, n: usize, log: &Arc<Mutex<Vec<usize>>>) -> Vec<OpSpec<Job>> {
    (0..n)
        .map(|i| {
            let log = log.clone();
            spec(move || {
                log.lock().unwrap().push(i);
                Ok(())
            })
            .writes(std::slice::from_ref(var))
        })
        .collect()
}

fn all_ok(results: &[Result<u64, Error>]) -> Vec<u64> {
    results.iter().map(|r| r.clone().unwrap()).collect()
}

#[test]
fn a_batch_runs_in_push_order_and_numbers_its_ops_in_order() {
    let e = engine_with(2);
    let v = e.new_var().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let before = e
        .push(spec(|| Ok(())).writes(std::slice::from_ref(&v)))
        .unwrap();
    let ids = all_ok(&e.push_batch(logged(&v, 700, &log)));
    assert_eq!(ids.len(), 700);
    assert!(ids[0] > before, "a batch's ids follow the pushes before it");
    assert!(ids.windows(2).all(|w| w[0] + 1 == w[1]), "consecutive ids");
    e.wait_for_var(&v).unwrap();
    assert_eq!(*log.lock().unwrap(), (0..700).collect::<Vec<_>>());
    assert_eq!(e.var_version(&v).unwrap(), 701);
}

/// Many ready ops at once (free vars, both lanes): every one of them is
/// queued and runs, whatever the runs they are queued in.
#[test]
fn every_ready_op_of_a_batch_runs_on_both_lanes() {
    let e = engine_with(2);
    let vars: Vec<Var<Job>> = (0..300).map(|_| e.new_var().unwrap()).collect();
    let ran = Arc::new(AtomicUsize::new(0));
    let specs = vars.iter().enumerate().map(|(i, v)| {
        let ran = ran.clone();
        let lane = if i % 5 == 0 {
            Lane::Host
        } else {
            Lane::Compute
        };
        spec(move || {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .writes(std::slice::from_ref(v))
        .lane(lane)
    });
    all_ok(&e.push_batch(specs));
    e.wait_all().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 300);
    assert_eq!(e.pending().unwrap(), 0);
}

#[test]
fn a_refused_spec_is_an_error_in_its_place_and_nothing_else_changes() {
    let e = engine_with(2);
    let other = engine_with(1);
    let (v, gone, foreign) = (
        e.new_var().unwrap(),
        e.new_var().unwrap(),
        other.new_var().unwrap(),
    );
    e.delete_var(&gone).unwrap();
    e.wait_all().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let good = || {
        let ran = ran.clone();
        spec(move || {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .writes(std::slice::from_ref(&v))
    };
    let specs = vec![
        good(),
        spec(|| Ok(())).writes(std::slice::from_ref(&foreign)),
        good(),
        spec(|| Ok(()))
            .reads(std::slice::from_ref(&v))
            .writes(std::slice::from_ref(&v)),
        spec(|| Ok(())).writes(std::slice::from_ref(&gone)),
        OpSpec::empty().writes(std::slice::from_ref(&v)),
        good(),
    ];
    let errors: Vec<Option<Error>> = e.push_batch(specs).into_iter().map(Result::err).collect();
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
    assert_eq!(ran.load(Ordering::SeqCst), 3);
    assert_eq!(e.var_version(&v).unwrap(), 3);
    assert_eq!(e.pending().unwrap(), 0);
}

#[test]
fn check_refuses_what_push_refuses_and_pushes_nothing() {
    let e = engine_with(1);
    let other = engine_with(1);
    let (v, w) = (e.new_var().unwrap(), other.new_var().unwrap());
    let twice = spec(|| Ok(()))
        .reads(std::slice::from_ref(&v))
        .writes(std::slice::from_ref(&v));
    assert_eq!(e.check(&twice), Err(Error::DuplicateVar));
    let foreign = spec(|| Ok(())).writes(std::slice::from_ref(&w));
    assert_eq!(e.check(&foreign), Err(Error::ForeignVar));
    assert_eq!(e.check(&OpSpec::empty()), Err(Error::NoPayload));
    let fine = spec(|| Ok(())).writes(std::slice::from_ref(&v));
    assert_eq!(e.check(&fine), Ok(()));
    assert_eq!(e.pending().unwrap(), 0);
    assert_eq!(e.var_version(&v).unwrap(), 0);
    e.shutdown(Duration::from_secs(1)).unwrap();
    assert_eq!(e.check(&fine), Err(Error::ShutDown));
}

#[test]
fn a_batch_longer_than_the_pending_bound_waits_for_room() {
    let e = engine(Config {
        compute_workers: 2,
        max_pending: Some(3),
        ..Config::default()
    });
    let v = e.new_var().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    all_ok(&e.push_batch(logged(&v, 200, &log)));
    e.wait_for_var(&v).unwrap();
    assert_eq!(*log.lock().unwrap(), (0..200).collect::<Vec<_>>());
    assert_eq!(e.pending().unwrap(), 0);
}

#[test]
fn fail_if_full_specs_fail_at_the_bound_and_the_others_wait() {
    let e = engine(Config {
        compute_workers: 1,
        max_pending: Some(2),
        ..Config::default()
    });
    let v = e.new_var().unwrap();
    let guard = e.quiesce(Duration::from_secs(5)).unwrap();
    let full = || {
        spec(|| Ok(()))
            .writes(std::slice::from_ref(&v))
            .fail_if_full()
    };
    let errors: Vec<Option<Error>> = e
        .push_batch(vec![full(), full(), full(), full()])
        .into_iter()
        .map(Result::err)
        .collect();
    assert_eq!(
        errors,
        vec![None, None, Some(Error::Full), Some(Error::Full)]
    );
    assert_eq!(e.pending().unwrap(), 2);
    assert_eq!(e.try_push(full()), Err(Error::Full));
    drop(guard);
    e.wait_for_var(&v).unwrap();
    assert_eq!(e.var_version(&v).unwrap(), 2);
    // With room again, a plain spec of a batch waits for it: all four go in.
    let log = Arc::new(Mutex::new(Vec::new()));
    all_ok(&e.push_batch(logged(&v, 4, &log)));
    e.wait_for_var(&v).unwrap();
    assert_eq!(*log.lock().unwrap(), vec![0, 1, 2, 3]);
}

/// The inner ops read a var the outer op writes, so none of them can
/// complete while the batch goes in: the outer op holds one place, two
/// inner ops take the others, the last two get `Full` at once.
#[test]
fn a_batch_from_inside_an_op_gets_full_past_the_bound() {
    let e = Arc::new(engine(Config {
        compute_workers: 2,
        max_pending: Some(3),
        ..Config::default()
    }));
    let (held, v) = (e.new_var().unwrap(), e.new_var().unwrap());
    let out = Arc::new(Mutex::new(Vec::new()));
    let (e2, held2, v2, out2) = (e.clone(), held.clone(), v.clone(), out.clone());
    e.push(
        spec(move || {
            let specs = (0..4).map(|_| {
                spec(|| Ok(()))
                    .reads(std::slice::from_ref(&held2))
                    .writes(std::slice::from_ref(&v2))
            });
            *out2.lock().unwrap() = e2.push_batch(specs).into_iter().map(Result::err).collect();
            Ok(())
        })
        .writes(std::slice::from_ref(&held)),
    )
    .unwrap();
    e.wait_all().unwrap();
    let errors = out.lock().unwrap().clone();
    assert_eq!(
        errors,
        vec![None, None, Some(Error::Full), Some(Error::Full)]
    );
    assert_eq!(e.var_version(&v).unwrap(), 2);
}

#[test]
fn a_batch_after_shutdown_is_refused_in_every_place() {
    let e = engine_with(1);
    let v = e.new_var().unwrap();
    e.shutdown(Duration::from_secs(1)).unwrap();
    let specs = (0..3).map(|_| spec(|| Ok(())).writes(std::slice::from_ref(&v)));
    assert_eq!(e.push_batch(specs), vec![Err(Error::ShutDown); 3]);
}

/// Every op on a free var is ready at its push: the pusher runs each
/// inline, in push order, and the ops on one var still run in order.
#[test]
fn a_batch_runs_its_ops_inline_in_order() {
    let e = engine(Config {
        compute_workers: 2,
        run_inline_from: Some(0),
        ..Config::default()
    });
    let v = e.new_var().unwrap();
    let free: Vec<Var<Job>> = (0..50).map(|_| e.new_var().unwrap()).collect();
    let log = Arc::new(Mutex::new(Vec::new()));
    let here = Arc::new(Mutex::new(Vec::new()));
    let me = std::thread::current().id();
    let mut specs = logged(&v, 50, &log);
    specs.extend(free.iter().enumerate().map(|(i, f)| {
        let here = here.clone();
        spec(move || {
            if std::thread::current().id() == me {
                here.lock().unwrap().push(i);
            }
            Ok(())
        })
        .writes(std::slice::from_ref(f))
    }));
    all_ok(&e.push_batch(specs));
    e.wait_all().unwrap();
    assert_eq!(*log.lock().unwrap(), (0..50).collect::<Vec<_>>());
    let here = here.lock().unwrap().clone();
    assert_eq!(
        here,
        (0..50).collect::<Vec<_>>(),
        "each free op ran inline, in order"
    );
}

/// The ops of a batch keep their lanes through the runs they are queued
/// in: host bodies run with the host lock, compute bodies without it.
#[test]
fn a_mixed_batch_runs_each_op_on_its_own_lane() {
    use forksafe_core::HostBridge;
    use forksafe_testkit::GilBridge;
    let gil = Arc::new(GilBridge::new());
    let config = Config {
        compute_workers: 2,
        host_workers: 1,
        ..Config::default()
    };
    let e = CoreEngine::with_bridge(domain(), config, Box::new(gil.clone())).unwrap();
    let wrong = Arc::new(AtomicUsize::new(0));
    for round in 0..20 {
        let vars: Vec<Var<Job>> = (0..40).map(|_| e.new_var().unwrap()).collect();
        let specs = vars.iter().enumerate().map(|(i, v)| {
            let host = (i + round) % 3 == 0;
            let (gil, wrong) = (gil.clone(), wrong.clone());
            let lane = if host { Lane::Host } else { Lane::Compute };
            spec(move || {
                if gil.holds_host_lock() != host {
                    wrong.fetch_add(1, Ordering::SeqCst);
                }
                Ok(())
            })
            .writes(std::slice::from_ref(v))
            .lane(lane)
        });
        all_ok(&e.push_batch(specs));
        e.wait_all().unwrap();
    }
    assert_eq!(
        wrong.load(Ordering::SeqCst),
        0,
        "a body ran on the other lane"
    );
}
