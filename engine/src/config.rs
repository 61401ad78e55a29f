//! Engine configuration: pool sizes, worker threads, the fork drain bound and
//! the shutdown deadline, validated before an engine starts.

use crate::{CoreConfig, Error};
use std::time::Duration;

/// The longest drain bound or shutdown deadline accepted (one hour).
pub const MAX_DEADLINE: Duration = Duration::from_secs(3600);

/// How an engine is sized and bounded: core's settings ([`CoreConfig`]:
/// worker counts, the pending bound, thread names and stacks, stand-ins,
/// running inline), and the two deadlines only this crate has. Build from
/// [`Config::default`] and override fields; [`Config::validate`] (run by
/// every constructor) rejects out-of-range values with
/// [`Error::InvalidConfig`].
///
/// ```
/// use forksafe::{Config, CoreConfig, Engine};
/// use std::time::Duration;
/// let config = Config {
///     core: CoreConfig { compute_workers: 4, ..CoreConfig::default() },
///     fork_drain: Duration::from_millis(500),
///     ..Config::default()
/// };
/// let engine = Engine::new(config).unwrap();
/// assert_eq!(engine.config().core.compute_workers, 4);
/// ```
///
/// Running inline (`CoreConfig::run_inline_from`): with `Some(n)`, a push
/// whose compute-lane op is ready at once runs it on the pushing thread
/// when the ready queue it would join already holds at least `n` ops
/// (docs/DESIGN.md, "Running inline").
///
/// ```
/// use forksafe::{Config, CoreConfig, Engine};
/// use std::sync::{Arc, Mutex};
/// let engine = Engine::new(Config {
///     core: CoreConfig { run_inline_from: Some(0), ..CoreConfig::default() },
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The core engine's sizing and limits; each field's range is on
    /// [`CoreConfig`].
    pub core: CoreConfig,
    /// How long [`crate::fork`] waits for running ops before forking anyway
    /// (positive, at most [`MAX_DEADLINE`]).
    pub fork_drain: Duration,
    /// How long [`crate::Engine::shutdown_now`] and `Drop` let queued ops
    /// run before cancelling them (positive, at most [`MAX_DEADLINE`]).
    pub shutdown_deadline: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            core: CoreConfig::default(),
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
        self.core.validate()?;
        if self.fork_drain.is_zero() || self.fork_drain > MAX_DEADLINE {
            return Err(Error::InvalidConfig("fork_drain must be in (0, 1h]"));
        }
        if self.shutdown_deadline.is_zero() || self.shutdown_deadline > MAX_DEADLINE {
            return Err(Error::InvalidConfig("shutdown_deadline must be in (0, 1h]"));
        }
        Ok(())
    }
}
