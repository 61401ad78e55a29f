//! Scenarios of the worker-pool models (`core/src/pool.rs`), written once
//! against the core's sync facade so that the loom models
//! (`loom_pool.rs`, `loom_controls.rs`) and the shuttle models
//! (`shuttle_pool.rs`, `shuttle_controls.rs`) run the very same code.
//!
//! - [`stand_in_rounds`]: the stand-in lifecycle. Each round makes the only
//!   worker of a lane wait inside an op for an op that becomes ready behind
//!   it, so the lane must bring a stand-in to life (round 1: start a
//!   thread; later rounds: recall the spare the first one retired as); at
//!   the end, shutdown wakes every parked worker. A lost wake-up anywhere
//!   on that path leaves the wait blocked for ever: a deadlock both model
//!   checkers report.
//! - [`push_inside_at_the_bound`]: the bound rule. With `max_pending = 1`
//!   an op's body pushes; the push must fail with `Full` at once, since the
//!   op itself holds the only slot.

#![allow(dead_code)]

use forksafe_core::sync::{spin_step, Arc, Mutex};
use forksafe_core::{
    BodyError, CompletionToken, Config, CoreEngine, Error, ForkDomain, Lane, OpSpec, Payload, Var,
};
use std::time::Duration;

/// A timeout no model reaches (model clocks move only when told to).
pub const LONG: Duration = Duration::from_secs(1);

/// Where a held op leaves its completion token.
pub type Slot = Arc<Mutex<Option<CompletionToken<PoolJob>>>>;
/// Where a body leaves the result of its engine call.
pub type Out = Arc<Mutex<Option<forksafe_core::Result<()>>>>;

/// The payload of the pool models.
pub enum PoolJob {
    /// An async op that leaves its token in the slot (its writes stay
    /// pending until someone completes it).
    Hold(Slot),
    /// Does nothing.
    Nop,
    /// Completes the held op's token (making ops behind it ready), then
    /// waits inside the op for `var`.
    ReleaseThenWait {
        held: Slot,
        engine: Arc<CoreEngine<PoolJob>>,
        var: Var<PoolJob>,
        out: Out,
    },
    /// Pushes an op from inside the op.
    PushInside {
        engine: Arc<CoreEngine<PoolJob>>,
        out: Out,
    },
}

impl Payload for PoolJob {
    fn run(self, token: Option<CompletionToken<Self>>) -> Result<(), BodyError> {
        match self {
            PoolJob::Hold(slot) => {
                *slot.lock() = token;
                Ok(())
            }
            PoolJob::Nop => Ok(()),
            PoolJob::ReleaseThenWait {
                held,
                engine,
                var,
                out,
            } => {
                let token = loop {
                    if let Some(t) = held.lock().take() {
                        break t;
                    }
                    spin_step(0);
                };
                token.complete(Ok(())).map_err(|e| e.to_string())?;
                let r = engine.wait_for_var(&var);
                *out.lock() = Some(r);
                Ok(())
            }
            PoolJob::PushInside { engine, out } => {
                let r = engine.push(OpSpec::new(PoolJob::Nop)).map(|_| ());
                *out.lock() = Some(r);
                Ok(())
            }
        }
    }
}

fn engine(max_pending: Option<usize>, max_stand_ins: usize) -> Arc<CoreEngine<PoolJob>> {
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    let config = Config {
        compute_workers: 1,
        host_workers: 1,
        max_pending,
        thread_name: "p".into(),
        worker_stack_size: None,
        max_stand_ins,
        run_inline_from: None,
    };
    Arc::new(CoreEngine::new(domain, config).unwrap())
}

fn slot<T>() -> Arc<Mutex<Option<T>>> {
    Arc::new(Mutex::new(None))
}

/// `rounds` rounds on a compute lane of one worker with a stand-in cap of
/// one. A round: H (async, holds var `u`), B (reads `u`, writes `v`), W
/// (completes H's token, then waits inside the op for `v`). W holds the
/// lane's only worker when B becomes ready, so B runs only on a stand-in.
/// Checks: each wait returns `Ok`, B ran once per round, the lane never
/// has more than 1 + 1 threads; shutdown returns.
pub fn stand_in_rounds(rounds: u64) {
    let e = engine(None, 1);
    let u = e.new_var().unwrap();
    let v = e.new_var().unwrap();
    let d = e.new_var().unwrap();
    for round in 1..=rounds {
        let held: Slot = slot();
        let out: Out = slot();
        e.push(
            OpSpec::new(PoolJob::Hold(held.clone()))
                .writes(std::slice::from_ref(&u))
                .asynchronous(),
        )
        .unwrap();
        e.push(
            OpSpec::new(PoolJob::Nop)
                .reads(std::slice::from_ref(&u))
                .writes(std::slice::from_ref(&v)),
        )
        .unwrap();
        e.push(
            OpSpec::new(PoolJob::ReleaseThenWait {
                held,
                engine: e.clone(),
                var: v.clone(),
                out: out.clone(),
            })
            .writes(std::slice::from_ref(&d)),
        )
        .unwrap();
        e.wait_all().unwrap();
        assert_eq!(
            out.lock().take(),
            Some(Ok(())),
            "round {round}: the wait inside the op"
        );
        assert_eq!(e.var_version(&v).unwrap(), round, "round {round}: B ran");
        let threads = e.worker_threads(Lane::Compute);
        assert!(
            threads <= 2,
            "round {round}: {threads} threads on a lane of 1 + 1 stand-in"
        );
    }
    e.shutdown(LONG).unwrap();
}

/// The bound rule: with `max_pending = 1`, a push from inside the op that
/// holds the slot returns `Full` at once; the op completes, and so does
/// `wait_all`.
pub fn push_inside_at_the_bound() {
    let e = engine(Some(1), 1);
    let out: Out = slot();
    e.push(OpSpec::new(PoolJob::PushInside {
        engine: e.clone(),
        out: out.clone(),
    }))
    .unwrap();
    e.wait_all().unwrap();
    assert_eq!(
        out.lock().take(),
        Some(Err(Error::Full)),
        "push inside the op"
    );
    e.shutdown(LONG).unwrap();
}
