//! loom models of forksafe-core's engine invariants: I1 (per-var order),
//! I2 (exactly-once completion, no lost wake-up), I3 (quiesce), I7 (errors
//! and poison) and I8 (shutdown). Exhaustive up to the preemption bound
//! (`LOOM_MAX_PREEMPTIONS`, default 2); see models/LOOM.md.

#![cfg(loom)]

mod common;

use common::*;
use forksafe_core::{Error, Lane, OpErrorKind, State};
use forksafe_models::serial;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// I1: four ops over three vars on both lanes: a write, two reads of it that
/// may overlap (one per lane), then a write after the reads. Results equal
/// the serial run in push order; the oracle sees no overlap of a write.
/// Threads: main + 1 compute + 1 host.
#[test]
fn i1_order() {
    check("i1_order", || {
        let w = World::new(config(1, 1, None), 3);
        let prog = [
            sync(step(1, &[], &[0]), Lane::Compute),
            sync(step(2, &[0], &[1]), Lane::Host),
            sync(step(3, &[0], &[2]), Lane::Compute),
            sync(step(4, &[1], &[0]), Lane::Host),
        ];
        for p in &prog {
            w.push(p).unwrap();
        }
        w.engine.wait_all().unwrap();
        let steps: Vec<_> = prog.iter().map(|p| p.step.clone()).collect();
        assert_eq!(w.oracle.violations(), Vec::<String>::new(), "I1 overlap");
        assert_eq!(
            w.oracle.slots(),
            serial(3, &steps),
            "not the serial result (I1)"
        );
        assert_eq!(w.ran(), vec![1, 2, 3, 4], "each body once (I2)");
        w.engine.shutdown(LONG).unwrap();
    });
}

/// I1 with two pushers: main pushes two ops and a second thread one, all on
/// var 0, racing; the result equals the serial run in push (id) order.
/// Threads: main + pusher + 1 compute + 1 host.
#[test]
fn i1_two_pushers() {
    check("i1_two_pushers", || {
        let w = Arc::new(World::new(config(1, 1, None), 2));
        let t = {
            let w = w.clone();
            loom::thread::spawn(move || {
                let p = sync(step(3, &[], &[0]), Lane::Host);
                (w.push(&p).unwrap(), p.step)
            })
        };
        let mine = [
            sync(step(1, &[1], &[0]), Lane::Compute),
            sync(step(2, &[0], &[1]), Lane::Compute),
        ];
        let mut pushed: Vec<_> = mine
            .iter()
            .map(|p| (w.push(p).unwrap(), p.step.clone()))
            .collect();
        pushed.push(t.join().unwrap());
        w.engine.wait_all().unwrap();
        pushed.sort_by_key(|(id, _)| *id);
        let steps: Vec<_> = pushed.into_iter().map(|(_, s)| s).collect();
        assert_eq!(w.oracle.violations(), Vec::<String>::new(), "I1 overlap");
        assert_eq!(
            w.oracle.slots(),
            serial(2, &steps),
            "not the serial result (I1)"
        );
        assert_eq!(w.ran(), vec![1, 2, 3], "each body once (I2)");
        w.engine.shutdown(LONG).unwrap();
    });
}

/// I2: an async op whose token a completer thread completes (a second
/// completion is `AlreadyCompleted`), and an op that depends on it;
/// `wait_for_var` and `wait_all` return (no lost wake-up) and see both.
/// Threads: main + completer + 1 compute.
#[test]
fn i2_token_from_another_thread() {
    check("i2_token_from_another_thread", || {
        let w = World::new(config(1, 1, None), 2);
        let a = asynchronous(step(1, &[], &[0]), Lane::Compute, Mode::Handoff(0));
        let b = sync(step(2, &[0], &[1]), Lane::Compute);
        let slot = a.slot.clone().unwrap();
        w.push(&a).unwrap();
        w.push(&b).unwrap();
        let completer = loom::thread::spawn(move || {
            complete_handed(&slot);
            mark("completed");
        });
        w.engine.wait_for_var(&w.vars[0]).unwrap();
        mark("w0");
        assert_eq!(w.engine.var_version(&w.vars[0]).unwrap(), 1);
        w.engine.wait_for_var(&w.vars[1]).unwrap();
        mark("w1");
        assert_eq!(w.engine.var_version(&w.vars[1]).unwrap(), 1);
        w.engine.wait_all().unwrap();
        mark("wall");
        completer.join().unwrap();
        assert_eq!(w.ran(), vec![1, 2]);
        assert_eq!(
            w.oracle.slots(),
            serial(2, &[a.step.clone(), b.step.clone()])
        );
        assert_eq!(w.engine.pending().unwrap(), 0);
        w.engine.shutdown(LONG).unwrap();
    });
}

