//! A small data pipeline on data vars, with no user lock:
//! load → normalise → mean and max, a stage that fails, a stage that
//! panics, and a fork with ops still queued.
//!
//! `cargo run --release -p forksafe --example pipeline`
//!
//! Every value lives in a `Data<T>`; each op names what it reads and
//! writes, and its body borrows exactly that (`&T`, `&mut T`) through its
//! `Access`. The engine orders the borrows as it orders the ops (I9), so
//! no `Arc<Mutex<_>>` is needed. Values come out of ops through handles
//! (`OpHandle::wait`) and out of data vars through `Engine::get`.

use forksafe::{Config, Data, Engine, Error, Forked, OpErrorKind};
use std::process::ExitCode;
use std::time::Duration;

/// A stage's own error type: it comes back typed from `try_run_with`.
#[derive(Debug)]
struct BadSample {
    index: usize,
    value: f64,
}

impl std::fmt::Display for BadSample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sample {} is {} (negative)", self.index, self.value)
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => {
            println!("pipeline: OK");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pipeline: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The three stages on `raw`: normalise into `norm`, then mean and max
/// (two readers of `norm`, which may run at once).
/// What `stages` pushed: normalise (with its typed error), mean, max.
struct Stages<'e> {
    normalise: forksafe::OpHandle<'e, Result<(), BadSample>>,
    mean: forksafe::OpHandle<'e, f64>,
    max: forksafe::OpHandle<'e, f64>,
}

fn stages<'e>(
    engine: &'e Engine,
    raw: &Data<Vec<f64>>,
    norm: &Data<Vec<f64>>,
) -> Result<Stages<'e>, Error> {
    let (r, n) = (raw.clone(), norm.clone());
    let normalise = engine
        .op("normalise")
        .reads(&[raw.var()])
        .writes(&[norm.var()])
        .try_run_with(move |acc| {
            // The op names both: these borrows cannot be refused.
            let raw = acc.read(&r).expect("named");
            if let Some((index, &value)) = raw.iter().enumerate().find(|(_, v)| **v < 0.0) {
                return Err(BadSample { index, value });
            }
            let top = raw
                .iter()
                .cloned()
                .fold(f64::MIN, f64::max)
                .max(f64::EPSILON);
            *acc.write(&n).expect("named") = raw.iter().map(|v| v / top).collect();
            Ok(())
        })?;
    let n = norm.clone();
    let mean = engine
        .op("mean")
        .reads(&[norm.var()])
        .run_with(move |acc| {
            let v = acc.read(&n).expect("named");
            v.iter().sum::<f64>() / v.len().max(1) as f64
        })?;
    let n = norm.clone();
    let max = engine.op("max").reads(&[norm.var()]).run_with(move |acc| {
        acc.read(&n)
            .expect("named")
            .iter()
            .cloned()
            .fold(0.0, f64::max)
    })?;
    Ok(Stages {
        normalise,
        mean,
        max,
    })
}

