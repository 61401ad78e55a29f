//! The fork steps of `ForkDomain` driven in-process, on real threads: the
//! prepare/parent window (I6, `ForkInProgress` for the forking thread) and a
//! simulated child (`prepare` then `child` on this thread, as the atfork
//! handlers would run them), which settles at its first engine call (I5).
//!
//! No real `fork()` here (those are `engine/tests/fork.rs`): the other
//! threads of this process keep existing, so these tests only use states in
//! which they are parked or blocked at the closed gate, where a real child
//! would simply not have them. These are core's own tests of the fork
//! steps, so core's mutation run covers the gate, the domain and the
//! child's settle (FORK-SAFETY.md, "Mutation testing").

use crate::support::{domain, job, Job};
use forksafe_core::{CompletionToken, Config, CoreEngine, Error, OpErrorKind, OpSpec, State};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

type Slot = Arc<Mutex<Option<CompletionToken<Job>>>>;

/// An async job that leaves its token in `slot` (the op stays running).
fn hand_off(slot: &Slot) -> Job {
    let slot = slot.clone();
    Job(Box::new(move |t| {
        *slot.lock().unwrap() = t;
        Ok(())
    }))
}

fn take_token(slot: &Slot) -> CompletionToken<Job> {
    loop {
        if let Some(t) = slot.lock().unwrap().take() {
            return t;
        }
        std::thread::yield_now();
    }
}

fn one_worker() -> Config {
    Config {
        compute_workers: 1,
        host_workers: 1,
        ..Config::default()
    }
}

fn lost_kind(e: &Error) -> Option<(u64, OpErrorKind)> {
    match e {
        Error::Poisoned(op) => Some((op.op().id, op.kind().clone())),
        _ => None,
    }
}

/// I6: between prepare and parent the forking thread's engine calls get
/// `ForkInProgress` (never a hang), another thread's call waits for the
/// window to close and then succeeds, and parent restores exactly the
/// pre-fork state, a held quiesce included.
#[test]
fn fork_window_refuses_the_forker_and_parent_restores_everything() {
    let d = domain();
    let e = CoreEngine::<Job>::new(d, one_worker()).unwrap();
    let v = e.new_var().unwrap();
    e.push(OpSpec::new(job(|| Ok(()))).writes(std::slice::from_ref(&v)))
        .unwrap();
    e.wait_for_var(&v).unwrap();
    assert_eq!(d.engines(), 1);
    let held = e.quiesce(Duration::from_secs(10)).unwrap();
    assert_eq!(e.state(), State::Quiesced);

    d.prepare();
    assert_eq!(d.epoch(), 0);
    assert_eq!(
        e.push(OpSpec::new(job(|| Ok(()))).writes(std::slice::from_ref(&v))),
        Err(Error::ForkInProgress)
    );
    assert_eq!(e.var_version(&v), Err(Error::ForkInProgress));
    assert_eq!(e.wait_all(), Err(Error::ForkInProgress));
    assert_eq!(e.pending(), Err(Error::ForkInProgress));
    assert!(matches!(e.new_var(), Err(Error::ForkInProgress)));
    // The registry is refused too (`engines` reads 0 on an error).
    assert_eq!(d.engines(), 0);

    // Another thread is not refused: it waits for the gate to reopen.
    let (tx, rx) = mpsc::channel();
    let (e2, v2) = (Arc::new(e), v.clone());
    let e3 = e2.clone();
    let other = std::thread::spawn(move || {
        let r = e3.var_version(&v2);
        tx.send(r).unwrap();
    });
    // Give it time to reach the gate (not an assertion on time: with a
    // correct gate it cannot have returned, however long this sleeps).
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        rx.try_recv().is_err(),
        "a call returned inside the fork window"
    );

    d.parent();
    assert_eq!(rx.recv().unwrap(), Ok(1));
    other.join().unwrap();
    assert_eq!(d.epoch(), 0);
    assert_eq!(d.engines(), 1);
    // Exactly the pre-fork state: still quiesced until the guard drops.
    assert_eq!(e2.state(), State::Quiesced);
    drop(held);
    assert_eq!(e2.state(), State::Running);
    e2.push(OpSpec::new(job(|| Ok(()))).writes(std::slice::from_ref(&v)))
        .unwrap();
    e2.wait_for_var(&v).unwrap();
    assert_eq!(e2.var_version(&v), Ok(2));
    e2.wait_all().unwrap();
    assert_eq!(e2.fork_report(), Ok(None));

    // A second fork window works the same (the forking flag was released).
    d.prepare();
    assert_eq!(e2.pending(), Err(Error::ForkInProgress));
    d.parent();
    assert_eq!(e2.pending(), Ok(0));
}

