//! Fork cost: fork + child `_exit(0)` + `waitpid`, many times, in a fresh
//! process of this same binary per mode: no engine, an idle started engine,
//! a busy engine. Modes run alternately; the ratio of medians is reported.

use crate::workloads::busy_2us;
use forksafe::{Config, Engine};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Forks per measurement.
pub const FORKS: u32 = 2000;

/// The modes, in alternation order.
pub const MODES: [&str; 3] = ["none", "idle", "busy"];

/// Forks `FORKS` times; returns µs per fork + exit + waitpid.
fn fork_loop() -> f64 {
    let start = Instant::now();
    for _ in 0..FORKS {
        // SAFETY: the child calls only `_exit`, which is async-signal-safe.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: `_exit` ends the child without running any handler.
            unsafe { libc::_exit(0) };
        }
        assert!(pid > 0, "fork failed");
        let mut status = 0;
        // SAFETY: `pid` is our child; `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(r, pid, "waitpid failed");
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(FORKS)
}

/// The child-process side: runs one mode and prints its figure.
pub fn child(mode: &str, workers: usize) -> Result<(), String> {
    let config = Config {
        compute_workers: workers,
        ..Config::default()
    };
    let us = match mode {
        "none" => fork_loop(),
        "idle" => {
            let engine = Engine::new(config).map_err(|e| e.to_string())?;
            let v = engine.new_var().map_err(|e| e.to_string())?;
            for _ in 0..100 {
                engine
                    .op("warm")
                    .writes(&[&v])
                    .run(|| {})
                    .map_err(|e| e.to_string())?;
            }
            engine.wait_all().map_err(|e| e.to_string())?;
            fork_loop()
        }
        "busy" => {
            let engine = Engine::new(config).map_err(|e| e.to_string())?;
            let vars: Vec<_> = (0..64).map(|_| engine.new_var().expect("var")).collect();
            let stop = AtomicBool::new(false);
            let mut us = 0.0;
            std::thread::scope(|s| {
                s.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        for i in 0..1000 {
                            let v = &vars[i % vars.len()];
                            engine.op("busy").writes(&[v]).run(busy_2us).expect("push");
                        }
                        engine.wait_all().expect("wait_all");
                    }
                });
                us = fork_loop();
                stop.store(true, Ordering::Relaxed);
            });
            us
        }
        other => return Err(format!("unknown fork mode {other}")),
    };
    println!("FORK mode={mode} us={us:.3}");
    Ok(())
}

/// Runs every mode `rounds` times, alternating, each in a fresh process;
/// returns per mode the list of µs-per-fork figures.
pub fn measure(rounds: usize, workers: usize) -> Result<Vec<(&'static str, Vec<f64>)>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut out: Vec<(&'static str, Vec<f64>)> = MODES.iter().map(|m| (*m, Vec::new())).collect();
    for _ in 0..rounds {
        for (mode, figures) in out.iter_mut() {
            let o = Command::new(&exe)
                .args(["--fork-child", mode, "--workers", &workers.to_string()])
                .output()
                .map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&o.stdout);
            let us = text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("FORK mode={mode} us=")))
                .and_then(|s| s.trim().parse::<f64>().ok())
                .ok_or_else(|| {
                    format!(
                        "fork child {mode} gave no figure: {text} {}",
                        String::from_utf8_lossy(&o.stderr)
                    )
                })?;
            figures.push(us);
        }
    }
    Ok(out)
}
