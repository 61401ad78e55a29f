//! Fork cost: fork + child `_exit(0)` + `waitpid`, many times, in a fresh
//! process of this same binary per mode: no engine, an idle started engine,
//! a busy engine, two controls, and no engine / idle engine again in a
//! process with 64 MiB of touched heap (a process of realistic size, where
//! copying its page tables dominates). Modes run alternately; the ratio of
//! medians is reported.

use crate::workloads::busy_2us;
use forksafe::{Config, CoreConfig, Engine};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Forks per measurement.
pub const FORKS: u32 = 2000;

/// The modes, in alternation order: no engine; an idle started engine
/// (workers parked); a busy engine (a thread pushing 2 µs ops); two
/// controls: `handlers` (an engine shut down before the forks, its workers
/// joined: only its atfork handlers run) and `threads` (no engine, parked plain threads, as
/// many as the workers), and `exited` (no engine, as many plain threads
/// started, made to allocate, and joined before the forks: what a thread
/// leaves behind — its cached stack, its malloc arena); and no engine / idle
/// engine in a process with 64 MiB of touched heap; then tokio: a plain
/// multi-thread runtime, idle (`tokio-plain`), and a `ForkSafeRuntime` with
/// as many workers, idle and busy (a thread in `block_on` spawning tasks).
pub const MODES: [&str; 11] = [
    "none",
    "idle",
    "busy",
    "handlers",
    "threads",
    "exited",
    "none-64m",
    "idle-64m",
    "tokio-plain",
    "tokio-idle",
    "tokio-busy",
];

/// Heap the `-64m` modes touch before forking.
const BALLAST: usize = 64 << 20;

/// Forks per measurement in the large-heap modes (each fork copies the
/// page tables of the heap).
const BALLAST_FORKS: u32 = 200;

/// How many forks mode `mode` measures, as a label.
pub fn forks_of(mode: &str) -> String {
    let n = if mode.ends_with("-64m") {
        BALLAST_FORKS
    } else {
        FORKS
    };
    format!("{n} forks")
}

/// CPU time (user + system) of the calling thread plus that of its reaped
/// children.
fn cpu_time() -> Duration {
    let get = |who: libc::c_int| {
        // SAFETY: `getrusage` writes into the zeroed struct we pass.
        let ru = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            libc::getrusage(who, &mut ru);
            ru
        };
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        tv(ru.ru_utime) + tv(ru.ru_stime)
    };
    get(libc::RUSAGE_THREAD) + get(libc::RUSAGE_CHILDREN)
}

