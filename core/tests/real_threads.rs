//! The real-threads check: thousands of random ops over a few vars, on real
//! worker threads with several pushers, give the same values as running the
//! same program serially in push order (I1), and every op runs exactly once
//! (I2).

use crate::support::Job;
use forksafe_core::{Config, Engine, ForkDomain, Lane, OpSpec, Priority, Var};
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

fn run(seed: u64, ops: usize, workers: usize) {
    let steps = program(seed, ops);
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    let config = Config {
        compute_workers: workers,
        host_workers: 2,
        ..Config::default()
    };
    let engine = Engine::<Job>::new(domain, config).unwrap();
    let vars: Vec<Var<Job>> = (0..VARS).map(|_| engine.new_var().unwrap()).collect();
    let world = Arc::new(World {
        mem: Mutex::new(vec![0; VARS]),
        runs: (0..ops).map(|_| AtomicUsize::new(0)).collect(),
    });
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
