//! Shared harness of the shuttle models (models/SHUTTLE.md).
//!
//! - [`model`] runs one model under the random, PCT (depth 3) or DFS
//!   scheduler, `FORKSAFE_SHUTTLE_ITERS` times (default per model), or, when
//!   `FORKSAFE_REPLAY=<schedule>` is set, replays that schedule once. On a
//!   failure shuttle prints the encoded schedule and this harness prints the
//!   command that replays it.
//! - [`Job`] is the op payload: an [`Effect`] of `forksafe-models` run in one
//!   of several [`Mode`]s (sync, async completed in the body, async handed
//!   to a completer thread, async whose token is dropped), with an optional
//!   in-body probe (I3) and an optional callback into the engine (H1).
//! - [`gen_program`] draws random programs from `shuttle::rand`, so a replayed
//!   schedule replays the program too; [`expect`] is the serial reference in
//!   push order, with poison (I7) and `clear_poison`.

#![allow(dead_code)]

use forksafe_core::sync::Arc as SArc;
use forksafe_core::{
    CompletionToken, Config, Engine, Error, ForkDomain, Lane, OpError, OpSpec, Payload, Var,
};
use forksafe_models::{mix, Oracle, Probe, Step};
use forksafe_testkit::GilBridge;
use shuttle::rand::{thread_rng, Rng};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Iterations of each model (per scheduler) when `FORKSAFE_SHUTTLE_ITERS`
/// is unset: the default run of all shuttle models takes about a minute
/// of CPU; the deep run sets `FORKSAFE_SHUTTLE_ITERS=100000`.
pub const DEFAULT_ITERS: usize = 3000;

/// PCT bug depth of every PCT model.
pub const PCT_DEPTH: usize = 3;

/// DFS models: schedules longer than this many steps are cut.
pub const DFS_STEPS: usize = 3_000;

static COMPLETED: AtomicUsize = AtomicUsize::new(0);

/// The scheduler of one model run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sched {
    /// `shuttle::check_random`.
    Random,
    /// `shuttle::check_pct` at depth [`PCT_DEPTH`].
    Pct,
    /// `shuttle::check_dfs`, bounded by the iteration count.
    Dfs,
}

/// Iterations of a model: `FORKSAFE_SHUTTLE_ITERS` if set, else `default`.
pub fn iterations(default: usize) -> usize {
    std::env::var("FORKSAFE_SHUTTLE_ITERS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// The schedule given in `FORKSAFE_REPLAY`, if any.
pub fn replay_schedule() -> Option<String> {
    std::env::var("FORKSAFE_REPLAY")
        .ok()
        .map(|s| s.trim().trim_matches('"').trim().to_string())
        .filter(|s| !s.is_empty())
}

struct ReplayHint {
    test: String,
}

impl Drop for ReplayHint {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let file = module_path!()
                .split("::")
                .next()
                .unwrap_or("shuttle_models");
            eprintln!(
                "\nshuttle model `{}` failed. Replay the schedule printed above with:\n  \
                 FORKSAFE_REPLAY='<schedule>' RUSTFLAGS=\"--cfg shuttle\" cargo test -p forksafe-models \
                 --target-dir target/shuttle --test {file} -- {} --exact --nocapture\n",
                self.test, self.test
            );
        }
    }
}

