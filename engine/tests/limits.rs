//! Limits a user can reach: an op naming `MAX_OP_VARS` vars through every
//! kind of push, and a body that borrows thousands of data vars at once.

mod support;

use forksafe::{Error, MAX_OP_VARS};
use support::engine;

#[test]
fn max_op_vars_is_accepted_by_every_push_and_one_more_is_refused() {
    let e = engine(1, 1);
    let vars: Vec<_> = (0..=MAX_OP_VARS).map(|_| e.new_var().unwrap()).collect();
    let at: Vec<_> = vars[..MAX_OP_VARS].iter().collect();
    let over: Vec<_> = vars.iter().collect();
    e.op("plain").reads(&at).run(|| {}).unwrap();
    let h = e.op("handle").writes(&at).run_with(|_| 7_u8).unwrap();
    assert_eq!(h.wait(), Ok(7));
    let h = e
        .op("try")
        .reads(&at)
        .try_run_with(|_| Ok::<_, String>(1_u8));
    assert_eq!(h.unwrap().wait(), Ok(Ok(1)));
    assert_eq!(
        e.op("plain").reads(&over).run(|| {}),
        Err(Error::TooManyVars)
    );
    assert!(matches!(
        e.op("handle").writes(&over).run_with(|_| ()),
        Err(Error::TooManyVars)
    ));
    e.wait_all().unwrap();
    assert_eq!(e.pending().unwrap(), 0);
}

#[test]
fn a_body_holds_many_borrows_at_once() {
    let e = engine(1, 1);
    let n = 20_000;
    let data: Vec<_> = (0..n).map(|i| e.data(i as u64).unwrap()).collect();
    let out = e.data(0_u64).unwrap();
    let reads: Vec<_> = data.iter().map(|d| d.var()).collect();
    let (data2, out2) = (data.clone(), out.clone());
    let h = e
        .op("sum")
        .reads(&reads)
        .writes(&[out.var()])
        .run_with(move |acc| {
            let held: Vec<_> = data2.iter().map(|d| acc.read(d).unwrap()).collect();
            // A second shared borrow of a held var is fine; a write of a
            // read var is undeclared; the sum is over every value.
            let again = acc.read(&data2[n / 2]).map(|v| *v);
            let write_read = acc.write(&data2[0]).err();
            let total: u64 = held.iter().map(|v| **v).sum();
            drop(held);
            let mut w = acc.write(&out2).unwrap();
            // While the write is held, no other borrow of it.
            let twice = acc.read(&out2).err();
            *w = total;
            (again, write_read, twice)
        })
        .unwrap();
    let (again, write_read, twice) = h.wait().unwrap();
    assert_eq!(again, Ok((n / 2) as u64));
    assert_eq!(write_read, Some(Error::UndeclaredData));
    assert_eq!(twice, Some(Error::DataBorrowed));
    assert_eq!(e.get(&out), Ok((0..n as u64).sum()));
}
