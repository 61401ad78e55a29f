//! shuttle models of the worker pool (`core/src/pool.rs`, its `# State`):
//! the stand-in lifecycle and the bound rule, under the random and PCT
//! schedulers. Scenarios in `pool_common` (the same code the loom models
//! run); negative controls in `shuttle_controls.rs`.

#![cfg(shuttle)]

mod common;
mod pool_common;

use common::*;

fn two_rounds() {
    pool_common::stand_in_rounds(2);
}

fn three_rounds() {
    pool_common::stand_in_rounds(3);
}

#[test]
fn pool_stand_in_rounds_random() {
    model(
        "pool_stand_in_rounds_random",
        Sched::Random,
        DEFAULT_ITERS,
        three_rounds,
    );
}

#[test]
fn pool_stand_in_rounds_pct() {
    model(
        "pool_stand_in_rounds_pct",
        Sched::Pct,
        DEFAULT_ITERS,
        two_rounds,
    );
}

#[test]
fn pool_push_inside_op_at_the_bound_random() {
    model(
        "pool_push_inside_op_at_the_bound_random",
        Sched::Random,
        DEFAULT_ITERS,
        pool_common::push_inside_at_the_bound,
    );
}

#[test]
fn pool_push_inside_op_at_the_bound_pct() {
    model(
        "pool_push_inside_op_at_the_bound_pct",
        Sched::Pct,
        DEFAULT_ITERS,
        pool_common::push_inside_at_the_bound,
    );
}
