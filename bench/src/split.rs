//! Where `dag-2us` time goes: the same ops pushed into a quiesced engine
//! (push cost alone: accepted and deferred, nothing runs), then drained by
//! the workers with no pusher competing for the cores. Each phase is
//! measured in process CPU time (`getrusage`, user + system), so other load
//! on the machine does not inflate it: during the push the workers are
//! parked, during the drain the pusher is parked in `wait_all`. Together
//! they bound what one pusher and the workers can reach on the same cores.

use crate::workloads::{busy_2us, dag_picks, warm_engine, DAG_VARS, OPS};
use std::time::{Duration, Instant};

/// The two phases' figures.
pub struct Split {
    /// Pusher CPU per op, µs (push into a quiesced engine).
    pub push_us: f64,
    /// Wall time per op while the workers drain the queue, µs.
    pub drain_us: f64,
    /// Worker CPU per op beyond the 2 µs body, µs (drain CPU per op − 2),
    /// idle spinning included.
    pub worker_overhead_us: f64,
}

/// User + system CPU time of the whole process.
fn cpu_time() -> Duration {
    // SAFETY: `getrusage` writes into the zeroed struct we pass.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// The throughput the `dag` dependencies alone allow: an in-order list
/// schedule of the same ops on `workers` workers, each op taking `body_us`,
/// pushes and engine work free. Ops/s.
pub fn dependency_bound(workers: usize, body_us: f64) -> f64 {
    let mut write_end = [0.0f64; DAG_VARS];
    let mut use_end = [0.0f64; DAG_VARS];
    let mut free = vec![0.0f64; workers.max(1)];
    let mut makespan = 0.0f64;
    for [r1, r2, w] in dag_picks(OPS).into_iter().map(|p| p.map(usize::from)) {
        let ready = write_end[r1].max(write_end[r2]).max(use_end[w]);
        let (k, at) = free
            .iter()
            .copied()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("a worker");
        let end = ready.max(at) + body_us;
        free[k] = end;
        use_end[r1] = use_end[r1].max(end);
        use_end[r2] = use_end[r2].max(end);
        write_end[w] = end;
        use_end[w] = end;
        makespan = makespan.max(end);
    }
    OPS as f64 / makespan * 1e6
}

/// Runs the split with `workers` compute workers.
pub fn measure(workers: usize) -> Split {
    let (engine, vars) = warm_engine(workers, DAG_VARS);
    let picks = dag_picks(OPS);
    let guard = engine.quiesce(Duration::from_secs(10)).expect("quiesce");
    let c0 = cpu_time();
    for p in &picks {
        let v = |k: usize| &vars[p[k] as usize];
        engine
            .op("dag-2us")
            .reads(&[v(0), v(1)])
            .writes(&[v(2)])
            .run(busy_2us)
            .expect("push");
    }
    let c1 = cpu_time();
    let t1 = Instant::now();
    drop(guard);
    engine.wait_all().expect("wait_all");
    let drain = t1.elapsed();
    let c2 = cpu_time();
    let n = OPS as f64;
    Split {
        push_us: (c1 - c0).as_secs_f64() * 1e6 / n,
        drain_us: drain.as_secs_f64() * 1e6 / n,
        worker_overhead_us: (c2 - c1).as_secs_f64() * 1e6 / n - 2.0,
    }
}
