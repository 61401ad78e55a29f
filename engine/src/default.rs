//! The process-wide default engine, started lazily at its first use.
//!
//! It lives in a [`LazySlot`]: filled by one atomic pointer swap, so a fork
//! copies it either empty or complete (no `Once` half-done at fork), and a
//! fork child keeps using the same engine (settled at its first call there).
//! It is never dropped: shut it down with [`shutdown_default`], typically
//! from an [`crate::ExitGuard`] made by [`default_exit_guard`].

use crate::{Config, Engine, Error, ExitGuard, HostBridge, Result, ShutdownReport};
use forksafe_core::global::LazySlot;
use std::time::Duration;

static DEFAULT: LazySlot<Engine> = LazySlot::new();

/// The default engine, started with [`Config::default`] and no host bridge
/// unless [`init_default`] ran first.
///
/// ```
/// let engine = forksafe::default_engine().unwrap();
/// let v = engine.new_var().unwrap();
/// engine.op("hello").writes(&[&v]).run(|| {}).unwrap();
/// engine.wait_for_var(&v).unwrap();
/// ```
pub fn default_engine() -> Result<&'static Engine> {
    DEFAULT.get_or_try_init(|| Engine::new(Config::default()))
}

/// Starts the default engine with `config` and `bridge`. Fails with
/// [`Error::InvalidConfig`] if the config is out of range, and with
/// [`Error::DefaultEngineStarted`] if the default engine has already
/// started (it is never replaced).
///
/// ```
/// use forksafe::{bridge::NoHost, Config, CoreConfig, Error};
/// let bad = Config {
///     core: CoreConfig { compute_workers: 0, ..CoreConfig::default() },
///     ..Config::default()
/// };
/// assert!(matches!(forksafe::init_default(bad, Box::new(NoHost)), Err(Error::InvalidConfig(_))));
/// ```
pub fn init_default(config: Config, bridge: Box<dyn HostBridge>) -> Result<&'static Engine> {
    config.validate()?;
    if DEFAULT.get().is_some() {
        return Err(Error::DefaultEngineStarted);
    }
    let mut mine = None;
    let engine = DEFAULT.get_or_try_init(|| {
        let e = Engine::with_bridge(config, bridge)?;
        mine = Some(e.id());
        Ok::<_, Error>(e)
    })?;
    if Some(engine.id()) == mine {
        Ok(engine)
    } else {
        Err(Error::DefaultEngineStarted)
    }
}

/// The default engine if it has started; never starts it.
pub fn default_engine_if_started() -> Option<&'static Engine> {
    DEFAULT.get()
}

/// Shuts the default engine down within `timeout` (see
/// [`CoreEngine::shutdown`](forksafe_core::CoreEngine::shutdown)); `Ok(None)` if it never started.
pub fn shutdown_default(timeout: Duration) -> Result<Option<ShutdownReport>> {
    match DEFAULT.get() {
        Some(e) => e.shutdown(timeout).map(Some),
        None => Ok(None),
    }
}

/// An [`ExitGuard`] for the default engine (starting it if needed): hold
/// it in `main` so that returning from `main` shuts the engine down within
/// its [`Config::shutdown_deadline`] before the process exits.
///
/// ```
/// // In `main`, held to its end:
/// let _exit = forksafe::default_exit_guard().unwrap();
/// // ... push work on forksafe::default_engine() ...
/// // `_exit` drops as `main` returns: the default engine shuts down there
/// ```
pub fn default_exit_guard() -> Result<ExitGuard<'static>> {
    default_engine().map(ExitGuard::new)
}
