//! Shared harness of the loom models (models/LOOM.md).
//!
//! - [`check`] runs one model exhaustively under loom with the preemption
//!   bound taken from `LOOM_MAX_PREEMPTIONS` (default [`DEFAULT_BOUND`]),
//!   counts the executions explored and prints them with the time taken.
//! - [`Job`] is the op payload: an [`Effect`] of `forksafe-models` run in one
//!   of several [`Mode`]s (sync, async completed in the body, async handed to
//!   a completer thread, async whose token is dropped), with an optional
//!   in-body probe (I3) and an optional callback into the engine (H1).
//! - [`World`] is one engine with a GIL-like host bridge, an oracle and its
//!   vars; [`child_world`] rebuilds a fork child world from a snapshot.
//!
//! Everything a payload holds is plain std data (the oracle, the probe, the
//! hand-off slot), so a payload copied into a [`ForkSnapshot`] can outlive
//! the loom execution that made it: the child models run later, as separate
//! loom models, one per distinct snapshot.

#![allow(dead_code)]

use forksafe_core::sync::Arc as LArc;
use forksafe_core::{
    CompletionToken, Config, Engine, Error, ForkDomain, ForkSnapshot, Lane, OpErrorKind, OpSpec,
    Payload, State, Var,
};
use forksafe_models::{Effect, Oracle, Probe, Step};
use forksafe_testkit::GilBridge;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Preemption bound when `LOOM_MAX_PREEMPTIONS` is unset.
pub const DEFAULT_BOUND: usize = 2;

/// A timeout long enough never to pass unless a model fires the clock.
pub const LONG: Duration = Duration::from_secs(1);

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

/// How a [`Job`] completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// A sync op.
    Sync,
    /// Async; the body completes its token.
    Async,
    /// Async; the body leaves its token in the job's [`Slot`] for a
    /// completer thread.
    Handoff,
    /// Async; the body drops its token unfinished (TokenDropped, I2).
    DropToken,
}

/// Where a [`Mode::Handoff`] body leaves its token and result.
pub type Slot = Arc<Mutex<Option<(CompletionToken<Job>, Result<(), String>)>>>;

/// A callback a body runs (into the engine, H1).
pub type Callback = Arc<dyn Fn() + Send + Sync>;

/// The op payload of the loom models.
#[derive(Clone)]
pub struct Job {
    /// What the body does, and on which oracle.
    pub effect: Effect,
    /// How it completes.
    pub mode: Mode,
    /// Hand-off slot of [`Mode::Handoff`].
    pub slot: Option<Slot>,
    /// In-body counter.
    pub probe: Option<Probe>,
    /// Run at the start of the body.
    pub call: Option<Callback>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Job({:?}, {:?})", self.effect.step, self.mode)
    }
}

// Snapshots compare payloads by what they would do.
impl PartialEq for Job {
    fn eq(&self, other: &Self) -> bool {
        self.effect == other.effect && self.mode == other.mode
    }
}
impl Eq for Job {}
impl Hash for Job {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.effect.hash(state);
        self.mode.hash(state);
    }
}

std::thread_local! {
    /// Set while a child world's model runs: a body run then (only ever an
    /// inherited op re-run by a broken child, or the child's own ops) logs
    /// into the child world's oracle, where the model looks. A std
    /// thread-local: loom runs all model threads on the test's OS thread.
    static CHILD_ORACLE: RefCell<Option<Oracle>> = const { RefCell::new(None) };
}

/// Directs every body run on this OS thread to `oracle` (a child world), or
/// back to each job's own oracle (`None`).
pub fn set_child_oracle(oracle: Option<Oracle>) {
    CHILD_ORACLE.with(|c| *c.borrow_mut() = oracle);
}

impl Payload for Job {
    fn run(self, token: Option<CompletionToken<Self>>) -> Result<(), String> {
        mark(format!("start {}", self.effect.step.label));
        if let Some(p) = &self.probe {
            p.enter();
        }
        if let Some(call) = &self.call {
            call();
        }
        let effect = match CHILD_ORACLE.with(|c| c.borrow().clone()) {
            Some(o) => o.effect(self.effect.step.clone()),
            None => self.effect.clone(),
        };
        // Effect::run has a scheduling point between its start and end.
        let result = effect.run(None);
        if let Some(p) = &self.probe {
            p.leave();
        }
        mark(format!("end {}", self.effect.step.label));
        match (self.mode, token) {
            (_, None) => result,
            (Mode::Sync | Mode::Async, Some(t)) => t.complete(result).map_err(|e| e.to_string()),
            (Mode::Handoff, Some(t)) => {
                let slot = self.slot.as_ref().expect("handoff job without a slot");
                *slot.lock().unwrap() = Some((t, result));
                Ok(())
            }
            (Mode::DropToken, Some(t)) => {
                drop(t);
                Ok(())
            }
        }
    }
}

/// A step.
pub fn step(label: u32, reads: &[usize], writes: &[usize]) -> Step {
    Step {
        label,
        reads: reads.to_vec(),
        writes: writes.to_vec(),
        fail: false,
    }
}

/// A failing step.
pub fn failing(label: u32, reads: &[usize], writes: &[usize]) -> Step {
    Step {
        fail: true,
        ..step(label, reads, writes)
    }
}

