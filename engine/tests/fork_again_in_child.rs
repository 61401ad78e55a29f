//! Regression test: a child forked while other threads were being turned
//! away at the closed fork gate must be able to fork in its turn.
//!
//! A gate that counted a refused thread in and out again would let a fork
//! between the two copy a count no thread of the child ever takes back, and
//! the child's own next fork would wait for it for ever. See
//! FORK-SAFETY.md, L9.
//!
//! A `harness = false` binary (libtest's threads could hold locks at a
//! fork). Two pushers keep pushing short ops to an engine with two compute
//! workers, so during every fork window pushers and workers are refused at
//! the gate; meanwhile the main thread forks `FORKSAFE_ROUNDS` times
//! (default 2000). Each child settles the inherited engine, forks a
//! grandchild, which settles too, and waits for it under a watchdog; the
//! parent waits for the child under its own. Exits 1 at the first failed
//! or hung child.

mod support;

use forksafe::Lane;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::*;

/// The child's and grandchild's engine calls: settle, then one call that
/// needs a section.
fn settles(e: &forksafe::Engine) -> Result<(), String> {
    e.fork_report()
        .map_err(|err| format!("fork_report: {err}"))?
        .ok_or("no fork report")?;
    e.new_var().map_err(|err| format!("new_var: {err}"))?;
    Ok(())
}

fn fork_again_in_child() {
    quiet_panics();
    let rounds = rounds();
    let e = Arc::new(engine(2, 1));
    let vars = new_vars(&e, 4);
    let stop = Arc::new(AtomicBool::new(false));
    let pushers: Vec<_> = (0..2)
        .map(|t| {
            let (e, vars, stop) = (e.clone(), vars.clone(), stop.clone());
            std::thread::spawn(move || {
                let c = counters(64);
                let mut pushed = 0usize;
                while !stop.load(Ordering::SeqCst) {
                    let v = std::slice::from_ref(&vars[(t + pushed) % vars.len()]);
                    push_counted(&e, &c, 0..64, v, Lane::Compute, Duration::ZERO)?;
                    e.wait_all_timeout(Duration::from_secs(30))
                        .map_err(|err| format!("pusher wait_all: {err}"))?;
                    pushed += 64;
                }
                Ok::<usize, String>(pushed)
            })
        })
        .collect();
    let mut failure = None;
    for round in 0..rounds {
        let result = fork_raw(|| {
            stage("child: first call (settles), then new_var");
            settles(&e)?;
            stage("child: forks the grandchild");
            let pid = fork_raw(|| {
                stage("grandchild: first call (settles), then new_var");
                settles(&e).map(|()| String::new())
            })?;
            stage("child: waits for the grandchild");
            wait_child(pid, Duration::from_secs(10))?;
            Ok(String::new())
        })
        .and_then(|pid| wait_child(pid, Duration::from_secs(20)));
        if let Err(err) = result {
            failure = Some(format!("round {round}: {err}"));
            break;
        }
    }
    stop.store(true, Ordering::SeqCst);
    let mut total = 0;
    for p in pushers {
        match p.join() {
            Ok(Ok(n)) => total += n,
            Ok(Err(err)) => failure = failure.or(Some(err)),
            Err(_) => failure = failure.or(Some("pusher panicked".into())),
        }
    }
    if let Some(err) = failure {
        say(&format!("    {err}\nfork_again_in_child: FAILED\n"));
        std::process::exit(1);
    }
    say(&format!(
        "fork_again_in_child: {rounds} rounds passed ({total} ops pushed around the forks)\n"
    ));
}

fn main() {
    forksafe_testkit::harness::main(&[("fork_again_in_child", fork_again_in_child)]);
}
