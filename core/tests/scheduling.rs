//! Dispatch order across priority bands with the starvation bound, and
//! what a shutdown reports about queued and running ops (I8). Found by the
//! full mutation run (FORK-SAFETY.md, "Mutation testing").

use crate::support::{
    engine_with, push_blocker, push_blocker_on, sets, spec as job, wait_until, Job,
};
use forksafe_core::{CoreEngine, Priority, STARVATION_LIMIT};
use forksafe_testkit::GilBridge;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn one_worker() -> CoreEngine<Job> {
    engine_with(1)
}

/// Higher bands first, FIFO within a band, and a waiting low op is
/// dispatched after `STARVATION_LIMIT` dispatches from above.
#[test]
fn priority_bands_dispatch_in_order_with_the_starvation_bound() {
    let e = one_worker();
    let v = e.new_var().unwrap();
    let go = Arc::new(AtomicBool::new(false));
    push_blocker_on(&e, &go, std::slice::from_ref(&v));
    let order: Arc<Mutex<Vec<String>>> = Arc::default();
    let op = |label: String, priority: Priority| {
        let order = order.clone();
        job(move || {
            order.lock().unwrap().push(label);
            Ok(())
        })
        .priority(priority)
    };
    let push = |label: String, priority: Priority| {
        e.push(op(label, priority)).unwrap();
    };
    // Ready only when the blocker completes: queued behind the others, even
    // though the worker that completes the blocker could take it at once.
    e.push(op("D".into(), Priority::Normal).reads(std::slice::from_ref(&v)))
        .unwrap();
    let highs = STARVATION_LIMIT as usize + 2;
    push("L1".into(), Priority::Low);
    push("N1".into(), Priority::Normal);
    push("N2".into(), Priority::Normal);
    for i in 1..=highs {
        push(format!("H{i}"), Priority::High);
    }
    go.store(true, Ordering::SeqCst);
    e.wait_all().unwrap();
    let mut expected: Vec<String> = (1..=STARVATION_LIMIT as usize)
        .map(|i| format!("H{i}"))
        .collect();
    // The streak bound lets the lowest waiting band (Low) through once.
    expected.push("L1".into());
    expected.extend((STARVATION_LIMIT as usize + 1..=highs).map(|i| format!("H{i}")));
    expected.extend(["N1".into(), "N2".into(), "D".into()]);
    assert_eq!(*order.lock().unwrap(), expected);
}

/// A shutdown whose deadline passes while an op runs cancels the queued
/// ops without running them and reports the running one as still running.
#[test]
fn shutdown_cancels_queued_ops_and_reports_the_running_one() {
    let e = one_worker();
    let go = Arc::new(AtomicBool::new(false));
    let running = push_blocker(&e, &go);
    let ran = Arc::new(AtomicBool::new(false));
    let queued = e.push(sets(&ran)).unwrap();
    let report = e.shutdown(Duration::from_millis(50)).unwrap();
    let ids = |infos: &[forksafe_core::OpInfo]| infos.iter().map(|i| i.id).collect::<Vec<_>>();
    assert_eq!(ids(&report.cancelled), vec![queued], "{report:?}");
    assert_eq!(ids(&report.still_running), vec![running], "{report:?}");
    go.store(true, Ordering::SeqCst);
    // A second shutdown reports nothing more; the queued op never runs.
    assert_eq!(
        e.shutdown(Duration::from_secs(10)).unwrap(),
        Default::default()
    );
    assert!(!ran.load(Ordering::SeqCst));
}

/// A shutdown called outside any op returns only after a host op's body
/// has left the host bridge, even past its deadline (I8: no host code runs
/// once it returned).
#[test]
fn shutdown_waits_for_a_host_body_to_leave_the_bridge() {
    let e = one_worker();
    let (started, left) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (s, l) = (started.clone(), left.clone());
    e.push(
        job(move || {
            s.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(50));
            l.store(true, Ordering::SeqCst);
            Ok(())
        })
        .lane(forksafe_core::Lane::Host),
    )
    .unwrap();
    while !started.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    e.shutdown(Duration::from_millis(1)).unwrap();
    assert!(
        left.load(Ordering::SeqCst),
        "shutdown returned inside host code"
    );
}

/// Once the host is finalising (interpreter shutdown), a host op never
/// enters the bridge, even on a running engine (I8).
#[test]
fn no_host_op_runs_once_the_host_is_finalising() {
    let (e, gil) = gil_engine();
    gil.set_finalizing(true);
    let ran = Arc::new(AtomicBool::new(false));
    e.push(sets(&ran).lane(forksafe_core::Lane::Host)).unwrap();
    let _ = e.wait_all();
    assert!(!ran.load(Ordering::SeqCst));
    assert_eq!(gil.calls_after_finalize(), 0);
}

/// Sets `flag` to whether the host lock was held when it was dropped.
struct DropProbe {
    gil: forksafe_core::sync::Arc<forksafe_testkit::GilBridge>,
    dropped: Arc<std::sync::Mutex<Option<bool>>>,
}

impl Drop for DropProbe {
    fn drop(&mut self) {
        *self.dropped.lock().unwrap() = Some(self.gil.lock().held_by_me());
    }
}

/// A host op cancelled by shutdown has its payload dropped with the host
/// lock held (it is host code, H1); once the host is finalising it is
/// leaked instead (I8). Returns what the probe saw, if it was dropped.
fn cancelled_host_payload(finalising: bool) -> Option<bool> {
    use forksafe_core::{HostBridge, Lane};
    let (e, gil) = gil_engine();
    let dropped: Arc<std::sync::Mutex<Option<bool>>> = Arc::default();
    // Holds the only host worker, with the host lock released, until the
    // queued op's payload is gone (or a bound passes).
    let (started, d, g) = (
        Arc::new(AtomicBool::new(false)),
        dropped.clone(),
        gil.clone(),
    );
    let s = started.clone();
    e.push(
        job(move || {
            s.store(true, Ordering::SeqCst);
            g.without_host_lock(&mut || {
                wait_until(Duration::from_millis(500), || d.lock().unwrap().is_some());
            });
            Ok(())
        })
        .lane(Lane::Host),
    )
    .unwrap();
    while !started.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    let probe = DropProbe {
        gil: gil.clone(),
        dropped: dropped.clone(),
    };
    e.push(
        job(move || {
            drop(probe);
            Ok(())
        })
        .lane(Lane::Host),
    )
    .unwrap();
    gil.set_finalizing(finalising);
    let report = e.shutdown(Duration::from_millis(5)).unwrap();
    assert_eq!(report.cancelled.len(), 1, "{report:?}");
    assert_eq!(gil.calls_after_finalize(), 0);
    let seen = *dropped.lock().unwrap();
    seen
}

#[test]
fn a_cancelled_host_payload_is_dropped_under_the_host_lock() {
    assert_eq!(cancelled_host_payload(false), Some(true));
}

#[test]
fn a_cancelled_host_payload_is_leaked_once_the_host_finalises() {
    assert_eq!(cancelled_host_payload(true), None);
}

/// An engine whose host is a [`GilBridge`], and the bridge.
fn gil_engine() -> (CoreEngine<Job>, forksafe_core::sync::Arc<GilBridge>) {
    let gil = forksafe_core::sync::Arc::new(GilBridge::new());
    let config = forksafe_core::Config::default();
    let e =
        CoreEngine::with_bridge(crate::support::domain(), config, Box::new(gil.clone())).unwrap();
    (e, gil)
}
