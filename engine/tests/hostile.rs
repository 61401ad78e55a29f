//! What a careless or hostile user does to the Rust API: each probe
//! asserts a typed error (or the documented result) and then that the
//! engine still runs an op and answers a wait. No probe may panic, abort
//! or hang (every wait from outside has a deadline).

mod support;

use forksafe::{Config, CoreConfig, Engine, Error, OpErrorKind, MAX_OP_VARS};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

fn engine() -> Arc<Engine> {
    Arc::new(support::engine(1, 1))
}

/// The engine still runs an op and answers a wait.
fn works(e: &Engine) {
    let v = e.new_var().unwrap();
    let n = Arc::new(AtomicU32::new(0));
    let m = n.clone();
    e.op("still works")
        .writes(&[&v])
        .run(move || {
            m.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    e.wait_for_var_timeout(&v, LIMIT).unwrap();
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

fn config_error(c: Config) {
    assert!(
        matches!(Engine::new(c.clone()), Err(Error::InvalidConfig(_))),
        "{c:?}"
    );
}

#[test]
fn config_extremes_are_invalid_config() {
    let base = Config::default;
    config_error(Config {
        core: CoreConfig {
            compute_workers: 0,
            ..base().core
        },
        ..base()
    });
    config_error(Config {
        core: CoreConfig {
            compute_workers: 1025,
            ..base().core
        },
        ..base()
    });
    config_error(Config {
        core: CoreConfig {
            host_workers: 0,
            ..base().core
        },
        ..base()
    });
    config_error(Config {
        core: CoreConfig {
            host_workers: usize::MAX,
            ..base().core
        },
        ..base()
    });
    config_error(Config {
        core: CoreConfig {
            max_pending: Some(0),
            ..base().core
        },
        ..base()
    });
    config_error(Config {
        core: CoreConfig {
            thread_name: String::new(),
            ..base().core
        },
        ..base()
    });
    config_error(Config {
        core: CoreConfig {
            thread_name: "x".repeat(33),
            ..base().core
        },
        ..base()
    });
    config_error(Config {
        core: CoreConfig {
            thread_name: "a\0b".into(),
            ..base().core
        },
        ..base()
    });
    config_error(Config {
        core: CoreConfig {
            worker_stack_size: Some(0),
            ..base().core
        },
        ..base()
    });
    config_error(Config {
        core: CoreConfig {
            max_stand_ins: 1025,
            ..base().core
        },
        ..base()
    });
    config_error(Config {
        fork_drain: Duration::ZERO,
        ..base()
    });
    config_error(Config {
        shutdown_deadline: Duration::ZERO,
        ..base()
    });
    works(&engine());
}

#[test]
fn a_stack_the_os_cannot_give_is_a_spawn_error() {
    let got = Engine::new(Config {
        core: CoreConfig {
            worker_stack_size: Some(1 << 50),
            ..CoreConfig::default()
        },
        ..Config::default()
    });
    assert!(matches!(got, Err(Error::Spawn(_))), "{got:?}");
    works(&engine());
}

#[test]
fn a_var_of_another_engine_is_foreign_everywhere() {
    let (e, other) = (engine(), engine());
    let v = other.new_var().unwrap();
    assert_eq!(e.op("x").reads(&[&v]).run(|| {}), Err(Error::ForeignVar));
    assert_eq!(e.op("x").writes(&[&v]).run(|| {}), Err(Error::ForeignVar));
    assert_eq!(e.wait_for_var(&v), Err(Error::ForeignVar));
    assert_eq!(e.var_version(&v), Err(Error::ForeignVar));
    assert_eq!(e.var_poison(&v), Err(Error::ForeignVar));
    assert_eq!(e.clear_poison(&v), Err(Error::ForeignVar));
    assert_eq!(e.delete_var(&v), Err(Error::ForeignVar));
    works(&e);
    works(&other);
}

#[test]
fn a_var_named_twice_is_a_duplicate() {
    let e = engine();
    let v = e.new_var().unwrap();
    assert_eq!(
        e.op("x").reads(&[&v, &v]).run(|| {}),
        Err(Error::DuplicateVar)
    );
    assert_eq!(
        e.op("x").writes(&[&v, &v]).run(|| {}),
        Err(Error::DuplicateVar)
    );
    assert_eq!(
        e.op("x").reads(&[&v]).writes(&[&v]).run(|| {}),
        Err(Error::DuplicateVar)
    );
    assert!(matches!(
        e.op("x").reads(&[&v, &v]).run_with(|_| ()),
        Err(Error::DuplicateVar)
    ));
    works(&e);
}

#[test]
fn a_deleted_var_is_refused_and_its_deletion_runs_once() {
    let e = engine();
    let v = e.new_var().unwrap();
    e.delete_var(&v).unwrap();
    assert_eq!(e.delete_var(&v), Err(Error::DeletedVar));
    assert_eq!(e.op("x").reads(&[&v]).run(|| {}), Err(Error::DeletedVar));
    e.wait_all_timeout(LIMIT).unwrap();
    assert_eq!(e.wait_for_var(&v), Err(Error::DeletedVar));
    works(&e);
}

#[test]
fn zero_timeouts_are_zero_timeout() {
    let e = engine();
    let v = e.new_var().unwrap();
    assert_eq!(
        e.wait_for_var_timeout(&v, Duration::ZERO),
        Err(Error::ZeroTimeout)
    );
    assert_eq!(e.wait_all_timeout(Duration::ZERO), Err(Error::ZeroTimeout));
    assert_eq!(
        e.wait_for_op_timeout(0, Duration::ZERO),
        Err(Error::ZeroTimeout)
    );
    assert!(matches!(e.quiesce(Duration::ZERO), Err(Error::ZeroTimeout)));
    assert!(matches!(
        e.shutdown(Duration::ZERO),
        Err(Error::ZeroTimeout)
    ));
    works(&e);
}

#[test]
fn the_longest_timeouts_are_no_deadline_not_a_panic() {
    let e = engine();
    let v = e.new_var().unwrap();
    e.op("w").writes(&[&v]).run(|| {}).unwrap();
    e.wait_for_var_timeout(&v, Duration::MAX).unwrap();
    e.wait_all_timeout(Duration::MAX).unwrap();
    let id = e.op("o").run(|| {}).unwrap();
    e.wait_for_op_timeout(id, Duration::MAX).unwrap();
    drop(e.quiesce(Duration::MAX).unwrap());
    works(&e);
    e.shutdown(Duration::MAX).unwrap();
}

#[test]
fn waits_for_unknown_or_finished_ops_return_at_once() {
    let e = engine();
    e.wait_for_op(u64::MAX).unwrap();
    let id = e.op("done").run(|| {}).unwrap();
    e.wait_for_op(id).unwrap();
    e.wait_for_op(id).unwrap();
    assert!(!e.is_running(id).unwrap());
    assert!(!e.is_running(u64::MAX).unwrap());
    works(&e);
}

#[test]
fn too_many_vars_is_refused() {
    let e = engine();
    let vars: Vec<_> = (0..=MAX_OP_VARS).map(|_| e.new_var().unwrap()).collect();
    let all: Vec<_> = vars.iter().collect();
    assert_eq!(e.op("x").reads(&all).run(|| {}), Err(Error::TooManyVars));
    let (r, w) = all.split_at(MAX_OP_VARS / 2);
    assert_eq!(
        e.op("x").reads(r).writes(w).run(|| {}),
        Err(Error::TooManyVars)
    );
    works(&e);
}

#[test]
fn after_shutdown_every_call_that_needs_the_engine_is_shut_down() {
    let e = engine();
    let v = e.new_var().unwrap();
    let d = e.data(1_u8).unwrap();
    e.shutdown(LIMIT).unwrap();
    assert_eq!(e.new_var(), Err(Error::ShutDown));
    assert!(matches!(e.data(0_u8), Err(Error::ShutDown)));
    assert_eq!(e.op("x").run(|| {}), Err(Error::ShutDown));
    assert!(matches!(e.op("x").run_with(|_| ()), Err(Error::ShutDown)));
    assert_eq!(e.clear_poison(&v), Err(Error::ShutDown));
    assert_eq!(e.delete_var(&v), Err(Error::ShutDown));
    assert!(matches!(e.get(&d), Err(Error::ShutDown)));
    // Reads of what exists, and waits with nothing left, still answer.
    assert_eq!(e.var_version(&v), Ok(0));
    e.wait_for_var(&v).unwrap();
    e.wait_all().unwrap();
    assert_eq!(
        e.shutdown(LIMIT).unwrap().cancelled.len(),
        0,
        "a second shutdown"
    );
}

#[test]
fn bodies_that_panic_with_any_payload_poison_and_the_engine_goes_on() {
    let e = engine();
    let v = e.new_var().unwrap();
    e.op("str").writes(&[&v]).run(|| panic!("a str")).unwrap();
    e.op("string")
        .writes(&[&v])
        .run_on_error()
        .run(|| std::panic::panic_any(String::from("s")))
        .unwrap();
    e.op("number")
        .writes(&[&v])
        .run_on_error()
        .run(|| std::panic::panic_any(7_u64))
        .unwrap();
    e.op("unit")
        .writes(&[&v])
        .run_on_error()
        .run(|| std::panic::panic_any(()))
        .unwrap();
    match e.wait_all_timeout(LIMIT) {
        Err(Error::OpsFailed(errs)) => {
            assert_eq!(errs.len(), 4);
            assert!(errs
                .iter()
                .all(|x| matches!(x.kind(), OpErrorKind::Panicked(_))));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(e.wait_for_var(&v), Err(Error::Poisoned(_))));
    e.clear_poison(&v).unwrap();
    e.wait_for_var_timeout(&v, LIMIT).unwrap();
    works(&e);
}

#[test]
fn a_failing_try_run_keeps_its_error_value() {
    #[derive(Debug)]
    struct Mine(u32);
    impl std::fmt::Display for Mine {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "mine {}", self.0)
        }
    }
    impl std::error::Error for Mine {}
    let e = engine();
    let v = e.new_var().unwrap();
    e.op("fails")
        .writes(&[&v])
        .try_run(|| Err(Mine(3)))
        .unwrap();
    let Err(Error::Poisoned(err)) = e.wait_for_var(&v) else {
        panic!("not poisoned")
    };
    let mine = err.body_error().and_then(|b| b.downcast_ref::<Mine>());
    assert_eq!(mine.map(|m| m.0), Some(3));
    let _ = e.wait_all();
    works(&e);
}

#[test]
fn a_handle_of_a_panicking_body_is_its_error_and_a_dropped_handle_is_fine() {
    let e = engine();
    let h = e.op("boom").run_with(|_| -> u8 { panic!("boom") }).unwrap();
    assert!(matches!(h.wait(), Err(Error::Poisoned(_))));
    drop(e.op("dropped").run_with(|_| 1_u8).unwrap());
    let _ = e.wait_all_timeout(LIMIT);
    works(&e);
}

#[test]
fn a_token_completed_twice_or_dropped_is_typed() {
    let e = engine();
    let (tx, rx) = channel();
    e.op("twice")
        .run_async(move |t| {
            let first = t.complete(Ok(()));
            tx.send((first, t.complete(Ok(())))).unwrap();
        })
        .unwrap();
    let v = e.new_var().unwrap();
    e.op("dropped").writes(&[&v]).run_async(drop).unwrap();
    let (first, second) = rx.recv_timeout(LIMIT).unwrap();
    assert_eq!(first, Ok(()));
    assert_eq!(second, Err(Error::AlreadyCompleted));
    let Err(Error::Poisoned(err)) = e.wait_for_var_timeout(&v, LIMIT) else {
        panic!("a dropped token did not fail its op")
    };
    assert_eq!(err.kind(), &OpErrorKind::TokenDropped);
    let _ = e.wait_all();
    works(&e);
}

#[test]
fn the_pending_bound_is_full_for_try_and_for_pushes_inside_ops() {
    let e = Arc::new(
        Engine::new(Config {
            core: CoreConfig {
                compute_workers: 1,
                host_workers: 1,
                max_pending: Some(1),
                ..CoreConfig::default()
            },
            ..Config::default()
        })
        .unwrap(),
    );
    let (tx, rx) = channel();
    let e2 = e.clone();
    e.op("holds the slot")
        .run(move || tx.send(e2.op("inside").run(|| {})).unwrap())
        .unwrap();
    assert_eq!(rx.recv_timeout(LIMIT).unwrap(), Err(Error::Full));
    e.wait_all_timeout(LIMIT).unwrap();
    works(&e);
}

#[test]
fn waits_inside_ops_on_themselves_are_wait_on_self() {
    let e = engine();
    let v = e.new_var().unwrap();
    let (tx, rx) = channel();
    let (e2, v2) = (e.clone(), v.clone());
    e.op("me")
        .writes(&[&v])
        .run(move || {
            let on_var = e2.wait_for_var(&v2);
            let me = e2.current_op().unwrap();
            let on_op = e2.wait_for_op(me);
            let behind = e2.op("behind").reads(&[&v2]).run_with(|_| ()).unwrap();
            tx.send((on_var, on_op, behind.wait(), e2.wait_all()))
                .unwrap();
        })
        .unwrap();
    let (on_var, on_op, behind, all) = rx.recv_timeout(LIMIT).unwrap();
    for got in [on_var, on_op, behind, all] {
        assert!(matches!(got, Err(Error::WaitOnSelf { .. })), "{got:?}");
    }
    e.wait_all_timeout(LIMIT).unwrap();
    works(&e);
}

#[test]
fn a_scope_inside_an_op_is_refused() {
    let e = engine();
    let (tx, rx) = channel();
    let e2 = e.clone();
    e.op("outer")
        .run(move || tx.send(e2.scope(|_| ()).err()).unwrap())
        .unwrap();
    assert_eq!(rx.recv_timeout(LIMIT).unwrap(), Some(Error::ScopeInsideOp));
    works(&e);
}

#[test]
fn data_access_outside_what_the_op_names_is_undeclared() {
    let e = engine();
    let (a, b) = (e.data(1_u32).unwrap(), e.data(2_u32).unwrap());
    let (a2, b2) = (a.clone(), b.clone());
    let h = e
        .op("reads a")
        .reads(&[a.var()])
        .run_with(move |acc| (acc.read(&b2).err(), acc.write(&a2).err()))
        .unwrap();
    assert_eq!(
        h.wait().unwrap(),
        (Some(Error::UndeclaredData), Some(Error::UndeclaredData))
    );
    works(&e);
}

#[test]
fn into_inner_of_shared_data_gives_it_back() {
    let e = engine();
    let d = e.data(vec![1, 2]).unwrap();
    let other = d.clone();
    let not = e.into_inner(d).unwrap_err();
    assert_eq!(not.error, Error::DataShared);
    drop(other);
    assert_eq!(e.into_inner(not.data).unwrap(), vec![1, 2]);
    works(&e);
}

#[test]
fn get_of_poisoned_data_is_poisoned_until_cleared() {
    let e = engine();
    let d = e.data(5_i32).unwrap();
    e.op("fails")
        .writes(&[d.var()])
        .run(|| panic!("no"))
        .unwrap();
    assert!(matches!(e.get(&d), Err(Error::Poisoned(_))));
    assert!(matches!(e.get(&d), Err(Error::Poisoned(_))));
    e.clear_poison(d.var()).unwrap();
    assert_eq!(e.get(&d), Ok(5));
    let _ = e.wait_all();
    works(&e);
}

#[test]
fn a_quiesce_guard_that_outlives_shutdown_is_inert() {
    let e = engine();
    let g = e.quiesce(LIMIT).unwrap();
    let id = e.op("deferred").run(|| {}).unwrap();
    // Shutdown ends the quiesce: the op runs within its deadline or is
    // cancelled, and either way is over.
    e.shutdown(Duration::from_millis(50)).unwrap();
    e.wait_for_op_timeout(id, LIMIT).unwrap();
    assert!(!e.is_running(id).unwrap());
    drop(g);
    assert_eq!(e.state(), forksafe::State::Stopped);
    assert_eq!(e.pending().unwrap(), 0);
}

#[test]
fn pushes_racing_a_shutdown_are_accepted_or_shut_down() {
    let e = engine();
    let pushers: Vec<_> = (0..4)
        .map(|_| {
            let e = e.clone();
            std::thread::spawn(move || {
                let mut refused = 0;
                for _ in 0..2000 {
                    match e.op("racer").run(|| {}) {
                        Ok(_) => {}
                        Err(Error::ShutDown) => refused += 1,
                        Err(other) => panic!("{other:?}"),
                    }
                }
                refused
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(2));
    e.shutdown(LIMIT).unwrap();
    let refused: u32 = pushers.into_iter().map(|p| p.join().unwrap()).sum();
    assert!(refused <= 8000);
    assert_eq!(e.op("late").run(|| {}), Err(Error::ShutDown));
}

#[test]
fn dropping_an_engine_with_ops_pending_returns() {
    let e = engine();
    let v = e.new_var().unwrap();
    for _ in 0..1000 {
        e.op("pending")
            .writes(&[&v])
            .run(|| std::thread::sleep(Duration::from_micros(10)))
            .unwrap();
    }
    drop(e);
    works(&engine());
}

#[test]
fn a_fork_report_outside_a_child_is_none() {
    let e = engine();
    assert_eq!(e.fork_report().unwrap(), None);
    works(&e);
}

#[test]
fn trace_calls_out_of_order_are_harmless() {
    let e = engine();
    e.trace_stop().unwrap();
    let empty = e.trace_take().unwrap();
    assert!(empty.events.is_empty());
    e.trace_start().unwrap();
    e.trace_start().unwrap();
    works(&e);
    e.trace_stop().unwrap();
    assert!(!e.trace_take().unwrap().events.is_empty());
}
