//! proptest strategies for programs. Everything is built from shrinkable
//! parts (vectors, subsequences, ranges, unions), so a failing program
//! shrinks to a minimal one: fewer statements, fewer vars, simpler ops.

use crate::program::{Mode, OpStmt, Outcome, Program, Stmt, VARS};
use proptest::prelude::*;
use proptest::sample::subsequence;

/// An op statement: distinct vars split into reads and writes (now and
/// then a var repeated, which the engine must refuse with a typed error).
pub fn op_stmt() -> impl Strategy<Value = OpStmt> {
    let vars = subsequence((0..VARS as u8).collect::<Vec<u8>>(), 0..=3);
    let outcome = prop_oneof![
        6 => Just(Outcome::Ok),
        1 => Just(Outcome::Fail),
        1 => Just(Outcome::Panic),
    ];
    let mode = prop_oneof![
        4 => Just(Mode::Sync),
        1 => Just(Mode::AsyncInline),
        1 => Just(Mode::AsyncThread),
    ];
    (
        vars,
        any::<u8>(),
        outcome,
        mode,
        prop::bool::weighted(0.25),
        prop::bool::weighted(0.1),
        0u8..3,
        prop::bool::weighted(0.03),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(vars, split, outcome, mode, host, run_on_error, priority, dup, body_wait)| {
                let (mut reads, mut writes) = (Vec::new(), Vec::new());
                for (i, v) in vars.into_iter().enumerate() {
                    if split & (1 << i) != 0 {
                        reads.push(v);
                    } else {
                        writes.push(v);
                    }
                }
                if dup {
                    if let Some(&v) = reads.first().or(writes.first()) {
                        writes.push(v);
                    }
                }
                OpStmt {
                    reads,
                    writes,
                    outcome,
                    mode,
                    host,
                    run_on_error,
                    priority,
                    // A var repeated is refused at push: no body to wait.
                    body_wait: body_wait && !dup,
                }
            },
        )
}

/// One statement; `forks` adds fork statements.
pub fn stmt(forks: bool) -> BoxedStrategy<Stmt> {
    let var = 0..VARS as u8;
    let base = prop_oneof![
        24 => op_stmt().prop_map(Stmt::Op),
        4 => var.clone().prop_map(Stmt::WaitVar),
        3 => Just(Stmt::WaitAll),
        1 => var.clone().prop_map(Stmt::Delete),
        2 => var.prop_map(Stmt::Clear),
        2 => Just(Stmt::Quiesce),
        2 => Just(Stmt::Resume),
    ];
    if forks {
        prop_oneof![
            38 => base,
            2 => any::<bool>().prop_map(|drained| Stmt::Fork { drained }),
        ]
        .boxed()
    } else {
        base.boxed()
    }
}

/// A program of up to `max_len` statements; `forks` adds fork statements.
pub fn program(max_len: usize, forks: bool) -> impl Strategy<Value = Program> {
    (
        1u8..=3,
        1u8..=2,
        prop::bool::weighted(0.25),
        prop::collection::vec(stmt(forks), 0..=max_len),
    )
        .prop_map(|(compute_workers, host_workers, gil, stmts)| Program {
            compute_workers,
            host_workers,
            gil,
            stmts,
        })
}
