//! Differential property tests: random programs on the real engine against
//! the serial reference, real forks included; failures shrink to a minimal
//! program, printed with the reason.
//!
//! A `harness = false` binary (docs/DESIGN.md, "Testing real forks"): libtest's
//! threads could hold output locks at a fork. Each property runs in a
//! fresh subprocess of this binary (its own process group) under a
//! watchdog that kills it and fails; every fork inside has its own
//! watchdog too.
//!
//! `cargo test -p forksafe-proptests --test differential [NAME...]`.
//! Case counts are sized for CI; `PROPTEST_CASES=N` sets every property's
//! count (deep runs), `PROPTEST_RNG_SEED=S` fixes the seed.

use forksafe_proptests::forking::quiet_panic_hook;
use forksafe_proptests::lifecycle::{decode_lifecycle, run_lifecycle};
use forksafe_proptests::{decode, encode, run_program, strategy, Options, Program, Stats, Stmt};
use forksafe_testkit::child::run_isolated;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use std::cell::RefCell;

use std::time::{Duration, Instant};

type Property = fn(u32) -> Result<String, String>;

/// Name, default case count, property.
const PROPERTIES: &[(&str, u32, Property)] = &[
    ("programs", 4000, programs),
    ("programs_with_forks", 1000, programs_with_forks),
    ("programs_with_pushers", 1500, programs_with_pushers),
    ("programs_run_inline", 1000, programs_run_inline),
    ("programs_batched", 1500, programs_batched),
    ("lifecycle", 1000, lifecycle),
    ("decode_roundtrip", 2000, decode_roundtrip),
    ("data_vars", 1000, data_vars),
    (
        "regression_lost_clear_poison",
        1,
        regression_lost_clear_poison,
    ),
];

/// Known bugs not fixed yet: each fails until it is, so it runs only when
/// named (`cargo test -p forksafe-proptests --test differential -- known`).
const KNOWN: &[(&str, u32, Property)] = &[("known_child_hang", 3000, known_child_hang)];

/// Watchdog of one property's process, scaled up for deep runs.
fn limit(cases: u32, default_cases: u32) -> Duration {
    let base = Duration::from_secs(300);
    base * (cases / default_cases.max(1)).max(1)
}

fn main() {
    if let Ok(name) = std::env::var("FORKSAFE_PROPERTY") {
        quiet_panic_hook();
        let Some((_, default_cases, f)) =
            PROPERTIES.iter().chain(KNOWN).find(|(n, _, _)| *n == name)
        else {
            eprintln!("no property {name}");
            std::process::exit(3);
        };
        match f(cases(*default_cases)) {
            Ok(detail) => {
                println!("    {detail}");
                std::process::exit(0)
            }
            Err(e) => {
                println!("    FAILED: {e}");
                std::process::exit(1)
            }
        }
    }
    // Known failures run only when named.
    let asked: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let listed = PROPERTIES.iter().chain(
        KNOWN
            .iter()
            .filter(|(n, _, _)| asked.iter().any(|f| n.contains(f.as_str()))),
    );
    let names: Vec<&'static str> = listed.map(|(n, _, _)| *n).collect();
    let (passed, failed) = forksafe_testkit::harness::run_counted(&names, |name| {
        let default_cases = PROPERTIES
            .iter()
            .chain(KNOWN)
            .find(|(n, _, _)| *n == name)
            .map_or(1, |(_, c, _)| *c);
        let started = Instant::now();
        let (ok, output) = run_isolated(
            "FORKSAFE_PROPERTY",
            name,
            limit(cases(default_cases), default_cases),
        );
        let secs = started.elapsed().as_secs_f64();
        let verdict = if ok { "ok" } else { "FAILED" };
        println!("property {name} ... {verdict} ({secs:.1}s)");
        print!("{output}");
        ok
    });
    println!("properties: {passed} passed, {failed} failed");
    if failed > 0 || passed == 0 {
        std::process::exit(1);
    }
}

/// The case count: `PROPTEST_CASES` if set, else the property's default.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default)
}

fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        // Shrinking runs failing programs again and again; bound it well
        // inside the watchdog.
        max_shrink_time: 120_000,
        ..Config::default()
    }
}

/// Runs a property over `strategy`; reports cases and totals, or the
/// minimal failing input with its reason.
fn check<S: Strategy>(
    cases: u32,
    strategy: S,
    test: impl Fn(&S::Value) -> Result<String, String>,
    show: impl Fn(&S::Value) -> String,
) -> Result<String, String> {
    let started = Instant::now();
    let mut runner = TestRunner::new(config(cases));
    let last = RefCell::new(String::new());
    let result = runner.run(&strategy, |value| {
        let detail = test(&value).map_err(TestCaseError::fail)?;
        *last.borrow_mut() = detail;
        Ok(())
    });
    let secs = started.elapsed().as_secs_f64();
    match result {
        Ok(()) => Ok(format!("{cases} cases in {secs:.1}s; {}", last.borrow())),
        Err(TestError::Fail(reason, value)) => Err(format!(
            "minimal failing input (after shrinking, {secs:.1}s):\n{}\nreason: {reason}",
            show(&value)
        )),
        Err(TestError::Abort(reason)) => Err(format!("aborted: {reason}")),
    }
}

