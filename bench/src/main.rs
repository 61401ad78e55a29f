//! `forksafe-bench`: the docs/DESIGN.md performance anchors on forksafe's
//! production engine.
//!
//! ```text
//! cargo run --release -p forksafe-bench -- [--reps N] [--workers N] [--raw]
//!     [--inline N] [--trace FILE] [WORKLOAD...]
//! ```
//!
//! Workloads: `indep`, `chain`, `dag`, `dag-2us`, `indep-2t`, `queue-10k`,
//! `queue-1m` (timed to the final `wait_all`, median of `--reps` runs),
//! `fork` (fork + exit + waitpid with no engine, an idle engine and a busy
//! engine, each mode in a fresh process of this binary, alternated), `mem`
//! (bytes per pending op, a million ops queued behind a quiesce),
//! `queue-held` (indep, chain and dag with 10 000 and with 1 000 000 ops
//! held behind a quiesce, then one `wait_all`: time per op, linear?),
//! `split` (`dag-2us` cut in two: push alone into a quiesced engine, then
//! drain alone). No workload given: all of them.
//! `--raw` also prints one `RESULT` line per timed run (for
//! `scripts/bench-vs-mxnet.sh` and `scripts/bench-vs-peers.sh`);
//! `--trace FILE` writes a Chrome Trace Event timeline of the last timed
//! run. `--inline N` times the engine with `CoreConfig::run_inline_from =
//! Some(N)` (a pusher runs a ready op itself once its queue holds N ops).
//! `--inline` applies to the timed workloads only.

mod alloc;
mod fork;
mod mem;
mod queue;
mod split;
mod stats;
mod workloads;

use forksafe::{Config, CoreConfig, Engine};
use stats::median;

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

struct Args {
    reps: usize,
    workers: usize,
    raw: bool,
    inline: Option<usize>,
    trace: Option<String>,
    fork_child: Option<String>,
    workloads: Vec<String>,
}

