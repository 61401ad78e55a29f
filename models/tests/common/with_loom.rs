//! The loom half of the models' harness (models/LOOM.md).
//!
//! - [`check`] runs one model exhaustively under loom with the preemption
//!   bound taken from `LOOM_MAX_PREEMPTIONS` (default [`DEFAULT_BOUND`]),
//!   counts the executions explored and prints them with the time taken;
//!   a failing execution prints its [`mark`]s.
//! - Hand-offs through an op's [`Slot`] ([`complete_handed`]), a clock
//!   thread that fires deadlines as events, and the fork helpers: distinct
//!   [`Snapshots`] of a parent model, each checked later as a child model
//!   of its own ([`child_world`], [`check_child_inherited`]).

use super::{config, Job, Slot, Step, World};
use forksafe_core::{Error, ForkSnapshot, OpErrorKind, State};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Preemption bound when `LOOM_MAX_PREEMPTIONS` is unset.
pub const DEFAULT_BOUND: usize = 2;

/// The preemption bound of every model: `LOOM_MAX_PREEMPTIONS`, else
/// [`DEFAULT_BOUND`].
pub fn bound() -> usize {
    std::env::var("LOOM_MAX_PREEMPTIONS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(DEFAULT_BOUND)
}

/// A loom builder for the models: `loom::model::Builder::new()` (which reads
/// the `LOOM_*` variables: `LOOM_MAX_PREEMPTIONS`, `LOOM_MAX_BRANCHES`,
/// `LOOM_CHECKPOINT_FILE`, `LOOM_LOG`, ...) with the preemption bound always
/// set explicitly.
pub fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(bound());
    if std::env::var_os("LOOM_MAX_BRANCHES").is_none() {
        b.max_branches = MAX_BRANCHES;
    }
    b
}

/// Branches (scheduling decisions) allowed in one execution when
/// `LOOM_MAX_BRANCHES` is unset: loom's default of 1000 is too few for a
/// dozen engine calls. A spinning thread still hits it (livelock).
pub const MAX_BRANCHES: usize = 20_000;

/// What [`check`] explored.
#[derive(Debug, Clone, Copy)]
pub struct Explored {
    /// Executions (loom iterations) run.
    pub iterations: usize,
    /// Wall time.
    pub secs: f64,
}

/// Runs `f` under loom, exhaustively up to the preemption bound, and prints
/// `loom model NAME: N iterations, bound B, T s`.
pub fn check<F>(name: &str, f: F) -> Explored
where
    F: Fn() + Sync + Send + 'static,
{
    check_with(name, builder(), f)
}

/// [`check`] with a given builder.
pub fn check_with<F>(name: &str, b: loom::model::Builder, f: F) -> Explored
where
    F: Fn() + Sync + Send + 'static,
{
    install_hook();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let start = Instant::now();
    let bound = b.preemption_bound;
    let report = Report {
        name: name.to_string(),
        count: count.clone(),
        start,
    };
    b.check(move || {
        let n = c.fetch_add(1, Ordering::Relaxed) + 1;
        ITERATION.with(|i| i.set(n));
        TRAIL.with(|t| t.borrow_mut().clear());
        f();
    });
    drop(report);
    let e = Explored {
        iterations: count.load(Ordering::Relaxed),
        secs: start.elapsed().as_secs_f64(),
    };
    eprintln!(
        "loom model {name}: {} iterations, bound {:?}, {:.2} s",
        e.iterations,
        bound.map_or(-1, |b| b as i64),
        e.secs
    );
    e
}