/// Runs model `f` named `test` (its test function's name) under `sched`.
pub fn model<F>(test: &str, sched: Sched, default_iters: usize, f: F)
where
    F: Fn() + Send + Sync + 'static,
{
    let _hint = ReplayHint {
        test: test.to_string(),
    };
    if let Some(schedule) = replay_schedule() {
        eprintln!("{test}: replaying the schedule in FORKSAFE_REPLAY");
        shuttle::replay(f, &schedule);
        return;
    }
    let n = iterations(default_iters);
    let start = Instant::now();
    match sched {
        Sched::Random => shuttle::check_random(f, n),
        Sched::Pct => shuttle::check_pct(f, n, PCT_DEPTH),
        Sched::Dfs => {
            // Parked threads may wake spuriously under shuttle, and DFS takes
            // that branch first, so every wait loop is an infinite schedule:
            // DFS here is bounded by schedule length too (DFS_STEPS), and
            // executions cut at the bound end without their final checks.
            COMPLETED.store(0, Ordering::SeqCst);
            let mut config = shuttle::Config::new();
            config.max_steps = shuttle::MaxSteps::ContinueAfter(DFS_STEPS);
            let runner = shuttle::Runner::new(
                shuttle::scheduler::DfsScheduler::new(Some(n), false),
                config,
            );
            runner.run(move || {
                f();
                COMPLETED.fetch_add(1, Ordering::SeqCst);
            });
            eprintln!(
                "shuttle model {test}: {} of {n} DFS schedules ran to completion",
                COMPLETED.load(Ordering::SeqCst)
            );
        }
    }
    eprintln!(
        "shuttle model {test}: {sched:?} x{n} in {:.2}s",
        start.elapsed().as_secs_f64()
    );
}

/// How a [`Job`] completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A sync op.
    Sync,
    /// Async; the body completes its token.
    Async,
    /// Async; the body hands its token to completer thread `i`.
    Handoff(usize),
    /// Async; the body drops its token unfinished (TokenDropped, I2).
    DropToken,
}

impl Mode {
    fn is_async(self) -> bool {
        self != Mode::Sync
    }
}

/// A token handed to a completer thread, with the result to complete with.
pub type Handed = (CompletionToken<Job>, Result<(), String>);

/// Senders to the completer threads.
pub type Mailboxes = SArc<Vec<shuttle::sync::Mutex<shuttle::sync::mpsc::Sender<Handed>>>>;

/// A callback a body runs (into the engine, H1).
pub type Callback = Arc<dyn Fn() + Send + Sync>;

/// The op payload of the shuttle models.
#[derive(Clone)]
pub struct Job {
    /// What the body does to the oracle.
    pub step: Step,
    /// How it completes.
    pub mode: Mode,
    /// The oracle of the world the op was pushed in.
    pub home: Oracle,
    /// Completer threads, for [`Mode::Handoff`].
    pub mail: Option<Mailboxes>,
    /// In-body counter.
    pub probe: Option<Probe>,
    /// Run at the start of the body.
    pub call: Option<Callback>,
}

shuttle::thread_local! {
    /// Set on the threads that drive a fork child world: a body run there
    /// (only ever by a broken child that re-runs an inherited op) acts on
    /// the child world's oracle, where the model sees it.
    static CHILD_ORACLE: RefCell<Option<Oracle>> = const { RefCell::new(None) };
}

/// Marks the calling model thread as a driver of the child world `oracle`.
pub fn enter_child_world(oracle: &Oracle) {
    CHILD_ORACLE.with(|c| *c.borrow_mut() = Some(oracle.clone()));
}

impl Payload for Job {
    fn run(self, token: Option<CompletionToken<Self>>) -> Result<(), String> {
        if let Some(p) = &self.probe {
            p.enter();
        }
        if let Some(call) = &self.call {
            call();
        }
        let oracle = CHILD_ORACLE
            .with(|c| c.borrow().clone())
            .unwrap_or_else(|| self.home.clone());
        let result = oracle.effect(self.step.clone()).run(None);
        if let Some(p) = &self.probe {
            p.leave();
        }
        match (self.mode, token) {
            (_, None) => result,
            (Mode::Sync | Mode::Async, Some(t)) => t.complete(result).map_err(|e| e.to_string()),
            (Mode::Handoff(i), Some(t)) => {
                let mail = self.mail.as_ref().expect("handoff op without mailboxes");
                let tx = mail[i % mail.len()].lock().unwrap().clone();
                tx.send((t, result)).expect("completer gone");
                Ok(())
            }
            (Mode::DropToken, Some(t)) => {
                drop(t);
                Ok(())
            }
        }
    }
}