/// The command line, parsed with `lexopt` (a small, dependency-free parser:
/// this binary needs flags, two numbers, a path and workload names, not
/// clap's build time).
fn parse_args() -> Result<Args, String> {
    use lexopt::prelude::*;
    const USAGE: &str = "usage: forksafe-bench [--reps N] [--workers N] [--raw] \
                         [--inline N] [--trace FILE] [indep chain dag dag-2us indep-2t queue-10k queue-1m fork mem split queue-held]";
    let mut a = Args {
        reps: 5,
        workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
        raw: false,
        inline: None,
        trace: None,
        fork_child: None,
        workloads: Vec::new(),
    };
    let mut parser = lexopt::Parser::from_env();
    let text = |v: std::ffi::OsString, name: &str| {
        v.into_string()
            .map_err(|_| format!("{name}: not valid UTF-8"))
    };
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Long("reps") => {
                a.reps = parser
                    .value()
                    .map_err(|e| e.to_string())?
                    .parse()
                    .map_err(|e| format!("--reps: {e}"))?
            }
            Long("workers") => {
                a.workers = parser
                    .value()
                    .map_err(|e| e.to_string())?
                    .parse()
                    .map_err(|e| format!("--workers: {e}"))?
            }
            Long("raw") => a.raw = true,
            Long("inline") => {
                a.inline = Some(
                    parser
                        .value()
                        .map_err(|e| e.to_string())?
                        .parse()
                        .map_err(|e| format!("--inline: {e}"))?,
                )
            }
            Long("trace") => {
                a.trace = Some(text(parser.value().map_err(|e| e.to_string())?, "--trace")?)
            }
            Long("fork-child") => {
                a.fork_child = Some(text(
                    parser.value().map_err(|e| e.to_string())?,
                    "--fork-child",
                )?)
            }
            Short('h') | Long("help") => return Err(USAGE.into()),
            Value(v) => {
                let w = text(v, "workload")?;
                if workloads::NAMES.contains(&w.as_str())
                    || ["fork", "mem", "split", "queue-held"].contains(&w.as_str())
                {
                    a.workloads.push(w);
                } else {
                    return Err(format!("unknown argument {w} (try --help)"));
                }
            }
            other => return Err(format!("{} (try --help)", other.unexpected())),
        }
    }
    if a.reps == 0 || a.workers == 0 {
        return Err("--reps and --workers must be positive".into());
    }
    if a.workloads.is_empty() {
        a.workloads = workloads::NAMES.iter().map(|s| s.to_string()).collect();
        a.workloads.extend([
            "fork".into(),
            "mem".into(),
            "split".into(),
            "queue-held".into(),
        ]);
    }
    Ok(a)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if let Some(mode) = &args.fork_child {
        if let Err(e) = fork::child(mode, args.workers) {
            eprintln!("{e}");
            std::process::exit(1);
        }
        return;
    }
    println!("command: {}", stats::command_line());
    println!("machine: {}", stats::machine());
    match args.inline {
        None => println!("engine:  forksafe, {} compute workers", args.workers),
        Some(n) => println!(
            "engine:  forksafe, {} compute workers, run inline from {n} queued ops",
            args.workers
        ),
    }
    println!();
    println!("| workload | ops | median s | ops/s | runs | allocs/op | CPU µs/op |");
    println!("|---|---|---|---|---|---|---|");
    let timed: Vec<&String> = args
        .workloads
        .iter()
        .filter(|w| workloads::NAMES.contains(&w.as_str()))
        .collect();
    if !timed.is_empty() {
        run_timed(&args, &timed);
    }
    if args.workloads.iter().any(|w| w == "fork") {
        run_fork(&args);
    }
    if args.workloads.iter().any(|w| w == "split") {
        let s = split::measure(args.workers);
        println!(
            "| split dag-2us: push alone | {} | {:.3} µs CPU/op | | 1 | | |",
            workloads::OPS,
            s.push_us
        );
        println!(
            "| split dag-2us: drain alone | {} | {:.3} µs/op | {:.0} | 1 | | |",
            workloads::OPS,
            s.drain_us,
            1e6 / s.drain_us
        );
        let cpu = s.push_us + 2.0 + s.worker_overhead_us;
        println!(
            "split: CPU per op = push {:.3} + body 2 + worker overhead {:.3} = {cpu:.3} µs; \
             {} cores bound one pusher + workers to {:.0} ops/s",
            s.push_us,
            s.worker_overhead_us,
            args.workers,
            args.workers as f64 * 1e6 / cpu
        );
        let deps = split::dependency_bound(args.workers, 2.0);
        println!(
            "split: the dag dependencies alone (in-order list schedule, {} workers, 2 µs ops) \
             allow {deps:.0} ops/s ({:.0}% of ideal)",
            args.workers,
            deps / (args.workers as f64 / 2e-6) * 100.0
        );
    }
    if args.workloads.iter().any(|w| w == "queue-held") {
        for shape in queue::SHAPES {
            let [small, large] = queue::SIZES.map(|n| queue::per_op_us(args.workers, shape, n));
            println!(
                "| queue-held {shape} | {} | {:.3} µs/op | {:.0} | 1 | | |",
                queue::SIZES[1],
                large,
                1e6 / large
            );
            println!(
                "queue-held: {shape}: {:.3} µs/op with {} queued, {:.3} with {}: ratio {:.2} (linear: 1)",
                small,
                queue::SIZES[0],
                large,
                queue::SIZES[1],
                large / small
            );
        }
    }
    if args.workloads.iter().any(|w| w == "mem") {
        let m = mem::measure(args.workers);
        println!(
            "| mem ({} pending ops) | heap {:.1} B/op | RSS {:.1} B/op | | 1 | | |",
            mem::PENDING_OPS,
            m.heap_per_op,
            m.rss_per_op
        );
        let per_op: Vec<String> = m
            .by_size
            .iter()
            .map(|(size, n)| format!("{n:.2} x {size} B"))
            .collect();
        let listed: f64 = m.by_size.iter().map(|(s, n)| *s as f64 * n).sum();
        println!(
            "mem: heap per pending op by allocation size: {} (+ {:.1} B amortised container growth)",
            per_op.join(", "),
            m.heap_per_op - listed
        );
    }
}

