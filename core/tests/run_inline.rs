//! When a push runs its op inline (`Config::run_inline_from`; the rule,
//! docs/DESIGN.md "Running inline"): a ready compute op on its pusher's
//! thread, and never from inside an op, under the host lock, or on the
//! host lane.

use crate::support::{domain, spec, Job};
use forksafe_core::{Config, CoreEngine, Lane};
use forksafe_testkit::GilBridge;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

fn inline_engine(bridge: Option<Arc<GilBridge>>) -> CoreEngine<Job> {
    let config = Config {
        compute_workers: 2,
        run_inline_from: Some(0),
        ..Config::default()
    };
    match bridge {
        Some(b) => CoreEngine::with_bridge(domain(), config, Box::new(b)).unwrap(),
        None => CoreEngine::new(domain(), config).unwrap(),
    }
}

/// The thread an op's body ran on, filled in by the body.
fn ran_on() -> (
    Arc<Mutex<Option<ThreadId>>>,
    impl FnOnce() -> Result<(), String> + Send,
) {
    let cell = Arc::new(Mutex::new(None));
    let c = cell.clone();
    (cell, move || {
        *c.lock().unwrap() = Some(std::thread::current().id());
        Ok(())
    })
}

#[test]
fn a_ready_compute_op_runs_on_its_pusher() {
    let e = inline_engine(None);
    let (thread, body) = ran_on();
    e.push(spec(body)).unwrap();
    e.wait_all().unwrap();
    assert_eq!(*thread.lock().unwrap(), Some(std::thread::current().id()));
}

#[test]
fn a_host_op_never_runs_on_its_pusher() {
    let e = inline_engine(None);
    let (thread, body) = ran_on();
    e.push(spec(body).lane(Lane::Host)).unwrap();
    e.wait_all().unwrap();
    assert_ne!(*thread.lock().unwrap(), Some(std::thread::current().id()));
}

/// A push from inside a body never runs its op on that thread: the inner
/// body would run nested inside the outer one.
#[test]
fn a_push_from_inside_an_op_never_runs_it_inline() {
    let e = Arc::new(inline_engine(None));
    let outer = Arc::new(Mutex::new(None));
    let inner = Arc::new(Mutex::new(None));
    let (e2, outer2, inner2) = (e.clone(), outer.clone(), inner.clone());
    e.push(spec(move || {
        *outer2.lock().unwrap() = Some(std::thread::current().id());
        let (cell, body) = ran_on();
        e2.push(spec(body)).unwrap();
        *inner2.lock().unwrap() = Some(cell);
        Ok(())
    }))
    .unwrap();
    e.wait_all().unwrap();
    let outer = outer.lock().unwrap().expect("the outer op ran");
    let inner = inner
        .lock()
        .unwrap()
        .clone()
        .expect("the inner op was pushed");
    let inner = inner.lock().unwrap().expect("the inner op ran");
    assert_ne!(inner, outer, "the inner body ran nested in the outer one");
}

/// A pusher that holds the host lock never runs a compute body itself (a
/// compute body must not hold it).
#[test]
fn a_pusher_holding_the_host_lock_never_runs_inline() {
    let gil = Arc::new(GilBridge::new());
    let e = inline_engine(Some(gil.clone()));
    let (thread, body) = ran_on();
    gil.lock().acquire();
    e.push(spec(body)).unwrap();
    gil.lock().release();
    e.wait_all().unwrap();
    assert_ne!(*thread.lock().unwrap(), Some(std::thread::current().id()));
}
