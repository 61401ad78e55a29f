//! `ForkSafeRuntime` across real forks, in a `harness = false` binary
//! (libtest's threads could hold locks at a fork). Each scenario forks with
//! a raw `fork()` and checks the child under a watchdog.
//!
//! - `task_spawned_before_the_fork`: a task the parent spawned and has not
//!   finished is `LostInFork` when the child awaits it (at once, not at the
//!   watchdog), and the child's own tasks run; the parent's task then
//!   finishes in the parent.
//! - `forked_while_in_block_on`: another thread is inside `block_on` at each
//!   fork; prepare waits for it (bound 5 s): the child reads `Prepared`.
//! - `forked_past_the_bound`: the `block_on` in flight outlasts a 1 ms
//!   bound: the fork goes ahead, the child reads `Unprepared(Overran)` and
//!   its own runtime still works.
//! - `nested`: a child forks a grandchild, which uses the runtime.
//! - `global_in_children`: `global_runtime()` serves the parent and every
//!   child, and a handle kept across the fork reaches the child's runtime.
//! - `leaks`: `FORKSAFE_ROUNDS` forks (default 200; the measurement in the
//!   crate docs used 10,000) of a parent whose runtime is in use: the
//!   parent's threads, mappings and RSS must not grow; then a chain of
//!   nested children, each using the runtime, prints what each generation
//!   adds.
//!
//! `FORKSAFE_ROUNDS` sets the forks per scenario.

use forksafe::{Inherited, PrepareFailure};
use forksafe_testkit::child::{fork_raw, quiet_panics, wait_child};
use forksafe_testkit::proc_counts::{mapping_count, rss_kib, thread_count};
use forksafe_tokio::{global_runtime, ForkSafeRuntime, RuntimeBuilder, TaskError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);

