//! Data vars and op handles on real threads: what a body may borrow, the
//! typed errors for bad input, and what a failure leaves behind.

use forksafe::{Config, CoreConfig, Engine, Error, OpErrorKind};

fn engine() -> Engine {
    Engine::new(Config::default()).expect("engine")
}

#[test]
fn a_body_borrows_only_what_its_op_names_in_the_mode_it_names() {
    let e = engine();
    let (a, b) = (e.data(1_u32).unwrap(), e.data(2_u32).unwrap());
    let (ra, rb) = (a.clone(), b.clone());
    let h = e
        .op("read a only")
        .reads(&[a.var()])
        .run_with(move |acc| {
            (
                acc.read(&ra).map(|v| *v),
                acc.write(&ra).err(),
                acc.read(&rb).err(),
            )
        })
        .unwrap();
    assert_eq!(
        h.wait().unwrap(),
        (
            Ok(1),
            Some(Error::UndeclaredData),
            Some(Error::UndeclaredData)
        )
    );
}

#[test]
fn a_body_cannot_alias_its_own_borrows() {
    let e = engine();
    let d = e.data(vec![0_u8]).unwrap();
    let w = d.clone();
    let h = e
        .op("alias")
        .writes(&[d.var()])
        .run_with(move |acc| {
            let first = acc.write(&w).unwrap();
            let again = acc.write(&w).err();
            let read = acc.read(&w).err();
            drop(first);
            // Released: borrowing again is fine, and two reads share.
            let (r1, r2) = (acc.read(&w).unwrap(), acc.read(&w).unwrap());
            (again, read, r1.len() + r2.len())
        })
        .unwrap();
    assert_eq!(
        h.wait().unwrap(),
        (Some(Error::DataBorrowed), Some(Error::DataBorrowed), 2)
    );
}

#[test]
fn data_of_another_engine_is_refused() {
    let (e, other) = (engine(), engine());
    let foreign = other.data(5_u32).unwrap();
    assert_eq!(
        e.op("foreign")
            .reads(&[foreign.var()])
            .run_with(|_| ())
            .err(),
        Some(Error::ForeignVar)
    );
    let f = foreign.clone();
    let h = e
        .op("touch foreign")
        .run_with(move |acc| acc.read(&f).err())
        .unwrap();
    assert_eq!(h.wait().unwrap(), Some(Error::UndeclaredData));
    assert_eq!(other.get(&foreign), Ok(5));
}

#[test]
fn a_panic_holding_a_write_poisons_the_value_and_get_refuses_it() {
    let e = engine();
    let d = e.data(String::from("good")).unwrap();
    let w = d.clone();
    let h = e
        .op("tear")
        .writes(&[d.var()])
        .run_with(move |acc| {
            let mut s = acc.write(&w).unwrap();
            s.clear();
            s.push_str("half");
            panic!("failed half-way");
        })
        .unwrap();
    match h.wait() {
        Err(Error::Poisoned(err)) => assert!(matches!(err.kind(), OpErrorKind::Panicked(_))),
        other => panic!("wait gave {other:?}"),
    }
    assert!(matches!(e.get(&d), Err(Error::Poisoned(_))));
    // into_inner gives the data var back, unchanged.
    let back = e.into_inner(d).unwrap_err();
    assert!(matches!(back.error, Error::Poisoned(_)));
    let d = back.data;
    // Clearing the poison is the user's explicit choice; the next write
    // makes the value good again.
    e.clear_poison(d.var()).unwrap();
    let w = d.clone();
    e.op("repair")
        .writes(&[d.var()])
        .run_with(move |acc| acc.write(&w).map(|mut s| *s = "repaired".into()))
        .unwrap();
    assert_eq!(e.get(&d).unwrap(), "repaired");
}

#[test]
fn a_typed_failure_comes_back_typed_and_skips_what_depends_on_it() {
    #[derive(Debug, PartialEq)]
    struct Parse(String);
    impl std::fmt::Display for Parse {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot parse {:?}", self.0)
        }
    }
    let e = engine();
    let n = e.data(0_i64).unwrap();
    let w = n.clone();
    let parse = e
        .op("parse")
        .writes(&[n.var()])
        .try_run_with(move |acc| {
            let parsed = "x1".parse::<i64>().map_err(|_| Parse("x1".into()))?;
            *acc.write(&w).unwrap() = parsed;
            Ok(())
        })
        .unwrap();
    let r = n.clone();
    let double = e
        .op("double")
        .reads(&[n.var()])
        .run_with(move |acc| acc.read(&r).map(|v| *v * 2))
        .unwrap();
    assert_eq!(parse.wait().unwrap(), Err(Parse("x1".into())));
    match double.wait() {
        Err(Error::Poisoned(err)) => {
            assert_eq!(
                err.op().name,
                "parse",
                "the skipped op passes parse's error"
            );
            assert_eq!(
                err.kind(),
                &OpErrorKind::Failed("cannot parse \"x1\"".into())
            );
        }
        other => panic!("the dependent op gave {other:?}"),
    }
}

#[test]
fn a_deleted_data_var_refuses_new_ops_and_into_inner_reports_it() {
    let e = engine();
    let d = e.data(3_u8).unwrap();
    let w = d.clone();
    e.op("before delete")
        .writes(&[d.var()])
        .run_with(move |acc| acc.write(&w).map(|mut v| *v += 1))
        .unwrap();
    e.delete_var(d.var()).unwrap();
    assert_eq!(e.get(&d), Err(Error::DeletedVar));
    let back = e.into_inner(d).unwrap_err();
    assert_eq!(back.error, Error::DeletedVar);
}

#[test]
fn into_inner_waits_for_readers_and_refuses_while_shared() {
    let e = engine();
    let d = e.data(vec![1, 2, 3]).unwrap();
    let r = d.clone();
    let len = e
        .op("len")
        .reads(&[d.var()])
        .run_with(move |acc| acc.read(&r).map(|v| v.len()))
        .unwrap();
    let extra = d.clone();
    let back = e.into_inner(d).unwrap_err();
    assert_eq!(back.error, Error::DataShared);
    drop(extra);
    assert_eq!(len.wait().unwrap(), Ok(3));
    assert_eq!(e.into_inner(back.data).unwrap(), vec![1, 2, 3]);
}

#[test]
fn a_shutdown_that_cancels_an_op_ends_its_handle_with_shut_down() {
    let e = Engine::new(Config {
        core: CoreConfig {
            compute_workers: 1,
            ..CoreConfig::default()
        },
        ..Config::default()
    })
    .unwrap();
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let (started, has_started) = std::sync::mpsc::channel::<()>();
    let blocker = e
        .op("blocker")
        .run_with(move |_| {
            let _ = started.send(());
            let _ = wait.recv();
        })
        .unwrap();
    // The only worker is in the blocker's body before the shutdown starts
    // (the test waited on a 1 ms deadline for that before, and failed
    // under load when the worker had not started yet).
    has_started.recv().unwrap();
    let queued = e.op("queued").run_with(|_| 1).unwrap();
    // A compute body cannot be stopped: shutdown returns at its deadline
    // listing the blocker as still running, with the queued op cancelled.
    let report = e.shutdown(std::time::Duration::from_millis(1)).unwrap();
    let _ = go.send(());
    assert_eq!(report.cancelled.len(), 1, "{report:?}");
    blocker.wait().unwrap();
    assert_eq!(queued.wait(), Err(Error::ShutDown));
}
