//! Where `dag-2us` time goes: the same ops pushed into a quiesced engine
//! (push cost alone: accepted and deferred, nothing runs), then drained by
//! the workers with no pusher competing for the cores. Together they bound
//! what one pusher and the workers can reach on the same cores.

use crate::workloads::{busy_2us, dag_picks, DAG_VARS, OPS};
use forksafe::{Config, Engine};
use std::time::{Duration, Instant};

/// The two phases' figures.
pub struct Split {
    /// Pusher time per op, µs (push into a quiesced engine).
    pub push_us: f64,
    /// Wall time per op while the workers drain the queue, µs.
    pub drain_us: f64,
    /// Worker CPU per op beyond the 2 µs body, µs (workers × drain − 2).
    pub worker_overhead_us: f64,
}

/// Runs the split with `workers` compute workers.
pub fn measure(workers: usize) -> Split {
    let engine = Engine::new(Config {
        compute_workers: workers,
        ..Config::default()
    })
    .expect("engine");
    let vars: Vec<_> = (0..DAG_VARS)
        .map(|_| engine.new_var().expect("var"))
        .collect();
    for v in &vars {
        engine.op("warm").writes(&[v]).run(|| {}).expect("push");
    }
    engine.wait_all().expect("wait_all");
    let picks = dag_picks(OPS);
    let guard = engine.quiesce(Duration::from_secs(10)).expect("quiesce");
    let t0 = Instant::now();
    for p in &picks {
        let v = |k: usize| &vars[p[k] as usize];
        engine
            .op("dag-2us")
            .reads(&[v(0), v(1)])
            .writes(&[v(2)])
            .run(busy_2us)
            .expect("push");
    }
    let push = t0.elapsed();
    let t1 = Instant::now();
    drop(guard);
    engine.wait_all().expect("wait_all");
    let drain = t1.elapsed();
    let n = OPS as f64;
    let drain_us = drain.as_secs_f64() * 1e6 / n;
    Split {
        push_us: push.as_secs_f64() * 1e6 / n,
        drain_us,
        worker_overhead_us: drain_us * workers as f64 - 2.0,
    }
}
