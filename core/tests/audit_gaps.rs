//! Small API behaviours that only these tests pin down (each kills mutants
//! of the mutation audit, FORK-SAFETY.md, "Mutation testing"): what a completion
//! token reports about itself, a `OnceFlag` raced by two threads of one
//! process, and the `Debug` forms that say whether a slot is filled.

use crate::support::Job;
use forksafe_core::global::{LazySlot, OnceFlag};
use forksafe_core::{CompletionToken, CoreEngine, Error, ForkDomain, OpErrorKind, OpSpec};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// A token knows its op and whether it has completed.
#[test]
fn a_token_reports_its_op_and_completion() {
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    let e = CoreEngine::<Job>::new(domain, Default::default()).unwrap();
    let v = e.new_var().unwrap();
    let slot: Arc<Mutex<Option<CompletionToken<Job>>>> = Arc::default();
    let s = slot.clone();
    // Push a first op so the async op's id is not 1 (ids start at 1).
    e.push(OpSpec::new(Job(Box::new(|_| Ok(())))).writes(std::slice::from_ref(&v)))
        .unwrap();
    let id = e
        .push(
            OpSpec::new(Job(Box::new(move |t| {
                *s.lock().unwrap() = t;
                Ok(())
            })))
            .writes(std::slice::from_ref(&v))
            .asynchronous()
            .name("handed"),
        )
        .unwrap();
    assert!(id > 1);
    let token = loop {
        if let Some(t) = slot.lock().unwrap().take() {
            break t;
        }
        std::thread::yield_now();
    };
    assert_eq!(token.op_id(), id);
    assert!(!token.is_completed());
    let shown = format!("{token:?}");
    assert!(
        shown.contains("'handed'") && shown.contains(&format!("#{id}")),
        "{shown}"
    );
    token.complete(Ok(())).unwrap();
    assert!(token.is_completed());
    assert_eq!(token.complete(Ok(())), Err(Error::AlreadyCompleted));
    e.wait_for_var(&v).unwrap();
}

/// Two threads of the same process: the second waits for the first's
/// registration instead of running it again.
#[test]
fn once_flag_makes_a_second_thread_of_the_process_wait() {
    let flag = OnceFlag::new();
    let runs = AtomicU32::new(0);
    let (started_tx, started_rx) = mpsc::channel();
    let (calling_tx, calling_rx) = mpsc::channel();
    let (flag, runs) = (&flag, &runs);
    std::thread::scope(|s| {
        s.spawn(move || {
            flag.call_once(7, || {
                runs.fetch_add(1, Ordering::SeqCst);
                started_tx.send(()).unwrap();
                // Wait until the other thread is about to call, then a bit
                // more so it is inside `call_once` (the count below is the
                // same however long this takes).
                calling_rx.recv().unwrap();
                std::thread::sleep(Duration::from_millis(50));
                Ok::<(), ()>(())
            })
            .unwrap();
        });
        s.spawn(move || {
            started_rx.recv().unwrap();
            calling_tx.send(()).unwrap();
            flag.call_once(7, || {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<(), ()>(())
            })
            .unwrap();
            // It returns only once the first run is done.
            assert!(flag.is_done());
        });
    });
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// `Debug` says whether a `LazySlot` is filled.
#[test]
fn lazy_slot_debug_shows_whether_it_is_filled() {
    let slot: LazySlot<u32> = LazySlot::new();
    assert!(format!("{slot:?}").contains("filled: false"));
    slot.get_or_try_init(|| Ok::<_, ()>(3)).unwrap();
    assert!(format!("{slot:?}").contains("filled: true"));
}

/// `Debug` of a held domain quiesce names how many engines it holds.
#[test]
fn domain_quiesce_debug_names_its_engines() {
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    let _e = CoreEngine::<Job>::new(domain, Default::default()).unwrap();
    let held = domain.quiesce_all(Duration::from_secs(10)).unwrap();
    assert_eq!(held.engines(), 1);
    let shown = format!("{held:?}");
    assert!(
        shown.contains("engines: 1") && shown.contains("timed_out: []"),
        "{shown}"
    );
}

/// An async body that panics while holding its own token: the op fails
/// with the panic, not with `TokenDropped` (the token's drop during the
/// unwind leaves the op to the worker).
#[test]
fn an_async_body_that_panics_holding_its_token_reports_the_panic() {
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    let e = CoreEngine::<Job>::new(domain, Default::default()).unwrap();
    let v = e.new_var().unwrap();
    e.push(
        OpSpec::new(Job(Box::new(|t| {
            let _held = t;
            panic!("boom in the body");
        })))
        .writes(std::slice::from_ref(&v))
        .asynchronous(),
    )
    .unwrap();
    match e.wait_for_var(&v) {
        Err(Error::Poisoned(err)) => assert_eq!(
            err.kind(),
            &OpErrorKind::Panicked("boom in the body".to_string())
        ),
        other => panic!("{other:?}"),
    }
}
