//! Scenarios of the fork-participant models (`core/src/participant.rs`,
//! `work_gate.rs`, `fork_local.rs`, design note `docs/PARTICIPANTS.md`),
//! written once against the core's sync facade so that the loom models
//! (`loom_participants.rs`) and the shuttle models
//! (`shuttle_participants.rs`) run the very same code.
//!
//! - [`work_across_a_fork`]: a pool-like participant whose prepare step
//!   closes its work gate and waits, bounded, for work in flight; a worker
//!   thread does two-step work under a pass; a clock thread may fire the
//!   prepare deadline at any point; the main thread forks (prepare, the
//!   fork point, parent). Checked: the child trusts the copied state
//!   ([`Inherited::Prepared`]) only if no work was half-done at the fork
//!   point (I5 for participants); after the parent step the gate is open
//!   and every piece of work ran once (I6); nothing waits for ever.
//! - [`child_builds_its_own`]: in a fork child, two threads use a
//!   per-epoch value at once: both get the child's own value, built once
//!   in the child; the parent's value is never handed out (I5 for
//!   `ForkLocal`).

#![allow(dead_code)]

use forksafe_core::sync::{spawn_named, Arc, AtomicUsize, Ordering};
use forksafe_core::{
    ForkDomain, ForkLocal, ForkParticipant, Inherited, PrepareDeadline, PrepareFailure, WorkGate,
};
use std::time::Duration;

/// A participant whose long work is counted by a work gate.
struct GatedPool {
    gate: Arc<WorkGate>,
}

impl ForkParticipant for GatedPool {
    fn name(&self) -> &str {
        "gated pool"
    }
    fn prepare(&self, deadline: &PrepareDeadline<'_>) {
        self.gate.close_and_wait(deadline);
    }
    fn parent(&self) {
        self.gate.open();
    }
}

/// The work: two steps under one pass (1 is half done, 2 done).
fn work(gate: &WorkGate, data: &AtomicUsize) {
    let _pass = gate.enter();
    data.store(1, Ordering::SeqCst);
    data.store(2, Ordering::SeqCst);
}

/// See the module docs. (A prepare step that panics is caught before its
/// outcome is written, on the forking thread alone: core's plain tests
/// cover it, `core/tests/participants.rs`.)
pub fn work_across_a_fork() {
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    let gate = Arc::new(WorkGate::new());
    let participation = domain
        .join(
            Box::new(GatedPool { gate: gate.clone() }),
            Duration::from_secs(1),
        )
        .unwrap();
    let data = Arc::new(AtomicUsize::new(0));
    let worker = {
        let (gate, data) = (gate.clone(), data.clone());
        spawn_named("worker".into(), None, move || work(&gate, &data)).unwrap()
    };
    let clock = spawn_named("clock".into(), None, move || domain.advance_clock()).unwrap();

    domain.prepare();
    // The fork point: what the OS would copy.
    let copied = data.load(Ordering::SeqCst);
    domain.parent();
    // Failures are collected and asserted after the cleanup: a panic
    // unwinding through the model's threads and handles would hide them.
    let mut failures = Vec::new();
    if gate.is_closed() {
        failures.push("the parent step reopens the gate (I6)");
        gate.open();
    }
    worker.join().unwrap();
    clock.join().unwrap();
    if data.load(Ordering::SeqCst) != 2 {
        failures.push("the work ran, once (I6)");
    }

    // The child's view of that fork: the record the forking thread wrote
    // before the fork point, read at the child's epoch.
    domain.child();
    match participation.inherited() {
        Inherited::Prepared if copied == 1 => {
            failures.push("the child trusts half-done work (I5)");
        }
        Inherited::Prepared | Inherited::Unprepared(PrepareFailure::Overran) => {}
        other => panic!("unexpected outcome {other:?}"),
    }
    participation.leave().unwrap();
    assert_eq!(domain.participants(), 0);
    assert!(failures.is_empty(), "{failures:?}");
}

/// See the module docs.
pub fn child_builds_its_own() {
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    let local: Arc<ForkLocal<u64>> = Arc::new(ForkLocal::new(domain));
    let builds = Arc::new(AtomicUsize::new(0));
    let parent = *local.get_or_try_init(|| Ok::<_, ()>(100)).unwrap();
    assert_eq!(parent, 100);
    domain.prepare();
    domain.child();
    let user = |local: Arc<ForkLocal<u64>>, builds: Arc<AtomicUsize>| {
        move || {
            let v = *local
                .get_or_try_init(|| {
                    builds.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, ()>(domain.epoch())
                })
                .unwrap();
            assert_eq!(v, 1, "the child got the parent's value (I5)");
        }
    };
    let other = spawn_named(
        "child thread".into(),
        None,
        user(local.clone(), builds.clone()),
    )
    .unwrap();
    user(local.clone(), builds.clone())();
    other.join().unwrap();
    let built = builds.load(Ordering::SeqCst);
    assert!((1..=2).contains(&built), "{built} builds");
    assert_eq!(*local.get().unwrap(), 1);
}
