//! The rule for waits inside an op (docs/DESIGN.md, "Waiting inside an
//! op"): such a wait returns only after everything it covers has completed,
//! the ops the calling op pushed itself included, or fails at once with
//! `WaitOnSelf` naming what cannot complete before the calling op. Every
//! test waits from outside with a deadline, so a deadlock fails it instead
//! of holding the suite.

mod support;

use forksafe::{Engine, Error};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Barrier};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

fn engine(compute: usize, host: usize) -> Arc<Engine> {
    Arc::new(support::engine(compute, host))
}

/// Runs `body` inside an op on `lane` (host if `host`) and returns what it
/// sent, after the engine is idle.
fn inside<T: Send + 'static>(
    e: &Arc<Engine>,
    host: bool,
    body: impl FnOnce(Arc<Engine>, Sender<T>) + Send + 'static,
) -> T {
    let (tx, rx) = channel();
    let e2 = e.clone();
    let b = e.op("caller");
    let b = if host { b.host() } else { b };
    b.run(move || body(e2, tx)).unwrap();
    e.wait_all_timeout(LIMIT).unwrap();
    rx.recv_timeout(LIMIT).expect("the body sent its result")
}

#[test]
fn wait_for_var_covers_a_write_the_op_pushed_itself() {
    for (compute, host, on_host) in [(1, 1, false), (1, 1, true), (2, 1, false)] {
        let e = engine(compute, host);
        let v = e.new_var().unwrap();
        let got = inside(&e, on_host, move |e, tx| {
            let ran = Arc::new(AtomicBool::new(false));
            let r = ran.clone();
            e.op("pushed inside")
                .writes(&[&v])
                .run(move || {
                    std::thread::sleep(Duration::from_millis(20));
                    r.store(true, Ordering::SeqCst);
                })
                .unwrap();
            let waited = e.wait_for_var(&v);
            tx.send((
                waited,
                ran.load(Ordering::SeqCst),
                e.var_version(&v).unwrap(),
            ))
            .unwrap();
        });
        assert_eq!(got, (Ok(()), true, 1), "{compute} compute, {host} host");
    }
}