fn run_timed(args: &Args, names: &[&String]) {
    let engine = Engine::new(Config {
        core: CoreConfig {
            compute_workers: args.workers,
            run_inline_from: args.inline,
            ..CoreConfig::default()
        },
        ..Config::default()
    })
    .expect("engine");
    let fx = workloads::Fixture::new(&engine);
    // Warm-up: start the workers.
    workloads::run(&engine, &fx, "indep").expect("warm-up");
    for name in names {
        let mut secs = Vec::new();
        let calls = alloc::alloc_calls();
        let mut cpus = Vec::new();
        let ops = workloads::ops(name);
        for _ in 0..args.reps {
            let c0 = stats::process_cpu();
            let d = workloads::run(&engine, &fx, name).expect("known workload");
            let cpu = stats::process_cpu() - c0;
            if args.raw {
                println!(
                    "RESULT engine=forksafe workload={name} ops={ops} seconds={:.6} cpu_seconds={cpu:.6}",
                    d.as_secs_f64()
                );
            }
            secs.push(d.as_secs_f64());
            cpus.push(cpu);
        }
        let m = median(&secs);
        let allocs = (alloc::alloc_calls() - calls) as f64 / (args.reps * ops) as f64;
        println!(
            "| {name} | {ops} | {m:.4} | {:.0} | {} | {allocs:.2} | {:.3} |",
            ops as f64 / m,
            secs.len(),
            median(&cpus) * 1e6 / ops as f64
        );
    }
    if let (Some(path), Some(name)) = (&args.trace, names.last()) {
        // One more run of the last workload, traced (not in the table).
        engine.trace_start().expect("trace start");
        workloads::run(&engine, &fx, name).expect("known workload");
        engine.trace_stop().expect("trace stop");
        let trace = engine.trace_take().expect("trace");
        let file = std::fs::File::create(path).expect("create trace file");
        trace
            .write_chrome_json(std::io::BufWriter::new(file))
            .expect("write trace");
        eprintln!(
            "trace of one {name} run: {} events in {path}",
            trace.events.len()
        );
    }
}

fn run_fork(args: &Args) {
    match fork::measure(args.reps, args.workers) {
        Ok(modes) => {
            let base = |name: &str| {
                let m = modes.iter().find(|m| m.0 == name).expect("baseline mode");
                (median(&m.1), median(&m.2))
            };
            for (mode, wall, cpu) in &modes {
                let (w, c) = (median(wall), median(cpu));
                // Each mode against no engine in a process of the same size.
                let (none_wall, none_cpu) = if mode.ends_with("-64m") {
                    base("none-64m")
                } else {
                    base("none")
                };
                let label = match *mode {
                    "handlers" => "engine, workers not started (handlers only)".to_string(),
                    "threads" => format!("no engine, {} parked threads", args.workers),
                    "exited" => format!("no engine, {} threads run and joined", args.workers),
                    "none-64m" => "no engine, 64 MiB heap".to_string(),
                    "idle-64m" => "idle engine, 64 MiB heap".to_string(),
                    "tokio-plain" => format!("plain tokio runtime, {} workers, idle", args.workers),
                    "tokio-idle" => format!("ForkSafeRuntime, {} workers, idle", args.workers),
                    "tokio-busy" => format!("ForkSafeRuntime, {} workers, busy", args.workers),
                    m => format!("{m} engine"),
                };
                println!(
                    "| fork+exit+waitpid, {label} | {} | wall {w:.1} µs, CPU {c:.1} µs | \
                     wall {:.3}x, CPU {:.3}x no engine | {} | | |",
                    fork::forks_of(mode),
                    w / none_wall,
                    c / none_cpu,
                    wall.len()
                );
            }
        }
        Err(e) => println!("| fork | failed: {e} | | | | | |"),
    }
}