/// Totals over the cases of one property.
#[derive(Default)]
struct Totals {
    cases: usize,
    stats: Stats,
}

impl Totals {
    fn add(&mut self, s: &Stats) -> String {
        self.cases += 1;
        let t = &mut self.stats;
        t.pushed += s.pushed;
        t.refused += s.refused;
        t.waits += s.waits;
        t.forks += s.forks;
        t.lost_in_children += s.lost_in_children;
        format!(
            "totals: {} ops pushed, {} refused as predicted, {} waits compared, {} forks, {} ops LostInFork in children",
            t.pushed, t.refused, t.waits, t.forks, t.lost_in_children
        )
    }
}

fn differential(cases: u32, forks: bool, pushers: usize) -> Result<String, String> {
    differential_with(
        cases,
        Options {
            forks,
            pushers,
            ..Options::default()
        },
    )
}

fn differential_with(cases: u32, options: Options) -> Result<String, String> {
    let forks = options.forks;
    let totals = RefCell::new(Totals::default());
    check(
        cases,
        strategy::program(60, forks),
        |p: &Program| {
            let stats = run_program(p, &options)?;
            Ok(totals.borrow_mut().add(&stats))
        },
        |p| format!("{p}bytes (fuzz format): {:02x?}", encode(p)),
    )
}

/// Every program gives the values and errors of the serial reference at
/// every wait (no forks).
fn programs(cases: u32) -> Result<String, String> {
    differential(cases, false, 1)
}

/// The same with three pushing threads: each run of consecutive op
/// statements is pushed by three threads at once, and the reference takes
/// those ops in the engine's id order (I1 across pushers), with forks.
fn programs_with_pushers(cases: u32) -> Result<String, String> {
    differential(cases, true, 3)
}

/// The same with each run of consecutive op statements pushed by one
/// `push_batch`, with forks: a batch gives what the same pushes one by one
/// give; half the cases also run ops inline (`run_inline_from: Some(1)`).
fn programs_batched(cases: u32) -> Result<String, String> {
    let half = cases / 2;
    let plain = differential_with(
        half.max(1),
        Options {
            forks: true,
            batch: true,
            ..Options::default()
        },
    )?;
    let inline = differential_with(
        (cases - half).max(1),
        Options {
            forks: true,
            batch: true,
            run_inline_from: Some(1),
            ..Options::default()
        },
    )?;
    Ok(format!("{plain}; run inline: {inline}"))
}

/// The same with pushers that run ops inline (`run_inline_from: Some(1)`:
/// a ready op whose queue already holds one op runs on its pusher, so
/// runs mix ops run inline and ops run by workers), three pushing threads
/// and forks.
fn programs_run_inline(cases: u32) -> Result<String, String> {
    differential_with(
        cases,
        Options {
            forks: true,
            pushers: 3,
            run_inline_from: Some(1),
            ..Options::default()
        },
    )
}

/// The same with forks: each child's state equals the reference at the
/// fork point (inherited ops `LostInFork`), the child goes on correctly,
/// and the parent is unaffected.
fn programs_with_forks(cases: u32) -> Result<String, String> {
    differential(cases, true, 1)
}

/// Concurrent lifecycle sequences: no panic, no hang, no lost op.
fn lifecycle(cases: u32) -> Result<String, String> {
    let accepted = RefCell::new((0usize, 0usize));
    check(
        cases,
        prop::collection::vec(any::<u8>(), 0..64),
        |bytes: &Vec<u8>| {
            let s = run_lifecycle(&decode_lifecycle(bytes))?;
            let mut a = accepted.borrow_mut();
            a.0 += s.accepted;
            a.1 += s.cancelled;
            Ok(format!(
                "totals: {} ops accepted, {} cancelled by shutdowns",
                a.0, a.1
            ))
        },
        |bytes| format!("{:?}\nbytes: {bytes:02x?}", decode_lifecycle(bytes)),
    )
}

/// Data vars (I9): ops from several threads borrow data vars' values; every
/// read and every final value equals the serial reference's.
fn data_vars(cases: u32) -> Result<String, String> {
    use forksafe_proptests::data::{data_program, run_data_program, DataProgram};
    check(
        cases,
        data_program(),
        |p: &DataProgram| run_data_program(p),
        |p| format!("{p:?}"),
    )
}

/// The fuzz input format gives back every generated program.
fn decode_roundtrip(cases: u32) -> Result<String, String> {
    check(
        cases,
        strategy::program(60, true),
        |p: &Program| {
            let back = decode(&encode(p));
            if back == *p {
                Ok(String::new())
            } else {
                Err(format!("decoded back as:\n{back}"))
            }
        },
        |p| format!("{p}"),
    )
}

