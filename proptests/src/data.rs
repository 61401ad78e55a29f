//! Data vars against the serial reference (I9, the access grant): several
//! threads push ops that borrow the values of a few data vars — a write
//! appends the op's label to the var's log, a read copies the log — on two
//! compute workers and a host worker. The serial reference replays the
//! same ops one at a time in the engine's id order; every read and every
//! final log must match it. An access the grants did not order would show
//! as a read of a log a later write already changed (or a torn one).

use forksafe::{Config, CoreConfig, Data, Engine, Lane};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// How many data vars a program uses.
pub const DATA_VARS: usize = 4;

/// One op: the data vars it names (distinct), each read or written, and
/// its lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataOp {
    /// `(var index, write)`, at most one entry per var.
    pub uses: Vec<(usize, bool)>,
    /// Host lane instead of compute.
    pub host: bool,
}

/// A program: one sequence of ops per pushing thread.
pub type DataProgram = Vec<Vec<DataOp>>;

/// Programs of 1 to 3 pushers with up to 24 ops each.
pub fn data_program() -> impl Strategy<Value = DataProgram> {
    let op = (
        prop::collection::btree_map(0..DATA_VARS, any::<bool>(), 1..=2),
        any::<bool>(),
    )
        .prop_map(|(uses, host)| DataOp {
            uses: uses.into_iter().collect(),
            host,
        });
    prop::collection::vec(prop::collection::vec(op, 0..24), 1..=3)
}

/// A label naming op `i` of pusher `p`.
fn label(p: usize, i: usize) -> u32 {
    (p as u32) << 16 | i as u32
}

type Log = Vec<u32>;
/// What one op's body read: `(var, log)` per read.
type Seen = Vec<(usize, Log)>;

/// Runs `prog` on a fresh engine and checks it against the reference.
pub fn run_data_program(prog: &DataProgram) -> Result<String, String> {
    let engine = Engine::new(Config {
        core: CoreConfig {
            compute_workers: 2,
            host_workers: 1,
            ..CoreConfig::default()
        },
        ..Config::default()
    })
    .map_err(|e| e.to_string())?;
    let vars: Vec<Data<Log>> = (0..DATA_VARS)
        .map(|_| engine.data(Vec::new()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    // (op id, label, op, what it read), from every pusher.
    let mut ran: Vec<(u64, u32, DataOp, Seen)> = std::thread::scope(|s| {
        let pushers: Vec<_> = prog
            .iter()
            .enumerate()
            .map(|(p, ops)| {
                let (engine, vars) = (&engine, &vars);
                s.spawn(move || push_all(engine, vars, p, ops))
            })
            .collect();
        let mut all = Vec::new();
        for h in pushers {
            all.extend(h.join().map_err(|_| "a pusher panicked".to_string())??);
        }
        Ok::<_, String>(all)
    })?;
    ran.sort_by_key(|(id, ..)| *id);
    // The serial reference, in id order.
    let mut logs: Vec<Log> = vec![Vec::new(); DATA_VARS];
    for (id, lbl, op, seen) in &ran {
        let mut expect: Seen = Vec::new();
        for &(v, write) in &op.uses {
            if !write {
                expect.push((v, logs[v].clone()));
            }
        }
        if *seen != expect {
            return Err(format!(
                "op #{id} ({op:?}) read {seen:?}, the serial reference reads {expect:?}"
            ));
        }
        for &(v, write) in &op.uses {
            if write {
                logs[v].push(*lbl);
            }
        }
    }
    for (v, d) in vars.into_iter().enumerate() {
        let got = engine.into_inner(d).map_err(|n| n.error.to_string())?;
        if got != logs[v] {
            return Err(format!(
                "var {v} ends as {got:?}, the serial reference as {:?}",
                logs[v]
            ));
        }
    }
    Ok(format!("{} ops", ran.len()))
}

/// Pushes pusher `p`'s ops and waits for each handle; returns, per op,
/// its id, label, op and what it read.
fn push_all(
    engine: &Engine,
    vars: &[Data<Log>],
    p: usize,
    ops: &[DataOp],
) -> Result<Vec<(u64, u32, DataOp, Seen)>, String> {
    let mut handles = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let lbl = label(p, i);
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        for &(v, w) in &op.uses {
            if w {
                writes.push(vars[v].var());
            } else {
                reads.push(vars[v].var());
            }
        }
        let mine: BTreeMap<usize, (bool, Data<Log>)> = op
            .uses
            .iter()
            .map(|&(v, w)| (v, (w, vars[v].clone())))
            .collect();
        let h = engine
            .op(format!("d{lbl}"))
            .reads(&reads)
            .writes(&writes)
            .lane(if op.host { Lane::Host } else { Lane::Compute })
            .run_with(move |acc| {
                let mut seen = Seen::new();
                for (v, (write, d)) in &mine {
                    if *write {
                        acc.write(d)?.push(lbl);
                    } else {
                        seen.push((*v, acc.read(d)?.clone()));
                    }
                }
                Ok::<_, forksafe::Error>(seen)
            })
            .map_err(|e| format!("push: {e}"))?;
        handles.push((h, lbl, op.clone()));
    }
    let mut out = Vec::new();
    for (h, lbl, op) in handles {
        let id = h.id();
        let seen = h
            .wait()
            .map_err(|e| format!("op {lbl}: {e}"))?
            .map_err(|e| format!("op {lbl} body: {e}"))?;
        out.push((id, lbl, op, seen));
    }
    Ok(out)
}