/// I5: a simulated child settles at its first engine call: every op
/// pending at the fork completes with `LostInFork` on the vars it writes,
/// without running; pending deletions are carried out; old tokens are
/// stale; errors reach `wait_all` once; new work runs normally.
#[test]
fn simulated_child_loses_inherited_ops_without_running_them() {
    let d = domain();
    let e = CoreEngine::<Job>::new(d, one_worker()).unwrap();
    let (v, w, x) = (
        e.new_var().unwrap(),
        e.new_var().unwrap(),
        e.new_var().unwrap(),
    );
    // A: async, writes v and x, running at the fork (its token held here).
    let slot: Slot = Arc::default();
    let a = e
        .push(
            OpSpec::new(hand_off(&slot))
                .writes(&[v.clone(), x.clone()])
                .asynchronous()
                .name("a"),
        )
        .unwrap();
    let token = take_token(&slot);
    // B: reads v, writes w; queued behind A.
    let ran_b = Arc::new(AtomicBool::new(false));
    let rb = ran_b.clone();
    let b = e
        .push(
            OpSpec::new(job(move || {
                rb.store(true, Ordering::SeqCst);
                Ok(())
            }))
            .reads(std::slice::from_ref(&v))
            .writes(std::slice::from_ref(&w))
            .name("b"),
        )
        .unwrap();
    // A deletion of x, pending behind A.
    e.delete_var(&x).unwrap();
    assert_eq!(e.pending(), Ok(3));

    // The atfork handlers, as the forking thread runs them in the child.
    d.prepare();
    d.child();
    assert_eq!(d.epoch(), 1);

    // The first call settles the engine.
    let report = e
        .fork_report()
        .unwrap()
        .expect("a fork report in the child");
    assert_eq!(report.epoch, 1);
    let lost: Vec<u64> = report.lost.iter().map(|i| i.id).collect();
    assert_eq!(lost, vec![a, b]);
    assert_eq!(report.deletions, 1);
    assert_eq!(report.carried, None);
    assert_eq!(e.state(), State::Running);
    assert_eq!(e.pending(), Ok(0));
    assert!(
        !ran_b.load(Ordering::SeqCst),
        "the child ran an inherited op"
    );

    // Old-epoch token: the op is done, completing it is a typed error.
    assert!(token.is_completed());
    assert_eq!(token.complete(Ok(())), Err(Error::StaleEpoch));

    // Poison names the lost op, on the vars it writes only.
    let pv = e.var_poison(&v).unwrap().expect("v poisoned");
    assert_eq!(
        (pv.op().id, pv.kind().clone()),
        (a, OpErrorKind::LostInFork)
    );
    let pw = e.var_poison(&w).unwrap().expect("w poisoned");
    assert_eq!(
        (pw.op().id, pw.kind().clone()),
        (b, OpErrorKind::LostInFork)
    );
    assert_eq!(
        lost_kind(&e.wait_for_var(&v).unwrap_err()),
        Some((a, OpErrorKind::LostInFork))
    );
    assert_eq!(e.wait_for_var(&x), Err(Error::DeletedVar));
    match e.wait_all() {
        Err(Error::OpsFailed(errors)) => {
            let ids: Vec<(u64, OpErrorKind)> = errors
                .iter()
                .map(|e| (e.op().id, e.kind().clone()))
                .collect();
            assert_eq!(
                ids,
                vec![(a, OpErrorKind::LostInFork), (b, OpErrorKind::LostInFork)]
            );
        }
        other => panic!("wait_all in the child: {other:?}"),
    }
    e.wait_all().unwrap();
    // One completed write of v (lost A) so far.
    assert_eq!(e.var_version(&v), Ok(1));

    // The registry settled too, and new work runs in the child.
    assert_eq!(d.engines(), 1);
    e.clear_poison(&v).unwrap();
    let ran_c = Arc::new(AtomicBool::new(false));
    let rc = ran_c.clone();
    e.push(
        OpSpec::new(job(move || {
            rc.store(true, Ordering::SeqCst);
            Ok(())
        }))
        .writes(std::slice::from_ref(&v)),
    )
    .unwrap();
    e.wait_for_var(&v).unwrap();
    assert!(ran_c.load(Ordering::SeqCst));
    assert_eq!(e.var_version(&v), Ok(3));
    e.wait_all().unwrap();

    // The child can fork again (its forking flag was released at settling).
    d.prepare();
    assert_eq!(e.pending(), Err(Error::ForkInProgress));
    d.parent();
    assert_eq!(e.pending(), Ok(0));
    drop(token);
}