std::thread_local! {
    /// Marks of the current execution, printed when a model fails (a std
    /// thread-local: loom runs a model's threads on the test's OS thread).
    static TRAIL: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// The iteration of the model running on this OS thread.
    static ITERATION: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Records a mark of the current execution (printed if the model fails).
pub fn mark(what: impl Into<String>) {
    TRAIL.with(|t| t.borrow_mut().push(what.into()));
}

/// A panic hook that prints the marks of the failing execution first: a
/// loom deadlock is often followed by a panic in a destructor during the
/// unwinding (a loom object dropped after the scheduler stopped), which
/// aborts the process before any `Drop` of the test could report.
fn install_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let _ = TRAIL.try_with(|t| {
                if let Ok(trail) = t.try_borrow() {
                    if !trail.is_empty() {
                        let n = ITERATION.with(|i| i.get());
                        eprintln!(
                            "iteration {n}: marks of the failing execution: {:?}",
                            *trail
                        );
                    }
                }
            });
            default(info);
        }));
    });
}

/// Prints how far a failing model got.
struct Report {
    name: String,
    count: Arc<AtomicUsize>,
    start: Instant,
}

impl Drop for Report {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "loom model {} FAILED at iteration {} after {:.2} s (rerun with \
                 LOOM_LOG=trace LOOM_LOCATION=1, see models/LOOM.md)",
                self.name,
                self.count.load(Ordering::Relaxed),
                self.start.elapsed().as_secs_f64()
            );
        }
    }
}

/// Completes the token a [`Mode::Handoff`] body leaves in `slot`, from the
/// calling (completer) thread, spinning with loom yields until it is there;
/// checks that a second completion is refused (I2).
pub fn complete_handed(slot: &Slot) {
    let (token, result) = loop {
        if let Some(t) = slot.lock().unwrap().take() {
            break t;
        }
        loom::thread::yield_now();
    };
    token.complete(result).expect("first completion refused");
    assert_eq!(
        token.complete(Ok(())),
        Err(Error::AlreadyCompleted),
        "a token completed twice (I2)"
    );
    drop(token);
}

/// A clock thread: once the engine's state satisfies `when` (so the call
/// under test has taken its deadline: every positive timeout ends at the
/// next tick), fires one tick with `CoreEngine::advance_clock`; gives up once
/// `done` is set. Spins with loom yields while it waits.
pub fn clock_thread(
    w: Arc<World>,
    when: fn(State) -> bool,
    done: Arc<AtomicBool>,
) -> loom::thread::JoinHandle<()> {
    loom::thread::spawn(move || loop {
        if when(w.engine.state()) {
            w.engine.advance_clock();
            return;
        }
        if done.load(Ordering::SeqCst) {
            return;
        }
        loom::thread::yield_now();
    })
}

/// [`complete_handed`], but gives up once `gone()` says the op completed
/// without handing its token over (cancelled before its body ran).
pub fn complete_handed_unless(slot: &Slot, gone: impl Fn() -> bool) {
    loop {
        if slot.lock().unwrap().is_some() {
            return complete_handed(slot);
        }
        if gone() {
            return;
        }
        loom::thread::yield_now();
    }
}

/// The program's steps, by op id.
pub type Pushed = Vec<(u64, Step)>;

/// Snapshots taken at the fork point of a parent model, deduplicated, with
/// the program's steps (by op id) of the iteration that first produced each.
#[derive(Default, Clone)]
pub struct Snapshots(Arc<Mutex<HashMap<ForkSnapshot<Job>, Pushed>>>);

impl Snapshots {
    /// Records `snap` (a no-op if an equal one is known).
    pub fn add(&self, snap: ForkSnapshot<Job>, pushed: Vec<(u64, Step)>) {
        self.0.lock().unwrap().entry(snap).or_insert(pushed);
    }

    /// The distinct snapshots, in a stable order.
    pub fn take(&self) -> Vec<(ForkSnapshot<Job>, Pushed)> {
        let mut v: Vec<_> = self.0.lock().unwrap().drain().collect();
        v.sort_by_key(|(s, _)| format!("{s:?}"));
        v
    }
}

/// The child world of `snap` (one worker per lane, as in the parent),
/// driven by the calling model thread.
pub fn child_world(parent_epoch: u64, snap: &ForkSnapshot<Job>) -> World {
    World::child(parent_epoch, config(1, 1, None), snap)
}

