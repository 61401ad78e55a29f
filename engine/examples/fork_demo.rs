//! forksafe's fork demo: the seed's deadlock scenario, survived.
//!
//! A "host" (a lock like CPython's GIL) is held by the main thread while
//! host ops wait for it; the process forks anyway, the child works on its
//! own, the parent finishes every op exactly once, and the process exits
//! with host ops still queued without calling the host after shutdown.
//!
//! `cargo run --release -p forksafe --example fork_demo` — exits non-zero
//! if any step misbehaves.

use forksafe::{Config, CoreConfig, Engine, Error, Forked, OpErrorKind};
use forksafe_testkit::GilBridge;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Prints with one write(2): safe on both sides of a fork.
fn say(msg: impl AsRef<str>) {
    let line = format!("{}\n", msg.as_ref());
    // SAFETY: writes a live buffer's bytes to fd 1.
    unsafe {
        libc::write(1, line.as_ptr().cast(), line.len());
    }
}

fn check(ok: bool, what: &str) -> Result<(), String> {
    if ok {
        say(format!("  ok: {what}"));
        Ok(())
    } else {
        Err(what.to_string())
    }
}

fn counted(engine: &Engine, name: &str, host: bool, n: usize, work: Duration) -> Arc<AtomicU32> {
    let runs = Arc::new(AtomicU32::new(0));
    for i in 0..n {
        let r = runs.clone();
        let v = engine.new_var().expect("var");
        let op = engine.op(format!("{name} {i}")).writes(&[&v]);
        let op = if host { op.host() } else { op };
        op.run(move || {
            std::thread::sleep(work);
            r.fetch_add(1, Ordering::SeqCst);
        })
        .expect("push");
    }
    runs
}

fn main() {
    match demo() {
        Ok(()) => say("fork_demo: every step behaved"),
        Err(e) => {
            say(format!("fork_demo: FAILED: {e}"));
            std::process::exit(1);
        }
    }
}

fn demo() -> Result<(), String> {
    let gil = Arc::new(GilBridge::new());
    let engine = Engine::with_bridge(
        Config {
            core: CoreConfig {
                compute_workers: 2,
                host_workers: 1,
                ..CoreConfig::default()
            },
            fork_drain: Duration::from_secs(5),
            shutdown_deadline: Duration::from_millis(200),
        },
        Box::new(gil.clone()),
    )
    .map_err(|e| e.to_string())?;

    say("1. the main thread takes the host lock (like Python holding the GIL)");
    gil.lock().acquire();
    say("2. push 200 compute ops and 20 host ops (the host ops need the lock)");
    let compute = counted(&engine, "compute", false, 200, Duration::from_micros(200));
    let host = counted(&engine, "host", true, 20, Duration::from_millis(1));

    say("3. fork while host ops are pending and the lock is held");
    let forked = engine.fork().map_err(|e| format!("fork: {e}"))?;
    match forked {
        Forked::Child { drain } => {
            let code = match child(&engine, &gil, drain.drained()) {
                Ok(()) => 0,
                Err(e) => {
                    say(format!("  child FAILED: {e}"));
                    1
                }
            };
            // SAFETY: the child leaves without running the parent's exit path.
            unsafe { libc::_exit(code) }
        }
        Forked::Parent { child, drain } => {
            say(format!(
                "  parent: forked child {child}; drain {} ({} engine held)",
                if drain.drained() {
                    "complete"
                } else {
                    "timed out"
                },
                drain.engines
            ));
            check(
                gil.lock().held_by_me(),
                "parent still holds the lock after the fork",
            )?;
            let status =
                wait_with_watchdog(nix::unistd::Pid::from_raw(child), Duration::from_secs(30))?;
            check(status, "the child finished its own work and exited 0")?;
        }
    }

    say("5. the parent releases the lock and finishes");
    gil.lock().release();
    engine
        .wait_all_timeout(Duration::from_secs(30))
        .map_err(|e| format!("parent wait_all: {e}"))?;
    check(
        compute.load(Ordering::SeqCst) == 200 && host.load(Ordering::SeqCst) == 20,
        "parent: 200/200 compute and 20/20 host ops ran exactly once",
    )?;

    say("6. exit with 100 slow host ops still queued (shutdown deadline 200 ms)");
    let late = counted(&engine, "late host", true, 100, Duration::from_millis(10));
    let started = Instant::now();
    {
        let _exit = engine.exit_guard();
    }
    let calls = gil.calls();
    gil.set_finalizing(true); // the host is finalising from here on
    let ran = late.load(Ordering::SeqCst);
    say(format!(
        "  shutdown took {:?}: {ran} late host ops ran, {} cancelled",
        started.elapsed(),
        100 - ran
    ));
    check(
        ran < 100,
        "host ops were still queued at exit and were cancelled",
    )?;
    check(
        engine.op("after exit").run(|| {}) == Err(Error::ShutDown),
        "pushes after shutdown fail with ShutDown",
    )?;
    std::thread::sleep(Duration::from_millis(50));
    check(
        gil.calls() == calls && gil.calls_after_finalize() == 0,
        "no host call after shutdown",
    )?;
    drop(engine);
    Ok(())
}

fn child(engine: &Engine, gil: &GilBridge, drained: bool) -> Result<(), String> {
    say("4. child: one thread, a copy of the parent");
    check(
        drained,
        "child: the drain finished before the fork (no op mid-flight)",
    )?;
    check(
        gil.lock().held_by_me(),
        "child: the forking thread still holds the lock",
    )?;
    gil.lock().release();
    let report = engine
        .fork_report()
        .map_err(|e| e.to_string())?
        .ok_or("no fork report")?;
    say(format!(
        "  child: {} inherited ops completed LostInFork without running",
        report.lost.len()
    ));
    match engine.wait_all_timeout(Duration::from_secs(10)) {
        Ok(()) => {}
        Err(Error::OpsFailed(errs)) => check(
            errs.iter().all(|e| e.kind() == &OpErrorKind::LostInFork),
            "child: every inherited op failed with LostInFork",
        )?,
        Err(e) => return Err(format!("child wait_all: {e}")),
    }
    let own_compute = counted(
        engine,
        "child compute",
        false,
        50,
        Duration::from_micros(100),
    );
    let own_host = counted(engine, "child host", true, 5, Duration::from_micros(100));
    engine
        .wait_all_timeout(Duration::from_secs(10))
        .map_err(|e| format!("child's own ops: {e}"))?;
    check(
        own_compute.load(Ordering::SeqCst) == 50 && own_host.load(Ordering::SeqCst) == 5,
        "child: its own 50 compute and 5 host ops ran",
    )
}

fn wait_with_watchdog(child: nix::unistd::Pid, limit: Duration) -> Result<bool, String> {
    let deadline = Instant::now() + limit;
    loop {
        match waitpid(child, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) if Instant::now() > deadline => {
                let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
                let _ = waitpid(child, None);
                return Err("the child hung (killed by the watchdog)".into());
            }
            Ok(WaitStatus::StillAlive) => std::thread::sleep(Duration::from_millis(2)),
            Ok(WaitStatus::Exited(_, code)) => return Ok(code == 0),
            Ok(other) => return Err(format!("child: {other:?}")),
            Err(e) => return Err(format!("waitpid: {e}")),
        }
    }
}
