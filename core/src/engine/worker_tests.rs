//! Worker start failures and the pool's thread reuse. The lane's pool is
//! not public, so these are unit tests. The first was found by the mutation
//! run (`-=` → `+=` and `/=` in the start path survived: no test made the
//! OS refuse a thread).

use super::{Config, Engine};
use crate::error::{Error, OpErrorKind};
use crate::op::{Lane, OpSpec, Payload};
use crate::token::CompletionToken;
use crate::ForkDomain;
use std::time::Duration;

struct Noop;

impl Payload for Noop {
    fn run(self, _: Option<CompletionToken<Self>>) -> Result<(), String> {
        Ok(())
    }
}

/// A stack larger than any address space: every worker start fails.
const NO_SUCH_STACK: usize = 1 << 60;

fn domain() -> &'static ForkDomain {
    Box::leak(Box::new(ForkDomain::new()))
}

/// `Engine::new` starts the lanes' workers, so a size the OS refuses is
/// an error there, and the half-built engine leaves its domain.
#[test]
fn a_stack_the_os_refuses_fails_engine_new() {
    let d = domain();
    let config = Config {
        worker_stack_size: Some(NO_SUCH_STACK),
        ..Config::default()
    };
    match Engine::<Noop>::new(d, config) {
        Err(Error::Spawn(_)) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(d.engines(), 0, "the failed engine stayed registered");
}

/// An engine whose workers are gone and cannot start again (as in a fork
/// child whose OS refuses threads): each refused worker is taken off the
/// lane's count, so every later dispatch tries again (an over-count would
/// stop the lane from ever starting a worker), and each op that no worker
/// can run completes with `WorkerStart` at once instead of waiting for
/// ever; ops that depend on it pass the error on.
#[test]
fn ops_no_worker_can_run_fail_with_worker_start() {
    let config = Config {
        compute_workers: 2,
        worker_stack_size: Some(NO_SUCH_STACK),
        ..Config::default()
    };
    let e = unstarted(config);
    let v = e.new_var().unwrap();
    for pushed in 1..=3 {
        e.push(OpSpec::new(Noop).writes(std::slice::from_ref(&v)))
            .unwrap();
        let lane = e.shared.lane(Lane::Compute).lock();
        assert_eq!(lane.pool.workers(), 0, "after push {pushed}");
        assert_eq!(
            lane.pool.spawned(),
            pushed,
            "start attempts after push {pushed}"
        );
        assert!(lane.is_empty(), "an op stayed queued with no worker");
    }
    match e.wait_all_timeout(Duration::from_secs(5)) {
        Err(Error::OpsFailed(errs)) => {
            // The first raised WorkerStart; the two after it passed it on.
            assert_eq!(errs.len(), 1, "{errs:?}");
            assert!(
                matches!(errs[0].kind(), OpErrorKind::WorkerStart(_)),
                "{errs:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    match e.wait_for_var(&v) {
        Err(Error::Poisoned(err)) => {
            assert!(matches!(err.kind(), OpErrorKind::WorkerStart(_)))
        }
        other => panic!("{other:?}"),
    }
    let report = e.shutdown(Duration::from_millis(10)).unwrap();
    assert!(report.cancelled.is_empty(), "{report:?}");
}

/// An engine built without starting its workers (model builds' way).
fn unstarted(config: Config) -> Engine<Noop> {
    Engine::<Noop>::unstarted(domain(), config).unwrap()
}
