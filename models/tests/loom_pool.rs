//! loom models of the worker pool (`core/src/pool.rs`, its `# State`): the
//! stand-in lifecycle (start, block, unblock, park as a spare, recall,
//! shutdown) and the bound rule. Scenarios in `pool_common`; their negative
//! controls (`RecallWithoutWake`, `PushInsideOpWaits`) in
//! `loom_controls.rs`.

#![cfg(loom)]

mod common;
mod pool_common;

use common::*;

/// One round: start a stand-in for a wait inside an op, retire it as a
/// spare, shut down. Threads: main + worker + stand-in.
#[test]
fn pool_stand_in_started_and_retired() {
    check("pool_stand_in_started_and_retired", || {
        pool_common::stand_in_rounds(1)
    });
}

/// Two rounds: the second recalls the spare the first retired (or finds
/// the stand-in still idle); never a third thread.
#[test]
fn pool_stand_in_recalled() {
    let mut b = builder();
    // The recall path needs no preemption once the first round has
    // retired its stand-in; bound 1 keeps this model small.
    b.preemption_bound = Some(bound().min(1));
    check_with("pool_stand_in_recalled", b, || {
        pool_common::stand_in_rounds(2)
    });
}

/// The bound rule: a push from inside the op holding the only slot fails
/// with `Full` at once. Threads: main + worker.
#[test]
fn pool_push_inside_op_at_the_bound() {
    check(
        "pool_push_inside_op_at_the_bound",
        pool_common::push_inside_at_the_bound,
    );
}