/// Checks a settled child world against its snapshot (I5): the report lists
/// exactly the snapshot's pending ops, none of their bodies ran, each var an
/// inherited op writes is poisoned `LostInFork` by it, and `wait_all`
/// reports each lost op once.
pub fn check_child_inherited(w: &World, snap: &ForkSnapshot<Job>, pushed: &[(u64, Step)]) {
    let report = w
        .engine
        .fork_report()
        .unwrap()
        .expect("the first call settles the child");
    assert_eq!(
        w.oracle.ran(),
        Vec::<u32>::new(),
        "the child ran an inherited op (I5)"
    );
    let lost: Vec<u64> = report.lost.iter().map(|i| i.id).collect();
    assert_eq!(lost, snap.pending_ops(), "fork report (I5)");
    for (i, v) in w.vars.iter().enumerate() {
        // The last inherited op writing slot i, in push order, poisons it
        // first unless an earlier lost op did: the poison names the first
        // lost writer, since poison sticks.
        let first_lost_writer = pushed
            .iter()
            .filter(|(id, s)| lost.contains(id) && s.writes.contains(&i))
            .map(|(id, _)| *id)
            .min();
        let poison = w.engine.var_poison(v).unwrap();
        match first_lost_writer {
            Some(id) => {
                let e = poison.expect("a var written by a lost op is poisoned (I5)");
                assert_eq!(e.kind(), &OpErrorKind::LostInFork);
                assert_eq!(e.op().id, id, "poison names the first lost writer");
            }
            None => assert!(poison.is_none(), "var {i} poisoned without a lost writer"),
        }
    }
    let failed = w.engine.wait_all();
    let mut ids: Vec<u64> = match &failed {
        Ok(()) => vec![],
        Err(Error::OpsFailed(es)) => es
            .iter()
            .filter(|e| e.kind() == &OpErrorKind::LostInFork)
            .map(|e| e.op().id)
            .collect(),
        Err(e) => panic!("child wait_all returned {e:?}"),
    };
    ids.sort_unstable();
    assert_eq!(ids, lost, "wait_all reports each lost op once (I5, I7)");
}

/// The child forks in its turn (I5: the child works, forking included).
/// Prepare waits only for sections the child's own threads opened; one
/// counted at the parent's fork point would have no thread to end it, and
/// prepare would wait for ever (FORK-SAFETY.md, L9).
pub fn fork_again(w: &World) {
    w.domain.prepare();
    w.domain.parent();
}

/// Runs the hidden test `runner` of this test binary in a child process,
/// with `env` set to `m`'s name and the `extra` variables set: the child
/// runs `m`'s scenario with `m` on (loom's failure unwinds through model
/// objects and often aborts; a process keeps that apart from the other
/// tests). Returns the child's output from loom's verdict (its first
/// panic) on; panics if the child succeeded or said the mutant was not
/// caught.
pub fn mutant_in_child(
    runner: &str,
    env: &str,
    m: forksafe_core::controls::Mutant,
    extra: &[(&str, &str)],
) -> String {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = std::process::Command::new(exe);
    cmd.args([runner, "--exact", "--nocapture", "--test-threads=1"])
        .env(env, format!("{m:?}"));
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run the mutant in a child process");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success() && !text.contains("MUTANT NOT CAUGHT"),
        "loom did not catch mutant {m:?}:\n{text}"
    );
    // The first panic is loom's verdict; later ones are its cleanup.
    let lines: Vec<&str> = text.lines().collect();
    let verdict = lines
        .iter()
        .position(|l| l.contains("panicked at"))
        .map(|i| lines[i..(i + 4).min(lines.len())].join("\n"))
        .unwrap_or_default();
    eprintln!(
        "negative control {m:?} caught (child {}):\n{verdict}",
        out.status
    );
    verdict
}
