//! Worker start failures and the pool's thread reuse. The lane's pool is
//! not public, so these are unit tests; the first makes the OS refuse a
//! thread, which no other test does (it kills the start path's `-=`
//! mutants).

use super::token::CompletionToken;
use super::Payload;
use super::{Config, CoreEngine};
use crate::error::{BodyError, Error, OpErrorKind};
use crate::op_info::Lane;
use crate::spec::OpSpec;
use crate::spec::Var;
use crate::sync::{Arc, AtomicBool, Mutex, Ordering};
use crate::ForkDomain;
use std::time::Duration;

struct Noop;

impl Payload for Noop {
    fn run(self, _: Option<CompletionToken<Self>>) -> Result<(), BodyError> {
        Ok(())
    }
}

/// A stack larger than any address space: every worker start fails.
const NO_SUCH_STACK: usize = 1 << 60;

fn domain() -> &'static ForkDomain {
    Box::leak(Box::new(ForkDomain::new()))
}

/// Runs `f`, which reads or changes `e`'s state directly, inside a
/// fork-gate section, as engine code does (debug builds check that every
/// engine lock is taken in one).
fn in_section<P: Payload, R>(e: &CoreEngine<P>, f: impl FnOnce() -> R) -> R {
    let _section = e.shared.enter().expect("no fork is in progress");
    f()
}