/// Found by `programs_with_forks` (shrunk to `clear_poison v0; delete v0;
/// fork (raw)`): a `clear_poison` inherited by a fork child cleared the
/// var's poison, i.e. the child carried out an op it must complete with
/// `LostInFork` without running (docs/DESIGN.md, I5). Run with both fork kinds,
/// with the var poisoned first and not.
fn regression_lost_clear_poison(_cases: u32) -> Result<String, String> {
    use forksafe_proptests::program::{Mode, OpStmt, Outcome};
    let poison = Stmt::Op(OpStmt {
        reads: vec![],
        writes: vec![0],
        outcome: Outcome::Fail,
        mode: Mode::Sync,
        host: false,
        run_on_error: false,
        priority: 1,
        body_wait: false,
    });
    let options = Options {
        forks: true,
        ..Options::default()
    };
    let mut runs = 0;
    for drained in [false, true] {
        for poisoned in [false, true] {
            // A quiesce holds the clear back, so the fork always inherits it.
            let mut stmts = Vec::new();
            if poisoned {
                stmts.extend([poison.clone(), Stmt::WaitVar(0)]);
            }
            stmts.extend([
                Stmt::Quiesce,
                Stmt::Clear(0),
                Stmt::Fork { drained },
                Stmt::Resume,
                Stmt::WaitVar(0),
            ]);
            let program = Program {
                compute_workers: 1,
                host_workers: 1,
                gil: false,
                stmts,
            };
            let stats = run_program(&program, &options).map_err(|e| format!("{e}\n{program}"))?;
            if stats.forks != 1 {
                return Err(format!("expected one fork: {stats:?}"));
            }
            runs += 1;
        }
    }
    Ok(format!(
        "{runs} programs: the child keeps (or gets) the poison"
    ))
}

/// Found by `programs_with_forks` (deep run: 1 failure in 20000 cases;
/// shrinking could not make the failure repeat, so this is the program as
/// found; it failed 4 times in about 1800 runs in a loop hosted by a
/// libtest test, and here at run 596 of `PROPTEST_CASES=8000` while
/// another time 3000 runs passed): in a raw fork child the engine's lazily started workers — and
/// any fresh `std::thread` — sleep in a futex for good, so no op ever runs
/// there (I5). It goes away when each run first waits for the previous
/// engine's threads to leave (`Options::settle_threads`, on in every other
/// test): a raw fork taken while threads of a shut-down engine are still
/// leaving leaves a child that cannot start threads (Rust std's thread
/// registry mutex is copied locked, FORK-SAFETY.md L8). Fixed: shutdown now
/// joins every worker not running a body before it returns; the bounded
/// regression test is `engine/tests/fork_after_shutdown.rs`. Still runs only
/// when named (3000 runs take minutes, and it failed too rarely to be a
/// regression test); 3000 runs passed after the fix.
fn known_child_hang(cases: u32) -> Result<String, String> {
    let bytes: [u8; 119] = [
        0x01, 0x0b, 0x00, 0x0e, 0xac, 0x19, 0x10, 0x5d, 0x50, 0x00, 0x01, 0x40, 0x09, 0x00, 0x00,
        0x22, 0x00, 0x12, 0x1c, 0x00, 0x1e, 0x0c, 0x1e, 0x1f, 0x00, 0x14, 0x88, 0x1e, 0x09, 0x00,
        0x00, 0x8c, 0x10, 0x03, 0x48, 0x29, 0x00, 0x00, 0x23, 0x00, 0x7e, 0x0c, 0x00, 0x04, 0x50,
        0x0e, 0x00, 0x1d, 0x9c, 0x1e, 0x00, 0x00, 0x9c, 0x00, 0x6b, 0x80, 0x09, 0x00, 0x0c, 0x42,
        0x00, 0x2c, 0x80, 0x0b, 0x3d, 0x1f, 0x1f, 0x0e, 0x1e, 0x00, 0x00, 0x18, 0x1d, 0x10, 0x3a,
        0x82, 0x00, 0x04, 0x40, 0x29, 0x1f, 0x0f, 0x0d, 0x2c, 0x00, 0x5b, 0x53, 0x29, 0x1f, 0x1d,
        0x00, 0x00, 0x03, 0x00, 0x00, 0x53, 0x00, 0x08, 0x40, 0x00, 0x09, 0x23, 0x0e, 0x00, 0x00,
        0x90, 0x19, 0x1e, 0x00, 0x00, 0x80, 0x19, 0x1f, 0x00, 0x23, 0x83, 0x00, 0x00, 0x42,
    ];
    let program = decode(&bytes);
    let options = Options {
        forks: true,
        wait_timeout: Duration::from_secs(3),
        settle_threads: false,
        ..Options::default()
    };
    for i in 0..cases {
        run_program(&program, &options).map_err(|e| format!("run {i}: {e}\n{program}"))?;
    }
    Ok(format!("{cases} runs of the program passed"))
}
