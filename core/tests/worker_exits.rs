//! When a shutdown returns, the engine's idle workers are gone, not just
//! leaving (a raw fork that catches a thread half-way out can leave the
//! child unable to start threads; FORK-SAFETY.md, L8). Seen through the
//! thread names in /proc. Found by the full mutation run.

#![cfg(target_os = "linux")]

use forksafe_core::{CompletionToken, Config, Engine, ForkDomain, Lane, OpSpec, Payload};
use std::sync::{mpsc, Arc};
use std::time::Duration;

type Body = Box<dyn FnOnce(Option<CompletionToken<Job>>) -> Result<(), String> + Send>;
struct Job(Body);

impl Payload for Job {
    fn run(self, token: Option<CompletionToken<Self>>) -> Result<(), String> {
        (self.0)(token)
    }
}

fn job(f: impl FnOnce() -> Result<(), String> + Send + 'static) -> OpSpec<Job> {
    OpSpec::new(Job(Box::new(move |_| f())))
}

/// Threads of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

fn engine(thread_name: &str) -> Arc<Engine<Job>> {
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    let config = Config {
        compute_workers: 2,
        host_workers: 1,
        thread_name: thread_name.into(),
        ..Config::default()
    };
    Arc::new(Engine::new(domain, config).unwrap())
}

/// Every worker (both lanes) has exited when shutdown returns.
#[test]
fn shutdown_returns_after_its_idle_workers_are_gone() {
    let e = engine("xq1");
    for lane in [Lane::Compute, Lane::Compute, Lane::Host] {
        e.push(job(|| Ok(())).lane(lane)).unwrap();
    }
    e.wait_all().unwrap();
    assert!(threads_named("xq1-") >= 2, "the workers started");
    e.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(threads_named("xq1-"), 0);
}

/// A shutdown from inside an op does not wait for its own thread, and the
/// other workers are gone when it returns.
#[test]
fn shutdown_from_inside_an_op_joins_the_other_workers_only() {
    let e = engine("xq2");
    // Start both compute workers and the host worker.
    let (tx, rx) = mpsc::channel::<()>();
    let (meet_tx, meet_rx) = mpsc::channel::<()>();
    e.push(job(move || {
        meet_tx.send(()).unwrap();
        rx.recv_timeout(Duration::from_secs(10)).map_err(|e| e.to_string())
    }))
    .unwrap();
    meet_rx.recv().unwrap();
    e.push(job(move || {
        tx.send(()).unwrap();
        Ok(())
    }))
    .unwrap();
    e.push(job(|| Ok(())).lane(Lane::Host)).unwrap();
    e.wait_all().unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    let inner = e.clone();
    e.push(job(move || {
        let r = inner.shutdown(Duration::from_secs(10)).map(drop);
        done_tx
            .send((r, threads_named("xq2-")))
            .map_err(|e| e.to_string())
    }))
    .unwrap();
    let (result, left) = done_rx.recv().unwrap();
    assert_eq!(result, Ok(()));
    assert_eq!(left, 1, "only the worker running the shutdown is left");
}