fn rounds(default: usize) -> usize {
    std::env::var("FORKSAFE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn runtime(bound: Duration) -> ForkSafeRuntime {
    RuntimeBuilder::new_multi_thread()
        .worker_threads(2)
        .prepare_bound(bound)
        .build()
        .expect("runtime")
}

/// A few tasks, a timer and a blocking call on `rt`.
fn work(rt: &ForkSafeRuntime) -> Result<(), String> {
    let tasks: Vec<_> = (0..8u64)
        .map(|i| rt.spawn(async move { i * i }))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let blocking = rt.spawn_blocking(|| 7).map_err(|e| e.to_string())?;
    let sum = rt
        .block_on(async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let mut sum = 0;
            for t in tasks {
                sum += t.await.map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(sum + blocking.await.map_err(|e| e.to_string())?)
        })
        .map_err(|e| e.to_string())??;
    (sum == 140 + 7)
        .then_some(())
        .ok_or_else(|| format!("sum {sum}"))
}

fn fork_and_check(what: &str, round: usize, f: impl FnOnce() -> Result<String, String>) {
    let pid = fork_raw(f).expect("fork");
    wait_child(pid, LIMIT).unwrap_or_else(|e| panic!("{what}, round {round}: {e}"));
}

fn task_spawned_before_the_fork() {
    let rt = runtime(Duration::from_secs(2));
    work(&rt).expect("parent");
    for round in 0..rounds(20) {
        let release = Arc::new(AtomicBool::new(false));
        let r = release.clone();
        let pending = rt
            .spawn(async move {
                while !r.load(Ordering::Acquire) {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                "done in the parent"
            })
            .expect("spawn");
        fork_and_check("task_spawned_before_the_fork", round, || {
            let start = Instant::now();
            let got = rt.block_on(pending).map_err(|e| e.to_string())?;
            if got != Err(TaskError::LostInFork) {
                return Err(format!("awaiting the parent's task gave {got:?}"));
            }
            if start.elapsed() > Duration::from_secs(5) {
                return Err("LostInFork came only after a wait".into());
            }
            work(&rt)?;
            Ok(String::new())
        });
        release.store(true, Ordering::Release);
        // The handle moved into the child's closure; the parent checks a
        // second one of the same kind.
        let again = rt
            .spawn(async { "the parent's task finishes" })
            .expect("spawn");
        assert_eq!(
            rt.block_on(again).expect("block_on"),
            Ok("the parent's task finishes")
        );
    }
}

fn forked_while_in_block_on() {
    let rt = Arc::new(runtime(Duration::from_secs(5)));
    work(&rt).expect("parent");
    for round in 0..rounds(20) {
        let inside = Arc::new(AtomicBool::new(false));
        let (r, i) = (rt.clone(), inside.clone());
        let busy = std::thread::spawn(move || {
            r.block_on(async move {
                i.store(true, Ordering::Release);
                tokio::time::sleep(Duration::from_millis(50)).await;
                "whole"
            })
        });
        while !inside.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        fork_and_check("forked_while_in_block_on", round, || {
            if rt.inherited() != Inherited::Prepared {
                return Err(format!("inherited {:?}", rt.inherited()));
            }
            work(&rt)?;
            Ok(String::new())
        });
        assert_eq!(busy.join().expect("thread").expect("block_on"), "whole");
    }
}

fn forked_past_the_bound() {
    let rt = Arc::new(runtime(Duration::from_millis(1)));
    work(&rt).expect("parent");
    let inside = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let (r, i, s) = (rt.clone(), inside.clone(), stop.clone());
    let busy = std::thread::spawn(move || {
        r.block_on(async move {
            i.store(true, Ordering::Release);
            while !s.load(Ordering::Acquire) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    });
    while !inside.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    for round in 0..rounds(5) {
        fork_and_check("forked_past_the_bound", round, || {
            if rt.inherited() != Inherited::Unprepared(PrepareFailure::Overran) {
                return Err(format!("inherited {:?}", rt.inherited()));
            }
            work(&rt)?;
            Ok(String::new())
        });
    }
    stop.store(true, Ordering::Release);
    busy.join().expect("thread").expect("block_on");
}

fn nested() {
    let rt = runtime(Duration::from_secs(2));
    work(&rt).expect("parent");
    for round in 0..rounds(10) {
        fork_and_check("nested", round, || {
            work(&rt)?;
            let pid = fork_raw(|| {
                work(&rt)?;
                Ok(String::new())
            })?;
            wait_child(pid, LIMIT)?;
            work(&rt)?;
            Ok(String::new())
        });
    }
}

fn global_in_children() {
    let rt = global_runtime().expect("global");
    work(rt).expect("parent");
    let handle = rt.handle();
    for round in 0..rounds(10) {
        fork_and_check("global_in_children", round, || {
            let g = global_runtime().map_err(|e| e.to_string())?;
            work(g)?;
            let v = handle.block_on(async { 3 }).map_err(|e| e.to_string())?;
            let t = handle.spawn(async { 4 }).map_err(|e| e.to_string())?;
            let w = g.block_on(t).map_err(|e| e.to_string())?;
            (v == 3 && w == Ok(4))
                .then(String::new)
                .ok_or_else(|| format!("handle gave {v}, {w:?}"))
        });
    }
}

fn leaks() {
    let rt = runtime(Duration::from_secs(2));
    work(&rt).expect("parent");
    let n = rounds(200);
    // Warm up: the first forks settle lazily built state of the process.
    for round in 0..5 {
        fork_and_check("leaks (warm-up)", round, || {
            work(&rt).map(|()| String::new())
        });
    }
    let before = (thread_count(), mapping_count(), rss_kib());
    assert!(before.0 > 0 && before.1 > 0, "/proc/self cannot be read");
    for round in 0..n {
        fork_and_check("leaks", round, || work(&rt).map(|()| String::new()));
        work(&rt).expect("parent between forks");
    }
    let after = (thread_count(), mapping_count(), rss_kib());
    println!(
        "leaks: {n} forks, parent threads {} -> {}, mappings {} -> {}, RSS {} -> {} KiB",
        before.0, after.0, before.1, after.1, before.2, after.2
    );
    assert_eq!(before.0, after.0, "the parent's thread count grew");
    assert!(
        after.1 <= before.1 + 2,
        "the parent's mappings grew: {} -> {}",
        before.1,
        after.1
    );
    // RSS may move by a few pages (allocator caches); a per-fork leak over
    // `n` forks would not stay within this.
    assert!(
        after.2 <= before.2 + 1024,
        "the parent's RSS grew: {} -> {} KiB",
        before.2,
        after.2
    );
    // A chain of nested children: what each generation adds.
    fn generation(rt: &ForkSafeRuntime, depth: usize, left: usize) -> Result<String, String> {
        work(rt)?;
        println!(
            "leaks: generation {depth}: threads {}, mappings {}, RSS {} KiB",
            thread_count(),
            mapping_count(),
            rss_kib()
        );
        if left == 0 {
            return Ok(String::new());
        }
        let pid = fork_raw(|| generation(rt, depth + 1, left - 1))?;
        wait_child(pid, LIMIT)?;
        Ok(String::new())
    }
    generation(&rt, 0, 8).expect("chain");
}

fn main() {
    quiet_panics(None);
    let scenarios: [(&'static str, fn()); 6] = [
        ("task_spawned_before_the_fork", task_spawned_before_the_fork),
        ("forked_while_in_block_on", forked_while_in_block_on),
        ("forked_past_the_bound", forked_past_the_bound),
        ("nested", nested),
        ("global_in_children", global_in_children),
        ("leaks", leaks),
    ];
    forksafe_testkit::harness::main_timed("forksafe-tokio", &scenarios);
}
