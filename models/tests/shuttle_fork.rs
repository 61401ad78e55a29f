//! shuttle models of fork in `forksafe-core`: I6 (the parent world goes on
//! exactly as before) and I5 (the child world, rebuilt from the snapshot
//! taken at prepare's fork point, completes every inherited op with
//! `LostInFork` without running it, reports them, and takes new work). Both
//! worlds run in one shuttle execution: the parent world with all its
//! threads, then the child world from the snapshot, on the main thread plus
//! fresh threads, with its own oracle. Iterations: `FORKSAFE_SHUTTLE_ITERS`;
//! replay: `FORKSAFE_REPLAY`; see models/SHUTTLE.md.

#![cfg(shuttle)]

mod common;

use common::*;
use forksafe_core::{Error, ForkSnapshot, OpErrorKind};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Pushed = Arc<Mutex<Vec<(u64, Op)>>>;

const LONG: Duration = Duration::from_secs(1);
const NV: usize = 3;

/// I5 + I6: parent world of 2 compute + 1 host workers, 1 completer, 3 vars,
/// 2 pushers × 5 ops (30 % host, 20 % handed-off async); a forking thread
/// (holding the GIL half the time) forks at a random point: prepare, a push
/// and a wait get `ForkInProgress`, snapshot, parent. The parent world
/// completes every op once with serial results. The child world is then
/// rebuilt from the snapshot: its first call settles it; the fork report
/// lists exactly the ops pending at the fork; none of them runs; the vars
/// they write carry `LostInFork`; `wait_all` reports each lost op once;
/// after `clear_poison` two child threads push and wait for new work, whose
/// results equal the serial run of the child's own ops; then the child
/// forks in its turn.
fn i5_i6_fork() {
    let mut w = World::new(config(2, 1, None), NV);
    let m = Mix {
        host: 30,
        handoff: 20,
        completers: 1,
        ..Mix::default()
    };
    let programs: Vec<Vec<Op>> = (0..2).map(|p| gen_program(100 * p + 1, 5, NV, m)).collect();
    let all: Vec<Op> = programs.concat();
    let completers = w.start_completers(&handoff_counts(&all, 1));
    let w = Arc::new(w);
    let pushed: Pushed = Arc::default();
    let snap: Arc<Mutex<Option<ForkSnapshot<Job>>>> = Arc::default();
    let mut threads: Vec<_> = programs
        .into_iter()
        .map(|prog| {
            let (w, pushed) = (w.clone(), pushed.clone());
            shuttle::thread::spawn(move || {
                for op in prog {
                    let id = w.push(&op).unwrap();
                    pushed.lock().unwrap().push((id, op));
                }
            })
        })
        .collect();
    {
        let (w, snap) = (w.clone(), snap.clone());
        let hold = chance(50);
        let delay = below(6);
        threads.push(shuttle::thread::spawn(move || {
            for _ in 0..delay {
                shuttle::thread::yield_now();
            }
            if hold {
                w.gil.lock().acquire();
            }
            w.domain.prepare();
            let probe = gen_program(900, 1, NV, Mix::default()).remove(0);
            assert_eq!(w.push(&probe), Err(Error::ForkInProgress));
            assert_eq!(w.engine.wait_all(), Err(Error::ForkInProgress));
            *snap.lock().unwrap() = Some(w.engine.fork_snapshot(&w.vars).unwrap());
            w.domain.parent();
            if hold {
                w.gil.lock().release();
            }
        }));
    }
    for t in threads.into_iter().chain(completers) {
        t.join().unwrap();
    }
    // I6: the parent world.
    let raised = failed_labels(&w.engine.wait_all());
    check_world(&w, &mut pushed.lock().unwrap(), &raised);
    let parent_pushed = pushed.lock().unwrap().clone();
    w.engine.shutdown(LONG).unwrap();

    // I5: the child world, from the snapshot.
    let snap = snap
        .lock()
        .unwrap()
        .take()
        .expect("the forking thread took a snapshot");
    child_world(&w, &snap, &parent_pushed);
}

