//! loom models of forksafe-core's fork protocol: I6 (the parent world goes
//! on exactly as before the fork: every op completes once, results are
//! serial) and I5 (the child world: inherited ops complete `LostInFork`
//! without running, the child settles at its first call and works).
//!
//! Fork is modelled as docs/DESIGN.md suggests. loom allows five threads a run
//! and never reuses one, so there are two stages: the parent model forks
//! at prepare's fork point (`domain.prepare()`, `fork_snapshot`,
//! `domain.parent()`), checks I6, and records the snapshot in a set
//! outside the model; then one child model per distinct snapshot rebuilds
//! the engine from it with fresh primitives (`from_fork_snapshot`), on the
//! forking thread plus new workers, and checks I5. Exhaustive up to the
//! preemption bound (`LOOM_MAX_PREEMPTIONS`, default 2); see models/LOOM.md.

#![cfg(loom)]

mod common;

use common::*;
use forksafe_core::{Error, ForkSnapshot, Lane};
use forksafe_models::{serial, Step};

/// The parent world: a sync op, and an async op depending on it whose
/// token main completes only after the fork (so at least one op is always
/// inherited); on `lane` the first op runs on the compute or the host lane.
/// Main forks while the workers run. I6: after parent every op completes
/// exactly once with serial results; between prepare and parent the
/// forking thread's calls get `ForkInProgress`.
fn parent_world(snaps: &Snapshots, lane: Lane) {
    let w = World::new(config(1, 1, None), 2);
    let prog = [
        sync(step(1, &[], &[0]), lane),
        asynchronous(step(2, &[0], &[1]), Lane::Compute, Mode::Handoff(0)),
    ];
    let pushed: Vec<_> = prog
        .iter()
        .map(|p| (w.push(p).unwrap(), p.step.clone()))
        .collect();
    mark("pushed");
    w.domain.prepare();
    mark("prepared");
    assert_eq!(w.engine.pending(), Err(Error::ForkInProgress));
    let snap = w.engine.fork_snapshot(&w.vars).unwrap();
    w.domain.parent();
    mark("parent");
    assert!(
        !snap.pending_ops().is_empty(),
        "op 2 is pending at the fork"
    );
    snaps.add(snap, pushed.clone());
    complete_handed(prog[1].slot.as_ref().unwrap());
    mark("completed");
    w.engine.wait_all().unwrap();
    mark("waited");
    let steps: Vec<_> = pushed.iter().map(|(_, s)| s.clone()).collect();
    assert_eq!(w.oracle.violations(), Vec::<String>::new(), "I1 overlap");
    assert_eq!(
        w.oracle.slots(),
        serial(2, &steps),
        "parent not serial (I6)"
    );
    assert_eq!(w.ran(), vec![1, 2], "each parent op once (I6)");
    w.engine.shutdown(LONG).unwrap();
}

/// The child world of one snapshot (I5): the first call settles it; the
/// report lists exactly the inherited ops; none of them runs (the child's
/// oracle stays empty); the vars they write are poisoned `LostInFork`;
/// `wait_all` reports each once. Then the child clears the poison, pushes
/// new ops on both lanes and waits: they run once, with serial results;
/// and it forks in its turn.
fn child_world_check(snap: &ForkSnapshot<Job>, pushed: &[(u64, Step)]) {
    let w = child_world(0, snap);
    check_child_inherited(&w, snap, pushed);
    for v in &w.vars {
        w.engine.clear_poison(v).unwrap();
    }
    let new = [
        sync(step(10, &[], &[0]), Lane::Compute),
        sync(step(11, &[0], &[1]), Lane::Host),
    ];
    for p in &new {
        w.push(p).unwrap();
    }
    w.engine.wait_all().unwrap();
    assert_eq!(w.ran(), vec![10, 11], "the child runs its own ops once");
    let steps: Vec<_> = new.iter().map(|p| p.step.clone()).collect();
    assert_eq!(w.oracle.slots(), serial(2, &steps));
    assert!(w.engine.fork_report().unwrap().is_some());
    fork_again(&w);
    w.engine.shutdown(LONG).unwrap();
}

/// Runs the parent model (I6), then one child model per distinct snapshot
/// (I5).
fn fork_models(name: &str, lane: Lane) {
    let snaps = Snapshots::default();
    let s = snaps.clone();
    check(&format!("{name}_parent"), move || parent_world(&s, lane));
    let all = snaps.take();
    assert!(!all.is_empty());
    let n = all.len();
    let mut total = 0;
    let mut secs = 0.0;
    for (i, (snap, pushed)) in all.into_iter().enumerate() {
        let e = check(&format!("{name}_child[{i}]"), move || {
            child_world_check(&snap, &pushed);
        });
        total += e.iterations;
        secs += e.secs;
    }
    eprintln!("loom model {name}_child: {n} distinct snapshots, {total} iterations, {secs:.2} s");
}

/// I6 then I5, the inherited ops on the compute lane.
/// Threads: parent main + 1 compute; child main + 1 compute + 1 host.
#[test]
fn i5_i6_fork() {
    fork_models("i5_i6_fork", Lane::Compute);
}

/// I6 then I5 with a host op in flight at the fork (the forker does not
/// hold the GIL; see loom_host's `h2_gil_holder_fork_steps` for that).
/// Threads: parent main + 1 compute + 1 host; child main + 1 compute +
/// 1 host.
#[test]
fn i5_i6_fork_host() {
    fork_models("i5_i6_fork_host", Lane::Host);
}
