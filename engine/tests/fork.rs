//! Real-fork integration tests. A `harness = false` binary: libtest's
//! threads could hold output locks at a fork and hang the child. Each
//! scenario runs in a fresh subprocess of this binary (its own process
//! group) under a watchdog that kills it and fails; inside, every forked
//! child reports with write(2), leaves with _exit, and is waited for under
//! its own watchdog.
//!
//! `cargo test -p forksafe --test fork [NAME...]`; the last line reads
//! `fork tests: N passed, M failed`.

mod support;

use forksafe::{Config, CoreConfig, Engine, Error, Forked, Lane, OpErrorKind};
use forksafe_testkit::child::run_isolated;
use forksafe_testkit::GilBridge;
use nix::unistd::Pid;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;

type Scenario = fn() -> Result<String, String>;

const SCENARIOS: &[(&str, Scenario)] = &[
    ("nothing_pending", nothing_pending),
    ("many_pending_compute", many_pending_compute),
    ("host_pending_gil_held", host_pending_gil_held),
    (
        "gil_free_in_children_of_raw_forks",
        gil_free_in_children_of_raw_forks,
    ),
    ("drained_fork_gil_held", drained_fork_gil_held),
    ("from_inside_op", from_inside_op),
    ("raw_fork_in_body_uses_engine", raw_fork_in_body_uses_engine),
    (
        "forksafe_fork_in_body_uses_engine",
        forksafe_fork_in_body_uses_engine,
    ),
    ("while_others_push", while_others_push),
    ("three_levels", three_levels),
    ("thousand_forks", thousand_forks),
    ("exit_with_pending_host_ops", exit_with_pending_host_ops),
    ("data_vars", data_vars),
    ("fork_inside_scope", fork_inside_scope),
    ("batch_pending_at_fork", batch_pending_at_fork),
];

/// Per-scenario watchdog (the scenario process and all it forked).
const SCENARIO_LIMIT: Duration = Duration::from_secs(60);
/// Watchdog of one forked child.
const CHILD_LIMIT: Duration = Duration::from_secs(30);

