//! Worker start failures. The lane's worker count is not public, and a
//! worker the OS refuses leaves no other trace while every start fails, so
//! this is a unit test. Found by the mutation run (`-=` → `+=` and `/=` in
//! `Shared::spawn_workers` survived: no test made the OS refuse a thread).

use super::{Config, Engine};
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

/// Each refused worker is taken off the lane's count, so every later
/// dispatch tries again (an over-count would stop the lane from ever
/// starting a worker); the queued ops are cancelled by shutdown.
#[test]
fn a_worker_the_os_refuses_is_taken_off_the_count() {
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    let config = Config {
        compute_workers: 2,
        worker_stack_size: Some(NO_SUCH_STACK),
        ..Config::default()
    };
    let e = Engine::new(domain, config).unwrap();
    for pushed in 1..=3 {
        e.push(OpSpec::new(Noop)).unwrap();
        let lane = e.shared.lane(Lane::Compute).lock();
        assert_eq!(lane.workers, 0, "after push {pushed}");
        assert_eq!(lane.spawned, pushed, "start attempts after push {pushed}");
    }
    let report = e.shutdown(Duration::from_millis(10)).unwrap();
    assert_eq!(report.cancelled.len(), 3);
}
