//! Lifecycle sequences from several threads at once: pushes, waits,
//! quiesce and resume, shutdown, and simulated forks (the parent side of a
//! fork: [`ForkDomain::prepare`] then [`ForkDomain::parent`], as the atfork
//! handlers run them, without the OS fork). The engine is core's engine
//! over the production payload, in a fork domain of its own so simulated
//! forks never touch the process's real one.
//!
//! Properties: nothing panics; no call hangs (a wait may time out only if
//! a quiesce was held or taken while it waited, or after a shutdown); no op
//! is lost (every accepted op's body runs exactly once, or a shutdown
//! report lists it cancelled); calls fail only with the errors the
//! contract gives for the state (`ShutDown` after a shutdown, errors of
//! cancelled ops).

use forksafe::{Error, Lane, OpErrorKind, Task};
use forksafe_core::{Config, CoreEngine, ForkDomain, OpSpec};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The fork domain of lifecycle engines (not the process's real one).
static LIFE_DOMAIN: ForkDomain = ForkDomain::new();

/// Vars of a lifecycle engine.
pub const LIFE_VARS: usize = 4;
/// Most actions per thread.
pub const MAX_ACTIONS: usize = 24;

/// One action of one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Push an op on a var (read or write), compute or host, sync or async
    /// (its token completed from a helper thread).
    Push {
        /// The var.
        var: u8,
        /// Writes it (else reads it).
        write: bool,
        /// On the host lane.
        host: bool,
        /// Async.
        asynchronous: bool,
    },
    /// `wait_for_var`.
    WaitVar(u8),
    /// `wait_all`.
    WaitAll,
    /// Take a quiesce.
    Quiesce,
    /// Drop this thread's latest quiesce guard.
    Resume,
    /// Shut the engine down.
    Shutdown,
    /// A simulated fork: prepare, then parent.
    SimFork,
}

/// Sequences of actions, one per thread.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lifecycle {
    /// Compute workers (1..=2).
    pub compute_workers: u8,
    /// One list of actions per thread (1..=3 threads).
    pub threads: Vec<Vec<Action>>,
}

/// Decodes any bytes into a lifecycle: byte 0 picks the thread count and
/// the pool size, then the bytes are dealt to the threads in turn.
pub fn decode_lifecycle(bytes: &[u8]) -> Lifecycle {
    let head = bytes.first().copied().unwrap_or(0);
    let n = 1 + (head % 3) as usize;
    let mut threads = vec![Vec::new(); n];
    for (i, &b) in bytes.iter().skip(1).enumerate() {
        let t = &mut threads[i % n];
        if t.len() >= MAX_ACTIONS {
            continue;
        }
        let var = (b >> 3) % LIFE_VARS as u8;
        t.push(match b % 8 {
            0..=2 => Action::Push {
                var,
                write: b & 0x20 != 0,
                host: b & 0x40 != 0,
                asynchronous: b & 0x80 != 0,
            },
            3 => Action::WaitVar(var),
            4 => Action::WaitAll,
            5 => Action::Quiesce,
            6 => Action::Resume,
            _ if (b >> 3) & 3 == 0 => Action::Shutdown,
            _ => Action::SimFork,
        });
    }
    Lifecycle {
        compute_workers: 1 + (head >> 2) % 2,
        threads,
    }
}

/// What a lifecycle run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LifeStats {
    /// Ops accepted.
    pub accepted: usize,
    /// Ops cancelled by a shutdown.
    pub cancelled: usize,
}

/// Bound on a wait that nothing should hold up.
const LONG: Duration = Duration::from_secs(10);
/// Bound on a wait that a held quiesce holds up.
const SHORT: Duration = Duration::from_millis(5);

struct Ctx {
    engine: CoreEngine<Task>,
    vars: Vec<forksafe_core::Var<Task>>,
    /// Per accepted op (by label): how many times its body ran.
    runs: Vec<AtomicU32>,
    next_label: AtomicUsize,
    /// Quiesces held or being taken.
    held: AtomicUsize,
    /// Quiesces taken or released so far.
    quiesce_events: AtomicUsize,
    shut: AtomicBool,
    /// Accepted ops: label and var.
    accepted: Mutex<Vec<(usize, usize)>>,
    /// Ops a shutdown report listed as cancelled.
    cancelled: Mutex<BTreeSet<String>>,
    /// Ops a `wait_all` reported failed.
    failed: Mutex<BTreeSet<String>>,
}