/// One op of a program.
#[derive(Debug, Clone)]
pub struct Op {
    /// Label, reads, writes, fail.
    pub step: Step,
    /// Completion mode.
    pub mode: Mode,
    /// Lane.
    pub lane: Lane,
    /// Runs even on poisoned vars.
    pub run_on_error: bool,
    /// A `clear_poison` of `step.writes[0]` instead of a body.
    pub clear: bool,
}

/// Percentages of the op kinds [`gen_program`] draws.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mix {
    /// Host-lane ops.
    pub host: u32,
    /// Async ops completed in the body.
    pub async_inline: u32,
    /// Async ops handed to a completer (needs `completers > 0`).
    pub handoff: u32,
    /// Async ops whose token is dropped.
    pub drop_token: u32,
    /// Failing bodies.
    pub fail: u32,
    /// `run_on_error` ops.
    pub run_on_error: u32,
    /// `clear_poison` ops.
    pub clear: u32,
    /// Completer threads.
    pub completers: usize,
}

fn pct(rng: &mut impl Rng, p: u32) -> bool {
    p > 0 && rng.gen_range(0..100) < p
}

/// `n` random ops labelled from `first`, over `nvars` vars, drawn from
/// `shuttle::rand` (so replays replay the program).
pub fn gen_program(first: u32, n: usize, nvars: usize, m: Mix) -> Vec<Op> {
    let mut rng = thread_rng();
    (0..n)
        .map(|i| {
            let label = first + i as u32;
            if pct(&mut rng, m.clear) {
                return Op {
                    step: Step {
                        label,
                        reads: vec![],
                        writes: vec![rng.gen_range(0..nvars)],
                        fail: false,
                    },
                    mode: Mode::Sync,
                    lane: Lane::Compute,
                    run_on_error: true,
                    clear: true,
                };
            }
            let mut vars: Vec<usize> = (0..nvars).collect();
            for j in (1..vars.len()).rev() {
                vars.swap(j, rng.gen_range(0..=j));
            }
            let k = rng.gen_range(1..=3.min(nvars));
            let w = rng.gen_range(1..=k);
            let writes = vars[..w].to_vec();
            let reads = vars[w..k].to_vec();
            let roll = rng.gen_range(0..100u32);
            let mode = if roll < m.async_inline {
                Mode::Async
            } else if roll < m.async_inline + m.handoff && m.completers > 0 {
                Mode::Handoff(rng.gen_range(0..m.completers))
            } else if roll < m.async_inline + m.handoff + m.drop_token {
                Mode::DropToken
            } else {
                Mode::Sync
            };
            Op {
                step: Step {
                    label,
                    reads,
                    writes,
                    fail: pct(&mut rng, m.fail),
                },
                mode,
                lane: if pct(&mut rng, m.host) {
                    Lane::Host
                } else {
                    Lane::Compute
                },
                run_on_error: pct(&mut rng, m.run_on_error),
                clear: false,
            }
        })
        .collect()
}

/// The engine name of an op labelled `label`.
pub fn op_name(label: u32) -> String {
    format!("op{label}")
}

/// The label of an op named by [`op_name`].
pub fn label_of(name: &str) -> Option<u32> {
    name.strip_prefix("op")?.parse().ok()
}

/// One model world: engine, host lock, oracle, vars, completer mailboxes.
pub struct World {
    /// The engine.
    pub engine: Engine<Job>,
    /// Its host bridge (a GIL).
    pub gil: SArc<GilBridge>,
    /// What the bodies did.
    pub oracle: Oracle,
    /// The vars, slot i = var i.
    pub vars: Vec<Var<Job>>,
    /// The domain the engine lives in.
    pub domain: &'static ForkDomain,
    /// Senders to completer threads.
    pub mail: Option<Mailboxes>,
    /// In-body counter.
    pub probe: Probe,
}

