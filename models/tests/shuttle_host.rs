//! shuttle models of the host-lock rules of `forksafe-core`: I4/H2 (threads
//! that hold the GIL push, wait, quiesce, fork-step and shut down while host
//! ops need the GIL: every call returns), H1 (host op bodies call back into
//! the engine without deadlock) and I8 (shutdown with pending host ops under
//! a random deadline event: queued ops cancelled, no bridge call after
//! shutdown returns). The host lock is core's GIL-like `GilBridge`.
//! Iterations: `FORKSAFE_SHUTTLE_ITERS`; replay: `FORKSAFE_REPLAY`; see
//! models/SHUTTLE.md.

#![cfg(shuttle)]

mod common;

use common::*;
use forksafe_core::{Error, Lane, OpErrorKind};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Pushed = Arc<Mutex<Vec<(u64, Op)>>>;

const LONG: Duration = Duration::from_secs(1);

/// I4/H2: 2 compute + 2 host workers, a pending bound of 4 (blocking pushes
/// wait with the GIL released), 3 vars, 70 % host ops. Three threads each
/// hold the GIL throughout: a pusher (6 blocking pushes, `wait_for_var`,
/// `wait_all`), a quiescer (quiesce, `try_push` while it holds, release) and
/// a forker (prepare → calls get `ForkInProgress` → snapshot → parent). Then
/// the main thread, holding the GIL, waits for everything and shuts down.
/// Every call returns (shuttle reports any hang as a deadlock) and the
/// results equal the serial run.
fn i4_gil_holders() {
    let w = Arc::new(World::new(config(2, 2, Some(4)), 3));
    let pushed: Pushed = Arc::default();
    let m = Mix {
        host: 70,
        ..Mix::default()
    };
    let prog = gen_program(1, 6, 3, m);
    let extra = gen_program(100, 2, 3, m);
    let pusher = {
        let (w, pushed) = (w.clone(), pushed.clone());
        shuttle::thread::spawn(move || {
            w.gil.lock().acquire();
            for op in prog {
                let id = w.push(&op).unwrap();
                pushed.lock().unwrap().push((id, op));
            }
            w.engine.wait_for_var(&w.vars[below(3)]).unwrap();
            w.engine.wait_all().unwrap();
            assert!(w.gil.lock().held_by_me());
            w.gil.lock().release();
        })
    };
    let quiescer = {
        let (w, pushed) = (w.clone(), pushed.clone());
        shuttle::thread::spawn(move || {
            w.gil.lock().acquire();
            let guard = w.engine.quiesce(LONG).unwrap();
            for op in extra {
                match w.engine.try_push(OpSpecOf::spec(&w, &op)) {
                    Ok(id) => pushed.lock().unwrap().push((id, op)),
                    Err(Error::Full) => {}
                    Err(e) => panic!("try_push during quiesce: {e:?}"),
                }
            }
            drop(guard);
            assert!(w.gil.lock().held_by_me());
            w.gil.lock().release();
        })
    };
    let forker = {
        let w = w.clone();
        shuttle::thread::spawn(move || {
            w.gil.lock().acquire();
            w.domain.prepare();
            let probe = gen_program(900, 1, 3, Mix::default()).remove(0);
            assert_eq!(w.push(&probe), Err(Error::ForkInProgress));
            assert_eq!(w.engine.wait_all(), Err(Error::ForkInProgress));
            let snap = w.engine.fork_snapshot(&w.vars).unwrap();
            w.domain.parent();
            drop(snap);
            w.gil.lock().release();
        })
    };
    for t in [pusher, quiescer, forker] {
        t.join().unwrap();
    }
    w.gil.lock().acquire();
    let raised = failed_labels(&w.engine.wait_all());
    check_world(&w, &mut pushed.lock().unwrap(), &raised);
    w.engine.shutdown(LONG).unwrap();
    w.gil.lock().release();
}