/// Runs a lifecycle; `Err` says what went wrong.
pub fn run_lifecycle(life: &Lifecycle) -> Result<LifeStats, String> {
    let total: usize = life.threads.iter().map(Vec::len).sum();
    let config = Config {
        compute_workers: life.compute_workers.clamp(1, 2) as usize,
        host_workers: 1,
        ..Config::default()
    };
    let engine = CoreEngine::new(&LIFE_DOMAIN, config).map_err(|e| format!("engine: {e}"))?;
    let vars = (0..LIFE_VARS)
        .map(|_| engine.new_var())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("new_var: {e}"))?;
    let ctx = Arc::new(Ctx {
        engine,
        vars,
        runs: (0..total).map(|_| AtomicU32::new(0)).collect(),
        next_label: AtomicUsize::new(0),
        held: AtomicUsize::new(0),
        quiesce_events: AtomicUsize::new(0),
        shut: AtomicBool::new(false),
        accepted: Mutex::new(Vec::new()),
        cancelled: Mutex::new(BTreeSet::new()),
        failed: Mutex::new(BTreeSet::new()),
    });
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = life
            .threads
            .iter()
            .enumerate()
            .map(|(t, actions)| {
                let ctx = ctx.clone();
                s.spawn(move || run_thread(&ctx, t, actions))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())))
            .collect()
    });
    for r in results {
        r?;
    }
    // Everything accepted either runs or is cancelled: finish with a
    // shutdown, then wait for bodies still running to return.
    let report = ctx
        .engine
        .shutdown(LONG)
        .map_err(|e| format!("final shutdown: {e}"))?;
    ctx.cancelled
        .lock()
        .expect("cancelled")
        .extend(report.cancelled.iter().map(|i| i.name.clone()));
    let start = Instant::now();
    while ctx.engine.pending().unwrap_or(0) > 0 {
        if start.elapsed() > LONG {
            return Err(format!(
                "{} ops still pending after the final shutdown",
                ctx.engine.pending().unwrap_or(0)
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let _ = waited(&ctx, |timeout| ctx.engine.wait_all_timeout(timeout));
    let accepted = ctx.accepted.lock().expect("accepted").clone();
    let cancelled = ctx.cancelled.lock().expect("cancelled").clone();
    let failed = ctx.failed.lock().expect("failed").clone();
    let shut = ctx.shut.load(Ordering::SeqCst);
    for &(label, var) in &accepted {
        let ran = ctx.runs[label].load(Ordering::SeqCst);
        let op = name(label);
        // Without a shutdown before the final one (which lets every queued
        // op run), every op runs exactly once. After one, an op that did
        // not run was cancelled: listed by a shutdown report (queued at the
        // deadline), failed with `Cancelled` (dispatched to a stopped host
        // lane), or skipped on a var that such an op poisoned.
        let ok = match ran {
            1 => !cancelled.contains(&op),
            0 if shut => {
                cancelled.contains(&op)
                    || failed.contains(&op)
                    || ctx
                        .engine
                        .var_poison(&ctx.vars[var])
                        .is_ok_and(|p| p.is_some())
            }
            _ => false,
        };
        if !ok {
            return Err(format!(
                "op {op} ran {ran} times (cancelled: {}, failed: {}, shutdown: {shut}): lost or run twice",
                cancelled.contains(&op),
                failed.contains(&op)
            ));
        }
    }
    Ok(LifeStats {
        accepted: accepted.len(),
        cancelled: cancelled.len(),
    })
}

fn name(label: usize) -> String {
    format!("L{label}")
}

fn run_thread(ctx: &Arc<Ctx>, t: usize, actions: &[Action]) -> Result<(), String> {
    let mut guards = Vec::new();
    for (i, &a) in actions.iter().enumerate() {
        act(ctx, &mut guards, a).map_err(|e| format!("thread {t} action {i} ({a:?}): {e}"))?;
    }
    while guards.pop().is_some() {
        ctx.quiesce_events.fetch_add(1, Ordering::SeqCst);
        ctx.held.fetch_sub(1, Ordering::SeqCst);
    }
    Ok(())
}

fn act(
    ctx: &Arc<Ctx>,
    guards: &mut Vec<forksafe::QuiesceGuard>,
    action: Action,
) -> Result<(), String> {
    let e = &ctx.engine;
    match action {
        Action::Push {
            var,
            write,
            host,
            asynchronous,
        } => {
            let label = ctx.next_label.fetch_add(1, Ordering::SeqCst);
            let v = ctx.vars[var as usize % LIFE_VARS].clone();
            let c = ctx.clone();
            let task = if asynchronous {
                Task::new(move |token| {
                    c.runs[label].fetch_add(1, Ordering::SeqCst);
                    let token = token.ok_or("no token")?;
                    std::thread::spawn(move || {
                        let _ = token.complete(Ok(()));
                    });
                    Ok(())
                })
            } else {
                Task::new(move |_| {
                    c.runs[label].fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
            };
            let mut spec = OpSpec::new(task).name(name(label)).lane(if host {
                Lane::Host
            } else {
                Lane::Compute
            });
            spec = if write {
                spec.writes(&[v])
            } else {
                spec.reads(&[v])
            };
            if asynchronous {
                spec = spec.asynchronous();
            }
            let shut_before = ctx.shut.load(Ordering::SeqCst);
            match e.push(spec) {
                Ok(_) => {
                    ctx.accepted
                        .lock()
                        .expect("accepted")
                        .push((label, var as usize % LIFE_VARS));
                    Ok(())
                }
                Err(Error::ShutDown) if shut_before || ctx.shut.load(Ordering::SeqCst) => Ok(()),
                Err(err) => Err(format!("push: {err}")),
            }
        }
        Action::WaitVar(var) => {
            let v = &ctx.vars[var as usize % LIFE_VARS];
            waited(ctx, |timeout| e.wait_for_var_timeout(v, timeout))
        }
        Action::WaitAll => waited(ctx, |timeout| e.wait_all_timeout(timeout)),
        Action::Quiesce => {
            ctx.held.fetch_add(1, Ordering::SeqCst);
            ctx.quiesce_events.fetch_add(1, Ordering::SeqCst);
            match e.quiesce(LONG) {
                Ok(g) => {
                    guards.push(g);
                    Ok(())
                }
                Err(err) => {
                    ctx.quiesce_events.fetch_add(1, Ordering::SeqCst);
                    ctx.held.fetch_sub(1, Ordering::SeqCst);
                    match err {
                        Error::ShutDown if ctx.shut.load(Ordering::SeqCst) => Ok(()),
                        err => Err(format!("quiesce: {err}")),
                    }
                }
            }
        }
        Action::Resume => {
            if guards.pop().is_some() {
                ctx.quiesce_events.fetch_add(1, Ordering::SeqCst);
                ctx.held.fetch_sub(1, Ordering::SeqCst);
            }
            Ok(())
        }
        Action::Shutdown => {
            ctx.shut.store(true, Ordering::SeqCst);
            let report = e
                .shutdown(Duration::from_micros(50))
                .map_err(|err| format!("shutdown: {err}"))?;
            ctx.cancelled
                .lock()
                .expect("cancelled")
                .extend(report.cancelled.iter().map(|i| i.name.clone()));
            Ok(())
        }
        Action::SimFork => {
            LIFE_DOMAIN.prepare();
            LIFE_DOMAIN.parent();
            Ok(())
        }
    }
}

/// Runs a wait with a bound that depends on whether a quiesce holds things
/// up, and accepts only the results the state allows.
fn waited(ctx: &Ctx, wait: impl FnOnce(Duration) -> Result<(), Error>) -> Result<(), String> {
    let events = ctx.quiesce_events.load(Ordering::SeqCst);
    let held = ctx.held.load(Ordering::SeqCst) > 0;
    let timeout = if held { SHORT } else { LONG };
    match wait(timeout) {
        Ok(()) => Ok(()),
        Err(Error::Timeout { pending }) => {
            let quiesced = held
                || ctx.held.load(Ordering::SeqCst) > 0
                || ctx.quiesce_events.load(Ordering::SeqCst) != events;
            if quiesced {
                Ok(())
            } else {
                Err(format!(
                    "timed out after {timeout:?} with no quiesce held: {} ops pending (hang)",
                    pending.len()
                ))
            }
        }
        Err(Error::OpsFailed(errors))
            if errors.iter().all(|e| {
                *e.kind() == OpErrorKind::Cancelled && ctx.shut.load(Ordering::SeqCst)
            }) =>
        {
            ctx.failed
                .lock()
                .expect("failed")
                .extend(errors.iter().map(|e| e.op().name.clone()));
            Ok(())
        }
        Err(Error::Poisoned(e))
            if *e.kind() == OpErrorKind::Cancelled && ctx.shut.load(Ordering::SeqCst) =>
        {
            ctx.failed
                .lock()
                .expect("failed")
                .insert(e.op().name.clone());
            Ok(())
        }
        Err(err) => Err(format!("wait: {err}")),
    }
}