fn run() -> Result<(), String> {
    // Stage 3 panics on purpose: keep that one panic's report short.
    std::panic::set_hook(Box::new(|info| {
        let what = info.payload().downcast_ref::<&str>().copied().unwrap_or("");
        if what != "scribble gave up half-way" {
            eprintln!("{info}");
        }
    }));
    let engine = Engine::new(Config::default()).map_err(|e| e.to_string())?;
    let s = |e: Error| e.to_string();

    // 1. The pipeline on good data.
    let raw = engine.data(Vec::<f64>::new()).map_err(s)?;
    let norm = engine.data(Vec::<f64>::new()).map_err(s)?;
    let r = raw.clone();
    engine
        .op("load")
        .writes(&[raw.var()])
        .run_with(move |acc| acc.write(&r).map(|mut v| *v = vec![2.0, 4.0, 6.0, 8.0]))
        .map_err(s)?;
    let st = stages(&engine, &raw, &norm).map_err(s)?;
    let (mean, max) = (st.mean.wait().map_err(s)?, st.max.wait().map_err(s)?);
    println!("good data: mean {mean:.3}, max {max:.3} (normalised by the largest sample)");
    if (mean - 0.625).abs() > 1e-9 || (max - 1.0).abs() > 1e-9 {
        return Err(format!("wrong results: mean {mean}, max {max}"));
    }

    // 2. A stage that fails: a negative sample. `normalise` fails with the
    // typed error, `norm` is poisoned, and mean and max are skipped with
    // normalise's error; nothing half-computed is handed out.
    let r = raw.clone();
    engine
        .op("load bad")
        .writes(&[raw.var()])
        .run_with(move |acc| acc.write(&r).map(|mut v| v[2] = -1.0))
        .map_err(s)?;
    let st = stages(&engine, &raw, &norm).map_err(s)?;
    let failed = st.normalise.wait().map_err(s)?;
    match (failed, st.mean.wait(), engine.get(&norm)) {
        (Err(bad), Err(Error::Poisoned(e)), Err(Error::Poisoned(_))) => {
            println!("bad sample: normalise failed with {bad:?} (typed); mean skipped ({e}); norm poisoned, not read");
        }
        other => return Err(format!("a failed stage gave {other:?}")),
    }
    // Recover: clear the poison, load good data again.
    engine.clear_poison(norm.var()).map_err(s)?;
    let _ = engine.wait_all(); // collects the errors of step 2

    // 3. A stage that panics while it holds `&mut`: the value is poisoned
    // with the panic, never read as good.
    let n = norm.clone();
    engine
        .op("scribble")
        .writes(&[norm.var()])
        .run_with(move |acc| {
            let mut v = acc.write(&n).expect("named");
            v.clear();
            panic!("scribble gave up half-way");
        })
        .map_err(s)?;
    match engine.get(&norm) {
        Err(Error::Poisoned(e)) if matches!(e.kind(), OpErrorKind::Panicked(_)) => {
            println!("panic: norm poisoned by '{}' ({e})", e.op().name);
        }
        other => return Err(format!("a panicking stage gave {other:?}")),
    }
    engine.clear_poison(norm.var()).map_err(s)?;
    let _ = engine.wait_all();

    // 4. A fork with ops queued: a slow stage runs, two more wait behind
    // it. The fork lets the running stage finish (its drain) and forks; in
    // the child the queued ops are lost, and what they would write is
    // poisoned `LostInFork`; the parent runs them.
    let slow = engine.data(0_u64).map_err(s)?;
    let w = slow.clone();
    let (started_tx, started) = std::sync::mpsc::channel();
    engine
        .op("slow")
        .writes(&[slow.var()])
        .run_with(move |acc| {
            let _ = started_tx.send(());
            std::thread::sleep(Duration::from_millis(200));
            acc.write(&w).map(|mut v| *v += 1)
        })
        .map_err(s)?;
    for step in ["queued 1", "queued 2"] {
        let w = slow.clone();
        engine
            .op(step)
            .writes(&[slow.var()])
            .run_with(move |acc| acc.write(&w).map(|mut v| *v += 10))
            .map_err(s)?;
    }
    started
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| "the slow stage never started")?;
    match forksafe::fork_with(Duration::from_secs(5)).map_err(s)? {
        Forked::Child { .. } => {
            let code = match child(&engine, &slow) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("pipeline child: FAILED: {e}");
                    1
                }
            };
            // SAFETY: leaving the child without the parent's exit hooks.
            unsafe { libc::_exit(code) }
        }
        Forked::Parent { child, .. } => {
            let child = nix::unistd::Pid::from_raw(child);
            let status = nix::sys::wait::waitpid(child, None).map_err(|e| e.to_string())?;
            if status != nix::sys::wait::WaitStatus::Exited(child, 0) {
                return Err(format!("the child ended with {status:?}"));
            }
            let v = engine.get(&slow).map_err(s)?;
            println!("fork, parent: every op ran once, slow = {v}");
            if v != 21 {
                return Err(format!("parent slow = {v}, expected 21"));
            }
        }
    }
    Ok(())
}

fn child(engine: &Engine, slow: &Data<u64>) -> Result<(), String> {
    let report = engine
        .fork_report()
        .map_err(|e| e.to_string())?
        .ok_or("no fork report")?;
    let lost: Vec<&str> = report.lost.iter().map(|i| i.name.as_str()).collect();
    match engine.get(slow) {
        Err(Error::Poisoned(e)) if e.kind() == &OpErrorKind::LostInFork => {
            println!(
                "fork, child: lost {lost:?}; slow poisoned LostInFork by '{}'",
                e.op().name
            );
            Ok(())
        }
        other => Err(format!("child get(slow) = {other:?}, lost {lost:?}")),
    }
}
