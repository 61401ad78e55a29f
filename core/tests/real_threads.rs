//! The real-threads check: thousands of random ops over a few vars, on real
//! worker threads with several pushers, give the same values as running the
//! same program serially in push order (I1), and every op runs exactly once
//! (I2).

use crate::support::Job;
use forksafe_core::{Config, CoreEngine, ForkDomain, Lane, OpSpec, Priority, Var};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

const VARS: usize = 5;

/// A tiny deterministic generator, so a failing seed can be rerun.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Clone)]
struct Step {
    label: u64,
    reads: Vec<usize>,
    writes: Vec<usize>,
    lane: Lane,
    priority: Priority,
    asynchronous: bool,
}

fn mix(label: u64, read: &[u64], old: u64) -> u64 {
    let mut h = old.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ label.wrapping_add(1);
    for r in read {
        h = h.rotate_left(17) ^ r.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    }
    h
}

fn program(seed: u64, ops: usize) -> Vec<Step> {
    let mut rng = Rng(seed.wrapping_mul(2654435761).max(1));
    (0..ops as u64)
        .map(|label| {
            let mut vars: Vec<usize> = (0..VARS).collect();
            for i in (1..vars.len()).rev() {
                vars.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let n_writes = 1 + rng.below(2) as usize;
            let n_reads = rng.below(3) as usize;
            Step {
                label,
                writes: vars[..n_writes].to_vec(),
                reads: vars[n_writes..n_writes + n_reads].to_vec(),
                lane: if rng.below(4) == 0 {
                    Lane::Host
                } else {
                    Lane::Compute
                },
                priority: [Priority::High, Priority::Normal, Priority::Low][rng.below(3) as usize],
                asynchronous: rng.below(5) == 0,
            }
        })
        .collect()
}

fn serial(steps: &[Step]) -> Vec<u64> {
    let mut mem = vec![0u64; VARS];
    for s in steps {
        let read: Vec<u64> = s.reads.iter().map(|&r| mem[r]).collect();
        for &w in &s.writes {
            mem[w] = mix(s.label, &read, mem[w]);
        }
    }
    mem
}

struct World {
    mem: Mutex<Vec<u64>>,
    runs: Vec<AtomicUsize>,
}

fn job(step: &Step, world: &Arc<World>) -> Job {
    let step = step.clone();
    let world = world.clone();
    Job(Box::new(move |token| {
        let apply = move || {
            let mut mem = world.mem.lock().unwrap();
            let read: Vec<u64> = step.reads.iter().map(|&r| mem[r]).collect();
            for &w in &step.writes {
                mem[w] = mix(step.label, &read, mem[w]);
            }
            world.runs[step.label as usize].fetch_add(1, Ordering::SeqCst);
        };
        match token {
            // Completed from another thread, after the body returned.
            Some(t) => {
                std::thread::spawn(move || {
                    apply();
                    t.complete(Ok(())).unwrap();
                });
            }
            None => apply(),
        }
        Ok(())
    }))
}

fn spec(step: &Step, world: &Arc<World>, vars: &[Var<Job>]) -> OpSpec<Job> {
    let pick = |ids: &[usize]| ids.iter().map(|&i| vars[i].clone()).collect::<Vec<_>>();
    let s = OpSpec::new(job(step, world))
        .reads(&pick(&step.reads))
        .writes(&pick(&step.writes))
        .lane(step.lane)
        .priority(step.priority)
        .name(format!("op{}", step.label));
    if step.asynchronous {
        s.asynchronous()
    } else {
        s
    }
}

/// An engine of `workers` compute workers and 2 host workers in a domain
/// of its own, its `VARS` vars, and a world for `ops` ops.
fn setup(ops: usize, workers: usize) -> (CoreEngine<Job>, Vec<Var<Job>>, Arc<World>) {
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    let config = Config {
        compute_workers: workers,
        host_workers: 2,
        ..Config::default()
    };
    let engine = CoreEngine::<Job>::new(domain, config).unwrap();
    let vars: Vec<Var<Job>> = (0..VARS).map(|_| engine.new_var().unwrap()).collect();
    let world = Arc::new(World {
        mem: Mutex::new(vec![0; VARS]),
        runs: (0..ops).map(|_| AtomicUsize::new(0)).collect(),
    });
    (engine, vars, world)
}

fn run(seed: u64, ops: usize, workers: usize) {
    let steps = program(seed, ops);
    let (engine, vars, world) = setup(ops, workers);
    for (i, step) in steps.iter().enumerate() {
        engine.push(spec(step, &world, &vars)).unwrap();
        if i % 500 == 499 {
            engine.wait_for_var(&vars[i % VARS]).unwrap();
        }
    }
    engine.wait_all().unwrap();
    assert_eq!(*world.mem.lock().unwrap(), serial(&steps), "seed {seed}");
    for (label, runs) in world.runs.iter().enumerate() {
        assert_eq!(runs.load(Ordering::SeqCst), 1, "op {label} of seed {seed}");
    }
    for v in &vars {
        let writes = steps
            .iter()
            .filter(|s| s.writes.iter().any(|&w| vars[w] == *v))
            .count();
        assert_eq!(engine.var_version(v).unwrap(), writes as u64);
    }
}

#[test]
fn random_programs_match_the_serial_reference() {
    for seed in 1..=6 {
        run(seed, 3000, 1 + (seed as usize % 4));
    }
}

#[test]
fn the_reference_can_tell_orders_apart() {
    // The check above can fail: swapping two conflicting ops changes the
    // reference result.
    let mut steps = program(7, 50);
    let before = serial(&steps);
    let (i, j) = (0..steps.len())
        .flat_map(|i| (i + 1..steps.len()).map(move |j| (i, j)))
        .find(|&(i, j)| steps[i].writes.iter().any(|w| steps[j].writes.contains(w)))
        .unwrap();
    steps.swap(i, j);
    assert_ne!(serial(&steps), before);
}

/// Op `label` of a multi-pusher program: 2 to 4 distinct vars of `VARS`,
/// at least one written, listed in random order (the engine must sort them
/// itself, I1).
fn overlapping_step(rng: &mut Rng, label: u64) -> Step {
    let mut vars: Vec<usize> = (0..VARS).collect();
    for i in (1..vars.len()).rev() {
        vars.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let n = 2 + rng.below(3) as usize;
    let n_writes = 1 + rng.below(n as u64) as usize;
    Step {
        label,
        writes: vars[..n_writes].to_vec(),
        reads: vars[n_writes..n].to_vec(),
        lane: if rng.below(6) == 0 {
            Lane::Host
        } else {
            Lane::Compute
        },
        priority: [Priority::High, Priority::Normal, Priority::Low][rng.below(3) as usize],
        asynchronous: rng.below(8) == 0,
    }
}

/// How long a wait of the multi-pusher check may take: far beyond a
/// healthy run (about a second), so only ops that can never run reach it;
/// scaled by `FORKSAFE_WATCHDOG_SCALE` on a loaded machine.
const LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// `pushers` threads push `per_pusher` overlapping ops each, all at once.
/// Ops sharing a var take their ids under that var's lock, so the serial
/// run in id order is the reference (I1); every op runs once (I2); and
/// `wait_all_timeout` must end well inside its limit (a cross-var cycle
/// from inconsistent queue orders would leave ops waiting for ever).
fn run_pushers(seed: u64, pushers: usize, per_pusher: usize, workers: usize) {
    let (engine, vars, world) = setup(pushers * per_pusher, workers);
    let start = std::sync::Barrier::new(pushers);
    let mut pushed: Vec<(u64, Step)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..pushers)
            .map(|p| {
                let (engine, vars, world, start) = (&engine, &vars, &world, &start);
                s.spawn(move || {
                    let mut rng = Rng((seed * 1_000_003 + p as u64).wrapping_mul(2654435761) | 1);
                    let mut mine = Vec::with_capacity(per_pusher);
                    start.wait();
                    for i in 0..per_pusher {
                        let step = overlapping_step(&mut rng, (p * per_pusher + i) as u64);
                        let id = engine.push(spec(&step, world, vars)).unwrap();
                        mine.push((id, step));
                        if i % 250 == 249 {
                            // Bounded: a cycle must fail the test, not hang it.
                            let v = &vars[rng.below(VARS as u64) as usize];
                            let waited = engine
                                .wait_for_var_timeout(v, forksafe_testkit::child::scaled(LIMIT));
                            assert_eq!(waited, Ok(()), "pusher {p} of seed {seed}: var wait");
                        }
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let waited = engine.wait_all_timeout(forksafe_testkit::child::scaled(LIMIT));
    assert_eq!(
        waited,
        Ok(()),
        "seed {seed}: {pushers} pushers: ops left waiting (a cross-var cycle?)"
    );
    pushed.sort_by_key(|(id, _)| *id);
    let steps: Vec<Step> = pushed.into_iter().map(|(_, s)| s).collect();
    assert_eq!(
        *world.mem.lock().unwrap(),
        serial(&steps),
        "seed {seed}: {pushers} pushers: values differ from the serial run in id order (I1)"
    );
    for (label, runs) in world.runs.iter().enumerate() {
        assert_eq!(runs.load(Ordering::SeqCst), 1, "op {label} of seed {seed}");
    }
}

/// Rounds of the multi-pusher check: `FORKSAFE_PUSHER_ROUNDS`, default 24
/// (about 4 s; each round is a new seed, 2 to 4 pushers, 2000 ops each).
fn pusher_rounds() -> u64 {
    std::env::var("FORKSAFE_PUSHER_ROUNDS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(24)
}

#[test]
fn several_pushers_on_overlapping_vars_match_the_serial_reference() {
    for seed in 1..=pusher_rounds() {
        let pushers = 2 + seed as usize % 3;
        run_pushers(seed, pushers, 2000, 1 + seed as usize % 3);
    }
}