/// `CoreEngine::new` starts the lanes' workers, so a size the OS refuses is
/// an error there, and the half-built engine leaves its domain.
#[test]
fn a_stack_the_os_refuses_fails_engine_new() {
    let d = domain();
    let config = Config {
        worker_stack_size: Some(NO_SUCH_STACK),
        ..Config::default()
    };
    match CoreEngine::<Noop>::new(d, config) {
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
    let e: CoreEngine<Noop> = unstarted(config);
    let v = e.new_var().unwrap();
    for pushed in 1..=3 {
        e.push(OpSpec::new(Noop).writes(std::slice::from_ref(&v)))
            .unwrap();
        let (workers, spawned, empty) = in_section(&e, || {
            let lane = e.shared.lane(Lane::Compute).lock();
            let empty = e.shared.ready(Lane::Compute).is_empty();
            (lane.pool().workers(), lane.pool().spawned(), empty)
        });
        assert_eq!(workers, 0, "after push {pushed}");
        assert_eq!(spawned, pushed, "start attempts after push {pushed}");
        assert!(empty, "an op stayed queued with no worker");
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
fn unstarted<P: Payload>(config: Config) -> CoreEngine<P> {
    CoreEngine::<P>::unstarted(domain(), config).unwrap()
}

/// A payload running its closure (with the token of an async op), and
/// setting `dropped` when it is dropped, run or not.
struct Job {
    body: Option<Body>,
    dropped: Option<Arc<AtomicBool>>,
}

type Body = Box<dyn FnOnce(Option<CompletionToken<Job>>) -> Result<(), String> + Send>;

impl Job {
    fn new(
        body: impl FnOnce(Option<CompletionToken<Job>>) -> Result<(), String> + Send + 'static,
    ) -> Self {
        Job {
            body: Some(Box::new(body)),
            dropped: None,
        }
    }
}

impl Payload for Job {
    fn run(mut self, token: Option<CompletionToken<Self>>) -> Result<(), BodyError> {
        match self.body.take() {
            Some(body) => Ok(body(token)?),
            None => Ok(()),
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Some(d) = &self.dropped {
            d.store(true, Ordering::SeqCst);
        }
    }
}

const BOUND: Duration = Duration::from_secs(10);

/// Polls `done` (spinning, then yielding) until it holds or `BOUND` passes.
fn eventually(done: impl Fn() -> bool) -> bool {
    let until = std::time::Instant::now() + BOUND;
    let mut round = 0;
    while !done() {
        if std::time::Instant::now() > until {
            return false;
        }
        crate::sync::pause_briefly(round);
        round = round.saturating_add(1);
    }
    true
}

/// One round on a compute lane of one worker: H (async, holds `u`), B
/// (reads `u`, writes `v`), W (completes H's token, then waits inside the
/// op for `v`): W holds the lane's only worker when B becomes ready, so B
/// runs only on a stand-in. Returns W's wait result.
fn stand_in_round(e: &Arc<CoreEngine<Job>>, u: &Var<Job>, v: &Var<Job>) -> crate::Result<()> {
    let queue: Arc<Mutex<Option<CompletionToken<Job>>>> = Arc::new(Mutex::new(None));
    let held = queue.clone();
    e.push(
        OpSpec::new(Job::new(move |t| {
            *held.lock() = t;
            Ok(())
        }))
        .writes(std::slice::from_ref(u))
        .asynchronous(),
    )?;
    e.push(
        OpSpec::new(Job::new(|_| Ok(())))
            .reads(std::slice::from_ref(u))
            .writes(std::slice::from_ref(v)),
    )?;
    let out: Arc<Mutex<Option<crate::Result<()>>>> = Arc::new(Mutex::new(None));
    let (o, inner, waited) = (out.clone(), e.clone(), v.clone());
    e.push(OpSpec::new(Job::new(move |_| {
        let mut round = 0;
        let token = loop {
            if let Some(t) = queue.lock().take() {
                break t;
            }
            crate::sync::pause_briefly(round);
            round += 1;
        };
        token.complete(Ok(())).map_err(|e| e.to_string())?;
        *o.lock() = Some(inner.wait_for_var_timeout(&waited, BOUND));
        Ok(())
    })))?;
    e.wait_all_timeout(BOUND)?;
    let result = out.lock().take();
    result.unwrap_or(Err(Error::ShutDown))
}

/// The stand-in of a wait inside an op retires as a spare once the wait
/// ends (two threads, one counted), and the next wait that needs a
/// stand-in recalls it: no third thread starts, and the recalled spare runs
/// the op the wait needs.
#[test]
fn a_retired_stand_in_is_recalled_for_the_next_wait() {
    let config = Config {
        compute_workers: 1,
        max_stand_ins: 1,
        ..Config::default()
    };
    let e = Arc::new(CoreEngine::<Job>::new(domain(), config).unwrap());
    let (u, v) = (e.new_var().unwrap(), e.new_var().unwrap());
    assert_eq!(stand_in_round(&e, &u, &v), Ok(()));
    let compute = || {
        in_section(&e, || {
            let ls = e.shared.lane(Lane::Compute).lock();
            (
                ls.pool().workers(),
                ls.pool().threads(),
                ls.pool().spawned(),
            )
        })
    };
    let idle = || in_section(&e, || e.shared.lane(Lane::Compute).lock().pool().idle_len());
    assert!(
        eventually(|| compute() == (1, 2, 2)),
        "no spare after the first wait: {:?}",
        compute()
    );
    // The counted worker parks idle; the spare never does (it waits to be
    // recalled). Looked at again after a while: a spare that left its
    // wait early would have registered as idle by then.
    assert!(eventually(|| idle() == 1));
    for round in 0..200 {
        crate::sync::pause_briefly(round);
    }
    assert_eq!(idle(), 1, "a spare registered as idle");
    assert_eq!(stand_in_round(&e, &u, &v), Ok(()));
    assert_eq!(compute().2, 2, "a new thread started instead of the spare");
    assert!(compute().1 <= 2);
    e.shutdown(BOUND).unwrap();
}

/// Only a lane with no worker free to run its queued ops fails them: not
/// while dispatch is paused (a quiesce holds them on purpose), and not
/// while a counted worker is free; a failed op's payload is dropped, not
/// leaked.
#[test]
fn only_a_lane_with_no_free_worker_fails_its_queued_ops() {
    // A started lane (one free worker), its dispatch paused, one op queued.
    let e = CoreEngine::<Job>::new(domain(), Config::default()).unwrap();
    let q = e.quiesce(BOUND).unwrap();
    e.push(OpSpec::new(Job::new(|_| Ok(())))).unwrap();
    // The worker parked idle first: unpaused by hand, a queue wakes
    // nobody, so the op stays queued and only the free worker keeps
    // `fail_unrunnable` from failing it. (A worker still on its way to
    // park would take the op itself.)
    let idle = || in_section(&e, || e.shared.lane(Lane::Compute).lock().pool().idle_len());
    assert!(
        eventually(|| idle() == Config::default().compute_workers),
        "the workers never parked"
    );
    in_section(&e, || e.shared.ready(Lane::Compute).set_paused(false));
    assert!(super::spawn::fail_unrunnable(&e.shared, Lane::Compute, "test").is_empty());
    in_section(&e, || e.shared.ready(Lane::Compute).set_paused(true));
    drop(q);
    // Not failed: it runs once the quiesce ends (a failed op would be
    // reported here with `WorkerStart`).
    assert_eq!(
        e.wait_all_timeout(BOUND),
        Ok(()),
        "failed with a free worker"
    );

    // A lane with no worker at all, paused: the op stays queued.
    let e: CoreEngine<Job> = unstarted(Config::default());
    let q = e.quiesce(BOUND).unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let mut job = Job::new(|_| Ok(()));
    job.dropped = Some(dropped.clone());
    e.push(OpSpec::new(job)).unwrap();
    assert!(super::spawn::fail_unrunnable(&e.shared, Lane::Compute, "test").is_empty());
    assert_eq!(
        in_section(&e, || e.shared.ready(Lane::Compute).len()),
        1,
        "failed while paused"
    );
    // Not paused: it fails, and its payload is dropped.
    in_section(&e, || e.shared.ready(Lane::Compute).set_paused(false));
    let _ = super::spawn::fail_unrunnable(&e.shared, Lane::Compute, "test");
    assert_eq!(in_section(&e, || e.shared.ready(Lane::Compute).len()), 0);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the failed op's payload leaked"
    );
    drop(q);
    match e.wait_all_timeout(BOUND) {
        Err(Error::OpsFailed(errs)) => {
            assert!(matches!(errs[0].kind(), OpErrorKind::WorkerStart(m) if m == "test"))
        }
        other => panic!("{other:?}"),
    }
}