fn main() {
    if let Ok(name) = std::env::var("FORKSAFE_SCENARIO") {
        quiet_panics();
        // Some scenarios fork with `forksafe::fork`: map the stage board
        // first, so their children's stages reach the watchdog.
        support::stage_board();
        let Some((_, f)) = SCENARIOS.iter().find(|(n, _)| *n == name) else {
            say(&format!("no scenario {name}\n"));
            std::process::exit(3);
        };
        match std::panic::catch_unwind(f) {
            Ok(Ok(detail)) => {
                say(&format!("    {detail}\n"));
                std::process::exit(0)
            }
            Ok(Err(e)) => {
                say(&format!("    FAILED: {e}\n"));
                std::process::exit(1)
            }
            Err(_) => std::process::exit(2),
        }
    }
    let names: Vec<&'static str> = SCENARIOS.iter().map(|(n, _)| *n).collect();
    let (passed, failed) = forksafe_testkit::harness::run_counted(&names, |name| {
        let started = Instant::now();
        let (ok, output) = run_isolated("FORKSAFE_SCENARIO", name, SCENARIO_LIMIT);
        let secs = started.elapsed().as_secs_f64();
        let verdict = if ok { "ok" } else { "FAILED" };
        println!("fork test {name} ... {verdict} ({secs:.1}s)");
        print!("{output}");
        ok
    });
    println!("fork tests: {passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}

fn gil_engine(compute: usize, host: usize) -> (Engine, Arc<GilBridge>) {
    let gil = Arc::new(GilBridge::new());
    let e = Engine::with_bridge(
        Config {
            core: CoreConfig {
                compute_workers: compute,
                host_workers: host,
                ..CoreConfig::default()
            },
            ..Config::default()
        },
        Box::new(gil.clone()),
    )
    .expect("engine");
    (e, gil)
}

fn nothing_pending() -> Result<String, String> {
    let e = engine(2, 1);
    let c = counters(100);
    let vars = new_vars(&e, 8);
    push_counted(&e, &c, 0..100, &vars, Lane::Compute, Duration::ZERO)?;
    e.wait_all().map_err(|e| e.to_string())?;
    let snap = snapshot(&c);
    let pid = fork_raw(|| {
        let lost = check_child(
            &e,
            ChildExpect {
                snap,
                counters: &c,
                vars: &vars,
                pushed: Some(100),
                drained: true,
            },
        )?;
        if lost != 0 {
            return Err(format!("{lost} ops lost with nothing pending"));
        }
        Ok("nothing inherited, own ops ran".into())
    })?;
    wait_child(pid, CHILD_LIMIT)?;
    check_parent(&e, &c, 100)?;
    Ok("parent: 100/100 ops ran once; child: 0 lost".into())
}

fn many_pending_compute() -> Result<String, String> {
    let e = engine(2, 1);
    let n = 3000;
    let c = counters(n);
    let vars = new_vars(&e, 16);
    push_counted(
        &e,
        &c,
        0..n,
        &vars,
        Lane::Compute,
        Duration::from_micros(20),
    )?;
    let pid = fork_raw(|| {
        let snap = snapshot(&c);
        let lost = check_child(
            &e,
            ChildExpect {
                snap,
                counters: &c,
                vars: &vars,
                pushed: Some(n),
                drained: false,
            },
        )?;
        if lost == 0 {
            return Err("expected pending ops at the fork".into());
        }
        Ok(format!(
            "{lost} of {n} inherited ops completed LostInFork, none ran"
        ))
    })?;
    wait_child(pid, CHILD_LIMIT)?;
    check_parent(&e, &c, n)?;
    Ok(format!("parent: {n}/{n} ops ran exactly once"))
}

/// The seed's deadlock: host ops wait for the GIL-like lock that the
/// forking thread holds. Prepare does no draining, so the fork completes.
fn host_pending_gil_held() -> Result<String, String> {
    let (e, gil) = gil_engine(1, 1);
    let n = 50;
    let c = counters(n);
    let vars = new_vars(&e, 4);
    gil.lock().acquire();
    push_counted(&e, &c, 0..n, &vars, Lane::Host, Duration::ZERO)?;
    // Let the host worker enter the bridge and block on the lock.
    while gil.calls() == 0 {
        std::thread::yield_now();
    }
    std::thread::sleep(Duration::from_millis(20));
    let pid = fork_raw(|| {
        if !gil.lock().held_by_me() {
            return Err("the GIL-like lock is not held by the forking thread".into());
        }
        let snap = snapshot(&c);
        if snap.iter().any(|&x| x != 0) {
            return Err("a host op ran while the lock was held".into());
        }
        gil.lock().release();
        let lost = check_child(
            &e,
            ChildExpect {
                snap,
                counters: &c,
                vars: &vars,
                pushed: Some(n),
                drained: false,
            },
        )?;
        if lost != n {
            return Err(format!("{lost} of {n} host ops lost"));
        }
        // The child's host lane works (the lock was released above).
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        e.op("child host")
            .host()
            .run(move || r.store(true, Ordering::SeqCst))
            .map_err(|e| e.to_string())?;
        e.wait_all_timeout(Duration::from_secs(20))
            .map_err(|e| e.to_string())?;
        if !ran.load(Ordering::SeqCst) {
            return Err("child host op did not run".into());
        }
        Ok(format!(
            "lock held across fork; {lost} host ops LostInFork; own host op ran"
        ))
    })?;
    let waited = wait_child(pid, CHILD_LIMIT);
    gil.lock().release();
    waited?;
    check_parent(&e, &c, n)?;
    Ok(format!(
        "fork returned with the lock held; parent: {n}/{n} host ops ran once"
    ))
}

/// forksafe::fork() with the lock held: the drain releases it through the
/// bridge while it waits, so running host ops finish; queued ones are lost
/// in the child, none was mid-flight.
fn drained_fork_gil_held() -> Result<String, String> {
    let (e, gil) = gil_engine(2, 1);
    let n = 400;
    let c = counters(n);
    let vars = new_vars(&e, 8);
    gil.lock().acquire();
    push_counted(
        &e,
        &c,
        0..n / 2,
        &vars,
        Lane::Host,
        Duration::from_micros(200),
    )?;
    push_counted(
        &e,
        &c,
        n / 2..n,
        &vars,
        Lane::Compute,
        Duration::from_micros(200),
    )?;
    let forked = forksafe::fork_with(Duration::from_secs(10)).map_err(|e| e.to_string())?;
    match forked {
        Forked::Child { drain } => child_exit(|| {
            let snap = snapshot(&c);
            if !drain.drained() {
                return Err(format!("drain timed out: {:?}", drain.timed_out));
            }
            if !gil.lock().held_by_me() {
                return Err("lock not held in the child".into());
            }
            gil.lock().release();
            let lost = check_child(
                &e,
                ChildExpect {
                    snap,
                    counters: &c,
                    vars: &vars,
                    pushed: Some(n),
                    drained: true,
                },
            )?;
            Ok(format!(
                "drained fork: {lost} queued ops LostInFork, none mid-flight"
            ))
        }),
        Forked::Parent { child, drain } => {
            let waited = wait_child(Pid::from_raw(child), CHILD_LIMIT);
            if !gil.lock().held_by_me() {
                return Err("parent lost the lock across the fork".into());
            }
            gil.lock().release();
            waited?;
            check_parent(&e, &c, n)?;
            Ok(format!(
                "parent: {n}/{n} ops ran once; {} engine(s) drained",
                drain.engines
            ))
        }
    }
}

/// A raw fork from inside an op body: the op goes on in the child and
/// completes normally there; its thread serves the child's engine.
fn from_inside_op() -> Result<String, String> {
    let e = Arc::new(engine(2, 1));
    let n = 1000;
    let c = counters(n);
    let vars = new_vars(&e, 8);
    let fvar = e.new_var().map_err(|e| e.to_string())?;
    push_counted(
        &e,
        &c,
        0..n / 2,
        &vars,
        Lane::Compute,
        Duration::from_micros(20),
    )?;
    let child_pid = Arc::new(Mutex::new(None));
    let forker_runs = counters(1);
    {
        let (e2, c2, vars2, fvar2) = (e.clone(), c.clone(), vars.clone(), fvar.clone());
        let (slot, runs) = (child_pid.clone(), forker_runs.clone());
        e.op("forker")
            .writes(&[&fvar])
            .run(move || {
                runs[0].fetch_add(1, Ordering::SeqCst);
                // SAFETY: the child spawns a checker thread that leaves
                // with _exit; no std lock is needed in between.
                match unsafe { nix::unistd::fork() } {
                    Ok(nix::unistd::ForkResult::Parent { child }) => {
                        *slot.lock().unwrap() = Some(child);
                    }
                    Ok(nix::unistd::ForkResult::Child) => {
                        let snap = snapshot(&c2);
                        std::thread::spawn(move || {
                            child_exit(|| {
                                let report = e2
                                    .fork_report()
                                    .map_err(|e| e.to_string())?
                                    .ok_or("no report")?;
                                match &report.carried {
                                    Some(op) if op.name == "forker" => {}
                                    other => return Err(format!("carried: {other:?}")),
                                }
                                let lost = check_child(
                                    &e2,
                                    ChildExpect {
                                        snap,
                                        counters: &c2,
                                        vars: &vars2,
                                        pushed: None,
                                        drained: false,
                                    },
                                )?;
                                e2.wait_for_var(&fvar2)
                                    .map_err(|e| format!("forker in child: {e}"))?;
                                if e2.var_version(&fvar2).map_err(|e| e.to_string())? != 1 {
                                    return Err("forker did not complete in the child".into());
                                }
                                Ok(format!(
                                    "forker carried and completed; {lost} ops LostInFork"
                                ))
                            })
                        });
                    }
                    Err(err) => panic!("fork in op: {err}"),
                }
            })
            .map_err(|e| e.to_string())?;
    }
    push_counted(
        &e,
        &c,
        n / 2..n,
        &vars,
        Lane::Compute,
        Duration::from_micros(20),
    )?;
    e.wait_for_var_timeout(&fvar, Duration::from_secs(30))
        .map_err(|e| e.to_string())?;
    let pid = child_pid.lock().unwrap().ok_or("forker did not fork")?;
    wait_child(pid, CHILD_LIMIT)?;
    check_parent(&e, &c, n)?;
    if snapshot(&forker_runs) != [1] {
        return Err("forker ran more than once in the parent".into());
    }
    Ok(format!("parent: {n}/{n} ops and the forker ran once"))
}

/// In a fork child made inside the op "forker" (which writes `fvar`), from
/// the forker's own thread: pushes on both lanes and waits for them with
/// every kind of wait, then hands the check of the forker's own completion
/// to a thread that exits the child once the body has returned.
fn child_uses_engine_from_body(e: &Arc<Engine>, fvar: &forksafe::Var) {
    let checked = (|| -> Result<(), String> {
        let d = e.data(1_u64).map_err(|e| e.to_string())?;
        let w = d.clone();
        e.op("child add")
            .writes(&[d.var()])
            .run_with(move |acc| acc.write(&w).map(|mut v| *v += 41))
            .map_err(|e| e.to_string())?;
        let got = e.get(&d).map_err(|e| format!("get: {e}"))?;
        if got != 42 {
            return Err(format!("get gave {got}"));
        }
        let v = e.new_var().map_err(|e| e.to_string())?;
        e.op("child host")
            .writes(&[&v])
            .host()
            .run(|| {})
            .map_err(|e| e.to_string())?;
        e.wait_for_var(&v)
            .map_err(|e| format!("wait_for_var: {e}"))?;
        if e.var_version(&v).map_err(|e| e.to_string())? != 1 {
            return Err("wait_for_var returned before the child's op".into());
        }
        let h = e
            .op("child value")
            .run_with(|_| 7_u32)
            .map_err(|e| e.to_string())?;
        match h.wait() {
            Ok(7) => {}
            other => return Err(format!("handle: {other:?}")),
        }
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        e.op("child last")
            .run(move || r.store(true, Ordering::SeqCst))
            .map_err(|e| e.to_string())?;
        // The parent's ops still pending at the fork were lost here.
        match e.wait_all() {
            Ok(()) => {}
            Err(Error::OpsFailed(errs))
                if errs.iter().all(|x| x.kind() == &OpErrorKind::LostInFork) => {}
            Err(other) => return Err(format!("wait_all: {other}")),
        }
        if !ran.load(Ordering::SeqCst) {
            return Err("wait_all returned before the child's op".into());
        }
        match e.wait_for_var(fvar) {
            Err(Error::WaitOnSelf { op, on, .. }) if op.id == on.id && op.name == "forker" => {}
            other => return Err(format!("a wait on the forker's own var: {other:?}")),
        }
        Ok(())
    })();
    let (e2, fvar2) = (e.clone(), fvar.clone());
    std::thread::spawn(move || {
        child_exit(|| {
            checked?;
            e2.wait_for_var_timeout(&fvar2, Duration::from_secs(20))
                .map_err(|e| format!("forker in the child: {e}"))?;
            match e2.var_version(&fvar2) {
                Ok(1) => Ok("used the engine from the forker's body; forker completed".into()),
                other => Err(format!("forker's var version in the child: {other:?}")),
            }
        })
    });
}

/// A raw fork inside an op body, on one worker per lane: the child uses the
/// engine from that body, then the body returns and its op completes.
fn raw_fork_in_body_uses_engine() -> Result<String, String> {
    fork_in_body(|e, fvar| {
        // SAFETY: the child uses the engine (fork-safe by design) and
        // leaves through `child_exit`'s _exit.
        match unsafe { nix::unistd::fork() } {
            Ok(nix::unistd::ForkResult::Parent { child }) => Some(child),
            Ok(nix::unistd::ForkResult::Child) => {
                child_uses_engine_from_body(e, fvar);
                None
            }
            Err(err) => panic!("fork in op: {err}"),
        }
    })
}

/// `forksafe::fork` inside an op body (it drains every engine but the
/// calling op), then the same child.
fn forksafe_fork_in_body_uses_engine() -> Result<String, String> {
    fork_in_body(|e, fvar| match forksafe::fork() {
        Ok(Forked::Parent { child, .. }) => Some(Pid::from_raw(child)),
        Ok(Forked::Child { .. }) => {
            child_uses_engine_from_body(e, fvar);
            None
        }
        Err(err) => panic!("forksafe::fork in op: {err}"),
    })
}

/// Pushes the op "forker" (host lane, writes a var) whose body calls
/// `fork` and keeps the child's pid; waits for the child and checks the
/// parent still works.
fn fork_in_body(
    fork: impl Fn(&Arc<Engine>, &forksafe::Var) -> Option<Pid> + Send + Sync + 'static,
) -> Result<String, String> {
    let e = Arc::new(engine(1, 1));
    let fvar = e.new_var().map_err(|e| e.to_string())?;
    let slot = Arc::new(Mutex::new(None));
    let (e2, f2, s2) = (e.clone(), fvar.clone(), slot.clone());
    e.op("forker")
        .writes(&[&fvar])
        .host()
        .run(move || {
            if let Some(pid) = fork(&e2, &f2) {
                *s2.lock().unwrap() = Some(pid);
            }
        })
        .map_err(|e| e.to_string())?;
    e.wait_for_var_timeout(&fvar, Duration::from_secs(30))
        .map_err(|e| e.to_string())?;
    let pid = slot.lock().unwrap().ok_or("forker did not fork")?;
    wait_child(pid, CHILD_LIMIT)?;
    let h = e
        .op("after")
        .run_with(|_| 1_u8)
        .map_err(|e| e.to_string())?;
    match h.wait() {
        Ok(1) => Ok("parent works after".into()),
        other => Err(format!("parent after the fork: {other:?}")),
    }
}

/// Raw forks while two host workers hand the GIL-like lock back and forth
/// (each host op takes it through the bridge): whatever a worker held at
/// the fork, each child takes the lock, runs a host op of its own and
/// exits. Catches a host lock whose internal state a fork can copy held.
fn gil_free_in_children_of_raw_forks() -> Result<String, String> {
    let (e, gil) = gil_engine(1, 2);
    let e = Arc::new(e);
    let stop = Arc::new(AtomicBool::new(false));
    let v = e.new_var().map_err(|e| e.to_string())?;
    let feeder = {
        let (e, stop) = (e.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                for _ in 0..64 {
                    let _ = e.op("gil hand-off").host().run(|| {});
                }
                let _ = e.wait_all_timeout(Duration::from_secs(30));
            }
        })
    };
    let rounds = rounds().min(2000);
    for _ in 0..rounds {
        let (e2, g2, v2) = (e.clone(), gil.clone(), v.clone());
        let pid = fork_raw(move || {
            g2.lock().acquire();
            g2.lock().release();
            e2.op("child host op")
                .writes(&[&v2])
                .host()
                .run(|| {})
                .map_err(|e| e.to_string())?;
            e2.wait_for_var_timeout(&v2, Duration::from_secs(20))
                .map_err(|e| format!("child's host op: {e}"))?;
            Ok(String::new())
        })?;
        wait_child(pid, CHILD_LIMIT)?;
    }
    stop.store(true, Ordering::SeqCst);
    feeder.join().map_err(|_| "feeder panicked")?;
    Ok(format!("{rounds} children took the lock"))
}

