//! Batch pushes from the op builder: specs from `into_spec`,
//! `into_try_spec` and `into_async_spec` keep every builder setting. What a
//! batch does (order, refusals in place, the bound, shutdown, inline runs)
//! is core's: `core/tests/batch.rs`; a batch across a fork is
//! tests/fork.rs, `batch_pending_at_fork`.

use forksafe::{Config, CoreConfig, Engine, Error, OpSpec, Priority, Var};
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

#[test]
fn sync_failing_and_async_specs_run_in_order_as_built() {
    let e = engine(workers(2));
    let (v, w) = (e.new_var().unwrap(), e.new_var().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let note = |label: &'static str| {
        let log = log.clone();
        move || log.lock().unwrap().push(label)
    };
    let (a, b, c) = (note("sync"), note("async"), note("host"));
    let specs: Vec<OpSpec> = vec![
        e.op("sync").writes(&[&v]).into_spec(a),
        e.op("async").writes(&[&v]).into_async_spec(move |token| {
            b();
            token.complete(Ok(())).unwrap();
        }),
        e.op("host")
            .writes(&[&v])
            .host()
            .priority(Priority::High)
            .into_spec(c),
        e.op("fails")
            .writes(&[&w])
            .into_try_spec(|| Err(std::io::Error::other("no disk"))),
    ];
    assert!(e.push_batch(specs).iter().all(Result::is_ok));
    e.wait_for_var(&v).unwrap();
    assert_eq!(*log.lock().unwrap(), vec!["sync", "async", "host"]);
    let Err(Error::Poisoned(err)) = e.wait_for_var(&w) else {
        panic!("the failing spec poisons what it writes")
    };
    let io = err
        .body_error()
        .and_then(|b| b.downcast_ref::<std::io::Error>());
    assert_eq!(io.map(|io| io.to_string()), Some("no disk".to_string()));
}

#[test]
fn independent_builder_specs_all_run_on_both_lanes() {
    let e = engine(workers(2));
    let vars: Vec<Var> = (0..64).map(|_| e.new_var().unwrap()).collect();
    let ran = Arc::new(AtomicUsize::new(0));
    let specs = (0..3000).map(|i| {
        let ran = ran.clone();
        let op = e.op("indep").writes(&[&vars[i % vars.len()]]);
        let op = if i % 7 == 0 { op.host() } else { op };
        op.into_spec(move || {
            ran.fetch_add(1, Ordering::Relaxed);
        })
    });
    assert!(e.push_batch(specs).iter().all(Result::is_ok));
    e.wait_all().unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), 3000);
    let versions: u64 = vars.iter().map(|v| e.var_version(v).unwrap()).sum();
    assert_eq!(versions, 3000);
}

#[test]
fn the_builders_fail_if_full_reaches_the_batch() {
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
    drop(guard);
    e.wait_for_var(&v).unwrap();
    assert_eq!(e.var_version(&v).unwrap(), 3);
}