/// Sizing of a [`World`].
pub fn config(compute: usize, host: usize, max_pending: Option<usize>) -> Config {
    Config {
        compute_workers: compute,
        host_workers: host,
        max_pending,
        thread_name: "m".into(),
        worker_stack_size: None,
        max_stand_ins: forksafe_core::DEFAULT_MAX_STAND_INS,
    }
}

impl World {
    /// A world with a fresh domain, a GIL bridge and `nvars` vars.
    pub fn new(config: Config, nvars: usize) -> World {
        let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
        let gil = SArc::new(GilBridge::new());
        let engine = Engine::with_bridge(domain, config, Box::new(gil.clone())).unwrap();
        let vars = (0..nvars).map(|_| engine.new_var().unwrap()).collect();
        World {
            engine,
            gil,
            oracle: Oracle::new(nvars),
            vars,
            domain,
            mail: None,
            probe: Probe::default(),
        }
    }

    /// Starts `n` completer threads; each completes `counts[i]` handed
    /// tokens (and checks a second completion is refused, I2).
    pub fn start_completers(&mut self, counts: &[usize]) -> Vec<shuttle::thread::JoinHandle<()>> {
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for &count in counts {
            let (tx, rx) = shuttle::sync::mpsc::channel::<Handed>();
            senders.push(shuttle::sync::Mutex::new(tx));
            handles.push(shuttle::thread::spawn(move || {
                for _ in 0..count {
                    let (token, result) = rx.recv().expect("job gone");
                    token.complete(result).expect("first completion refused");
                    assert_eq!(
                        token.complete(Ok(())),
                        Err(Error::AlreadyCompleted),
                        "a token completed twice (I2)"
                    );
                }
            }));
        }
        self.mail = Some(SArc::new(senders));
        handles
    }

    /// The payload of `op` in this world.
    pub fn job(&self, op: &Op) -> Job {
        Job {
            step: op.step.clone(),
            mode: op.mode,
            home: self.oracle.clone(),
            mail: self.mail.clone(),
            probe: Some(self.probe.clone()),
            call: None,
        }
    }

    /// Pushes `op` (with payload `job`); returns its id.
    pub fn push_job(&self, op: &Op, job: Job) -> forksafe_core::Result<u64> {
        if op.clear {
            return self.engine.clear_poison(&self.vars[op.step.writes[0]]);
        }
        let reads: Vec<_> = op
            .step
            .reads
            .iter()
            .map(|&i| self.vars[i].clone())
            .collect();
        let writes: Vec<_> = op
            .step
            .writes
            .iter()
            .map(|&i| self.vars[i].clone())
            .collect();
        let mut spec = OpSpec::new(job)
            .name(op_name(op.step.label))
            .lane(op.lane)
            .reads(&reads)
            .writes(&writes);
        if op.mode.is_async() {
            spec = spec.asynchronous();
        }
        if op.run_on_error {
            spec = spec.run_on_error();
        }
        self.engine.push(spec)
    }

    /// Pushes `op` with [`World::job`].
    pub fn push(&self, op: &Op) -> forksafe_core::Result<u64> {
        self.push_job(op, self.job(op))
    }
}

/// Handed-off ops per completer in `ops` (ops that will run: callers use
/// it only for programs without poison).
pub fn handoff_counts(ops: &[Op], completers: usize) -> Vec<usize> {
    let mut c = vec![0; completers];
    for op in ops {
        if let Mode::Handoff(i) = op.mode {
            c[i] += 1;
        }
    }
    c
}

/// What the serial reference predicts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expect {
    /// Slot values.
    pub slots: Vec<u64>,
    /// Labels whose bodies run.
    pub ran: BTreeSet<u32>,
    /// Labels of the ops that first raise an error (I7).
    pub raised: BTreeSet<u32>,
    /// Per var: the label of the op its poison names.
    pub poison: Vec<Option<u32>>,
}

