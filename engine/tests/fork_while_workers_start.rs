//! Regression test: a raw fork while an engine's workers are starting must
//! leave a child that can start threads and run ops.
//!
//! Rust's std takes a process-wide mutex on the way into every thread it
//! starts (the stack-overflow handler's thread info), before the thread's
//! closure runs. Workers start lazily, at the first dispatches; before
//! prepare waited for them, a fork right after a push could catch a new
//! worker holding that mutex, and no thread ever started in the child: the
//! child hung (seen once in CI, in `fork`'s `three_levels`). See
//! FORK-SAFETY.md, L8.
//!
//! A `harness = false` binary (libtest's threads could hold locks at a
//! fork). Each round: a fresh engine with several workers per lane gets a
//! burst of ops, which starts its workers, and the test forks at once (at a
//! spread of moments after the pushes); the child starts a thread, runs an
//! op on a fresh engine and leaves with `_exit`. The parent waits for it
//! under a watchdog (`support::wait_child`), kills it if it hangs, and
//! fails. `FORKSAFE_ROUNDS` sets the number of rounds (default 2000).

mod support;

use forksafe::Lane;

/// Workers per lane: all of them start during the burst.
const WORKERS: usize = 8;

fn fork_while_workers_start() {
    support::fork_rounds("fork_while_workers_start", WORKERS, |round, e| {
        // The last workers are often still starting after this: prepare
        // waits for them.
        for i in 0..2 * WORKERS {
            let v = e.new_var().expect("var");
            let lane = if i % 2 == 0 {
                Lane::Compute
            } else {
                Lane::Host
            };
            e.op(format!("r{round}-{i}"))
                .writes(&[&v])
                .lane(lane)
                .run(|| {})
                .expect("push");
        }
    });
}

fn main() {
    forksafe_testkit::harness::main(&[("fork_while_workers_start", fork_while_workers_start)]);
}
