//! The test-list protocol for the `harness = false` binaries, so that a
//! runner can list their cases and run one at a time, each in a process of
//! its own, with a time limit (cargo-nextest: `.config/nextest.toml`), as
//! it does libtest's. Those binaries have no libtest harness because
//! libtest's threads could hold locks at a fork; this keeps them
//! single-threaded and understands the few arguments a runner passes:
//!
//! - `--list` (with `--format terse`): one line `<case>: test` per case;
//!   with `--ignored`, none (no case is ignored).
//! - `--exact <case>`: only that case; a bare `<filter>`: the cases whose
//!   name contains it; nothing: every case, in order (plain `cargo test`).
//! - Other flags (`--nocapture`, `--test-threads=1`, …) are accepted and
//!   change nothing: the cases already run one after another and print
//!   straight to the process's output.

/// One case: its name and its body, which panics or exits non-zero on
/// failure.
pub type Case = (&'static str, fn());

/// What a runner asked for.
#[derive(Debug, PartialEq, Eq)]
enum Request {
    /// List the cases (none if `ignored`).
    List { ignored: bool },
    /// Run the cases that `filter` selects (all if `None`).
    Run { filter: Option<String>, exact: bool },
}

fn parse(args: &[String]) -> Request {
    let list = args.iter().any(|a| a == "--list");
    let ignored = args
        .iter()
        .any(|a| a == "--ignored" || a == "--include-ignored");
    if list {
        return Request::List { ignored };
    }
    let exact = args.iter().any(|a| a == "--exact");
    // The value of a flag that takes one is not a filter.
    let mut filter = None;
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
            continue;
        }
        if matches!(a.as_str(), "--format" | "--test-threads" | "--color" | "-Z") {
            skip = true;
            continue;
        }
        if !a.starts_with('-') {
            filter = Some(a.clone());
        }
    }
    Request::Run { filter, exact }
}

fn selected(name: &str, filter: &Option<String>, exact: bool) -> bool {
    match filter {
        None => true,
        Some(f) if exact => name == f,
        Some(f) => name.contains(f.as_str()),
    }
}

/// Runs the binary's `cases` as the arguments ask (see the module docs).
pub fn main(cases: &[Case]) {
    main_with(cases, |_, case| case());
}

/// [`main`], saying `{label} {case}: ok (seconds)` after each case that
/// returned.
pub fn main_timed(label: &str, cases: &[Case]) {
    main_with(cases, |name, case| {
        let start = std::time::Instant::now();
        case();
        println!(
            "{label} {name}: ok ({:.1} s)",
            start.elapsed().as_secs_f64()
        );
    });
}

fn main_with(cases: &[Case], each: impl Fn(&'static str, fn())) {
    let names: Vec<&'static str> = cases.iter().map(|(n, _)| *n).collect();
    run(&names, |name| {
        if let Some(&(_, case)) = cases.iter().find(|(n, _)| *n == name) {
            each(name, case);
        }
    });
}

/// Runs the cases `names` as the arguments ask, each through `case`, which
/// gets the case's name. A listing exits 0 once printed; a filter that
/// selects no case exits 1, so a runner never mistakes a misspelt name for
/// a pass.
pub fn run(names: &[&'static str], case: impl Fn(&'static str)) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse(&args) {
        Request::List { ignored } => {
            if !ignored {
                for name in names {
                    println!("{name}: test");
                }
            }
            // Nothing else of the binary's runs: a listing is only the list.
            std::process::exit(0);
        }
        Request::Run { filter, exact } => {
            let mut ran = 0;
            for name in names {
                if selected(name, &filter, exact) {
                    case(name);
                    ran += 1;
                }
            }
            if ran == 0 {
                eprintln!("no case matches {filter:?} (exact: {exact})");
                std::process::exit(1);
            }
        }
    }
}

/// [`run`] for cases that report instead of panicking: `case` returns
/// whether the case passed; returns how many passed and how many failed,
/// for the binary's summary and exit status.
pub fn run_counted(names: &[&'static str], case: impl Fn(&'static str) -> bool) -> (usize, usize) {
    let (passed, failed) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    run(names, |name| {
        let counter = if case(name) { &passed } else { &failed };
        counter.set(counter.get() + 1);
    });
    (passed.get(), failed.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_runner_lists_then_runs_one_case() {
        assert_eq!(
            parse(&args(&["--list", "--format", "terse"])),
            Request::List { ignored: false }
        );
        assert_eq!(
            parse(&args(&["--list", "--format", "terse", "--ignored"])),
            Request::List { ignored: true }
        );
        assert_eq!(
            parse(&args(&["--exact", "nested", "--nocapture"])),
            Request::Run {
                filter: Some("nested".into()),
                exact: true
            }
        );
        assert!(selected("nested", &Some("nested".into()), true));
        assert!(!selected("nested_twice", &Some("nested".into()), true));
        assert!(selected("nested_twice", &Some("nested".into()), false));
    }

    #[test]
    fn cargo_test_runs_every_case() {
        assert_eq!(
            parse(&args(&[])),
            Request::Run {
                filter: None,
                exact: false
            }
        );
        assert_eq!(
            parse(&args(&["--test-threads", "2"])),
            Request::Run {
                filter: None,
                exact: false
            }
        );
        assert!(selected("any", &None, false));
    }
}
