//! Helpers of the real-fork test binary: forking with a reporting child,
//! waiting for a child under a watchdog, and the checks every scenario
//! makes on both sides of a fork.

// Each test binary uses a subset of these helpers.
#![allow(dead_code, unused_imports)]

use forksafe::{Engine, Error, Lane, OpErrorKind, Var};
pub use forksafe_testkit::child::{
    child_exit, exit_now, fork_raw, say, stage, stage_board, wait_child,
};
pub use forksafe_testkit::counters::{bump, counters, snapshot, Counters};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// A panic hook that reports with `write(2)` only (std's stderr lock may be
/// held by a vanished thread in a fork child).
pub fn quiet_panics() {
    forksafe_testkit::child::quiet_panics(None);
}

/// Pushes ops `range`, named `op{i}`, op i writing `vars[i % len]`; each
/// body spins `spin` and then bumps its counter (last, so a counter of 0
/// means the body never got that far).
pub fn push_counted(
    e: &Engine,
    c: &Counters,
    range: std::ops::Range<usize>,
    vars: &[Var],
    lane: Lane,
    spin: Duration,
) -> Result<(), String> {
    for i in range {
        let c = c.clone();
        e.op(format!("op{i}"))
            .writes(&[&vars[i % vars.len()]])
            .lane(lane)
            .run(move || {
                let t = Instant::now();
                while t.elapsed() < spin {
                    std::hint::spin_loop();
                }
                bump(&c, i);
            })
            .map_err(|e| format!("push op{i}: {e}"))?;
    }
    Ok(())
}

/// An engine with `compute` and `host` workers (panics if it cannot start).
pub fn engine(compute: usize, host: usize) -> Engine {
    Engine::new(forksafe::Config {
        core: forksafe::CoreConfig {
            compute_workers: compute,
            host_workers: host,
            ..forksafe::CoreConfig::default()
        },
        ..forksafe::Config::default()
    })
    .expect("engine")
}

pub fn new_vars(e: &Engine, n: usize) -> Vec<Var> {
    (0..n).map(|_| e.new_var().unwrap()).collect()
}

/// The parent's view after a fork: every op completes, each exactly once.
pub fn check_parent(e: &Engine, c: &Counters, n: usize) -> Result<(), String> {
    e.wait_all_timeout(Duration::from_secs(30))
        .map_err(|e| format!("parent wait_all: {e}"))?;
    for (i, x) in snapshot(c).iter().enumerate().take(n) {
        if *x != 1 {
            return Err(format!("parent: op{i} ran {x} times"));
        }
    }
    Ok(())
}

/// What a child expects of the ops it inherited.
pub struct ChildExpect<'a> {
    /// Counters as copied at the fork (taken before any engine call).
    pub snap: Vec<u32>,
    pub counters: &'a Counters,
    /// Vars the counted ops write (op i writes `vars[i % len]`).
    pub vars: &'a [Var],
    /// How many counted ops were pushed before the fork (all of them were
    /// accepted); `None` if pushers were still running.
    pub pushed: Option<usize>,
    /// A drained fork: nothing ran at the fork, so every lost op never
    /// started.
    pub drained: bool,
}

