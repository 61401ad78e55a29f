//! Regression tests for the bugs the differential tests and the fuzzers
//! found: each is the minimal program they shrank to, run against the
//! reference, plus a direct check on the public API. (Bugs that need a real
//! fork are regression entries of the `differential` binary, which may
//! fork.)

use forksafe::{Config, Engine, Error, OpErrorKind};
use forksafe_proptests::program::{Mode, OpStmt, Outcome, Program, Stmt};
use forksafe_proptests::{run_program, Options};

/// Found by `programs`: an async op whose body panics while it holds its
/// token was reported as `TokenDropped` (the token's drop during the
/// unwinding completed the op first), losing the panic; docs/DESIGN.md (I7) and
/// `OpErrorKind::Panicked` say a panicking body fails the op with its
/// panic.
#[test]
fn async_body_panic_is_reported_as_a_panic() {
    forksafe_proptests::forking::quiet_panic_hook();
    let program = Program {
        compute_workers: 1,
        host_workers: 1,
        gil: false,
        stmts: vec![Stmt::Op(OpStmt {
            reads: vec![],
            writes: vec![0],
            outcome: Outcome::Panic,
            mode: Mode::AsyncInline,
            host: false,
            run_on_error: false,
            priority: 1,
            body_wait: false,
        })],
    };
    if let Err(e) = run_program(&program, &Options::default()) {
        panic!("{e}\n{program}");
    }

    let engine = Engine::new(Config::default()).unwrap();
    let v = engine.new_var().unwrap();
    engine
        .op("async panics")
        .writes(&[&v])
        .run_async(|token| {
            let _held = token;
            std::panic::panic_any(format!("boom {}", forksafe_proptests::program::PANIC_MARK));
        })
        .unwrap();
    match engine.wait_for_var(&v) {
        Err(Error::Poisoned(e)) => assert_eq!(
            e.kind(),
            &OpErrorKind::Panicked(format!("boom {}", forksafe_proptests::program::PANIC_MARK))
        ),
        other => panic!("wait_for_var: {other:?}"),
    }
}