/// I5: a fork from inside an op body carries that op into the child, where
/// it completes normally; the other pending ops are lost.
#[test]
fn fork_from_inside_an_op_carries_it_into_the_child() {
    let d = domain();
    let e = CoreEngine::<Job>::new(d, one_worker()).unwrap();
    let (v, y) = (e.new_var().unwrap(), e.new_var().unwrap());
    // Z: async on the host lane, running at the fork; D queued behind it.
    let slot: Slot = Arc::default();
    let z = e
        .push(
            OpSpec::new(hand_off(&slot))
                .writes(std::slice::from_ref(&y))
                .lane(forksafe_core::Lane::Host)
                .asynchronous(),
        )
        .unwrap();
    let token = take_token(&slot);
    let dd = e
        .push(OpSpec::new(job(|| Ok(()))).writes(std::slice::from_ref(&y)))
        .unwrap();
    // F forks from its body, then goes on (in the "child") and writes.
    let seen_epoch = Arc::new(AtomicU64::new(u64::MAX));
    let se = seen_epoch.clone();
    let f = e
        .push(
            OpSpec::new(job(move || {
                d.prepare();
                d.child();
                se.store(d.epoch(), Ordering::SeqCst);
                Ok(())
            }))
            .writes(std::slice::from_ref(&v))
            .name("forker"),
        )
        .unwrap();
    e.wait_for_var(&v).unwrap();
    assert_eq!(seen_epoch.load(Ordering::SeqCst), 1);
    assert_eq!(e.var_poison(&v), Ok(None));
    assert_eq!(e.var_version(&v), Ok(1));
    let report = e.fork_report().unwrap().expect("a fork report");
    assert_eq!(report.carried.map(|i| i.id), Some(f));
    let lost: Vec<u64> = report.lost.iter().map(|i| i.id).collect();
    assert_eq!(lost, vec![z, dd]);
    assert_eq!(token.complete(Ok(())), Err(Error::StaleEpoch));
    // The forker's worker serves the child's engine afterwards.
    e.push(OpSpec::new(job(|| Ok(()))).writes(std::slice::from_ref(&v)))
        .unwrap();
    e.wait_for_var(&v).unwrap();
    assert_eq!(e.var_version(&v), Ok(2));
    assert!(matches!(e.wait_all(), Err(Error::OpsFailed(errs)) if errs.len() == 2));
    assert_eq!(e.pending(), Ok(0));
}

/// The forking mark is the forking thread's, for its own window only: after
/// parent, a window opened by another thread makes this thread wait (not
/// `ForkInProgress`).
#[test]
fn the_forking_mark_ends_with_the_window() {
    let d = domain();
    let e = CoreEngine::<Job>::new(d, one_worker()).unwrap();
    d.prepare();
    assert_eq!(e.pending(), Err(Error::ForkInProgress));
    d.parent();
    assert_eq!(e.pending(), Ok(0));

    let (opened_tx, opened_rx) = mpsc::channel();
    let (close_tx, close_rx) = mpsc::channel::<()>();
    let forker = std::thread::spawn(move || {
        d.prepare();
        opened_tx.send(()).unwrap();
        close_rx.recv().unwrap();
        d.parent();
    });
    opened_rx.recv().unwrap();
    let closer = std::thread::spawn(move || {
        // Lets this thread block at the gate first (not a timing
        // assertion: the result below is the same whenever parent runs).
        std::thread::sleep(Duration::from_millis(50));
        close_tx.send(()).unwrap();
    });
    // Another thread's window: this thread waits for it, then succeeds.
    assert_eq!(e.pending(), Ok(0));
    forker.join().unwrap();
    closer.join().unwrap();
}

/// Two engines of one domain: ids differ, a var of one is foreign to the
/// other, and dropping one unregisters that one only (the other's gate is
/// still closed by the next prepare).
#[test]
fn two_engines_in_one_domain_keep_apart() {
    let d = domain();
    let e1 = CoreEngine::<Job>::new(d, one_worker()).unwrap();
    let e2 = CoreEngine::<Job>::new(d, one_worker()).unwrap();
    assert_ne!(e1.id(), e2.id());
    assert_eq!(d.engines(), 2);
    let v1 = e1.new_var().unwrap();
    assert_eq!(
        e2.push(OpSpec::new(job(|| Ok(()))).writes(std::slice::from_ref(&v1))),
        Err(Error::ForeignVar)
    );
    assert_eq!(e2.var_version(&v1), Err(Error::ForeignVar));
    drop(e1);
    assert_eq!(d.engines(), 1);
    d.prepare();
    assert_eq!(e2.pending(), Err(Error::ForkInProgress));
    d.parent();
    assert_eq!(e2.pending(), Ok(0));
    assert!(format!("{d:?}").contains("epoch: 0"), "{d:?}");
}