#[test]
fn wait_all_covers_ops_the_op_pushed_itself() {
    for on_host in [false, true] {
        let e = engine(1, 1);
        let got = inside(&e, on_host, move |e, tx| {
            let n = Arc::new(AtomicU32::new(0));
            for lane_host in [false, true, false] {
                let n = n.clone();
                let b = e.op("child");
                let b = if lane_host { b.host() } else { b };
                b.run(move || {
                    std::thread::sleep(Duration::from_millis(5));
                    n.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap();
            }
            let waited = e.wait_all();
            tx.send((waited, n.load(Ordering::SeqCst))).unwrap();
        });
        assert_eq!(got, (Ok(()), 3));
    }
}

#[test]
fn a_handle_and_get_inside_an_op_give_the_value() {
    let e = engine(1, 1);
    let d = e.data(10_u64).unwrap();
    let got = inside(&e, false, move |e, tx| {
        let w = d.clone();
        e.op("add")
            .writes(&[d.var()])
            .run_with(move |acc| acc.write(&w).map(|mut v| *v += 5))
            .unwrap();
        let h = e.op("value").run_with(|_| 7_u32).unwrap();
        let handle = h.wait();
        let get = e.get(&d);
        let with = e.with(&d, |v| v * 2);
        tx.send((handle, get, with)).unwrap();
    });
    assert_eq!(got, (Ok(7), Ok(15), Ok(30)));
}

#[test]
fn into_inner_inside_an_op_waits_for_the_ops_on_the_data() {
    let e = engine(1, 1);
    let got = inside(&e, false, move |e, tx| {
        let d = e.data(vec![1]).unwrap();
        let w = d.clone();
        e.op("push 2")
            .writes(&[d.var()])
            .run_with(move |acc| acc.write(&w).map(|mut v| v.push(2)))
            .unwrap();
        // `w` went into the op, whose payload is gone once it completed.
        tx.send(e.into_inner(d).map_err(|n| n.error)).unwrap();
    });
    assert_eq!(got, Ok(vec![1, 2]));
}

fn is_wait_on_self(got: &Result<(), Error>, op_name: &str, on_name: &str) -> bool {
    matches!(got, Err(Error::WaitOnSelf { op, on, .. }) if op.name == op_name && on.name == on_name)
}

#[test]
fn waiting_for_a_write_queued_behind_the_caller_fails_at_once() {
    let e = engine(1, 1);
    let v = e.new_var().unwrap();
    let (tx, rx) = channel();
    let (e2, v2) = (e.clone(), v.clone());
    e.op("caller")
        .writes(&[&v])
        .run(move || {
            // Queued behind the caller on `v`: it cannot run first.
            e2.op("behind").writes(&[&v2]).run(|| {}).unwrap();
            tx.send(e2.wait_for_var(&v2)).unwrap();
        })
        .unwrap();
    let got = rx.recv_timeout(LIMIT).unwrap();
    // "behind" was pushed before the body sent.
    e.wait_all_timeout(LIMIT).unwrap();
    // The caller's own write comes first in the var's pending list.
    assert!(is_wait_on_self(&got, "caller", "caller"), "{got:?}");
    assert_eq!(e.var_version(&v).unwrap(), 2, "both writes ran");
}

#[test]
fn a_dependent_through_another_var_is_found() {
    // caller writes a; y reads a (behind the caller) and writes b; the wait
    // is on b, whose pending write (y) waits for the caller.
    let e = engine(2, 1);
    let (a, b) = (e.new_var().unwrap(), e.new_var().unwrap());
    let (tx, rx) = channel();
    let e2 = e.clone();
    let (a2, b2) = (a.clone(), b.clone());
    e.op("caller")
        .writes(&[&a])
        .run(move || {
            e2.op("y").reads(&[&a2]).writes(&[&b2]).run(|| {}).unwrap();
            tx.send(e2.wait_for_var(&b2)).unwrap();
            tx.send(e2.wait_all()).unwrap();
        })
        .unwrap();
    let on_b = rx.recv_timeout(LIMIT).unwrap();
    let all = rx.recv_timeout(LIMIT).unwrap();
    // y was pushed before the body sent.
    e.wait_all_timeout(LIMIT).unwrap();
    assert!(is_wait_on_self(&on_b, "caller", "y"), "{on_b:?}");
    assert!(matches!(&on_b, Err(Error::WaitOnSelf { var: Some(id), .. }) if *id == b.id()));
    assert!(is_wait_on_self(&all, "caller", "y"), "{all:?}");
    assert_eq!(e.var_version(&b).unwrap(), 1, "y ran after the caller");
}

#[test]
fn get_of_data_the_caller_writes_is_wait_on_self() {
    let e = engine(1, 1);
    let d = e.data(1_u32).unwrap();
    let (tx, rx) = channel();
    let (e2, d2) = (e.clone(), d.clone());
    e.op("writer")
        .writes(&[d.var()])
        .run(move || tx.send(e2.get(&d2)).unwrap())
        .unwrap();
    e.wait_all_timeout(LIMIT).unwrap();
    let got = rx.recv().unwrap();
    assert!(
        matches!(&got, Err(Error::WaitOnSelf { op, on, .. }) if op.name == "writer" && on.name == "forksafe.get"),
        "{got:?}"
    );
    assert_eq!(e.get(&d), Ok(1), "the engine works after");
}

/// Two running ops, each waiting for an op queued behind the other: the
/// waits would close a cycle, so exactly one fails and the other returns
/// once the first op completed.
#[test]
fn two_waits_that_would_close_a_cycle_fail_one_and_finish_both() {
    for _ in 0..20 {
        let e = engine(2, 1);
        let (a, b) = (e.new_var().unwrap(), e.new_var().unwrap());
        let (xa, xb) = (e.new_var().unwrap(), e.new_var().unwrap());
        let both = Arc::new(Barrier::new(2));
        let (tx, rx) = channel();
        for (name, own, other, x) in [("A", &a, &b, &xa), ("B", &b, &a, &xb)] {
            let (e2, other, x) = (e.clone(), other.clone(), x.clone());
            let (both, tx) = (both.clone(), tx.clone());
            e.op(name)
                .writes(&[own])
                .run(move || {
                    // Reads the other op's var: queued behind it.
                    e2.op(format!("x{name}"))
                        .reads(&[&other])
                        .writes(&[&x])
                        .run(|| {})
                        .unwrap();
                    both.wait();
                    tx.send((name, e2.wait_for_var(&x))).unwrap();
                })
                .unwrap();
        }
        // Both inner ops were pushed before their bodies sent.
        let mut got: Vec<_> = (0..2).map(|_| rx.recv_timeout(LIMIT).unwrap()).collect();
        e.wait_all_timeout(LIMIT).unwrap();
        got.sort_by_key(|(n, _)| *n);
        let failed = got.iter().filter(|(_, r)| r.is_err()).count();
        assert_eq!(failed, 1, "{got:?}");
        for (name, r) in &got {
            if let Err(err) = r {
                let Error::WaitOnSelf { op, .. } = err else {
                    panic!("{name}: {err:?}")
                };
                assert_eq!(op.name, *name);
            }
        }
        assert_eq!(e.var_version(&xa).unwrap(), 1);
        assert_eq!(e.var_version(&xb).unwrap(), 1);
    }
}

#[test]
fn an_independent_op_pushed_by_another_thread_is_waited_for() {
    let e = engine(1, 1);
    let v = e.new_var().unwrap();
    let started = Arc::new(Barrier::new(2));
    let pushed = Arc::new(Barrier::new(2));
    let (tx, rx) = channel();
    let (e2, v2, s2, p2) = (e.clone(), v.clone(), started.clone(), pushed.clone());
    e.op("caller")
        .run(move || {
            s2.wait();
            p2.wait();
            tx.send((e2.wait_for_var(&v2), e2.var_version(&v2).unwrap()))
                .unwrap();
        })
        .unwrap();
    started.wait();
    // Pushed after the caller, before its wait: covered, and independent.
    e.op("later").writes(&[&v]).run(|| {}).unwrap();
    pushed.wait();
    e.wait_all_timeout(LIMIT).unwrap();
    assert_eq!(rx.recv().unwrap(), (Ok(()), 1));
}

#[test]
fn waits_inside_ops_nest_through_stand_ins() {
    // Each level pushes the next and waits for it: one worker, stand-ins.
    fn level(e: Arc<Engine>, depth: u32, total: Arc<AtomicU32>) {
        total.fetch_add(1, Ordering::SeqCst);
        if depth == 0 {
            return;
        }
        let (e2, t2) = (e.clone(), total.clone());
        let h = e
            .op(format!("level {depth}"))
            .run_with(move |_| level(e2, depth - 1, t2))
            .unwrap();
        h.wait().unwrap();
    }
    let e = engine(1, 1);
    let total = Arc::new(AtomicU32::new(0));
    let (e2, t2) = (e.clone(), total.clone());
    let h = e.op("root").run_with(move |_| level(e2, 8, t2)).unwrap();
    h.wait().unwrap();
    assert_eq!(total.load(Ordering::SeqCst), 9);
    e.wait_all_timeout(LIMIT).unwrap();
}

/// The models' shape of the cycle: one compute and one host worker, the
/// two waiting ops on different lanes, both pushed under a quiesce (so
/// neither runs before both are queued): whichever lists its wait second
/// fails, in every order.
#[test]
fn a_cycle_across_lanes_with_one_worker_each() {
    for _ in 0..50 {
        let e = engine(1, 1);
        let vars: Vec<_> = (0..4).map(|_| e.new_var().unwrap()).collect();
        let (tx, rx) = channel();
        let hold = e.quiesce(LIMIT).unwrap();
        for (name, own, other, x, host) in [("A", 0, 1, 2, false), ("B", 1, 0, 3, true)] {
            let (e2, other, xv) = (e.clone(), vars[other].clone(), vars[x].clone());
            let tx = tx.clone();
            let b = e.op(name).writes(&[&vars[own]]);
            let b = if host { b.host() } else { b };
            b.run(move || {
                e2.op(format!("x{name}"))
                    .reads(&[&other])
                    .writes(&[&xv])
                    .run(|| {})
                    .unwrap();
                tx.send(e2.wait_for_var(&xv).is_err()).unwrap();
            })
            .unwrap();
        }
        drop(hold);
        // Both inner ops were pushed before their bodies sent.
        let failed = (0..2).filter(|_| rx.recv_timeout(LIMIT).unwrap()).count();
        e.wait_all_timeout(LIMIT).unwrap();
        assert_eq!(failed, 1);
        assert_eq!(e.var_version(&vars[2]).unwrap(), 1);
        assert_eq!(e.var_version(&vars[3]).unwrap(), 1);
    }
}
