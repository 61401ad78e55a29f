//! Engine configuration: pool sizes, worker threads, the fork drain bound and
//! the shutdown deadline, validated before an engine starts.

use crate::Error;
use std::time::Duration;

/// The longest drain bound or shutdown deadline accepted (one hour).
pub const MAX_DEADLINE: Duration = Duration::from_secs(3600);

/// How an engine is sized and bounded. Build from [`Config::default`] and
/// override fields; [`Config::validate`] (run by every constructor) rejects
/// out-of-range values with [`Error::InvalidConfig`].
///
/// ```
/// use forksafe::{Config, Engine};
/// use std::time::Duration;
/// let config = Config {
///     compute_workers: 4,
///     fork_drain: Duration::from_millis(500),
///     ..Config::default()
/// };
/// let engine = Engine::new(config).unwrap();
/// assert_eq!(engine.config().compute_workers, 4);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Worker threads of the compute lane (1..=1024), started by the
    /// constructor.
    pub compute_workers: usize,
    /// Worker threads of the host lane (1..=1024).
    pub host_workers: usize,
    /// Bound on pending ops (`None`: unbounded, the default).
    pub max_pending: Option<usize>,
    /// Prefix of worker thread names: 1..=32 bytes, no NUL.
    pub thread_name: String,
    /// Stack size of each worker thread in bytes (`None`: std's default,
    /// 2 MiB; `Some(0)` is invalid). Host bodies that recurse deeply (a
    /// Python interpreter, say) may want more. A size the OS cannot provide
    /// fails the constructor with [`Error::Spawn`].
    pub worker_stack_size: Option<usize>,
    /// Per lane, at most this many workers blocked at once in a wait inside
    /// an op (0..=1024, default 64): each such wait gets a stand-in worker,
    /// parked and reused afterwards; a wait past the cap fails with
    /// [`Error::StandInLimit`].
    pub max_stand_ins: usize,
    /// Run inline (`None`, the default: never). With `Some(n)`, a push
    /// whose compute-lane op is ready at once runs it on the pushing thread
    /// when the ready queue it would join already holds at least `n` ops
    /// (`Some(0)`: whenever it is ready), unless the pusher is inside an
    /// op, holds the host lock, or a quiesce or fork holds the engine. A
    /// pusher that outruns the workers then does work instead of queueing
    /// it. The body runs outside every engine lock, its errors are reported
    /// at waits as a worker's would be, and a panic in it is caught. Leave
    /// it off if a body may wait for something its pusher does only after
    /// `push` returns: run inline, that body would wait for its own thread.
    ///
    /// ```
    /// use forksafe::{Config, Engine};
    /// use std::sync::{Arc, Mutex};
    /// let engine = Engine::new(Config {
    ///     run_inline_from: Some(0),
    ///     ..Config::default()
    /// })
    /// .unwrap();
    /// let v = engine.new_var().unwrap();
    /// let ran_on = Arc::new(Mutex::new(None));
    /// let record = ran_on.clone();
    /// engine
    ///     .op("here")
    ///     .writes(&[&v])
    ///     .run(move || *record.lock().unwrap() = Some(std::thread::current().id()))
    ///     .unwrap();
    /// engine.wait_all().unwrap();
    /// // Ready at once, and no quiesce or fork held the engine: it ran here.
    /// assert_eq!(*ran_on.lock().unwrap(), Some(std::thread::current().id()));
    /// ```
    pub run_inline_from: Option<usize>,
    /// How long [`crate::fork`] waits for running ops before forking anyway
    /// (positive, at most [`MAX_DEADLINE`]).
    pub fork_drain: Duration,
    /// How long [`crate::Engine::shutdown_now`] and `Drop` let queued ops
    /// run before cancelling them (positive, at most [`MAX_DEADLINE`]).
    pub shutdown_deadline: Duration,
}

impl Default for Config {
    fn default() -> Self {
        let core = forksafe_core::Config::default();
        Config {
            compute_workers: core.compute_workers,
            host_workers: core.host_workers,
            max_pending: core.max_pending,
            thread_name: core.thread_name,
            worker_stack_size: core.worker_stack_size,
            max_stand_ins: core.max_stand_ins,
            run_inline_from: core.run_inline_from,
            fork_drain: Duration::from_secs(5),
            shutdown_deadline: Duration::from_secs(1),
        }
    }
}

impl Config {
    /// Checks every value's range.
    ///
    /// ```
    /// use forksafe::{Config, Error};
    /// use std::time::Duration;
    /// let bad = Config { fork_drain: Duration::ZERO, ..Config::default() };
    /// assert!(matches!(bad.validate(), Err(Error::InvalidConfig(_))));
    /// ```
    pub fn validate(&self) -> Result<(), Error> {
        self.core().validate()?;
        if self.fork_drain.is_zero() || self.fork_drain > MAX_DEADLINE {
            return Err(Error::InvalidConfig("fork_drain must be in (0, 1h]"));
        }
        if self.shutdown_deadline.is_zero() || self.shutdown_deadline > MAX_DEADLINE {
            return Err(Error::InvalidConfig("shutdown_deadline must be in (0, 1h]"));
        }
        Ok(())
    }

    /// The part of the config that sizes core's pools.
    pub(crate) fn core(&self) -> forksafe_core::Config {
        forksafe_core::Config {
            compute_workers: self.compute_workers,
            host_workers: self.host_workers,
            max_pending: self.max_pending,
            thread_name: self.thread_name.clone(),
            worker_stack_size: self.worker_stack_size,
            max_stand_ins: self.max_stand_ins,
            run_inline_from: self.run_inline_from,
        }
    }
}
