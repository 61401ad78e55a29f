//! Regression test: a raw fork right after `shutdown` returns must leave a
//! child that can start threads and run ops.
//!
//! Rust's std takes a process-wide mutex on the way out of every thread it
//! started (and on the way in of every new one: the stack-overflow handler's
//! thread info). Before shutdown joined its workers, a fork right after
//! shutdown could catch a worker on its way out holding that mutex, and no
//! thread ever started in the child (its engine's workers included): the
//! child hung. See FORK-SAFETY.md, "Assumptions".
//!
//! A `harness = false` binary (libtest's threads could hold locks at a fork).
//! Each round: an engine with several workers runs a few ops, shuts down,
//! and the test forks at once; the child starts a thread, then runs an op on
//! a fresh engine, and leaves with `_exit`. The parent waits for it under a
//! watchdog (`support::wait_child`), kills it if it hangs, and fails.
//! `FORKSAFE_ROUNDS` sets the number of rounds (default 2000).

mod support;

use forksafe::{Config, Engine};
use std::time::Duration;
use support::*;

/// Workers per lane: all of them are on their way out when the test forks.
const WORKERS: usize = 8;

/// Watchdog of one forked child (a healthy one takes milliseconds).
const CHILD_LIMIT: Duration = Duration::from_secs(5);

fn main() {
    quiet_panics();
    let rounds = rounds_from_env(2000);
    for round in 0..rounds {
        let e = Engine::new(Config {
            compute_workers: WORKERS,
            host_workers: WORKERS,
            ..Config::default()
        })
        .expect("engine");
        let v = e.new_var().expect("var");
        for i in 0..2 * WORKERS {
            let lane_var = e.new_var().expect("var");
            e.op(format!("r{round}-{i}"))
                .reads(&[&v])
                .writes(&[&lane_var])
                .run(|| {})
                .expect("push");
        }
        e.shutdown(Duration::from_secs(5)).expect("shutdown");
        // Before the fix, the workers were still leaving here.
        spin_for_round(round);
        // The child starts a thread, uses a fresh engine, and leaves with
        // `_exit`; it never returns into this loop.
        let result = fork_raw(|| child_starts_threads().map(|()| String::new()))
            .and_then(|pid| wait_child(pid, CHILD_LIMIT));
        if let Err(err) = result {
            say(&format!(
                "    round {round}: {err}\nfork_after_shutdown: FAILED\n"
            ));
            std::process::exit(1);
        }
        drop(e);
    }
    say(&format!("fork_after_shutdown: {rounds} rounds passed\n"));
}
