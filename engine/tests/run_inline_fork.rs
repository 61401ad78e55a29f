//! A fork from inside an op its pusher runs inline (`CoreConfig::run_inline_from`,
//! docs/DESIGN.md "Running inline"): the child carries that op, still
//! running on the forking thread, which is no worker. The child's pool must
//! count no worker for it, or an op the child queues finds nobody to run
//! it (the child's `wait_all` then times out and this test fails).
//!
//! A `harness = false` binary (libtest's threads could hold locks at a
//! fork). `FORKSAFE_ROUNDS` rounds (default 2000, like the other fork
//! tests; CI runs them with the default), each with a fresh engine.

mod support;

use forksafe::{Config, CoreConfig, Engine};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;

/// The child, inside the carried op's body: the op is reported carried,
/// and a new op (pushed from inside an op, so queued for a worker) runs.
fn child(e: &Engine) -> Result<String, String> {
    stage("child: settle");
    let report = e
        .fork_report()
        .map_err(|err| format!("fork_report: {err}"))?
        .ok_or("no fork report")?;
    let carried = report.carried.ok_or("no carried op")?;
    if carried.name != "forker" {
        return Err(format!("carried {}, not forker", carried.name));
    }
    let v = e.new_var().map_err(|err| format!("new_var: {err}"))?;
    let (ran, ran_rx) = std::sync::mpsc::channel();
    e.op("after")
        .writes(&[&v])
        .run(move || ran.send(()).unwrap())
        .map_err(|err| format!("push: {err}"))?;
    stage("child: wait for the op queued for a worker");
    // Not an engine wait: from inside an op, waits cover only the ops
    // pushed before it.
    ran_rx
        .recv_timeout(Duration::from_secs(5))
        .map_err(|_| "no worker ran the op the child queued".to_string())?;
    Ok(String::new())
}

fn run_inline_fork() {
    quiet_panics();
    let rounds = rounds();
    for round in 0..rounds {
        let e = Arc::new(
            Engine::new(Config {
                core: CoreConfig {
                    compute_workers: 1,
                    host_workers: 1,
                    run_inline_from: Some(0),
                    ..CoreConfig::default()
                },
                ..Config::default()
            })
            .expect("engine"),
        );
        let v = e.new_var().unwrap();
        let pusher = std::thread::current().id();
        let outcome = Arc::new(Mutex::new(None));
        let (e2, outcome2) = (e.clone(), outcome.clone());
        e.op("forker")
            .writes(&[&v])
            .run(move || {
                let result = if std::thread::current().id() != pusher {
                    Err("the op did not run on its pusher".to_string())
                } else {
                    fork_raw(|| child(&e2)).and_then(|pid| wait_child(pid, Duration::from_secs(20)))
                };
                *outcome2.lock().unwrap() = Some(result);
            })
            .unwrap();
        let result = outcome
            .lock()
            .unwrap()
            .take()
            .unwrap_or(Err("the forker op did not run inline".into()));
        let result = result.and_then(|()| {
            e.wait_all_timeout(Duration::from_secs(20))
                .map_err(|err| format!("parent wait_all: {err}"))
        });
        if let Err(err) = result {
            say(&format!(
                "    round {round}: {err}\nrun_inline_fork: FAILED\n"
            ));
            std::process::exit(1);
        }
    }
    say(&format!("run_inline_fork: {rounds} rounds passed\n"));
}

fn main() {
    forksafe_testkit::harness::main(&[("run_inline_fork", run_inline_fork)]);
}
