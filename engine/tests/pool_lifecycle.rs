//! Regression tests of the worker pool's lifecycle (issue "Core as owned
//! parts"): stand-ins never leak, a push from inside an op never waits for
//! the slot its own op holds, and a worker the OS refuses is an error.
//!
//! A `harness = false` binary (one check forks, and libtest's threads could
//! hold locks at a fork): the churn check reads the whole process's
//! thread and mapping counts from `/proc/self`, so no other test may start
//! threads beside it. Each check runs in turn; a check that could hang runs
//! under a watchdog thread that fails the binary instead of hanging CI.
//!
//! `FORKSAFE_CHURN_CYCLES` sets the number of wait-inside-op cycles of the
//! churn check (default 200000; the documented long run uses 2000000).

mod support;

use forksafe::{Config, CoreConfig, Engine, Error, Priority};
use forksafe_testkit::proc_counts::{mapping_count as mappings, status_field};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;
use support::{fork_raw, wait_child};

/// An engine shared with its own ops (they push and wait on it).
fn new_engine(config: Config) -> Result<Arc<Engine>, String> {
    Engine::new(config).map(Arc::new).map_err(|e| e.to_string())
}

/// Runs `check` on a thread of its own; fails if it has not returned within
/// `limit` (a hang is the bug these checks look for; the limit is far above
/// a healthy run's time, and scaled by `FORKSAFE_WATCHDOG_SCALE` on slow
/// machines).
fn with_watchdog(
    name: &str,
    limit: Duration,
    check: impl FnOnce() -> Result<String, String> + Send + 'static,
) -> Result<String, String> {
    let limit = forksafe_testkit::child::scaled(limit);
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name(format!("check-{name}"))
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(check))
                .unwrap_or_else(|_| Err("panicked".into()));
            let _ = tx.send(r);
        })
        .expect("start the check thread");
    match rx.recv_timeout(limit) {
        Ok(r) => r,
        Err(_) => Err(format!("hung: no result after {limit:?}")),
    }
}

/// ≥ 200k cycles, each an op on a 1-worker lane that waits inside its body
/// for an op queued behind it (so the lane needs a stand-in each time). The
/// thread count must stay within the lane's size plus one stand-in plus the
/// host lane and this binary's own threads, and the mapping count and RSS
/// must stay flat: a stand-in that exited unjoined each cycle would leave
/// its stack mapped, and the process would abort after about 32.7k cycles
/// (vm.max_map_count).
fn stand_in_churn() -> Result<String, String> {
    let cycles: u64 = std::env::var("FORKSAFE_CHURN_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let engine = new_engine(Config {
        core: CoreConfig {
            compute_workers: 1,
            host_workers: 1,
            ..CoreConfig::default()
        },
        ..Config::default()
    })?;
    let v = engine.new_var().map_err(|e| e.to_string())?;
    let done = engine.new_var().map_err(|e| e.to_string())?;
    let warm_up = 1_000.min(cycles);
    let mut base = None;
    let mut peak_threads = 0;
    let mut peak_maps = 0;
    for cycle in 0..cycles {
        wait_inside_op_cycle(&engine, &v, &done).map_err(|e| format!("cycle {cycle}: {e}"))?;
        if cycle + 1 == warm_up {
            base = Some((status_field("Threads:"), mappings(), status_field("VmRSS:")));
        }
        if cycle % 1000 == 999 {
            peak_threads = peak_threads.max(status_field("Threads:"));
            peak_maps = peak_maps.max(mappings());
        }
    }
    let (threads0, maps0, rss0) = base.ok_or("no warm-up")?;
    let (threads1, maps1, rss1) = (status_field("Threads:"), mappings(), status_field("VmRSS:"));
    let report = format!(
        "{cycles} cycles: threads {threads0} -> {threads1} (peak {peak_threads}), \
         mappings {maps0} -> {maps1} (peak {peak_maps}), RSS {rss0} -> {rss1} kB"
    );
    // The binary's main thread and watchdog'd check thread, 1 compute
    // worker, 1 stand-in, and at most the host lane's worker.
    if peak_threads > threads0 + 1 || peak_threads > 5 {
        return Err(format!("thread count grew: {report}"));
    }
    // A leaked stand-in leaves a stack and a guard page: two mappings each.
    if peak_maps > maps0 + 8 {
        return Err(format!("mapping count grew: {report}"));
    }
    if rss1 > rss0 + 16 * 1024 {
        return Err(format!("RSS grew by more than 16 MiB: {report}"));
    }
    Ok(report)
}

/// One cycle on a compute lane of one worker: an op that waits inside its
/// body for an op queued behind it, so the lane needs a stand-in.
fn wait_inside_op_cycle(
    engine: &Arc<Engine>,
    v: &forksafe::Var,
    done: &forksafe::Var,
) -> Result<(), String> {
    // The plug keeps the only compute worker busy until both ops are
    // queued, so the waiter (high band) is taken before the op it waits
    // for (low band), which then needs a stand-in.
    let (go, plug) = mpsc::channel::<()>();
    engine
        .op("plug")
        .run(move || {
            let _ = plug.recv();
        })
        .map_err(|e| e.to_string())?;
    engine
        .op("writer")
        .writes(&[v])
        .priority(Priority::Low)
        .run(|| {})
        .map_err(|e| e.to_string())?;
    let inner = engine.clone();
    let waited = v.clone();
    engine
        .op("waiter")
        .writes(&[done])
        .priority(Priority::High)
        .try_run(move || inner.wait_for_var(&waited).map_err(|e| e.to_string()))
        .map_err(|e| e.to_string())?;
    go.send(()).map_err(|e| e.to_string())?;
    engine
        .wait_all_timeout(Duration::from_secs(60))
        .map_err(|e| e.to_string())
}

