//! shuttle models of fork participants (`core/src/participant.rs`, its
//! work gate and per-epoch values; docs/PARTICIPANTS.md) under the random
//! and PCT schedulers, and their negative controls with a fixed seed.
//! Scenarios in `participants_common` (the same code the loom models run).
//!
//! The `TrustLatePrepare` control is loom's only (`loom_participants.rs`):
//! it needs the deadline to fire in the few steps between the worker's two
//! writes while the forking thread waits, which loom's exhaustive search
//! reaches and shuttle's random schedules did not in 20,000 runs of five
//! seeds.

#![cfg(shuttle)]

mod common;
mod participants_common;

use common::*;
use forksafe_core::controls::{self as mutant, Mutant};
use shuttle::scheduler::RandomScheduler;
use shuttle::{Config, MaxSteps, Runner};
use std::panic::{catch_unwind, AssertUnwindSafe};

#[test]
fn participant_work_across_a_fork_random() {
    model(
        "participant_work_across_a_fork_random",
        Sched::Random,
        DEFAULT_ITERS,
        participants_common::work_across_a_fork,
    );
}

#[test]
fn participant_work_across_a_fork_pct() {
    model(
        "participant_work_across_a_fork_pct",
        Sched::Pct,
        DEFAULT_ITERS,
        participants_common::work_across_a_fork,
    );
}

#[test]
fn fork_local_child_builds_its_own_random() {
    model(
        "fork_local_child_builds_its_own_random",
        Sched::Random,
        DEFAULT_ITERS,
        participants_common::child_builds_its_own,
    );
}

/// The seed of every control: the same schedules on every run.
const SEED: u64 = 0x5eed_f04c;
const CONTROL_ITERS: usize = 20_000;
/// Step bound: a spinning thread past it is a livelock.
const STEPS: usize = 20_000;

/// Runs `f` with `m` on and returns shuttle's panic message; panics if
/// shuttle found nothing.
fn caught(m: Mutant, f: fn()) -> String {
    mutant::set(Some(m));
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut config = Config::new();
        config.max_steps = MaxSteps::FailAfter(STEPS);
        Runner::new(RandomScheduler::new_from_seed(SEED, CONTROL_ITERS), config).run(f);
    }));
    mutant::set(None);
    let panic = result.expect_err("shuttle did not catch the mutant");
    let msg = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    eprintln!("negative control {m:?} caught: {msg}");
    msg
}

#[test]
fn caught_close_without_waiting() {
    let msg = caught(
        Mutant::CloseWithoutWaiting,
        participants_common::work_across_a_fork,
    );
    assert!(msg.contains("half-done work"), "{msg}");
}

#[test]
fn caught_skip_participant_parent() {
    let msg = caught(
        Mutant::SkipParticipantParent,
        participants_common::work_across_a_fork,
    );
    assert!(
        msg.contains("reopens the gate") || msg.contains("exceeded"),
        "{msg}"
    );
}

#[test]
fn caught_fork_local_ignores_epoch() {
    let msg = caught(
        Mutant::ForkLocalIgnoresEpoch,
        participants_common::child_builds_its_own,
    );
    assert!(msg.contains("parent's value"), "{msg}");
}
