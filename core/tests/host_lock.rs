//! The GIL-like [`HostLock`] and [`GilBridge`] that the models run the
//! seed's scenarios against (H1, H2): if they did not behave like a
//! re-entrant global lock, the models would prove nothing. Found by the
//! full mutation run (FORK-SAFETY.md, "Mutation testing").

use crate::support::wait_until;
use forksafe_core::HostBridge;
use forksafe_testkit::{GilBridge, HostLock};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Waits (bounded, so a broken lock fails instead of hanging) until `f`.
fn eventually(what: &str, f: impl Fn() -> bool) {
    assert!(
        wait_until(Duration::from_secs(20), f),
        "never happened: {what}"
    );
}

/// Re-entrant: each acquire needs its own release; a thread that does not
/// hold the lock cannot release it.
#[test]
fn the_host_lock_is_reentrant_and_owned() {
    let lock = Arc::new(HostLock::new());
    assert!(!lock.held_by_me());
    lock.acquire();
    lock.acquire();
    assert!(lock.held_by_me());
    let other = lock.clone();
    std::thread::spawn(move || {
        assert!(!other.held_by_me());
        other.release();
    })
    .join()
    .unwrap();
    assert!(lock.held_by_me());
    lock.release();
    assert!(lock.held_by_me(), "one level is still held");
    lock.release();
    assert!(!lock.held_by_me());
}

/// A second thread waits for the lock while it is held, is seen waiting,
/// and gets it once it is released.
#[test]
fn the_host_lock_excludes_and_hands_over() {
    let lock = Arc::new(HostLock::new());
    lock.acquire();
    assert!(!lock.contended());
    let got = Arc::new(AtomicBool::new(false));
    let (l, g) = (lock.clone(), got.clone());
    let waiter = std::thread::spawn(move || {
        l.acquire();
        g.store(true, Ordering::SeqCst);
        assert!(l.held_by_me());
        l.release();
    });
    eventually("the second thread waits", || {
        lock.contended() || got.load(Ordering::SeqCst)
    });
    assert!(!got.load(Ordering::SeqCst), "two holders at once");
    assert!(lock.contended());
    lock.release();
    waiter.join().unwrap();
    assert!(got.load(Ordering::SeqCst));
    assert!(!lock.contended());
    assert!(!lock.held_by_me());
}

/// `without_host_lock` releases every level, lets another thread take the
/// lock meanwhile, and restores the same depth.
#[test]
fn the_bridge_releases_all_levels_and_takes_them_back() {
    let gil = Arc::new(GilBridge::new());
    gil.lock().acquire();
    gil.lock().acquire();
    let g = gil.clone();
    gil.without_host_lock(&mut || {
        assert!(!g.holds_host_lock());
        let g2 = g.clone();
        std::thread::spawn(move || {
            g2.with_host_lock(&mut || assert!(g2.holds_host_lock()));
        })
        .join()
        .unwrap();
    });
    assert!(gil.holds_host_lock());
    gil.lock().release();
    assert!(gil.holds_host_lock(), "depth 2 restored");
    gil.lock().release();
    assert!(!gil.holds_host_lock());
    // Not held: the closure runs directly and the lock stays free.
    let mut ran = false;
    gil.without_host_lock(&mut || ran = true);
    assert!(ran && !gil.holds_host_lock());
}

/// The bridge counts host calls, and those made while finalising (I8).
#[test]
fn the_bridge_counts_calls_and_calls_after_finalisation() {
    let gil = GilBridge::new();
    assert_eq!((gil.calls(), gil.calls_after_finalize()), (0, 0));
    let mut inside = false;
    gil.with_host_lock(&mut || inside = gil.lock().held_by_me());
    assert!(inside && !gil.holds_host_lock());
    assert_eq!((gil.calls(), gil.calls_after_finalize()), (1, 0));
    assert!(!gil.is_finalizing());
    gil.set_finalizing(true);
    assert!(gil.is_finalizing());
    gil.with_host_lock(&mut || {});
    gil.with_host_lock(&mut || {});
    assert_eq!((gil.calls(), gil.calls_after_finalize()), (3, 2));
    gil.set_finalizing(false);
    assert!(!gil.is_finalizing());
}

/// A bridge whose answers all differ from the defaults.
struct Polling;

impl HostBridge for Polling {
    fn with_host_lock(&self, f: &mut dyn FnMut()) {
        f()
    }
    fn without_host_lock(&self, f: &mut dyn FnMut()) {
        f()
    }
    fn holds_host_lock(&self) -> bool {
        true
    }
    fn is_finalizing(&self) -> bool {
        true
    }
    fn interrupt_requested(&self) -> bool {
        true
    }
    fn interrupt_poll(&self) -> Option<Duration> {
        Some(Duration::from_millis(7))
    }
}

/// A shared bridge answers exactly as the bridge it shares.
#[test]
fn a_shared_bridge_forwards_every_call() {
    fn check(b: &dyn HostBridge, expect: bool, poll: Option<Duration>) {
        assert_eq!(b.holds_host_lock(), expect);
        assert_eq!(b.is_finalizing(), expect);
        assert_eq!(b.interrupt_requested(), expect);
        assert_eq!(b.interrupt_poll(), poll);
        let mut n = 0;
        b.with_host_lock(&mut || n += 1);
        b.without_host_lock(&mut || n += 10);
        assert_eq!(n, 11);
    }
    check(
        &forksafe_core::sync::Arc::new(Polling),
        true,
        Some(Duration::from_millis(7)),
    );
    let gil = forksafe_core::sync::Arc::new(GilBridge::new());
    check(&gil, false, None);
    gil.lock().acquire();
    assert!(gil.holds_host_lock());
    gil.lock().release();
    assert_eq!(gil.calls(), 1, "the call went through to the shared bridge");
}
