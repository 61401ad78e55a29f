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

use std::time::Duration;

/// Workers per lane: all of them are on their way out when the test forks.
const WORKERS: usize = 8;

fn fork_after_shutdown() {
    support::fork_rounds("fork_after_shutdown", WORKERS, |round, e| {
        let v = e.new_var().expect("var");
        for i in 0..2 * WORKERS {
            let lane_var = e.new_var().expect("var");
            e.op(format!("r{round}-{i}"))
                .reads(&[&v])
                .writes(&[&lane_var])
                .run(|| {})
                .expect("push");
        }
        // Shutdown returns only once its workers are gone: a fork right
        // after it catches none leaving.
        e.shutdown(Duration::from_secs(5)).expect("shutdown");
    });
}

fn main() {
    forksafe_testkit::harness::main(&[("fork_after_shutdown", fork_after_shutdown)]);
}
