//! What the test modules share: a payload that is a boxed closure (given
//! the completion token of async ops), and small constructors.

use forksafe_core::{CompletionToken, Config, Engine, ForkDomain, OpSpec, Payload};

/// The body of a [`Job`].
pub type Body = Box<dyn FnOnce(Option<CompletionToken<Job>>) -> Result<(), String> + Send>;

/// A payload that runs its closure.
pub struct Job(pub Body);

impl Payload for Job {
    fn run(self, token: Option<CompletionToken<Self>>) -> Result<(), String> {
        (self.0)(token)
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
pub fn engine_with(compute_workers: usize) -> Engine<Job> {
    let config = Config {
        compute_workers,
        ..Config::default()
    };
    Engine::new(domain(), config).unwrap()
}