/// Forks `forks` times; returns µs per fork + exit + waitpid: wall time,
/// and CPU time of the forking thread plus the children (which other load
/// on the machine does not inflate).
fn fork_loop(forks: u32) -> (f64, f64) {
    let start = Instant::now();
    let cpu0 = cpu_time();
    for _ in 0..forks {
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
    let per = |d: Duration| d.as_secs_f64() * 1e6 / f64::from(forks);
    (per(start.elapsed()), per(cpu_time() - cpu0))
}

/// The child-process side: runs one mode and prints its figure.
pub fn child(mode: &str, workers: usize) -> Result<(), String> {
    let config = Config {
        core: CoreConfig {
            compute_workers: workers,
            ..CoreConfig::default()
        },
        ..Config::default()
    };
    // The ballast stays alive (and resident) through the fork loop.
    let mut ballast = Vec::new();
    let mut forks = FORKS;
    let mode = match mode.strip_suffix("-64m") {
        Some(base) => {
            ballast = vec![1u8; BALLAST];
            forks = BALLAST_FORKS;
            base
        }
        None => mode,
    };
    let us = match mode {
        "none" => fork_loop(forks),
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
            fork_loop(forks)
        }
        "handlers" => {
            // Workers start in `Engine::new`; a shut-down engine has joined
            // them but stays registered, so only its atfork handlers run.
            let engine = Engine::new(config).map_err(|e| e.to_string())?;
            engine
                .shutdown(std::time::Duration::from_secs(5))
                .map_err(|e| e.to_string())?;
            let us = fork_loop(forks);
            drop(engine);
            us
        }
        "exited" => {
            for _ in 0..workers {
                std::thread::spawn(|| std::hint::black_box(vec![0u8; 100]).len())
                    .join()
                    .map_err(|_| "thread panicked".to_string())?;
            }
            fork_loop(forks)
        }
        "threads" => {
            let stop = AtomicBool::new(false);
            let mut us = (0.0, 0.0);
            std::thread::scope(|s| {
                let parked: Vec<_> = (0..workers)
                    .map(|_| {
                        s.spawn(|| {
                            while !stop.load(Ordering::Acquire) {
                                std::thread::park();
                            }
                        })
                    })
                    .collect();
                us = fork_loop(forks);
                stop.store(true, Ordering::Release);
                for t in &parked {
                    t.thread().unpark();
                }
            });
            us
        }
        "busy" => {
            let engine = Engine::new(config).map_err(|e| e.to_string())?;
            let vars: Vec<_> = (0..64).map(|_| engine.new_var().expect("var")).collect();
            let stop = AtomicBool::new(false);
            let mut us = (0.0, 0.0);
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
                us = fork_loop(forks);
                stop.store(true, Ordering::Relaxed);
            });
            us
        }
        "tokio-plain" => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async { tokio::spawn(async {}).await })
                .map_err(|e| e.to_string())?;
            fork_loop(forks)
        }
        "tokio-idle" => {
            let rt = forksafe_tokio::RuntimeBuilder::new_multi_thread()
                .worker_threads(workers)
                .build()
                .map_err(|e| e.to_string())?;
            let t = rt.spawn(async {}).map_err(|e| e.to_string())?;
            rt.block_on(t)
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            fork_loop(forks)
        }
        "tokio-busy" => {
            let rt = forksafe_tokio::RuntimeBuilder::new_multi_thread()
                .worker_threads(workers)
                .build()
                .map_err(|e| e.to_string())?;
            let stop = AtomicBool::new(false);
            let mut us = (0.0, 0.0);
            std::thread::scope(|s| {
                s.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        let _ = rt.block_on(async {
                            let tasks: Vec<_> = (0..100)
                                .map(|_| tokio::spawn(async { busy_2us() }))
                                .collect();
                            for t in tasks {
                                let _ = t.await;
                            }
                        });
                    }
                });
                us = fork_loop(forks);
                stop.store(true, Ordering::Relaxed);
            });
            us
        }
        other => return Err(format!("unknown fork mode {other}")),
    };
    let touched = ballast
        .iter()
        .step_by(4096)
        .map(|b| usize::from(*b))
        .sum::<usize>();
    let mode = if touched > 0 {
        format!("{mode}-64m")
    } else {
        mode.to_string()
    };
    println!("FORK mode={mode} us={:.3} cpu_us={:.3}", us.0, us.1);
    Ok(())
}

/// Per mode: the wall and CPU µs-per-fork figures of each round.
pub type ForkFigures = Vec<(&'static str, Vec<f64>, Vec<f64>)>;

/// Runs every mode `rounds` times, alternating, each in a fresh process.
pub fn measure(rounds: usize, workers: usize) -> Result<ForkFigures, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut out: ForkFigures = MODES.iter().map(|m| (*m, Vec::new(), Vec::new())).collect();
    for _ in 0..rounds {
        for (mode, wall, cpu) in out.iter_mut() {
            let o = Command::new(&exe)
                .args(["--fork-child", mode, "--workers", &workers.to_string()])
                .output()
                .map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&o.stdout);
            let figures = text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("FORK mode={mode} us=")))
                .and_then(|s| {
                    let (w, c) = s.trim().split_once(" cpu_us=")?;
                    Some((w.parse::<f64>().ok()?, c.parse::<f64>().ok()?))
                })
                .ok_or_else(|| {
                    format!(
                        "fork child {mode} gave no figure: {text} {}",
                        String::from_utf8_lossy(&o.stderr)
                    )
                })?;
            wall.push(figures.0);
            cpu.push(figures.1);
        }
    }
    Ok(out)
}