/// Builds and checks the child world of `snap`, taken in parent world `w`.
pub fn child_world(w: &World, snap: &ForkSnapshot<Job>, parent_pushed: &[(u64, Op)]) {
    // This thread drives the child: a body it ran (an inherited op re-run
    // by a broken child) would show in the child's oracle.
    let cw = World::child(w.domain.epoch(), config(2, 1, None), snap);
    let (engine, oracle, vars, domain) = (&cw.engine, &cw.oracle, &cw.vars, cw.domain);
    let report = engine
        .fork_report()
        .unwrap()
        .expect("the child settled at its first call");
    let lost: Vec<u64> = report.lost.iter().map(|i| i.id).collect();
    assert_eq!(
        lost,
        snap.pending_ops(),
        "the report lists the ops pending at the fork (I5)"
    );
    assert_eq!(report.epoch, domain.epoch());
    assert_eq!(
        oracle.ran(),
        Vec::<u32>::new(),
        "the child ran an inherited op (I5)"
    );
    let by_id: std::collections::BTreeMap<u64, &Op> =
        parent_pushed.iter().map(|(id, op)| (*id, op)).collect();
    let mut lost_writes = BTreeSet::new();
    for id in &lost {
        for &v in &by_id[id].step.writes {
            lost_writes.insert(v);
        }
    }
    for (i, v) in vars.iter().enumerate() {
        let poison = engine.var_poison(v).unwrap();
        if lost_writes.contains(&i) {
            let e = poison.expect("a var written by a lost op is poisoned (I5)");
            assert_eq!(e.kind(), &OpErrorKind::LostInFork);
        } else {
            assert_eq!(poison, None);
        }
    }
    let mut reported = failed_labels(&engine.wait_all());
    reported.sort_unstable();
    let mut want: Vec<u32> = lost.iter().map(|id| by_id[id].step.label).collect();
    want.sort_unstable();
    assert_eq!(
        reported, want,
        "wait_all in the child reports each lost op once (I5)"
    );

    let cw = Arc::new(cw);
    let pushed: Pushed = Arc::default();
    for v in 0..NV {
        let clear = Op {
            run_on_error: true,
            clear: true,
            ..sync(
                step(700 + v as u32, &[], &[v]),
                forksafe_core::Lane::Compute,
            )
        };
        let id = cw.push(&clear).unwrap();
        pushed.lock().unwrap().push((id, clear));
    }
    let m = Mix {
        host: 40,
        async_inline: 30,
        ..Mix::default()
    };
    let threads: Vec<_> = (0..2)
        .map(|p| {
            let prog = gen_program(2000 + 100 * p, 3, NV, m);
            let (cw, pushed) = (cw.clone(), pushed.clone());
            shuttle::thread::spawn(move || {
                for op in prog {
                    let id = cw.push(&op).unwrap();
                    let v = op.step.writes[0];
                    pushed.lock().unwrap().push((id, op));
                    cw.engine.wait_for_var(&cw.vars[v]).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let raised = failed_labels(&cw.engine.wait_all());
    check_world(&cw, &mut pushed.lock().unwrap(), &raised);
    // The child forks in its turn: a section counted at the parent's fork
    // point would have no thread to end it (FORK-SAFETY.md, L9).
    cw.domain.prepare();
    cw.domain.parent();
    cw.engine.shutdown(LONG).unwrap();
}

#[test]
fn i5_i6_fork_random() {
    model(
        "i5_i6_fork_random",
        Sched::Random,
        DEFAULT_ITERS,
        i5_i6_fork,
    );
}

#[test]
fn i5_i6_fork_pct() {
    model("i5_i6_fork_pct", Sched::Pct, DEFAULT_ITERS, i5_i6_fork);
}

/// A drained fork's quiesce of the whole domain (`ForkDomain::quiesce_all`)
/// racing a shutdown of its one engine, which has an op queued: the drain
/// either holds the engine quiesced, or reports `ShutDown`, or skips it
/// because it had already stopped — never returns holding nothing while
/// the engine is still shutting down (I3 across engines, I8).
fn drain_races_shutdown() {
    let w = Arc::new(World::new(config(1, 1, None), 1));
    let queued = sync(step(1, &[], &[0]), forksafe_core::Lane::Compute);
    w.push(&queued).unwrap();
    let stopper = {
        let w = w.clone();
        shuttle::thread::spawn(move || {
            w.engine.shutdown(LONG).unwrap();
        })
    };
    match w.domain.quiesce_all(LONG) {
        Ok(held) if held.engines() == 0 => assert_eq!(
            w.engine.state(),
            forksafe_core::State::Stopped,
            "quiesce_all held nothing while the engine was still shutting down"
        ),
        Ok(held) => assert_eq!(held.engines(), 1),
        Err(e) => assert_eq!(e, Error::ShutDown),
    }
    stopper.join().unwrap();
    assert_eq!(w.engine.state(), forksafe_core::State::Stopped);
}

#[test]
fn drain_races_shutdown_random() {
    model(
        "drain_races_shutdown_random",
        Sched::Random,
        DEFAULT_ITERS,
        drain_races_shutdown,
    );
}

#[test]
fn drain_races_shutdown_pct() {
    model(
        "drain_races_shutdown_pct",
        Sched::Pct,
        DEFAULT_ITERS,
        drain_races_shutdown,
    );
}
