//! The docs/DESIGN.md workloads, each pushed from one thread (or two for
//! `indep-2t`) and timed to the final `wait_all`.

use forksafe::{Config, CoreConfig, Engine, Var};
use std::time::{Duration, Instant};

/// Ops per workload run.
pub const OPS: usize = 200_000;
/// Vars of `indep` (op i writes var i % 1024).
pub const INDEP_VARS: usize = 1024;
/// Vars of `dag` and `dag-2us`.
pub const DAG_VARS: usize = 64;

/// Names of the timed workloads, in table order. `queue-10k` and
/// `queue-1m` are `indep` with 10 000 and 1 000 000 ops pushed before the
/// one `wait_all` (is the cost per op linear in what is queued?);
/// `indep-batch` is `indep` pushed in batches of [`BATCH`] ops
/// (`push_batch`), forksafe's alone.
pub const NAMES: [&str; 8] = [
    "indep",
    "chain",
    "dag",
    "dag-2us",
    "indep-2t",
    "queue-10k",
    "queue-1m",
    "indep-batch",
];

/// Ops per `push_batch` call in `indep-batch`.
pub const BATCH: usize = 1024;

/// Ops of one run of workload `name`.
pub fn ops(name: &str) -> usize {
    match name {
        "queue-10k" => 10_000,
        "queue-1m" => 1_000_000,
        _ => OPS,
    }
}

/// The vars a workload run uses, and the `dag` picks (2 reads, 1 write).
pub struct Fixture {
    vars: Vec<Var>,
    dag: Vec<[u8; 3]>,
}

impl Fixture {
    /// Makes the vars and the `dag` picks (the same xorshift64 stream as
    /// `bench/mxnet/harness.c`).
    pub fn new(engine: &Engine) -> Fixture {
        let vars = (0..INDEP_VARS)
            .map(|_| engine.new_var().expect("new var"))
            .collect();
        Fixture {
            vars,
            dag: dag_picks(OPS),
        }
    }
}

/// A fresh engine of `workers` compute workers and `vars` vars, each
/// written once and waited for: the workers have started and every lazily
/// grown structure has settled before anything is measured.
pub fn warm_engine(workers: usize, vars: usize) -> (Engine, Vec<Var>) {
    let engine = Engine::new(Config {
        core: CoreConfig {
            compute_workers: workers,
            ..CoreConfig::default()
        },
        ..Config::default()
    })
    .expect("engine");
    let vars: Vec<Var> = (0..vars).map(|_| engine.new_var().expect("var")).collect();
    for v in &vars {
        engine.op("warm").writes(&[v]).run(|| {}).expect("push");
    }
    engine.wait_all().expect("wait_all");
    (engine, vars)
}

/// For each op, three distinct vars among `DAG_VARS`: reads, reads, writes.
pub fn dag_picks(n: usize) -> Vec<[u8; 3]> {
    let mut s: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut pick = [0u8; 3];
        let mut k = 0;
        while k < 3 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let v = (s % DAG_VARS as u64) as u8;
            if !pick[..k].contains(&v) {
                pick[k] = v;
                k += 1;
            }
        }
        out.push(pick);
    }
    out
}

/// A busy body of about 2 µs.
pub fn busy_2us() {
    let start = Instant::now();
    while start.elapsed() < Duration::from_micros(2) {
        std::hint::spin_loop();
    }
}

fn indep_range(engine: &Engine, vars: &[Var], n: usize) {
    for i in 0..n {
        engine
            .op("indep")
            .writes(&[&vars[i % vars.len()]])
            .run(|| {})
            .expect("push");
    }
}

fn indep_batches(engine: &Engine, vars: &[Var], n: usize) {
    for start in (0..n).step_by(BATCH) {
        let specs = (start..n.min(start + BATCH)).map(|i| {
            engine
                .op("indep")
                .writes(&[&vars[i % vars.len()]])
                .into_spec(|| {})
        });
        for pushed in engine.push_batch(specs) {
            pushed.expect("push");
        }
    }
}

/// Runs workload `name` once and returns its wall time up to the final
/// `wait_all`; `None` for an unknown name.
pub fn run(engine: &Engine, fx: &Fixture, name: &str) -> Option<Duration> {
    let start = Instant::now();
    match name {
        "indep" => indep_range(engine, &fx.vars, OPS),
        "chain" => {
            for _ in 0..OPS {
                engine
                    .op("chain")
                    .writes(&[&fx.vars[0]])
                    .run(|| {})
                    .expect("push");
            }
        }
        "dag" | "dag-2us" => {
            let (busy, label) = match name {
                "dag" => (false, "dag"),
                _ => (true, "dag-2us"),
            };
            for p in &fx.dag {
                let v = |k: usize| &fx.vars[p[k] as usize];
                let op = engine.op(label).reads(&[v(0), v(1)]).writes(&[v(2)]);
                if busy {
                    op.run(busy_2us).expect("push");
                } else {
                    op.run(|| {}).expect("push");
                }
            }
        }
        "indep-2t" => {
            let half = INDEP_VARS / 2;
            std::thread::scope(|s| {
                s.spawn(|| indep_range(engine, &fx.vars[..half], OPS / 2));
                s.spawn(|| indep_range(engine, &fx.vars[half..], OPS / 2));
            });
        }
        "queue-10k" | "queue-1m" => indep_range(engine, &fx.vars, ops(name)),
        "indep-batch" => indep_batches(engine, &fx.vars, OPS),
        _ => return None,
    }
    engine.wait_all().expect("wait_all");
    Some(start.elapsed())
}
