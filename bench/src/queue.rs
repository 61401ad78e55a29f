//! `queue-held`: a million ops queued, then one `wait_all` — is the cost
//! per op linear in how much is queued? Each shape (`indep`, `chain`, `dag`) is
//! pushed into a quiesced engine (so every op really is queued at once),
//! released, and waited for; the same with 10 000 ops gives the per-op
//! baseline. Wall time from the first push to the end of `wait_all`.

use crate::workloads::{dag_picks, warm_engine, DAG_VARS, INDEP_VARS};
use std::time::{Duration, Instant};

/// The small and the large run.
pub const SIZES: [usize; 2] = [10_000, 1_000_000];
/// The shapes, in table order.
pub const SHAPES: [&str; 3] = ["indep", "chain", "dag"];

/// Time per op (µs) of `shape` with `n` ops queued, on a fresh engine.
pub fn per_op_us(workers: usize, shape: &str, n: usize) -> f64 {
    let (engine, vars) = warm_engine(workers, INDEP_VARS);
    let picks = if shape == "dag" {
        dag_picks(n)
    } else {
        Vec::new()
    };
    let start = Instant::now();
    let guard = engine.quiesce(Duration::from_secs(60)).expect("quiesce");
    for i in 0..n {
        let op = engine.op("queued");
        let op = match shape {
            "indep" => op.writes(&[&vars[i % INDEP_VARS]]),
            "chain" => op.writes(&[&vars[0]]),
            _ => {
                let p = picks[i];
                let v = |k: usize| &vars[p[k] as usize % DAG_VARS];
                op.reads(&[v(0), v(1)]).writes(&[v(2)])
            }
        };
        op.run(|| {}).expect("push");
    }
    drop(guard);
    engine.wait_all().expect("wait_all");
    start.elapsed().as_secs_f64() * 1e6 / n as f64
}