/// I2 + I7: an async op whose body drops its token unfinished completes
/// with `TokenDropped` (never a hang); its dependent is skipped and passes
/// the error on; `wait_all` reports it once.
/// Threads: main + 1 compute + 1 host.
#[test]
fn i2_dropped_token() {
    check("i2_dropped_token", || {
        let w = World::new(config(1, 1, None), 2);
        w.push(&asynchronous(
            step(1, &[], &[0]),
            Lane::Compute,
            Mode::DropToken,
        ))
        .unwrap();
        w.push(&sync(step(2, &[0], &[1]), Lane::Host)).unwrap();
        match w.engine.wait_for_var(&w.vars[1]) {
            Err(Error::Poisoned(e)) => {
                assert_eq!(e.kind(), &OpErrorKind::TokenDropped);
                assert_eq!(e.op().name, "op1");
            }
            r => panic!("wait_for_var returned {r:?}"),
        }
        assert_eq!(failed_labels(&w.engine.wait_all()), vec![1]);
        assert_eq!(w.engine.wait_all(), Ok(()), "an error reported twice");
        assert_eq!(w.ran(), vec![1], "a skipped op ran (I7)");
        w.engine.shutdown(LONG).unwrap();
    });
}

/// I2: two waiters at once — a second thread in `wait_for_var` and main in
/// `wait_all` — while the worker completes an async op (completed in its
/// body) and a sync op depending on it. Neither wake-up is lost.
/// Threads: main + waiter + 1 compute.
#[test]
fn i2_two_waiters() {
    check("i2_two_waiters", || {
        let w = Arc::new(World::new(config(1, 1, None), 2));
        w.push(&asynchronous(
            step(1, &[], &[0]),
            Lane::Compute,
            Mode::Async,
        ))
        .unwrap();
        w.push(&sync(step(2, &[0], &[1]), Lane::Compute)).unwrap();
        let waiter = {
            let w = w.clone();
            loom::thread::spawn(move || {
                w.engine.wait_for_var(&w.vars[1]).unwrap();
                assert_eq!(w.engine.var_version(&w.vars[1]).unwrap(), 1);
            })
        };
        w.engine.wait_all().unwrap();
        assert_eq!(w.ran(), vec![1, 2]);
        waiter.join().unwrap();
        w.engine.shutdown(LONG).unwrap();
    });
}

/// I3: a quiesce taken while an op may be running, with a second thread
/// pushing at the same time. While the guard is held the engine is
/// Quiesced and no body runs; a push made under it is accepted and runs
/// only after the guard drops; the result is serial.
/// Threads: main + pusher + 1 compute.
#[test]
fn i3_quiesce() {
    check("i3_quiesce", || {
        let w = Arc::new(World::new(config(1, 1, None), 2));
        let a = sync(step(1, &[], &[0]), Lane::Compute);
        let b = sync(step(2, &[0], &[1]), Lane::Compute);
        let mut pushed = vec![(w.push(&a).unwrap(), a.step.clone())];
        let pusher = {
            let w = w.clone();
            loom::thread::spawn(move || (w.push(&b).unwrap(), b.step.clone()))
        };
        let guard = w.engine.quiesce(LONG).unwrap();
        assert_eq!(w.engine.state(), State::Quiesced);
        assert_eq!(w.probe.running(), 0, "a body runs under a quiesce (I3)");
        let c = sync(step(3, &[1], &[0]), Lane::Compute);
        pushed.push((w.push(&c).unwrap(), c.step.clone()));
        pushed.push(pusher.join().unwrap());
        assert_eq!(w.probe.running(), 0, "a body runs under a quiesce (I3)");
        assert!(
            !w.oracle.ran().contains(&3),
            "an op pushed under a quiesce ran"
        );
        assert!(w.engine.pending().unwrap() >= 1);
        drop(guard);
        w.engine.wait_all().unwrap();
        pushed.sort_by_key(|(id, _)| *id);
        let steps: Vec<_> = pushed.into_iter().map(|(_, s)| s).collect();
        assert_eq!(w.oracle.violations(), Vec::<String>::new());
        assert_eq!(w.oracle.slots(), serial(2, &steps));
        assert_eq!(w.ran(), vec![1, 2, 3]);
        w.engine.shutdown(LONG).unwrap();
    });
}

/// I3 with a deadline: a quiesce waits for an async op whose token is only
/// completed after the quiesce returns; a clock thread fires the deadline.
/// The quiesce either drained first (the op had not started: Ok) or
/// returns `Timeout` listing the op it waited for; either way the engine
/// resumes and the op completes exactly once. (This caught a core bug: a
/// popped op was counted as running before it was marked RUNNING, so the
/// timeout's list could be empty.)
/// Threads: main + clock + 1 compute.
#[test]
fn i3_quiesce_deadline() {
    quiesce_deadline("i3_quiesce_deadline", true);
}