/// A fork from inside a host op's body: the op stays counted in the host
/// bridge in the child, leaves it once, and a shutdown afterwards finds the
/// bridge empty.
#[test]
fn fork_from_inside_a_host_op_leaves_the_bridge_balanced() {
    let d = domain();
    let e = CoreEngine::<Job>::new(d, one_worker()).unwrap();
    let v = e.new_var().unwrap();
    let f = e
        .push(
            OpSpec::new(job(move || {
                d.prepare();
                d.child();
                Ok(())
            }))
            .writes(std::slice::from_ref(&v))
            .lane(forksafe_core::Lane::Host),
        )
        .unwrap();
    e.wait_for_var(&v).unwrap();
    let report = e.fork_report().unwrap().expect("a fork report");
    assert_eq!(report.carried.map(|i| i.id), Some(f));
    // The host lane still works, and shutdown sees nobody in the bridge.
    e.push(
        OpSpec::new(job(|| Ok(())))
            .writes(std::slice::from_ref(&v))
            .lane(forksafe_core::Lane::Host),
    )
    .unwrap();
    e.wait_for_var(&v).unwrap();
    let r = e.shutdown(Duration::from_secs(10)).unwrap();
    assert!(
        r.cancelled.is_empty() && r.still_running.is_empty(),
        "{r:?}"
    );
    assert_eq!(e.state(), State::Stopped);
}

/// A fork child whose first engine call is a push: the push settles the
/// engine, and the op it pushes belongs to the child's epoch, so it runs
/// and completes there (a record numbered in the parent's epoch would be
/// refused as stale when it completes, and its waiter would wait for
/// ever).
#[test]
fn a_push_that_settles_the_child_runs_in_the_child() {
    let d = domain();
    let e = CoreEngine::<Job>::new(d, one_worker()).unwrap();
    let v = e.new_var().unwrap();
    e.push(OpSpec::new(job(|| Ok(()))).writes(std::slice::from_ref(&v)))
        .unwrap();
    e.wait_all().unwrap();

    d.prepare();
    d.child();
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    // The child's first engine call.
    e.push(
        OpSpec::new(job(move || {
            r.store(true, Ordering::SeqCst);
            Ok(())
        }))
        .writes(std::slice::from_ref(&v))
        .name("first in the child"),
    )
    .unwrap();
    assert_eq!(
        e.fork_report().unwrap().map(|r| r.epoch),
        Some(1),
        "the push settled the child"
    );
    assert_eq!(e.wait_for_var_timeout(&v, Duration::from_secs(20)), Ok(()));
    assert!(ran.load(Ordering::SeqCst), "the child's op ran");
    assert_eq!(e.var_version(&v), Ok(2));
    e.shutdown(Duration::from_secs(5)).unwrap();
}

/// The pending bound in a fork child counts only what the child kept: the
/// ops lost at the fork give their places back, so a child of a full
/// engine can push at once.
#[test]
fn a_child_of_a_full_engine_has_room() {
    let d = domain();
    let e = CoreEngine::<Job>::new(
        d,
        Config {
            max_pending: Some(2),
            ..one_worker()
        },
    )
    .unwrap();
    let v = e.new_var().unwrap();
    // A runs (its token held here), B waits behind it: the bound is full.
    let slot: Slot = Arc::default();
    e.push(
        OpSpec::new(hand_off(&slot))
            .writes(std::slice::from_ref(&v))
            .asynchronous(),
    )
    .unwrap();
    let token = take_token(&slot);
    e.push(OpSpec::new(job(|| Ok(()))).writes(std::slice::from_ref(&v)))
        .unwrap();
    assert_eq!(
        e.try_push(OpSpec::new(job(|| Ok(())))),
        Err(Error::Full),
        "the parent's bound is full"
    );

    d.prepare();
    d.child();
    assert_eq!(e.pending(), Ok(0));
    let w = e.new_var().unwrap();
    for _ in 0..2 {
        e.try_push(OpSpec::new(job(|| Ok(()))).writes(std::slice::from_ref(&w)))
            .expect("the child has room");
    }
    assert_eq!(e.wait_for_var_timeout(&w, Duration::from_secs(20)), Ok(()));
    e.shutdown(Duration::from_secs(5)).unwrap();
    drop(token);
}
