//! What the test modules share: a payload that is a boxed closure (given
//! the completion token of async ops), and small constructors.

use forksafe_core::{BodyError, CompletionToken, Config, CoreEngine, ForkDomain, OpSpec, Payload};

/// The body of a [`Job`].
pub type Body = Box<dyn FnOnce(Option<CompletionToken<Job>>) -> Result<(), String> + Send>;

/// A payload that runs its closure.
pub struct Job(pub Body);

impl Payload for Job {
    fn run(self, token: Option<CompletionToken<Self>>) -> Result<(), BodyError> {
        Ok((self.0)(token)?)
    }
}

/// A payload running `f` (sync ops).
pub fn job(f: impl FnOnce() -> Result<(), String> + Send + 'static) -> Job {
    Job(Box::new(move |_| f()))
}

/// A sync compute op running `f`.
pub fn spec(f: impl FnOnce() -> Result<(), String> + Send + 'static) -> OpSpec<Job> {
    OpSpec::new(job(f))
}

/// A fresh fork domain of its own (leaked: domains are `'static`).
pub fn domain() -> &'static ForkDomain {
    Box::leak(Box::new(ForkDomain::new()))
}

/// An engine with `compute_workers` compute workers in a domain of its own.
pub fn engine_with(compute_workers: usize) -> CoreEngine<Job> {
    let config = Config {
        compute_workers,
        ..Config::default()
    };
    CoreEngine::new(domain(), config).unwrap()
}

/// Counts how many ops run at once: each op made by [`Concurrency::op`]
/// counts itself in for a few milliseconds.
#[derive(Default, Clone)]
pub struct Concurrency {
    now: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    most: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Concurrency {
    /// An op that is counted while it runs.
    pub fn op(&self) -> OpSpec<Job> {
        use std::sync::atomic::Ordering;
        let (now, most) = (self.now.clone(), self.most.clone());
        spec(move || {
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(n, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(2));
            now.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        })
    }

    /// The most ops seen running at once.
    pub fn most(&self) -> usize {
        self.most.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Pushes an op that sleeps `ms` milliseconds, and returns once it runs.
pub fn push_running(e: &CoreEngine<Job>, ms: u64) {
    push_started(e, &[], move || {
        std::thread::sleep(std::time::Duration::from_millis(ms))
    });
}

/// Pushes a sync op writing `vars` that runs `body`, and returns its id once
/// the body has started.
fn push_started(
    e: &CoreEngine<Job>,
    vars: &[forksafe_core::Var<Job>],
    body: impl FnOnce() + Send + 'static,
) -> u64 {
    use std::sync::atomic::{AtomicBool, Ordering};
    let started = std::sync::Arc::new(AtomicBool::new(false));
    let s = started.clone();
    let id = e
        .push(
            spec(move || {
                s.store(true, Ordering::SeqCst);
                body();
                Ok(())
            })
            .writes(vars),
        )
        .unwrap();
    while !started.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    id
}

/// Polls `done` every millisecond until it holds or `bound` has passed;
/// returns whether it held. Tests bound their waits with it so that a
/// broken engine fails them instead of hanging them.
pub fn wait_until(bound: std::time::Duration, done: impl Fn() -> bool) -> bool {
    let until = std::time::Instant::now() + bound;
    while !done() {
        if std::time::Instant::now() > until {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    true
}

/// A sync op that sets `flag` when it runs.
pub fn sets(flag: &std::sync::Arc<std::sync::atomic::AtomicBool>) -> OpSpec<Job> {
    let flag = flag.clone();
    spec(move || {
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    })
}

/// Pushes an op that holds a worker until `go` is set (bounded, so a
/// broken engine fails instead of hanging), and returns once it runs: on a
/// lane of one, ops pushed after it cannot overtake it.
pub fn push_blocker(
    e: &CoreEngine<Job>,
    go: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> u64 {
    push_blocker_on(e, go, &[])
}

/// [`push_blocker`], writing `vars`.
pub fn push_blocker_on(
    e: &CoreEngine<Job>,
    go: &std::sync::Arc<std::sync::atomic::AtomicBool>,
    vars: &[forksafe_core::Var<Job>],
) -> u64 {
    let go = go.clone();
    push_started(e, vars, move || {
        wait_until(std::time::Duration::from_secs(10), || {
            go.load(std::sync::atomic::Ordering::SeqCst)
        });
    })
}