fn quiesce_deadline(name: &str, strict: bool) {
    check(name, move || {
        let w = Arc::new(World::new(config(1, 1, None), 1));
        let a = asynchronous(step(1, &[], &[0]), Lane::Compute, Mode::Handoff(0));
        let slot = a.slot.clone().unwrap();
        let id = w.push(&a).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let clock = clock_thread(
            w.clone(),
            |s| matches!(s, State::Quiescing | State::Quiesced),
            done.clone(),
        );
        let r = w.engine.quiesce(LONG);
        done.store(true, Ordering::SeqCst);
        match r {
            Ok(guard) => {
                assert_eq!(w.probe.running(), 0, "a body runs under a quiesce (I3)");
                drop(guard);
            }
            Err(Error::Timeout { pending }) => {
                let ids: Vec<u64> = pending.iter().map(|i| i.id).collect();
                if strict || !ids.is_empty() {
                    assert_eq!(ids, vec![id], "timeout lists the running op");
                }
            }
            Err(e) => panic!("quiesce returned {e:?}"),
        }
        assert_eq!(w.engine.state(), State::Running);
        complete_handed(&slot);
        w.engine.wait_all().unwrap();
        clock.join().unwrap();
        assert_eq!(w.ran(), vec![1]);
        w.engine.shutdown(LONG).unwrap();
    });
}

/// I7: a failing op poisons what it writes; its dependent (a host op) is
/// skipped and passes the same error; a `run_on_error` op runs; `wait_all`
/// reports the error once and poison sticks.
/// Threads: main + 1 compute + 1 host.
#[test]
fn i7_errors() {
    check("i7_errors", || {
        let w = World::new(config(1, 1, None), 3);
        w.push(&sync(failing(1, &[], &[0]), Lane::Compute)).unwrap();
        w.push(&sync(step(2, &[0], &[1]), Lane::Host)).unwrap();
        let mut roe = sync(step(3, &[0], &[2]), Lane::Compute);
        roe.run_on_error = true;
        w.push(&roe).unwrap();
        match w.engine.wait_for_var(&w.vars[1]) {
            Err(Error::Poisoned(e)) => {
                assert_eq!(e.op().name, "op1", "the poison names the failing op");
                assert!(matches!(e.kind(), OpErrorKind::Failed(_)));
            }
            r => panic!("wait_for_var returned {r:?}"),
        }
        assert_eq!(failed_labels(&w.engine.wait_all()), vec![1]);
        assert_eq!(w.engine.wait_all(), Ok(()), "an error reported twice");
        assert!(
            w.engine.var_poison(&w.vars[0]).unwrap().is_some(),
            "poison sticks"
        );
        assert_eq!(w.engine.var_poison(&w.vars[2]).unwrap(), None);
        assert_eq!(w.ran(), vec![1, 3], "a skipped op ran (I7)");
        w.engine.shutdown(LONG).unwrap();
    });
}

/// I7: `clear_poison` is an op ordered on the var: pushed right after the
/// failing op, before it completes, it clears the poison after it; an op
/// pushed after the clear runs; `wait_for_var` returns Ok.
/// Threads: main + 1 compute.
#[test]
fn i7_clear_poison() {
    check("i7_clear_poison", || {
        let w = World::new(config(1, 1, None), 1);
        w.push(&sync(failing(1, &[], &[0]), Lane::Compute)).unwrap();
        w.engine.clear_poison(&w.vars[0]).unwrap();
        w.push(&sync(step(2, &[], &[0]), Lane::Compute)).unwrap();
        w.engine.wait_for_var(&w.vars[0]).unwrap();
        assert_eq!(w.engine.var_version(&w.vars[0]).unwrap(), 3);
        assert_eq!(failed_labels(&w.engine.wait_all()), vec![1]);
        assert_eq!(w.ran(), vec![1, 2]);
        w.engine.shutdown(LONG).unwrap();
    });
}

/// I7 with two `wait_all` callers at once: two failing ops; between them the
/// two calls report each error exactly once.
/// Threads: main + waiter + 1 compute.
#[test]
fn i7_two_wait_all() {
    check("i7_two_wait_all", || {
        let w = Arc::new(World::new(config(1, 1, None), 2));
        w.push(&sync(failing(1, &[], &[0]), Lane::Compute)).unwrap();
        w.push(&sync(failing(2, &[], &[1]), Lane::Compute)).unwrap();
        let waiter = {
            let w = w.clone();
            loom::thread::spawn(move || failed_labels(&w.engine.wait_all()))
        };
        let mut all = failed_labels(&w.engine.wait_all());
        all.extend(waiter.join().unwrap());
        all.sort_unstable();
        assert_eq!(all, vec![1, 2], "each error reported exactly once (I7)");
        w.engine.shutdown(LONG).unwrap();
    });
}