/// The child's view (docs/DESIGN.md, I5): every op pending at the fork is
/// completed with `LostInFork` without running, the others had completed
/// in the parent; nothing inherited runs again; vars written by lost ops
/// are poisoned with `LostInFork`; the child's own ops run normally.
/// Returns how many ops were lost.
pub fn check_child(e: &Engine, x: ChildExpect<'_>) -> Result<usize, String> {
    stage("check_child: first call (the engine settles)");
    let report = e
        .fork_report()
        .map_err(|e| format!("fork_report: {e}"))?
        .ok_or("no fork report in the child")?;
    if report.epoch != forksafe::fork_epoch() {
        return Err(format!(
            "report epoch {} != {}",
            report.epoch,
            forksafe::fork_epoch()
        ));
    }
    let mut lost = BTreeSet::new();
    for info in &report.lost {
        let i: usize = info
            .name
            .strip_prefix("op")
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("unexpected lost op {}", info.name))?;
        lost.insert(i);
    }
    stage("check_child: wait_all for the inherited ops");
    match e.wait_all_timeout(Duration::from_secs(20)) {
        Ok(()) if lost.is_empty() => {}
        Ok(()) => return Err(format!("{} lost ops but wait_all is Ok", lost.len())),
        Err(Error::OpsFailed(errs)) => {
            if errs.len() != lost.len() {
                return Err(format!("{} errors for {} lost ops", errs.len(), lost.len()));
            }
            if let Some(bad) = errs.iter().find(|e| e.kind() != &OpErrorKind::LostInFork) {
                return Err(format!("unexpected error {bad}"));
            }
        }
        Err(other) => return Err(format!("child wait_all: {other}")),
    }
    for (i, &v) in x.snap.iter().enumerate() {
        if v > 1 {
            return Err(format!("op{i} had run {v} times at the fork"));
        }
        let accepted = x.pushed.is_some_and(|n| i < n);
        if v == 0 && accepted && !lost.contains(&i) {
            return Err(format!("op{i} never ran in the parent yet is not lost"));
        }
        if x.drained && lost.contains(&i) && v != 0 {
            return Err(format!("op{i} was running at a drained fork"));
        }
    }
    stage("check_child: wait_for_var on the vars of lost ops");
    for &i in &lost {
        let var = &x.vars[i % x.vars.len()];
        match e.wait_for_var(var) {
            Err(Error::Poisoned(err)) if err.kind() == &OpErrorKind::LostInFork => {}
            other => return Err(format!("var of lost op{i}: {other:?}")),
        }
    }
    // The child's own work runs, and nothing inherited runs again.
    stage("check_child: the child's own ops");
    let own = counters(20);
    let v = e.new_var().map_err(|e| e.to_string())?;
    push_counted(e, &own, 0..20, &[v], Lane::Compute, Duration::ZERO)?;
    if let Some(&i) = lost.iter().next() {
        let var = &x.vars[i % x.vars.len()];
        e.clear_poison(var).map_err(|e| e.to_string())?;
        e.wait_for_var(var)
            .map_err(|e| format!("after clear_poison: {e}"))?;
    }
    e.wait_all_timeout(Duration::from_secs(20))
        .map_err(|e| format!("child's own ops: {e}"))?;
    if snapshot(&own) != vec![1; 20] {
        return Err("child's own ops did not each run once".into());
    }
    if snapshot(x.counters) != x.snap {
        return Err("an inherited op ran in the child".into());
    }
    Ok(lost.len())
}

/// Rounds of a looping fork test: `FORKSAFE_ROUNDS`, default 2000.
pub fn rounds() -> u32 {
    std::env::var("FORKSAFE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}

/// The body of a looping fork test (`fork_after_shutdown`,
/// `fork_while_workers_start`): `FORKSAFE_ROUNDS` rounds (default 2000),
/// each with a fresh engine of `workers` workers per lane on which
/// `before_fork` runs; then a raw fork at a round-dependent moment (0 to
/// 31 × 200 spin hints later, so the rounds sample the whole window the
/// step races with; a spin, not a sleep: no timing is asserted). The child
/// must start threads ([`child_starts_threads`]) within 5 s (a healthy one
/// takes milliseconds). Exits 1 at the first failed or hung child, else
/// reports the rounds passed.
pub fn fork_rounds(name: &str, workers: usize, before_fork: impl Fn(u32, &Engine)) {
    quiet_panics();
    let rounds = rounds();
    for round in 0..rounds {
        let e = engine(workers, workers);
        before_fork(round, &e);
        for _ in 0..(round % 32) * 200 {
            std::hint::spin_loop();
        }
        // The child leaves with `_exit`; it never returns into this loop.
        let label = format!("{name} round {round}: the child starts a thread and runs an op");
        let result = fork_raw(|| {
            stage(&label);
            child_starts_threads().map(|()| String::new())
        })
        .and_then(|pid| wait_child(pid, Duration::from_secs(5)));
        if let Err(err) = result {
            say(&format!("    round {round}: {err}\n{name}: FAILED\n"));
            std::process::exit(1);
        }
    }
    say(&format!("{name}: {rounds} rounds passed\n"));
}

/// A fork child's check that threads still start: a fresh thread must
/// start and be joined, and a fresh engine must run an op (its worker is a
/// new thread too).
pub fn child_starts_threads() -> Result<(), String> {
    let t = std::thread::spawn(|| 7);
    if t.join().map_err(|_| "thread panicked")? != 7 {
        return Err("thread returned the wrong value".into());
    }
    let e = forksafe::Engine::new(forksafe::Config {
        core: forksafe::CoreConfig {
            compute_workers: 1,
            host_workers: 1,
            ..forksafe::CoreConfig::default()
        },
        ..forksafe::Config::default()
    })
    .map_err(|e| e.to_string())?;
    let v = e.new_var().map_err(|e| e.to_string())?;
    e.op("child")
        .writes(&[&v])
        .run(|| {})
        .map_err(|e| e.to_string())?;
    e.wait_all_timeout(Duration::from_secs(2))
        .map_err(|e| e.to_string())?;
    Ok(())
}
