//! `ForkDomain::quiesce_all` (drained fork support) and the `global`
//! primitives (`OnceFlag`, `LazySlot`) used by the engine crate.

use forksafe_core::global::{LazySlot, OnceFlag};
use forksafe_core::{
    CompletionToken, Config, CoreEngine, Error, ForkDomain, OpSpec, Payload, State,
};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

struct Job(Box<dyn FnOnce() + Send>);
impl Payload for Job {
    fn run(self, _t: Option<CompletionToken<Self>>) -> Result<(), forksafe_core::BodyError> {
        (self.0)();
        Ok(())
    }
}

fn domain() -> &'static ForkDomain {
    Box::leak(Box::new(ForkDomain::new()))
}

#[test]
fn quiesce_all_holds_every_engine_and_reports_a_missed_deadline() {
    let d = domain();
    let a = CoreEngine::<Job>::new(d, Config::default()).unwrap();
    let b = CoreEngine::<Job>::new(d, Config::default()).unwrap();
    let (release, blocked) = mpsc::channel::<()>();
    let (started, is_started) = mpsc::channel::<()>();
    b.push(OpSpec::new(Job(Box::new(move || {
        started.send(()).unwrap();
        let _ = blocked.recv_timeout(Duration::from_secs(10));
    }))))
    .unwrap();
    is_started.recv().unwrap();
    let held = d.quiesce_all(Duration::from_millis(50)).unwrap();
    assert_eq!(held.engines(), 1, "a drained, b timed out");
    assert_eq!(held.timed_out().len(), 1);
    assert_eq!(held.timed_out()[0].0, b.id());
    assert!(!held.drained());
    assert_eq!(a.state(), State::Quiesced);
    // Pushes are accepted and deferred while held.
    let ran = std::sync::Arc::new(AtomicU32::new(0));
    let r = ran.clone();
    a.push(OpSpec::new(Job(Box::new(move || {
        r.fetch_add(1, Ordering::SeqCst);
    }))))
    .unwrap();
    assert_eq!(a.pending().unwrap(), 1);
    drop(held);
    release.send(()).unwrap();
    a.wait_all().unwrap();
    b.wait_all().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert!(d.quiesce_all(Duration::from_secs(1)).unwrap().drained());
}

#[test]
fn quiesce_all_refuses_zero_and_a_shutdown_in_progress_but_skips_stopped() {
    let d = domain();
    assert!(matches!(
        d.quiesce_all(Duration::ZERO),
        Err(Error::ZeroTimeout)
    ));
    let stopped = CoreEngine::<Job>::new(d, Config::default()).unwrap();
    stopped.shutdown(Duration::from_secs(1)).unwrap();
    assert_eq!(d.quiesce_all(Duration::from_secs(1)).unwrap().engines(), 0);
    let e = CoreEngine::<Job>::new(d, Config::default()).unwrap();
    let (release, blocked) = mpsc::channel::<()>();
    let (started, is_started) = mpsc::channel::<()>();
    e.push(OpSpec::new(Job(Box::new(move || {
        started.send(()).unwrap();
        let _ = blocked.recv_timeout(Duration::from_secs(10));
    }))))
    .unwrap();
    is_started.recv().unwrap();
    std::thread::scope(|s| {
        let h = s.spawn(|| e.shutdown(Duration::from_secs(10)).unwrap());
        while e.state() != State::ShuttingDown {
            std::thread::yield_now();
        }
        assert!(matches!(
            d.quiesce_all(Duration::from_secs(1)),
            Err(Error::ShutDown)
        ));
        release.send(()).unwrap();
        h.join().unwrap();
    });
}

#[test]
fn once_flag_runs_once_retries_after_failure_and_takes_over_a_vanished_runner() {
    let flag = OnceFlag::new();
    assert_eq!(flag.call_once(7, || Err::<(), _>("no")), Err("no"));
    assert!(!flag.is_done());
    let runs = AtomicU32::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                flag.call_once(7, || {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok::<(), ()>(())
                })
                .unwrap()
            });
        }
    });
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(flag.is_done());

    // A flag left running by process 7 (its thread vanished in a fork) is
    // taken over by process 8 instead of waited on forever.
    let stuck = OnceFlag::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            let _ = stuck.call_once(7, || -> Result<(), ()> {
                // Process 8 runs while 7 is "inside": it must take over.
                stuck
                    .call_once(8, || {
                        runs.fetch_add(1, Ordering::SeqCst);
                        Ok::<(), ()>(())
                    })
                    .unwrap();
                Ok(())
            });
        });
    });
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert!(stuck.is_done());
}

#[test]
fn lazy_slot_keeps_one_value_among_racing_initialisers() {
    static SLOT: LazySlot<u32> = LazySlot::new();
    let inits = AtomicU32::new(0);
    let seen: Vec<u32> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|i| {
                let inits = &inits;
                s.spawn(move || {
                    *SLOT
                        .get_or_try_init(|| {
                            inits.fetch_add(1, Ordering::SeqCst);
                            Ok::<_, ()>(i)
                        })
                        .unwrap()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(seen.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(SLOT.get(), Some(&seen[0]));
    assert!(inits.load(Ordering::SeqCst) >= 1);
    assert_eq!(
        SLOT.get_or_try_init(|| Err::<u32, _>("unused")),
        Ok(&seen[0])
    );
    static EMPTY: LazySlot<u32> = LazySlot::new();
    assert_eq!(
        EMPTY.get_or_try_init(|| Err::<u32, _>("failed")),
        Err("failed")
    );
    assert!(EMPTY.get().is_none());
}