/// The I8 scenario: a host op whose body hands its token on (so it stays
/// pending after its body), and a compute op queued behind it on the same
/// var; a clock thread fires shutdown's deadline. Shutdown returns (with
/// the GIL held by the caller if `gil`); the queued op is cancelled; the
/// host op ran or was cancelled, not both, and completes once; afterwards,
/// with the host finalising, the bridge is never called again and pushes
/// get `ShutDown`.
fn shutdown_scenario(gil: bool) {
    let w = Arc::new(World::new(config(1, 1, None), 1));
    let host = asynchronous(step(1, &[], &[0]), Lane::Host, Mode::Handoff(0));
    let slot = host.slot.clone().unwrap();
    let host_id = w.push(&host).unwrap();
    let queued_id = w.push(&sync(step(2, &[], &[0]), Lane::Compute)).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let clock = clock_thread(w.clone(), |s| s == State::ShuttingDown, done.clone());
    if gil {
        w.gil.lock().acquire();
    }
    let report = w.engine.shutdown(LONG).unwrap();
    done.store(true, Ordering::SeqCst);
    if gil {
        w.gil.lock().release();
    }
    let calls = w.gil.calls();
    w.gil.set_finalizing(true);
    assert_eq!(w.engine.state(), State::Stopped);
    assert_eq!(
        w.push(&sync(step(3, &[], &[0]), Lane::Host)),
        Err(Error::ShutDown)
    );
    let mut cancelled: Vec<u64> = report.cancelled.iter().map(|i| i.id).collect();
    assert!(
        cancelled.contains(&queued_id),
        "the queued op is cancelled (I8)"
    );
    if !cancelled.contains(&host_id) {
        // Started before the sweep: its body hands the token over, unless it
        // found the lane stopped at the bridge (then it completes Cancelled
        // by itself).
        complete_handed_unless(&slot, || w.engine.pending().unwrap() == 0);
    }
    match w.engine.wait_all() {
        Ok(()) => {}
        Err(Error::OpsFailed(es)) => {
            for e in es {
                assert_eq!(e.kind(), &OpErrorKind::Cancelled, "only cancellations");
                if !cancelled.contains(&e.op().id) {
                    cancelled.push(e.op().id);
                }
            }
        }
        Err(e) => panic!("wait_all after shutdown returned {e:?}"),
    }
    assert_eq!(
        w.oracle.ran().contains(&1),
        !cancelled.contains(&host_id),
        "the host op must run xor be cancelled (I2, I8)"
    );
    assert!(!w.oracle.ran().contains(&2), "a cancelled op ran");
    clock.join().unwrap();
    assert_eq!(w.gil.calls(), calls, "host code called after shutdown (I8)");
    assert_eq!(w.gil.calls_after_finalize(), 0);
    assert_eq!(w.engine.pending().unwrap(), 0);
}

/// I8: shutdown with a pending host op and a deadline fired by a clock
/// thread. Threads: main + clock + 1 host.
#[test]
fn i8_shutdown() {
    check("i8_shutdown", || shutdown_scenario(false));
}

/// I8 + H2: the same, shutdown called by a thread holding the GIL.
/// Threads: main (GIL) + clock + 1 host.
#[test]
fn i8_shutdown_gil_held() {
    check("i8_shutdown_gil_held", || shutdown_scenario(true));
}

/// I8: the host starts finalising while a host op is queued behind an
/// async compute op on the same var; main then completes the compute op's
/// token. The host op must not enter the bridge (it completes `Cancelled`,
/// its payload leaked); shutdown returns; the bridge is never called.
/// Threads: main + 1 compute + 1 host.
#[test]
fn i8_finalizing() {
    check("i8_finalizing", || {
        let w = World::new(config(1, 1, None), 2);
        let a = asynchronous(step(1, &[], &[0]), Lane::Compute, Mode::Handoff(0));
        let slot = a.slot.clone().unwrap();
        w.push(&a).unwrap();
        w.push(&sync(step(2, &[0], &[1]), Lane::Host)).unwrap();
        w.gil.set_finalizing(true);
        complete_handed(&slot);
        match w.engine.wait_for_var(&w.vars[1]) {
            Err(Error::Poisoned(e)) => assert_eq!(e.kind(), &OpErrorKind::Cancelled),
            r => panic!("wait_for_var returned {r:?}"),
        }
        let report = w.engine.shutdown(LONG).unwrap();
        assert!(report.cancelled.is_empty());
        assert_eq!(w.gil.calls(), 0, "host code called while finalising (I8)");
        assert_eq!(w.gil.calls_after_finalize(), 0);
        assert_eq!(w.ran(), vec![1], "a host body ran while finalising");
        assert_eq!(w.engine.pending().unwrap(), 0);
    });
}