/// A raw fork while the lane has a spare parked (and the stand-in of the
/// last cycle idle): the child's engine forgets the parent's threads and
/// runs the same cycles again, starting stand-ins of its own. The child
/// reports by exit status; the parent waits for it under a deadline.
fn fork_with_a_spare_parked() -> Result<String, String> {
    let engine = new_engine(Config {
        core: CoreConfig {
            compute_workers: 1,
            ..CoreConfig::default()
        },
        ..Config::default()
    })?;
    let v = engine.new_var().map_err(|e| e.to_string())?;
    let done = engine.new_var().map_err(|e| e.to_string())?;
    for _ in 0..10 {
        wait_inside_op_cycle(&engine, &v, &done)?;
    }
    let pid = fork_raw(|| {
        for cycle in 0..100 {
            wait_inside_op_cycle(&engine, &v, &done).map_err(|e| format!("cycle {cycle}: {e}"))?;
        }
        Ok(String::new())
    })?;
    wait_child(pid, Duration::from_secs(60))?;
    wait_inside_op_cycle(&engine, &v, &done)?;
    Ok("child ran 100 wait-inside-op cycles after a fork with a spare parked".into())
}

/// With `max_pending = 1` the running op holds the only slot: a push from
/// its body must return `Error::Full` at once (the documented rule) instead
/// of waiting for the slot its own completion frees.
fn push_inside_op_at_the_bound() -> Result<String, String> {
    let engine = new_engine(Config {
        core: CoreConfig {
            max_pending: Some(1),
            ..CoreConfig::default()
        },
        ..Config::default()
    })?;
    let (tx, rx) = mpsc::channel();
    let inner = engine.clone();
    engine
        .op("outer")
        .run(move || {
            let r = inner.op("inner").run(|| {});
            let _ = tx.send(r.map(|_| ()));
        })
        .map_err(|e| e.to_string())?;
    engine
        .wait_all_timeout(Duration::from_secs(30))
        .map_err(|e| e.to_string())?;
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Err(Error::Full)) => Ok("push inside an op at the bound: Error::Full".into()),
        Ok(other) => Err(format!("push inside an op at the bound gave {other:?}")),
        Err(_) => Err("the op's push never returned".into()),
    }
}

/// A push from inside an op with a free slot is admitted as usual.
fn push_inside_op_below_the_bound() -> Result<String, String> {
    let engine = new_engine(Config {
        core: CoreConfig {
            max_pending: Some(2),
            ..CoreConfig::default()
        },
        ..Config::default()
    })?;
    let v = engine.new_var().map_err(|e| e.to_string())?;
    let (tx, rx) = mpsc::channel();
    let inner = engine.clone();
    let written = v.clone();
    engine
        .op("outer")
        .run(move || {
            let r = inner.op("inner").writes(&[&written]).run(|| {});
            let _ = tx.send(r.map(|_| ()));
        })
        .map_err(|e| e.to_string())?;
    // Received before waiting, so the wait covers the inner op too.
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(format!("push inside an op below the bound: {e:?}")),
        Err(_) => return Err("the op's push never returned".into()),
    }
    engine
        .wait_all_timeout(Duration::from_secs(30))
        .map_err(|e| e.to_string())?;
    match engine.var_version(&v) {
        Ok(1) => Ok("push inside an op below the bound: admitted and run".into()),
        other => Err(format!("inner op's var version: {other:?}")),
    }
}

/// A stack size the OS cannot provide fails `Engine::new` with
/// `Error::Spawn`, instead of an engine whose ops never run.
fn bad_stack_size() -> Result<String, String> {
    let config = Config {
        core: CoreConfig {
            worker_stack_size: Some(1 << 62),
            ..CoreConfig::default()
        },
        ..Config::default()
    };
    match Engine::new(config) {
        Err(Error::Spawn(msg)) => Ok(format!("bad worker_stack_size: Error::Spawn({msg})")),
        Err(e) => Err(format!("bad worker_stack_size: wrong error {e:?}")),
        Ok(e) => {
            // Show what the old behaviour was: an op that never runs.
            let r = e.op("never").run(|| {}).map(|_| ());
            let waited = e.wait_all_timeout(Duration::from_secs(2));
            Err(format!(
                "Engine::new accepted an unusable stack size (push: {r:?}, wait: {waited:?})"
            ))
        }
    }
}

fn main() {
    type Check = fn() -> Result<String, String>;
    let checks: [(&'static str, Check, u64); 5] = [
        ("stand_in_churn", stand_in_churn, 600),
        (
            "push_inside_op_at_the_bound",
            push_inside_op_at_the_bound,
            60,
        ),
        (
            "push_inside_op_below_the_bound",
            push_inside_op_below_the_bound,
            60,
        ),
        ("bad_stack_size", bad_stack_size, 60),
        ("fork_with_a_spare_parked", fork_with_a_spare_parked, 120),
    ];
    let names: Vec<&'static str> = checks.iter().map(|(n, _, _)| *n).collect();
    let (passed, failed) = forksafe_testkit::harness::run_counted(&names, |name| {
        let Some(&(_, check, limit)) = checks.iter().find(|(n, _, _)| *n == name) else {
            return false;
        };
        match with_watchdog(name, Duration::from_secs(limit), check) {
            Ok(msg) => {
                println!("pool_lifecycle: {name} ok: {msg}");
                true
            }
            Err(msg) => {
                println!("pool_lifecycle: {name} FAILED: {msg}");
                false
            }
        }
    });
    println!("pool_lifecycle: {passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}
