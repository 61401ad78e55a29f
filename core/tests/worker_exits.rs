//! When a shutdown returns, the engine's idle workers are gone, not just
//! leaving: a raw fork that catches a thread half-way out can leave the
//! child unable to start threads (FORK-SAFETY.md, L8). Seen through a
//! thread-local guard each op body leaves in its worker: its destructor
//! runs in the worker's last user-space steps, so a worker that was joined
//! has run it. Found by the full mutation run.

use crate::support::{spec as job, Job};
use forksafe_core::{Config, CoreEngine, Lane};
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Threads that ran a body, and how many of them have exited.
#[derive(Default)]
struct ThreadExits {
    started: AtomicUsize,
    exited: AtomicUsize,
}

struct ExitGuard(Arc<ThreadExits>);

impl Drop for ExitGuard {
    fn drop(&mut self) {
        // Linger in the exit path: a shutdown that only waited for the
        // workers' leaving flags (set before this runs) would return first.
        std::thread::sleep(Duration::from_millis(20));
        self.0.exited.fetch_add(1, Ordering::SeqCst);
    }
}

thread_local! {
    static GUARD: RefCell<Option<ExitGuard>> = const { RefCell::new(None) };
}

/// Called in a body: counts its thread once, and its exit.
fn mark_thread(exits: &Arc<ThreadExits>) {
    GUARD.with(|g| {
        let mut g = g.borrow_mut();
        if g.is_none() {
            exits.started.fetch_add(1, Ordering::SeqCst);
            *g = Some(ExitGuard(exits.clone()));
        }
    });
}

fn engine() -> Arc<CoreEngine<Job>> {
    let config = Config {
        compute_workers: 2,
        host_workers: 1,
        ..Config::default()
    };
    Arc::new(CoreEngine::new(crate::support::domain(), config).unwrap())
}

/// Every worker (both lanes) has exited when shutdown returns.
#[test]
fn shutdown_returns_after_its_idle_workers_are_gone() {
    let e = engine();
    let exits = Arc::new(ThreadExits::default());
    for lane in [Lane::Compute, Lane::Compute, Lane::Host] {
        let x = exits.clone();
        e.push(
            job(move || {
                mark_thread(&x);
                Ok(())
            })
            .lane(lane),
        )
        .unwrap();
    }
    e.wait_all().unwrap();
    let started = exits.started.load(Ordering::SeqCst);
    assert!(started >= 2, "a compute and the host worker ran bodies");
    e.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(exits.exited.load(Ordering::SeqCst), started);
}

/// A shutdown from inside an op does not wait for its own thread, and the
/// other workers are gone when it returns.
#[test]
fn shutdown_from_inside_an_op_joins_the_other_workers_only() {
    let e = engine();
    let exits = Arc::new(ThreadExits::default());
    // Both compute workers and the host worker run a body.
    let (tx, rx) = mpsc::channel::<()>();
    let (meet_tx, meet_rx) = mpsc::channel::<()>();
    let x = exits.clone();
    e.push(job(move || {
        mark_thread(&x);
        meet_tx.send(()).unwrap();
        rx.recv_timeout(Duration::from_secs(10))
            .map_err(|e| e.to_string())
    }))
    .unwrap();
    meet_rx.recv().unwrap();
    let x = exits.clone();
    e.push(job(move || {
        mark_thread(&x);
        tx.send(()).unwrap();
        Ok(())
    }))
    .unwrap();
    let x = exits.clone();
    e.push(
        job(move || {
            mark_thread(&x);
            Ok(())
        })
        .lane(Lane::Host),
    )
    .unwrap();
    e.wait_all().unwrap();
    assert_eq!(exits.started.load(Ordering::SeqCst), 3);
    let (done_tx, done_rx) = mpsc::channel();
    let (inner, x) = (e.clone(), exits.clone());
    e.push(job(move || {
        let r = inner.shutdown(Duration::from_secs(10)).map(drop);
        let exited = x.exited.load(Ordering::SeqCst);
        done_tx.send((r, exited)).map_err(|e| e.to_string())
    }))
    .unwrap();
    let (result, exited) = done_rx.recv().unwrap();
    assert_eq!(result, Ok(()));
    assert_eq!(exited, 2, "every worker but the caller's has exited");
}

/// Fork prepare's wait for starting workers (L8): it returns only once no
/// thread is counted as starting. Seen through `forksafe_core::sync::Exits`
/// itself: a worker's start-up window is too short to hold open from a
/// test.
#[test]
fn waiting_for_starting_threads_returns_only_once_none_is_counted() {
    let exits = Arc::new(forksafe_core::sync::Exits::new());
    exits.wait_for_starting();
    let first = exits.starting();
    let second = exits.starting();
    let (done_tx, done_rx) = mpsc::channel();
    let waiter = {
        let exits = exits.clone();
        std::thread::spawn(move || {
            exits.wait_for_starting();
            done_tx.send(()).unwrap();
        })
    };
    let early = done_rx.recv_timeout(Duration::from_millis(50));
    assert!(early.is_err(), "returned with two threads starting");
    drop(first);
    let early = done_rx.recv_timeout(Duration::from_millis(50));
    assert!(early.is_err(), "returned with one thread starting");
    drop(second);
    done_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("no return");
    waiter.join().unwrap();
}

fn engine_with(gil: &Arc<forksafe_testkit::GilBridge>) -> CoreEngine<Job> {
    let config = Config {
        compute_workers: 2,
        host_workers: 2,
        ..Config::default()
    };
    CoreEngine::with_bridge(crate::support::domain(), config, Box::new(gil.clone())).unwrap()
}

/// Each worker tells the bridge it started and, by the time shutdown
/// returns, that it is exiting: once each, so a bridge can keep host state
/// per worker thread and free all of it.
#[test]
fn every_worker_tells_the_bridge_it_starts_and_exits() {
    let gil = Arc::new(forksafe_testkit::GilBridge::new());
    let e = engine_with(&gil);
    for lane in [Lane::Compute, Lane::Host, Lane::Host] {
        e.push(job(|| Ok(())).lane(lane)).unwrap();
    }
    e.wait_all().unwrap();
    assert_eq!(
        gil.worker_exits(),
        0,
        "no worker exits while the engine lives"
    );
    e.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(gil.worker_starts(), 4, "two workers per lane started");
    assert_eq!(gil.worker_exits(), gil.worker_starts());
}

/// A shutdown called with the host lock held (from a host thread, as
/// Python code calls it) joins workers whose exit takes the host lock:
/// the join runs with it released (H2). Without that the join waits for
/// a worker that waits for the lock the caller holds.
#[test]
fn shutdown_with_the_host_lock_held_lets_exiting_workers_take_it() {
    let gil = Arc::new(forksafe_testkit::GilBridge::new());
    gil.lock_on_worker_exit(true);
    let e = engine_with(&gil);
    e.push(job(|| Ok(())).lane(Lane::Host)).unwrap();
    e.wait_all().unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    let caller = {
        let gil = gil.clone();
        std::thread::spawn(move || {
            gil.lock().acquire();
            let r = e.shutdown(Duration::from_secs(10)).map(drop);
            let held = gil.lock().held_by_me();
            gil.lock().release();
            done_tx.send((r, held)).unwrap();
        })
    };
    let (r, held) = done_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("shutdown never returned: an exiting worker waits for the host lock");
    caller.join().unwrap();
    assert_eq!(r, Ok(()));
    assert!(held, "shutdown gives the host lock back");
    assert_eq!(gil.worker_exits(), 4);
}