/// The serial reference: `ops` run one by one in push order, with poison
/// propagation, `run_on_error` and `clear_poison` (I1, I7).
pub fn expect(nslots: usize, ops: &[&Op]) -> Expect {
    let mut mem = vec![0u64; nslots];
    let mut poison: Vec<Option<u32>> = vec![None; nslots];
    let mut ran = BTreeSet::new();
    let mut raised = BTreeSet::new();
    for op in ops {
        let s = &op.step;
        if op.clear {
            poison[s.writes[0]] = None;
            continue;
        }
        let passed = if op.run_on_error {
            None
        } else {
            s.reads.iter().chain(&s.writes).find_map(|&v| poison[v])
        };
        if let Some(src) = passed {
            for &w in &s.writes {
                poison[w].get_or_insert(src);
            }
            continue;
        }
        ran.insert(s.label);
        let read: Vec<u64> = s.reads.iter().map(|&r| mem[r]).collect();
        if !s.fail {
            for &w in &s.writes {
                mem[w] = mix(s.label, &read, mem[w]);
            }
        }
        if s.fail || op.mode == Mode::DropToken {
            raised.insert(s.label);
            for &w in &s.writes {
                poison[w].get_or_insert(s.label);
            }
        }
    }
    Expect {
        slots: mem,
        ran,
        raised,
        poison,
    }
}

/// Labels named by the errors of a `wait_all` result (`OpsFailed`).
pub fn failed_labels(r: &forksafe_core::Result<()>) -> Vec<u32> {
    match r {
        Ok(()) => vec![],
        Err(Error::OpsFailed(es)) => es.iter().filter_map(|e| label_of(&e.op().name)).collect(),
        Err(e) => panic!("wait_all returned {e:?}"),
    }
}

/// Checks a quiet world against the serial reference of `pushed` (id, op):
/// slot values, no I1 overlap, each expected body ran exactly once, the
/// vars' poison, nothing pending, and `raised` (labels reported by every
/// `wait_all`) lists each first-raised error exactly once.
pub fn check_world(w: &World, pushed: &mut [(u64, Op)], raised: &[u32]) {
    pushed.sort_by_key(|(id, _)| *id);
    let ops: Vec<&Op> = pushed.iter().map(|(_, op)| op).collect();
    let exp = expect(w.vars.len(), &ops);
    assert_eq!(w.oracle.violations(), Vec::<String>::new(), "I1 overlap");
    let mut ran = w.oracle.ran();
    ran.sort_unstable();
    let want: Vec<u32> = exp.ran.iter().copied().collect();
    assert_eq!(
        ran, want,
        "bodies run (exactly once each, I2) differ from the serial run"
    );
    assert_eq!(
        w.oracle.slots(),
        exp.slots,
        "values differ from the serial run (I1)"
    );
    let poison: Vec<Option<u32>> = w
        .vars
        .iter()
        .map(|v| {
            w.engine
                .var_poison(v)
                .unwrap()
                .map(|e: OpError| label_of(&e.op().name).expect("poison names a program op"))
        })
        .collect();
    assert_eq!(
        poison, exp.poison,
        "poison differs from the serial run (I7)"
    );
    assert_eq!(w.engine.pending().unwrap(), 0, "ops left pending (I2)");
    let mut got = raised.to_vec();
    got.sort_unstable();
    let want: Vec<u32> = exp.raised.iter().copied().collect();
    assert_eq!(
        got, want,
        "wait_all must report each first-raised error exactly once (I7)"
    );
}

/// Whether `shuttle::rand` says yes with probability `p` percent.
pub fn chance(p: u32) -> bool {
    pct(&mut thread_rng(), p)
}

/// A random number in `0..n`.
pub fn below(n: usize) -> usize {
    thread_rng().gen_range(0..n)
}
