//! shuttle models of I1 (per-var order), I2 (exactly-once completion, async
//! tokens, waits), I3 (quiesce) and I7 (errors and poison) of
//! `forksafe-core`, with more threads and ops than loom can exhaust.
//! Programs are drawn from `shuttle::rand`, so a replayed schedule replays
//! the program too. Iterations: `FORKSAFE_SHUTTLE_ITERS`; replay:
//! `FORKSAFE_REPLAY`; see models/SHUTTLE.md.

#![cfg(shuttle)]

mod common;

use common::*;
use forksafe_core::{Error, Lane, State};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Pushed = Arc<Mutex<Vec<(u64, Op)>>>;
type Raised = Arc<Mutex<Vec<u32>>>;

const LONG: Duration = Duration::from_secs(1);

/// I1: 3 pushers × 5 random ops (40 % host) over 4 vars, 3 compute + 2 host
/// workers; one pusher waits on a var half-way. Values equal the serial run
/// in push order, no overlap, every body once.
fn i1_order() {
    let w = Arc::new(World::new(config(3, 2, None), 4));
    let pushed: Pushed = Arc::default();
    let m = Mix {
        host: 40,
        ..Mix::default()
    };
    let programs: Vec<Vec<Op>> = (0..3).map(|p| gen_program(100 * p + 1, 5, 4, m)).collect();
    let threads: Vec<_> = programs
        .into_iter()
        .enumerate()
        .map(|(p, prog)| {
            let (w, pushed) = (w.clone(), pushed.clone());
            shuttle::thread::spawn(move || {
                for (i, op) in prog.into_iter().enumerate() {
                    let id = w.push(&op).unwrap();
                    pushed.lock().unwrap().push((id, op));
                    if p == 0 && i == 2 {
                        w.engine.wait_for_var(&w.vars[below(4)]).unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let raised = failed_labels(&w.engine.wait_all());
    check_world(&w, &mut pushed.lock().unwrap(), &raised);
    w.engine.shutdown(LONG).unwrap();
}

#[test]
fn i1_order_random() {
    model("i1_order_random", Sched::Random, DEFAULT_ITERS, i1_order);
}

#[test]
fn i1_order_pct() {
    model("i1_order_pct", Sched::Pct, DEFAULT_ITERS, i1_order);
}

/// I2: 2 pushers × 6 ops over 3 vars (sync, async completed in the body,
/// async handed to one of 2 completer threads, dropped tokens), 3 compute +
/// 1 host workers. Each pusher then waits for every var it wrote (the
/// version covers its writes) and calls `wait_all`. Every op completes once,
/// a second completion is refused, every wait returns, each dropped token's
/// error is reported once.
fn i2_completion() {
    let mut w = World::new(config(3, 1, None), 3);
    let m = Mix {
        host: 30,
        async_inline: 25,
        handoff: 30,
        drop_token: 15,
        run_on_error: 100,
        completers: 2,
        ..Mix::default()
    };
    let programs: Vec<Vec<Op>> = (0..2).map(|p| gen_program(100 * p + 1, 6, 3, m)).collect();
    let all: Vec<Op> = programs.concat();
    let completers = w.start_completers(&handoff_counts(&all, 2));
    let w = Arc::new(w);
    let pushed: Pushed = Arc::default();
    let raised: Raised = Arc::default();
    let threads: Vec<_> = programs
        .into_iter()
        .map(|prog| {
            let (w, pushed, raised) = (w.clone(), pushed.clone(), raised.clone());
            shuttle::thread::spawn(move || {
                let mut mine = [0u64; 3];
                for op in prog {
                    let id = w.push(&op).unwrap();
                    for &v in &op.step.writes {
                        mine[v] += 1;
                    }
                    pushed.lock().unwrap().push((id, op));
                }
                for (v, &n) in mine.iter().enumerate() {
                    if n == 0 {
                        continue;
                    }
                    match w.engine.wait_for_var(&w.vars[v]) {
                        Ok(()) | Err(Error::Poisoned(_)) => {}
                        Err(e) => panic!("wait_for_var: {e:?}"),
                    }
                    assert!(
                        w.engine.var_version(&w.vars[v]).unwrap() >= n,
                        "wait_for_var returned early (I2)"
                    );
                }
                let r = w.engine.wait_all();
                raised.lock().unwrap().extend(failed_labels(&r));
            })
        })
        .collect();
    for t in threads.into_iter().chain(completers) {
        t.join().unwrap();
    }
    let r = w.engine.wait_all();
    raised.lock().unwrap().extend(failed_labels(&r));
    check_world(&w, &mut pushed.lock().unwrap(), &raised.lock().unwrap());
    w.engine.shutdown(LONG).unwrap();
}

#[test]
fn i2_completion_random() {
    model(
        "i2_completion_random",
        Sched::Random,
        DEFAULT_ITERS,
        i2_completion,
    );
}

#[test]
fn i2_completion_pct() {
    model(
        "i2_completion_pct",
        Sched::Pct,
        DEFAULT_ITERS,
        i2_completion,
    );
}

/// I2, small (4 threads at most): 1 compute + 1 host worker, 1 completer,
/// 3 fixed ops over 2 vars (host sync, handed-off async, dropped token);
/// the main thread waits on a var and then on everything.
fn i2_small() {
    let mut w = World::new(config(1, 1, None), 2);
    let op = |step, mode, lane| Op {
        run_on_error: true,
        ..Op::new(step, mode, lane)
    };
    let prog = vec![
        op(step(1, &[], &[0]), Mode::Sync, Lane::Host),
        op(step(2, &[0], &[1]), Mode::Handoff(0), Lane::Compute),
        op(step(3, &[], &[0]), Mode::DropToken, Lane::Compute),
    ];
    let completers = w.start_completers(&[1]);
    let mut pushed: Vec<(u64, Op)> = prog
        .into_iter()
        .map(|op| (w.push(&op).unwrap(), op))
        .collect();
    assert!(matches!(w.engine.wait_for_var(&w.vars[1]), Ok(())));
    let raised = failed_labels(&w.engine.wait_all());
    for t in completers {
        t.join().unwrap();
    }
    check_world(&w, &mut pushed, &raised);
    w.engine.shutdown(LONG).unwrap();
}

#[test]
fn i2_small_random() {
    model("i2_small_random", Sched::Random, DEFAULT_ITERS, i2_small);
}

/// Bounded DFS of the small I2 model. Ignored: shuttle lets a parked
/// thread wake spuriously and DFS takes that branch first, so every wait
/// loop of the engine is an infinite schedule; with a step bound of
/// `DFS_STEPS` no schedule reaches the end of the model (0 of 1000 in our
/// runs), so DFS checks nothing here (SHUTTLE.md).
#[test]
#[ignore = "shuttle DFS cannot finish a schedule: spurious park wake-ups make every wait loop infinite (SHUTTLE.md)"]
fn i2_small_dfs() {
    model("i2_small_dfs", Sched::Dfs, 1000, i2_small);
}

/// I3: 2 pushers × 5 ops over 3 vars (30 % host, 20 % handed-off async),
/// 2 compute + 1 host workers, 1 completer; 1 or 2 quiescer threads (nested
/// guards) push while they hold, and check that no body runs and the state
/// is Quiesced while their guard holds; a clock thread may fire the quiesce
/// deadline (then the quiesce reports Timeout). Afterwards every op, the
/// deferred ones included, ran once with serial results.
fn i3_quiesce() {
    let mut w = World::new(config(2, 1, None), 3);
    let m = Mix {
        host: 30,
        handoff: 20,
        completers: 1,
        ..Mix::default()
    };
    let programs: Vec<Vec<Op>> = (0..2).map(|p| gen_program(100 * p + 1, 5, 3, m)).collect();
    let quiescers = 1 + usize::from(chance(50));
    let extra: Vec<Op> = (0..quiescers)
        .map(|q| {
            gen_program(
                500 + q as u32,
                1,
                3,
                Mix {
                    host: 50,
                    ..Mix::default()
                },
            )
            .remove(0)
        })
        .collect();
    let all: Vec<Op> = programs.concat();
    let completers = w.start_completers(&handoff_counts(&all, 1));
    let w = Arc::new(w);
    let pushed: Pushed = Arc::default();
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
    for op in extra {
        let (w, pushed) = (w.clone(), pushed.clone());
        threads.push(shuttle::thread::spawn(move || {
            match w.engine.quiesce(LONG) {
                Ok(guard) => {
                    for round in 0..3 {
                        assert_eq!(
                            w.probe.running(),
                            0,
                            "a body runs while a quiesce holds (I3)"
                        );
                        assert_eq!(w.engine.state(), State::Quiesced);
                        if round == 1 {
                            let id = w.push(&op).expect("push during a quiesce is accepted (I3)");
                            pushed.lock().unwrap().push((id, op.clone()));
                        }
                        shuttle::thread::yield_now();
                    }
                    drop(guard);
                }
                Err(Error::Timeout { .. }) => {
                    let id = w.push(&op).unwrap();
                    pushed.lock().unwrap().push((id, op));
                }
                Err(e) => panic!("quiesce: {e:?}"),
            }
        }));
    }
    if chance(30) {
        let w = w.clone();
        threads.push(shuttle::thread::spawn(move || {
            shuttle::thread::yield_now();
            w.engine.advance_clock();
        }));
    }
    for t in threads.into_iter().chain(completers) {
        t.join().unwrap();
    }
    let raised = failed_labels(&w.engine.wait_all());
    assert_eq!(w.engine.state(), State::Running);
    check_world(&w, &mut pushed.lock().unwrap(), &raised);
    w.engine.shutdown(LONG).unwrap();
}

#[test]
fn i3_quiesce_random() {
    model(
        "i3_quiesce_random",
        Sched::Random,
        DEFAULT_ITERS,
        i3_quiesce,
    );
}

#[test]
fn i3_quiesce_pct() {
    model("i3_quiesce_pct", Sched::Pct, DEFAULT_ITERS, i3_quiesce);
}

/// I7: 2 pushers × 7 ops over 4 vars: failing bodies (sync and async),
/// dropped tokens, `run_on_error` ops and `clear_poison`; 3 compute + 1 host
/// workers. Pushers call `wait_all` half-way and at the end. Skipped ops do
/// not run, poison equals the serial run's, poison sticks (two
/// `wait_for_var` agree), and over all `wait_all` calls each first-raised
/// error is reported exactly once.
fn i7_errors() {
    let w = Arc::new(World::new(config(3, 1, None), 4));
    let m = Mix {
        host: 30,
        async_inline: 20,
        drop_token: 10,
        fail: 25,
        run_on_error: 15,
        clear: 10,
        ..Mix::default()
    };
    let programs: Vec<Vec<Op>> = (0..2).map(|p| gen_program(100 * p + 1, 7, 4, m)).collect();
    let pushed: Pushed = Arc::default();
    let raised: Raised = Arc::default();
    let threads: Vec<_> = programs
        .into_iter()
        .map(|prog| {
            let (w, pushed, raised) = (w.clone(), pushed.clone(), raised.clone());
            shuttle::thread::spawn(move || {
                for (i, op) in prog.into_iter().enumerate() {
                    let id = w.push(&op).unwrap();
                    pushed.lock().unwrap().push((id, op));
                    if i == 3 {
                        let r = w.engine.wait_all();
                        raised.lock().unwrap().extend(failed_labels(&r));
                    }
                }
                let r = w.engine.wait_all();
                raised.lock().unwrap().extend(failed_labels(&r));
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let r = w.engine.wait_all();
    raised.lock().unwrap().extend(failed_labels(&r));
    for v in &w.vars {
        let first = w.engine.wait_for_var(v);
        assert_eq!(first, w.engine.wait_for_var(v), "poison must stick (I7)");
        assert_eq!(
            matches!(first, Err(Error::Poisoned(_))),
            w.engine.var_poison(v).unwrap().is_some()
        );
    }
    check_world(&w, &mut pushed.lock().unwrap(), &raised.lock().unwrap());
    w.engine.shutdown(LONG).unwrap();
}

#[test]
fn i7_errors_random() {
    model("i7_errors_random", Sched::Random, DEFAULT_ITERS, i7_errors);
}

#[test]
fn i7_errors_pct() {
    model("i7_errors_pct", Sched::Pct, DEFAULT_ITERS, i7_errors);
}

/// Deadlines (I2's waits, I3's bounded quiesce): an op runs until released;
/// `wait_for_var_timeout`, `wait_all_timeout` and `quiesce` on it must each
/// return `Timeout` naming it once the clock passes their deadline (a
/// ticker thread keeps advancing it), and the op then completes normally.
/// A deadline that never fires (the waiter not registered for the tick, or
/// a tick that wakes no one) leaves the waiter parked while the ticker and
/// the op spin: shuttle's step bound fails the run.
fn deadlines() {
    use shuttle::sync::atomic::{AtomicBool, Ordering};
    let w = Arc::new(World::new(config(1, 1, None), 1));
    let release = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let lane = if chance(50) {
        Lane::Host
    } else {
        Lane::Compute
    };
    let op = sync(step(1, &[], &[0]), lane);
    let mut job = w.job(&op);
    let (r, s) = (release.clone(), started.clone());
    job.call = Some(Arc::new(move || {
        s.store(true, Ordering::SeqCst);
        while !r.load(Ordering::SeqCst) {
            shuttle::thread::yield_now();
        }
    }));
    let id = w.push_job(&op, job).unwrap();
    let ticker = {
        let (w, done) = (w.clone(), done.clone());
        shuttle::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                w.engine.advance_clock();
                shuttle::thread::yield_now();
            }
        })
    };
    let named = |r: forksafe_core::Result<()>| match r {
        Err(Error::Timeout { pending }) => pending.iter().any(|i| i.id == id),
        _ => false,
    };
    assert!(named(w.engine.wait_for_var_timeout(&w.vars[0], LONG)));
    assert!(named(w.engine.wait_all_timeout(LONG)));
    // Once the op has started, a quiesce waits for it and times out.
    while !started.load(Ordering::SeqCst) {
        shuttle::thread::yield_now();
    }
    match w.engine.quiesce(LONG) {
        Err(Error::Timeout { pending }) => assert!(pending.iter().any(|i| i.id == id)),
        other => panic!("quiesce past its deadline: {:?}", other.map(|_| ())),
    }
    assert_eq!(w.engine.state(), State::Running);
    release.store(true, Ordering::SeqCst);
    w.engine.wait_for_var(&w.vars[0]).unwrap();
    done.store(true, Ordering::SeqCst);
    ticker.join().unwrap();
    w.engine.wait_all().unwrap();
    w.engine.shutdown(LONG).unwrap();
}

#[test]
fn deadlines_random() {
    model("deadlines_random", Sched::Random, DEFAULT_ITERS, deadlines);
}

#[test]
fn deadlines_pct() {
    model("deadlines_pct", Sched::Pct, DEFAULT_ITERS, deadlines);
}
