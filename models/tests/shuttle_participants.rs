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
use forksafe_core::controls::Mutant;

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
fn gated_local_runtime_across_a_fork_random() {
    model(
        "gated_local_runtime_across_a_fork_random",
        Sched::Random,
        DEFAULT_ITERS,
        participants_common::gated_local_across_a_fork,
    );
}

#[test]
fn gated_local_runtime_across_a_fork_pct() {
    model(
        "gated_local_runtime_across_a_fork_pct",
        Sched::Pct,
        DEFAULT_ITERS,
        participants_common::gated_local_across_a_fork,
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

fn caught(m: Mutant, f: fn()) -> String {
    caught_seeded(m, f, SEED, CONTROL_ITERS, STEPS)
}

#[test]
fn caught_gated_local_skips_pass() {
    let msg = caught(
        Mutant::GatedLocalSkipsPass,
        participants_common::gated_local_across_a_fork,
    );
    assert!(msg.contains("half-done work"), "{msg}");
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
