//! loom models of fork participants (`core/src/participant.rs`, its work
//! gate and per-epoch values; docs/PARTICIPANTS.md), with their negative
//! controls. Scenarios in `participants_common`. Each control runs its
//! scenario in a child process of this test binary with the mutant on
//! (loom's failure unwinds through model objects; a process keeps that
//! apart from the other tests).

#![cfg(loom)]

mod common;
mod participants_common;

use common::*;
use forksafe_core::controls::{self as mutant, Mutant};

fn work_across_a_fork() {
    check(
        "participant_work_across_a_fork",
        participants_common::work_across_a_fork,
    );
}

fn gated_local_across_a_fork() {
    check(
        "gated_local_across_a_fork",
        participants_common::gated_local_across_a_fork,
    );
}

#[test]
fn gated_local_runtime_across_a_fork() {
    gated_local_across_a_fork();
}

fn child_builds_its_own() {
    check(
        "fork_local_child_builds_its_own",
        participants_common::child_builds_its_own,
    );
}

#[test]
fn participant_work_across_a_fork() {
    work_across_a_fork();
}

#[test]
fn fork_local_child_builds_its_own() {
    child_builds_its_own();
}

const MUTANT_ENV: &str = "FORKSAFE_LOOM_PARTICIPANT_MUTANT";

const CONTROLS: [(Mutant, fn()); 5] = [
    (Mutant::GatedLocalSkipsPass, gated_local_across_a_fork),
    (Mutant::TrustLatePrepare, work_across_a_fork),
    (Mutant::CloseWithoutWaiting, work_across_a_fork),
    (Mutant::SkipParticipantParent, work_across_a_fork),
    (Mutant::ForkLocalIgnoresEpoch, child_builds_its_own),
];

/// Not a control by itself: the child process of a `caught_*` test runs
/// the scenario of the mutant named in the variable here, with it on.
#[test]
fn participant_mutant_run() {
    let Ok(name) = std::env::var(MUTANT_ENV) else {
        return;
    };
    let (m, scenario) = CONTROLS
        .into_iter()
        .find(|(m, _)| format!("{m:?}") == name)
        .unwrap_or_else(|| panic!("unknown mutant {name}"));
    mutant::set(Some(m));
    scenario();
    mutant::set(None);
    eprintln!("MUTANT NOT CAUGHT: {name}");
}

/// Runs `m`'s scenario in a child process; returns loom's verdict.
fn caught(m: Mutant) -> String {
    mutant_in_child("participant_mutant_run", MUTANT_ENV, m, &[])
}

#[test]
fn caught_trust_late_prepare() {
    let text = caught(Mutant::TrustLatePrepare);
    assert!(text.contains("half-done work"), "{text}");
}

#[test]
fn caught_gated_local_skips_pass() {
    let text = caught(Mutant::GatedLocalSkipsPass);
    assert!(text.contains("half-done work"), "{text}");
}

#[test]
fn caught_close_without_waiting() {
    let text = caught(Mutant::CloseWithoutWaiting);
    assert!(text.contains("half-done work"), "{text}");
}

#[test]
fn caught_skip_participant_parent() {
    let text = caught(Mutant::SkipParticipantParent);
    assert!(
        text.contains("reopens the gate") || text.contains("deadlock") || text.contains("branches"),
        "{text}"
    );
}

#[test]
fn caught_fork_local_ignores_epoch() {
    let text = caught(Mutant::ForkLocalIgnoresEpoch);
    assert!(text.contains("parent's value"), "{text}");
}