/// Forks repeatedly while three threads keep pushing (they stop only
/// after the last fork).
fn while_others_push() -> Result<String, String> {
    let e = Arc::new(engine(3, 1));
    let per = 20_000;
    let c = counters(3 * per);
    let vars = new_vars(&e, 12);
    let forks = 10;
    let stop = Arc::new(AtomicBool::new(false));
    let pushed: Vec<usize> = std::thread::scope(|s| -> Result<Vec<usize>, String> {
        let pushers: Vec<_> = (0..3)
            .map(|t| {
                let (e, c, vars, stop) = (e.clone(), c.clone(), vars.clone(), stop.clone());
                s.spawn(move || {
                    let mut chunk = 0;
                    while !stop.load(Ordering::SeqCst) && (chunk + 1) * 50 <= per {
                        let lo = t * per + chunk * 50;
                        push_counted(
                            &e,
                            &c,
                            lo..lo + 50,
                            &vars,
                            Lane::Compute,
                            Duration::from_micros(5),
                        )?;
                        chunk += 1;
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    Ok::<usize, String>(chunk * 50)
                })
            })
            .collect();
        for _ in 0..forks {
            std::thread::sleep(Duration::from_millis(5));
            let pid = fork_raw(|| {
                let snap = snapshot(&c);
                let lost = check_child(
                    &e,
                    ChildExpect {
                        snap,
                        counters: &c,
                        vars: &vars,
                        pushed: None,
                        drained: false,
                    },
                )?;
                Ok(format!("{lost} ops LostInFork while 3 threads pushed"))
            })?;
            wait_child(pid, CHILD_LIMIT)?;
        }
        stop.store(true, Ordering::SeqCst);
        pushers
            .into_iter()
            .map(|p| p.join().map_err(|_| "pusher panicked".to_string())?)
            .collect()
    })?;
    e.wait_all_timeout(Duration::from_secs(30))
        .map_err(|e| e.to_string())?;
    let snap = snapshot(&c);
    for (t, &n) in pushed.iter().enumerate() {
        if let Some(i) = (t * per..t * per + n).find(|&i| snap[i] != 1) {
            return Err(format!("parent: op{i} ran {} times", snap[i]));
        }
    }
    let total: usize = pushed.iter().sum();
    Ok(format!(
        "{forks} forks under 3 pushers; parent: {total}/{total} ops ran once"
    ))
}

/// The child pushes, waits, and forks again: three levels.
fn three_levels() -> Result<String, String> {
    fn level(depth: u64, e: &Engine) -> Result<String, String> {
        let n = 500;
        let c = counters(n);
        let vars = new_vars(e, 8);
        push_counted(e, &c, 0..n, &vars, Lane::Compute, Duration::from_micros(10))?;
        let epoch = forksafe::fork_epoch();
        let pid = fork_raw(|| {
            if forksafe::fork_epoch() != epoch + 1 {
                return Err(format!(
                    "epoch {} after fork from {epoch}",
                    forksafe::fork_epoch()
                ));
            }
            let snap = snapshot(&c);
            let lost = check_child(
                e,
                ChildExpect {
                    snap,
                    counters: &c,
                    vars: &vars,
                    pushed: Some(n),
                    drained: false,
                },
            )?;
            let below = if depth < 3 {
                level(depth + 1, e)?
            } else {
                "no further fork".into()
            };
            Ok(format!(
                "generation {depth} (epoch {}): {lost} inherited ops LostInFork; {below}",
                epoch + 1
            ))
        })?;
        wait_child(pid, CHILD_LIMIT)?;
        check_parent(e, &c, n)?;
        Ok(format!(
            "generation {} as parent: {n}/{n} ran once",
            depth - 1
        ))
    }
    let e = engine(2, 1);
    level(1, &e)
}

/// 1,000 raw forks in a loop, each with ops pending.
fn thousand_forks() -> Result<String, String> {
    let e = engine(2, 1);
    let forks = 1000;
    let per = 5;
    let c = counters(forks * per);
    let vars = new_vars(&e, 4);
    let mut lost_total = 0usize;
    let lost_pipe = nix::unistd::pipe().map_err(|e| e.to_string())?;
    for k in 0..forks {
        push_counted(
            &e,
            &c,
            k * per..(k + 1) * per,
            &vars,
            Lane::Compute,
            Duration::from_micros(10),
        )?;
        // SAFETY: the child only makes engine calls, writes one byte with
        // write(2), and leaves with _exit.
        match unsafe { nix::unistd::fork() } {
            Ok(nix::unistd::ForkResult::Child) => {
                let snap = snapshot(&c);
                let code = match e.wait_all_timeout(Duration::from_secs(20)) {
                    Ok(()) => 0,
                    Err(forksafe::Error::OpsFailed(errs))
                        if errs
                            .iter()
                            .all(|x| x.kind() == &forksafe::OpErrorKind::LostInFork) =>
                    {
                        let b = [errs.len().min(255) as u8];
                        // SAFETY: one byte from a live buffer to the pipe.
                        unsafe {
                            libc::write(
                                std::os::fd::AsRawFd::as_raw_fd(&lost_pipe.1),
                                b.as_ptr().cast(),
                                1,
                            )
                        };
                        0
                    }
                    Err(_) => 1,
                };
                let code = if snapshot(&c) == snap { code } else { 4 };
                // SAFETY: ends the child at once.
                unsafe { libc::_exit(code) }
            }
            Ok(nix::unistd::ForkResult::Parent { child }) => {
                wait_child(child, CHILD_LIMIT).map_err(|err| format!("fork {k}: {err}"))?
            }
            Err(err) => return Err(format!("fork {k}: {err}")),
        }
    }
    drop(lost_pipe.1);
    let mut buf = Vec::new();
    std::io::Read::read_to_end(&mut std::fs::File::from(lost_pipe.0), &mut buf)
        .map_err(|e| e.to_string())?;
    lost_total += buf.iter().map(|&b| b as usize).sum::<usize>();
    check_parent(&e, &c, forks * per)?;
    Ok(format!(
        "{forks} forks, children lost {lost_total} ops in all and re-ran none; parent: {}/{} ran once",
        forks * per,
        forks * per
    ))
}

/// The process exits with host ops still queued: the exit guard shuts the
/// default engine down within its deadline, and no host call happens after.
fn exit_with_pending_host_ops() -> Result<String, String> {
    let gil = Arc::new(GilBridge::new());
    let e = forksafe::init_default(
        Config {
            core: CoreConfig {
                host_workers: 1,
                ..CoreConfig::default()
            },
            shutdown_deadline: Duration::from_millis(100),
            ..Config::default()
        },
        Box::new(gil.clone()),
    )
    .map_err(|e| e.to_string())?;
    let n = 200;
    let c = counters(n);
    let vars = new_vars(e, 2);
    push_counted(e, &c, 0..n, &vars, Lane::Host, Duration::from_millis(5))?;
    {
        let _exit = forksafe::default_exit_guard().map_err(|e| e.to_string())?;
        // main's body would end here, with host ops still queued.
    }
    if e.state() != forksafe::State::Stopped {
        return Err(format!("engine {:?} after the exit guard", e.state()));
    }
    let calls = gil.calls();
    gil.set_finalizing(true);
    let ran_at_shutdown = snapshot(&c);
    // Give any stray worker a chance to misbehave before checking.
    std::thread::sleep(Duration::from_millis(50));
    if gil.calls() != calls || gil.calls_after_finalize() != 0 {
        return Err("host called after shutdown".into());
    }
    if snapshot(&c) != ran_at_shutdown {
        return Err("a host op ran after shutdown".into());
    }
    let ran = ran_at_shutdown.iter().filter(|&&x| x == 1).count();
    if ran == n {
        return Err("nothing was queued at exit".into());
    }
    Ok(format!(
        "{ran} of {n} host ops ran before the deadline, {} cancelled; no host call after",
        n - ran
    ))
}

/// Data vars across a fork: a value whose writer completed before the fork
/// is the child's as it was; a value whose writer was half-way through its
/// body at the fork is poisoned `LostInFork` in the child, never handed out
/// half written; the parent's writer finishes and the parent reads the
/// whole write.
fn data_vars() -> Result<String, String> {
    use std::sync::mpsc;
    let e = engine(2, 1);
    let done = e.data(0_u64).map_err(|e| e.to_string())?;
    let d = done.clone();
    e.op("set 41")
        .writes(&[done.var()])
        .run_with(move |acc| acc.write(&d).map(|mut v| *v = 41))
        .map_err(|e| e.to_string())?;
    if e.get(&done) != Ok(41) {
        return Err("the completed write is not visible".into());
    }
    let half = e.data(vec![0_u8; 4]).map_err(|e| e.to_string())?;
    let (started_tx, started) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let h = half.clone();
    e.op("half write")
        .writes(&[half.var()])
        .run_with(move |acc| {
            let mut v = acc.write(&h)?;
            v[0] = 1;
            let _ = started_tx.send(());
            let _ = go_rx.recv();
            v.iter_mut().for_each(|x| *x = 1);
            Ok::<_, forksafe::Error>(())
        })
        .map_err(|e| e.to_string())?;
    started
        .recv_timeout(Duration::from_secs(20))
        .map_err(|_| "the writer never started")?;
    let pid = fork_raw(|| {
        stage("data_vars child: get the completed and the half-written value");
        if e.get(&done) != Ok(41) {
            return Err(format!("child get(done) = {:?}", e.get(&done)));
        }
        match e.get(&half) {
            Err(forksafe::Error::Poisoned(err)) if err.kind() == &OpErrorKind::LostInFork => {}
            other => return Err(format!("child got the half-written value: {other:?}")),
        }
        Ok("completed data kept, half-written data poisoned LostInFork".into())
    })?;
    wait_child(pid, CHILD_LIMIT)?;
    let _ = go.send(());
    match e.get(&half) {
        Ok(v) if v == vec![1; 4] => Ok("parent sees the whole write".into()),
        other => Err(format!("parent get(half) = {other:?}")),
    }
}

/// A raw fork from inside a scope's closure while one scoped op runs
/// (blocked) and another is queued behind it: in the child the scope
/// returns, having waited for nothing it cannot have, with both ops
/// `LostInFork`; the parent's scope waits for both and returns `Ok`, and
/// its borrows saw both ops run.
fn fork_inside_scope() -> Result<String, String> {
    use nix::unistd::{fork, ForkResult};
    use std::sync::mpsc;
    let e = engine(2, 1);
    let v = e.new_var().map_err(|e| e.to_string())?;
    let (started_tx, started) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let mut log: Vec<&str> = Vec::new();
    let (side, scoped) = {
        let log = &mut log;
        let mut side = None;
        let scoped = e.scope(|s| {
            let side = &mut side;
            let first = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let f2 = first.clone();
            s.op("running").writes(&[&v]).run(move |_| {
                let _ = started_tx.send(());
                let _ = go_rx.recv();
                f2.lock().unwrap().push("running");
            })?;
            s.op("queued")
                .writes(&[&v])
                .run(move |_| log.push("queued"))?;
            started
                .recv_timeout(Duration::from_secs(20))
                .map_err(|_| Error::Timeout { pending: vec![] })?;
            // SAFETY: the child only waits for the scope (engine calls run
            // after the child settles) and leaves with `_exit`.
            *side = Some(match unsafe { fork() } {
                Ok(ForkResult::Child) => None,
                Ok(ForkResult::Parent { child }) => {
                    let _ = go.send(());
                    Some(child)
                }
                Err(e) => return Err(Error::ForkFailed(e.to_string())),
            });
            Ok(())
        });
        (side, scoped)
    };
    match side {
        None => Err(format!("the scope ended before the fork: {scoped:?}")),
        Some(None) => {
            // The child.
            let lost = match scoped {
                Err(Error::OpsFailed(errs))
                    if errs.iter().all(|e| e.kind() == &OpErrorKind::LostInFork) =>
                {
                    errs.len()
                }
                other => {
                    say(&format!("    child: scope gave {other:?}\n"));
                    support::exit_now(1)
                }
            };
            let code = if lost == 2 && log.is_empty() { 0 } else { 1 };
            support::exit_now(code)
        }
        Some(Some(child)) => {
            wait_child(child, CHILD_LIMIT)?;
            match scoped {
                Ok(Ok(())) if log == vec!["queued"] => {
                    Ok("child: both scoped ops LostInFork; parent: both ran".into())
                }
                other => Err(format!("parent scope gave {other:?}, log {log:?}")),
            }
        }
    }
}

/// `n` specs writing `var`, each logging its index after a short body.
fn logged_batch(
    e: &Engine,
    var: &forksafe::Var,
    n: usize,
) -> (Vec<forksafe::OpSpec>, Arc<Mutex<Vec<usize>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let specs = (0..n)
        .map(|i| {
            let log = log.clone();
            e.op("batched").writes(&[var]).into_spec(move || {
                std::thread::sleep(Duration::from_micros(5));
                log.lock().unwrap().push(i);
            })
        })
        .collect();
    (specs, log)
}

/// A fork while a batch's ops are pending: the parent's all run once, in
/// order; the child's batch on the inherited engine runs in order.
fn batch_pending_at_fork() -> Result<String, String> {
    let e = engine(2, 1);
    let v = e.new_var().map_err(|e| e.to_string())?;
    let n = 2000;
    let (specs, log) = logged_batch(&e, &v, n);
    if let Some(err) = e.push_batch(specs).into_iter().find_map(Result::err) {
        return Err(format!("parent's batch: {err}"));
    }
    let pid = fork_raw(|| {
        let w = e.new_var().map_err(|e| e.to_string())?;
        let (specs, log) = logged_batch(&e, &w, 100);
        if let Some(err) = e.push_batch(specs).into_iter().find_map(Result::err) {
            return Err(format!("child's batch: {err}"));
        }
        e.wait_for_var(&w).map_err(|e| e.to_string())?;
        let got = log.lock().unwrap().clone();
        if got != (0..100).collect::<Vec<_>>() {
            return Err(format!("child's batch ran as {got:?}"));
        }
        Ok("child: a batch of 100 ran in order".into())
    })?;
    wait_child(pid, CHILD_LIMIT)?;
    e.wait_for_var(&v).map_err(|e| e.to_string())?;
    let got = log.lock().unwrap().clone();
    if got != (0..n).collect::<Vec<_>>() {
        return Err(format!(
            "parent's batch ran {} ops, out of order or twice",
            got.len()
        ));
    }
    Ok(format!("parent: a batch of {n} ran once each, in order"))
}