/// The engine name of the op labelled `label`.
pub fn op_name(label: u32) -> String {
    format!("op{label}")
}

/// The label of an op named by [`op_name`].
pub fn label_of(name: &str) -> Option<u32> {
    name.strip_prefix("op")?.parse().ok()
}

/// One worker per lane: with main and at most two more model threads this
/// stays within loom's five threads.
pub fn config() -> Config {
    Config {
        compute_workers: 1,
        host_workers: 1,
        max_pending: None,
        thread_name: "l".into(),
        worker_stack_size: None,
        max_stand_ins: forksafe_core::DEFAULT_MAX_STAND_INS,
    }
}

/// One model world: engine, host lock, oracle, vars.
pub struct World {
    /// The engine.
    pub engine: Engine<Job>,
    /// Its host bridge (a GIL).
    pub gil: LArc<GilBridge>,
    /// What the bodies did.
    pub oracle: Oracle,
    /// The vars, slot i = var i.
    pub vars: Vec<Var<Job>>,
    /// The domain the engine lives in.
    pub domain: &'static ForkDomain,
    /// In-body counter shared by every job of this world.
    pub probe: Probe,
}

/// How to push a job.
#[derive(Clone)]
pub struct Push {
    /// Label, reads, writes, fail.
    pub step: Step,
    /// Completion mode.
    pub mode: Mode,
    /// Lane.
    pub lane: Lane,
    /// Hand-off slot (for [`Mode::Handoff`]).
    pub slot: Option<Slot>,
    /// Callback into the engine.
    pub call: Option<Callback>,
    /// Runs even on poisoned vars.
    pub run_on_error: bool,
}

/// A sync op of `step` on `lane`.
pub fn sync(step: Step, lane: Lane) -> Push {
    Push {
        step,
        mode: Mode::Sync,
        lane,
        slot: None,
        call: None,
        run_on_error: false,
    }
}

/// An async op of `step` on `lane` completing in `mode`.
pub fn asynchronous(step: Step, lane: Lane, mode: Mode) -> Push {
    Push {
        mode,
        slot: (mode == Mode::Handoff).then(Slot::default),
        ..sync(step, lane)
    }
}

impl World {
    /// A world with a fresh domain, a GIL bridge and `nvars` vars.
    pub fn new(nvars: usize) -> World {
        let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
        let gil = LArc::new(GilBridge::new());
        let engine = Engine::with_bridge(domain, config(), Box::new(gil.clone())).unwrap();
        let vars = (0..nvars).map(|_| engine.new_var().unwrap()).collect();
        World {
            engine,
            gil,
            oracle: Oracle::new(nvars),
            vars,
            domain,
            probe: Probe::default(),
        }
    }

    /// The payload of `p` in this world.
    pub fn job(&self, p: &Push) -> Job {
        Job {
            effect: self.oracle.effect(p.step.clone()),
            mode: p.mode,
            slot: p.slot.clone(),
            probe: Some(self.probe.clone()),
            call: p.call.clone(),
        }
    }

    /// The push request of `p` in this world.
    pub fn spec(&self, p: &Push) -> OpSpec<Job> {
        let reads: Vec<_> = p.step.reads.iter().map(|&i| self.vars[i].clone()).collect();
        let writes: Vec<_> = p
            .step
            .writes
            .iter()
            .map(|&i| self.vars[i].clone())
            .collect();
        let mut spec = OpSpec::new(self.job(p))
            .name(op_name(p.step.label))
            .lane(p.lane)
            .reads(&reads)
            .writes(&writes);
        if p.mode != Mode::Sync {
            spec = spec.asynchronous();
        }
        if p.run_on_error {
            spec = spec.run_on_error();
        }
        spec
    }

    /// Pushes `p`; returns its id.
    pub fn push(&self, p: &Push) -> forksafe_core::Result<u64> {
        self.engine.push(self.spec(p))
    }

    /// Sorted labels of the bodies that ran.
    pub fn ran(&self) -> Vec<u32> {
        let mut r = self.oracle.ran();
        r.sort_unstable();
        r
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
/// next tick), fires one tick with `Engine::advance_clock`; gives up once
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

/// Labels named by the errors of a `wait_all` result (`OpsFailed`).
pub fn failed_labels(r: &forksafe_core::Result<()>) -> Vec<u32> {
    match r {
        Ok(()) => vec![],
        Err(Error::OpsFailed(es)) => {
            let mut l: Vec<u32> = es.iter().filter_map(|e| label_of(&e.op().name)).collect();
            l.sort_unstable();
            l
        }
        Err(e) => panic!("wait_all returned {e:?}"),
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

/// The child world of `snap`: an engine rebuilt with fresh primitives in a
/// domain one epoch on, a fresh GIL, and a fresh oracle that every body run
/// on this thread logs into (see [`set_child_oracle`]).
pub fn child_world(parent_epoch: u64, snap: &ForkSnapshot<Job>) -> World {
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::with_epoch(parent_epoch + 1)));
    let gil = LArc::new(GilBridge::new());
    let (engine, vars) =
        Engine::from_fork_snapshot(domain, config(), Box::new(gil.clone()), snap).unwrap();
    let oracle = Oracle::new(vars.len());
    set_child_oracle(Some(oracle.clone()));
    World {
        engine,
        gil,
        oracle,
        vars,
        domain,
        probe: Probe::default(),
    }
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
