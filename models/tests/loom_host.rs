//! loom models of forksafe-core's host-lock rules: I4 (whoever holds the
//! host lock, every engine call returns), H1 (host code — an op body under
//! the GIL — calls back into the engine without deadlock) and H2 (calls
//! made while holding the GIL, including the fork prepare/parent steps,
//! never wait for a host op without releasing it). The host lock is
//! `forksafe_testkit::GilBridge`, a GIL-like re-entrant lock. Exhaustive
//! up to the preemption bound (`LOOM_MAX_PREEMPTIONS`, default 2); see
//! models/LOOM.md.

#![cfg(loom)]

mod common;

use common::*;
use forksafe_core::{Error, Lane, State};
use forksafe_models::serial;
use std::sync::Arc;

/// I4: a thread holding the GIL pushes host ops (which need the GIL to
/// run), waits for one, quiesces while the other may run, and shuts down:
/// every call returns, with the GIL still held by the caller afterwards.
/// Threads: main (GIL) + 1 host.
#[test]
fn i4_gil_holder() {
    check("i4_gil_holder", || {
        let w = World::new(config(1, 1, None), 2);
        w.gil.lock().acquire();
        let a = sync(step(1, &[], &[0]), Lane::Host);
        let b = sync(step(2, &[0], &[1]), Lane::Host);
        w.push(&a).unwrap();
        w.engine.wait_for_var(&w.vars[0]).unwrap();
        assert!(
            w.gil.lock().held_by_me(),
            "the GIL is taken back after a wait"
        );
        w.push(&b).unwrap();
        let guard = w.engine.quiesce(LONG).unwrap();
        assert_eq!(w.probe.running(), 0, "a body runs under a quiesce (I3)");
        drop(guard);
        w.engine.wait_all().unwrap();
        assert_eq!(
            w.oracle.slots(),
            serial(2, &[a.step.clone(), b.step.clone()])
        );
        w.engine.shutdown(LONG).unwrap();
        assert!(w.gil.lock().held_by_me());
        w.gil.lock().release();
        assert_eq!(w.ran(), vec![1, 2]);
    });
}

/// H1: a host op's body, running under the GIL, calls back into the
/// engine: it waits for an unrelated var written by an earlier compute op
/// (the wait releases the GIL), pushes a new compute op and reads
/// `pending()`. Nothing deadlocks and everything runs once.
/// Threads: main + 1 compute + 1 host.
#[test]
fn h1_host_callback() {
    check("h1_host_callback", || {
        let w = Arc::new(World::new(config(1, 1, None), 3));
        let a = sync(step(1, &[], &[1]), Lane::Compute);
        w.push(&a).unwrap();
        let mut b = sync(step(2, &[], &[0]), Lane::Host);
        let weak = Arc::downgrade(&w);
        b.call = Some(Arc::new(move || {
            let w = weak.upgrade().expect("world alive while its ops run");
            assert!(w.gil.lock().held_by_me(), "host body runs under the GIL");
            w.engine.wait_for_var(&w.vars[1]).unwrap();
            assert_eq!(w.engine.var_version(&w.vars[1]).unwrap(), 1);
            w.push(&sync(step(3, &[], &[2]), Lane::Compute)).unwrap();
            assert!(w.engine.pending().unwrap() >= 1);
        }));
        w.push(&b).unwrap();
        w.engine.wait_all().unwrap();
        w.engine.wait_all().unwrap();
        assert_eq!(w.ran(), vec![1, 2, 3]);
        w.engine.shutdown(LONG).unwrap();
    });
}

/// H2: a thread holding the GIL, with a host op pending (it needs the GIL),
/// runs the fork steps: between prepare and parent, its push and wait get
/// `ForkInProgress` (never a hang) and the snapshot is taken; after parent
/// it waits for everything and quiesces and shuts down; all return.
/// Threads: main (GIL) + 1 host.
#[test]
fn h2_gil_holder_fork_steps() {
    check("h2_gil_holder_fork_steps", || {
        let w = World::new(config(1, 1, None), 1);
        w.gil.lock().acquire();
        let a = sync(step(1, &[], &[0]), Lane::Host);
        w.push(&a).unwrap();
        mark("pushed");
        w.domain.prepare();
        mark("prepared");
        assert_eq!(w.push(&a), Err(Error::ForkInProgress));
        assert_eq!(
            w.engine.wait_for_var(&w.vars[0]),
            Err(Error::ForkInProgress)
        );
        let snap = w.engine.fork_snapshot(&w.vars).unwrap();
        w.domain.parent();
        mark("parent");
        assert!(snap.pending_ops().len() <= 1);
        w.engine.wait_all().unwrap();
        mark("waited");
        drop(w.engine.quiesce(LONG).unwrap());
        mark("quiesced");
        w.engine.shutdown(LONG).unwrap();
        mark("shut down");
        assert_eq!(w.engine.state(), State::Stopped);
        w.gil.lock().release();
        assert_eq!(w.ran(), vec![1]);
    });
}
