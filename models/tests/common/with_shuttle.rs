//! The shuttle half of the models' harness (models/SHUTTLE.md).
//!
//! - [`model`] runs one model under the random, PCT (depth 3) or DFS
//!   scheduler, `FORKSAFE_SHUTTLE_ITERS` times (default per model), or, when
//!   `FORKSAFE_REPLAY=<schedule>` is set, replays that schedule once. On a
//!   failure shuttle prints the encoded schedule and this harness prints the
//!   command that replays it.
//! - Completer threads a world hands async tokens to
//!   ([`World::start_completers`]).
//! - [`gen_program`] draws random programs from `shuttle::rand`, so a replayed
//!   schedule replays the program too; [`expect`] is the serial reference in
//!   push order, with poison (I7) and `clear_poison`; [`check_world`] checks
//!   a quiet world against it.

use super::{label_of, Handed, Mode, Op, Step, World};
use forksafe_core::{Error, Lane, OpError};
use forksafe_models::mix;
use shuttle::rand::{thread_rng, Rng};
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
                let step = Step {
                    label,
                    reads: vec![],
                    writes: vec![rng.gen_range(0..nvars)],
                    fail: false,
                };
                return Op {
                    run_on_error: true,
                    clear: true,
                    ..Op::new(step, Mode::Sync, Lane::Compute)
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
            let step = Step {
                label,
                reads,
                writes,
                fail: pct(&mut rng, m.fail),
            };
            let lane = if pct(&mut rng, m.host) {
                Lane::Host
            } else {
                Lane::Compute
            };
            Op {
                run_on_error: pct(&mut rng, m.run_on_error),
                ..Op::new(step, mode, lane)
            }
        })
        .collect()
}

impl World {
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
        let senders = Arc::new(senders);
        self.hand_off = Some(Arc::new(move |i, handed| {
            let tx = senders[i % senders.len()].lock().unwrap().clone();
            tx.send(handed).expect("completer gone");
        }));
        handles
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

/// Switches a negative control on for this OS thread until dropped.
struct Switch;
impl Switch {
    fn on(m: Option<forksafe_core::controls::Mutant>) -> Switch {
        forksafe_core::controls::set(m);
        Switch
    }
}
impl Drop for Switch {
    fn drop(&mut self) {
        forksafe_core::controls::set(None);
    }
}

/// Runs `f` under shuttle's random scheduler from `seed` for `iters`
/// schedules (or its PCT scheduler at depth [`PCT_DEPTH`] if `pct`),
/// failing a schedule past `steps` steps (a livelock), with control `m` on
/// (or none).
pub fn run_seeded(
    m: Option<forksafe_core::controls::Mutant>,
    f: fn(),
    seed: u64,
    iters: usize,
    steps: usize,
) {
    run_seeded_with(m, f, seed, iters, steps, false)
}

fn run_seeded_with(
    m: Option<forksafe_core::controls::Mutant>,
    f: fn(),
    seed: u64,
    iters: usize,
    steps: usize,
    pct: bool,
) {
    let _switch = Switch::on(m);
    let mut config = shuttle::Config::new();
    config.max_steps = shuttle::MaxSteps::FailAfter(steps);
    if pct {
        let scheduler = shuttle::scheduler::PctScheduler::new_from_seed(seed, PCT_DEPTH, iters);
        shuttle::Runner::new(scheduler, config).run(f);
    } else {
        let scheduler = shuttle::scheduler::RandomScheduler::new_from_seed(seed, iters);
        shuttle::Runner::new(scheduler, config).run(f);
    }
}

/// [`run_seeded`] with `m` on; returns the panic message shuttle failed
/// with, and panics if shuttle found nothing. The random scheduler runs
/// first; if its `iters` schedules all pass, the PCT scheduler (same seed,
/// depth [`PCT_DEPTH`]) gets as many: PCT finds the lost wake-ups that need
/// one preemption at one exact step far more often than random walks do,
/// and which of the two finds a bug first shifts whenever the engine's
/// scheduling points change.
pub fn caught_seeded(
    m: forksafe_core::controls::Mutant,
    f: fn(),
    seed: u64,
    iters: usize,
    steps: usize,
) -> String {
    let run = |pct: bool| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_seeded_with(Some(m), f, seed, iters, steps, pct)
        }))
    };
    let (panic, by) = match run(false) {
        Err(panic) => (panic, "random"),
        Ok(()) => (
            run(true).expect_err("shuttle did not catch the mutant"),
            "PCT",
        ),
    };
    let msg = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    eprintln!("negative control {m:?} caught by the {by} scheduler: {msg}");
    msg
}
