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
//! - [`gated_local_across_a_fork`]: the shape of `forksafe-tokio`'s
//!   runtime and `forksafe-rayon`'s pool, on the production
//!   [`GatedLocal`]: a thread's use (`with`, two steps, like a `block_on`)
//!   races a drained fork (drain, prepare, the fork point, parent) while a
//!   clock thread may fire the deadlines. Checked: the child trusts the
//!   copy only if no use was half done at the fork point (I5); the child
//!   never gets the parent's value and builds its own (the epoch switch);
//!   after the parent step uses go on, and the use ran once (I6).
//! - [`child_builds_its_own`]: in a fork child, two threads use a
//!   per-epoch value at once: both get the child's own value, built once
//!   in the child; the parent's value is never handed out (I5 for
//!   `ForkLocal`).

#![allow(dead_code)]

use forksafe_core::sync::{spawn_named, Arc, AtomicUsize, Ordering};
use forksafe_core::{
    ForkDomain, ForkLocal, ForkParticipant, GatedLocal, Inherited, PrepareDeadline, PrepareFailure,
    WorkGate,
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

/// A runtime-like value: the epoch it was built in, and its work's state.
struct Runtime {
    built_in: u64,
    data: AtomicUsize,
}

/// A participant whose value is a [`GatedLocal`], as `forksafe-tokio`'s is.
struct GatedRuntime {
    local: Arc<GatedLocal<Runtime>>,
}

impl ForkParticipant for GatedRuntime {
    fn name(&self) -> &str {
        "gated runtime"
    }
    fn prepare(&self, deadline: &PrepareDeadline<'_>) {
        self.local.prepare(deadline);
    }
    fn drain(&self, deadline: &PrepareDeadline<'_>) {
        self.local.drain(deadline);
    }
    fn parent(&self) {
        self.local.parent();
    }
}

/// See the module docs.
pub fn gated_local_across_a_fork() {
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    let local = Arc::new(GatedLocal::new(domain));
    let build = move || {
        Ok::<_, ()>(Runtime {
            built_in: domain.epoch(),
            data: AtomicUsize::new(0),
        })
    };
    let participation = domain
        .join(
            Box::new(GatedRuntime {
                local: local.clone(),
            }),
            Duration::from_secs(1),
        )
        .unwrap();
    local.get_or_try_init(build).unwrap();
    let user = {
        let local = local.clone();
        spawn_named("user".into(), None, move || {
            local
                .with(build, |rt| {
                    rt.data.store(1, Ordering::SeqCst);
                    rt.data.store(2, Ordering::SeqCst);
                })
                .unwrap();
        })
        .unwrap()
    };
    let clock = spawn_named("clock".into(), None, move || domain.advance_clock()).unwrap();

    domain.drain_participants(Duration::from_secs(1)).unwrap();
    domain.prepare();
    // The fork point: what the OS would copy.
    let copied = local.get().unwrap().data.load(Ordering::SeqCst);
    domain.parent();
    let mut failures = Vec::new();
    // Uses go on after the parent step (a gate left closed would hold this
    // one for ever: a deadlock the checker reports).
    local.with(build, |_| ()).unwrap();
    user.join().unwrap();
    clock.join().unwrap();
    if local.get().unwrap().data.load(Ordering::SeqCst) != 2 {
        failures.push("the use ran, once (I6)");
    }

    domain.child();
    match participation.inherited() {
        Inherited::Prepared if copied == 1 => {
            failures.push("the child trusts half-done work (I5)");
        }
        Inherited::Prepared | Inherited::Unprepared(PrepareFailure::Overran) => {}
        other => panic!("unexpected outcome {other:?}"),
    }
    if local.get().is_some() {
        failures.push("the child got the parent's value (I5)");
    }
    let child_built_in = local.with(build, |rt| rt.built_in).unwrap();
    if child_built_in != domain.epoch() {
        failures.push("the child uses a value built in another process (I5)");
    }
    participation.leave().unwrap();
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