/// Builds an `OpSpec` for `try_push` the way [`World::push`] does.
struct OpSpecOf;
impl OpSpecOf {
    fn spec(w: &World, op: &Op) -> forksafe_core::OpSpec<Job> {
        let reads: Vec<_> = op.step.reads.iter().map(|&i| w.vars[i].clone()).collect();
        let writes: Vec<_> = op.step.writes.iter().map(|&i| w.vars[i].clone()).collect();
        forksafe_core::OpSpec::new(w.job(op))
            .name(op_name(op.step.label))
            .lane(op.lane)
            .reads(&reads)
            .writes(&writes)
    }
}

#[test]
fn i4_gil_holders_random() {
    model(
        "i4_gil_holders_random",
        Sched::Random,
        DEFAULT_ITERS,
        i4_gil_holders,
    );
}

#[test]
fn i4_gil_holders_pct() {
    model(
        "i4_gil_holders_pct",
        Sched::Pct,
        DEFAULT_ITERS,
        i4_gil_holders,
    );
}

/// H1: 2 compute + 1 host workers, 4 program vars plus one side var per op,
/// 2 pushers × 4 ops (60 % host). Half the bodies call back into the
/// engine while they run (a host body holds the GIL): push a compute op on
/// their side var, `wait_for_var` on a random program var (Ok, or
/// `WaitOnSelf` on a var the op writes), `var_version`, `pending`. Nothing
/// deadlocks and the results, side ops included, equal the serial run.
fn h1_callbacks() {
    const NV: usize = 4;
    const PER: usize = 4;
    let w = Arc::new(World::new(config(2, 1, None), NV + 2 * PER));
    let pushed: Pushed = Arc::default();
    let m = Mix {
        host: 60,
        ..Mix::default()
    };
    let programs: Vec<Vec<Op>> = (0..2)
        .map(|p| gen_program(100 * p as u32 + 1, PER, NV, m))
        .collect();
    let mut threads = Vec::new();
    for (p, prog) in programs.into_iter().enumerate() {
        let (w, pushed) = (w.clone(), pushed.clone());
        let jobs: Vec<(Op, Job)> = prog
            .into_iter()
            .enumerate()
            .map(|(i, op)| {
                let mut job = w.job(&op);
                if chance(50) {
                    let side = NV + p * PER + i;
                    let side_op = sync(step(1000 + side as u32, &[], &[side]), Lane::Compute);
                    let target = below(NV);
                    let own_write = op.step.writes.contains(&target);
                    let (w2, pushed2) = (Arc::downgrade(&w), pushed.clone());
                    job.call = Some(Arc::new(move || {
                        let w = w2.upgrade().expect("world alive while ops run");
                        let id = w.push(&side_op).expect("push from a body (H1)");
                        pushed2.lock().unwrap().push((id, side_op.clone()));
                        match w.engine.wait_for_var(&w.vars[target]) {
                            Ok(()) => assert!(!own_write),
                            // Its own write; else an op queued behind it,
                            // or a blocked op whose wait leads back to it.
                            Err(Error::WaitOnSelf { op, on, .. }) => {
                                assert_eq!(own_write, on.id == op.id, "{op:?} on {on:?}")
                            }
                            Err(e) => panic!("wait_for_var from a body: {e:?}"),
                        }
                        w.engine.var_version(&w.vars[target]).unwrap();
                        w.engine.pending().unwrap();
                    }));
                }
                (op, job)
            })
            .collect();
        threads.push(shuttle::thread::spawn(move || {
            for (op, job) in jobs {
                let id = w.push_job(&op, job).unwrap();
                pushed.lock().unwrap().push((id, op));
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    // Side ops are pushed by bodies: wait until no op is left.
    let mut raised = Vec::new();
    loop {
        raised.extend(failed_labels(&w.engine.wait_all()));
        if w.engine.pending().unwrap() == 0 {
            break;
        }
    }
    check_world(&w, &mut pushed.lock().unwrap(), &raised);
    w.engine.shutdown(LONG).unwrap();
}

#[test]
fn h1_callbacks_random() {
    model(
        "h1_callbacks_random",
        Sched::Random,
        DEFAULT_ITERS,
        h1_callbacks,
    );
}

#[test]
fn h1_callbacks_pct() {
    model("h1_callbacks_pct", Sched::Pct, DEFAULT_ITERS, h1_callbacks);
}

/// I8: 2 compute + 1 host workers, 3 vars, 2 pushers × 6 ops (60 % host,
/// racing the shutdown) and a shutdown by the main
/// thread (which holds the GIL half the time);
/// a clock thread may fire the shutdown deadline. After shutdown returns the
/// host starts finalising: no bridge call follows (`calls()` unchanged,
/// `calls_after_finalize() == 0`), pushes get `ShutDown`, `wait_all`
/// returns, each accepted op completed once (ran, or cancelled and not run).
fn i8_shutdown() {
    let w = Arc::new(World::new(config(2, 1, None), 3));
    let pushed: Pushed = Arc::default();
    let m = Mix {
        host: 60,
        ..Mix::default()
    };
    let mut threads: Vec<_> = (0..2)
        .map(|p| {
            let prog = gen_program(100 * p + 1, 6, 3, m);
            let (w, pushed) = (w.clone(), pushed.clone());
            shuttle::thread::spawn(move || {
                for op in prog {
                    match w.push(&op) {
                        Ok(id) => pushed.lock().unwrap().push((id, op)),
                        Err(Error::ShutDown) => {}
                        Err(e) => panic!("push: {e:?}"),
                    }
                }
            })
        })
        .collect();
    {
        let w = w.clone();
        threads.push(shuttle::thread::spawn(move || {
            for _ in 0..3 {
                shuttle::thread::yield_now();
                if chance(40) {
                    w.engine.advance_clock();
                }
            }
        }));
    }
    for _ in 0..below(4) {
        shuttle::thread::yield_now();
    }
    let hold = chance(50);
    if hold {
        w.gil.lock().acquire();
    }
    let report = w.engine.shutdown(LONG).unwrap();
    if hold {
        w.gil.lock().release();
    }
    let calls = w.gil.calls();
    w.gil.set_finalizing(true);
    let late = gen_program(900, 1, 3, m).remove(0);
    assert_eq!(w.push(&late), Err(Error::ShutDown));
    for t in threads {
        t.join().unwrap();
    }
    let r = w.engine.wait_all();
    let mut cancelled_errors = BTreeSet::new();
    if let Err(Error::OpsFailed(es)) = &r {
        for e in es {
            assert_eq!(
                e.kind(),
                &OpErrorKind::Cancelled,
                "only cancellations fail here"
            );
            cancelled_errors.insert(label_of(&e.op().name).unwrap());
        }
    } else {
        assert_eq!(r, Ok(()));
    }
    assert_eq!(
        w.engine.pending().unwrap(),
        0,
        "an accepted op never completed (I2/I8)"
    );
    assert_eq!(
        w.gil.calls(),
        calls,
        "host code called after shutdown returned (I8)"
    );
    assert_eq!(w.gil.calls_after_finalize(), 0);
    assert_eq!(w.oracle.violations(), Vec::<String>::new());
    let mut ran = w.oracle.ran();
    let n = ran.len();
    ran.sort_unstable();
    ran.dedup();
    assert_eq!(ran.len(), n, "a body ran twice (I2)");
    let ran: BTreeSet<u32> = ran.into_iter().collect();
    let cancelled: BTreeSet<u32> = report
        .cancelled
        .iter()
        .map(|i| label_of(&i.name).unwrap())
        .collect();
    assert!(ran.is_disjoint(&cancelled), "a cancelled op ran (I8)");
    assert!(
        cancelled.is_subset(&cancelled_errors),
        "a cancellation was not reported"
    );
    let accepted: BTreeSet<u32> = pushed
        .lock()
        .unwrap()
        .iter()
        .map(|(_, op)| op.step.label)
        .collect();
    for label in &accepted {
        assert!(
            ran.contains(label) || cancelled_errors.contains(label),
            "op {label} neither ran nor was cancelled (I2/I8): report {report:?}, wait_all {r:?}, ran {ran:?}, pushed {:?}",
            pushed.lock().unwrap()
        );
    }
}

#[test]
fn i8_shutdown_random() {
    model("i8_shutdown_random", Sched::Random, DEFAULT_ITERS, || {
        i8_shutdown()
    });
}

#[test]
fn i8_shutdown_pct() {
    model("i8_shutdown_pct", Sched::Pct, DEFAULT_ITERS, || {
        i8_shutdown()
    });
}
