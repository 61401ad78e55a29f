//! The exit-hook pattern.
//!
//! Rust never drops statics, and `exit()` does not join threads: a process
//! that returns from `main` with host ops still queued would let host
//! workers run on while the host (an embedding interpreter) finalises. Hold
//! an [`ExitGuard`] in `main` (or make the host's own exit hook — Python's
//! `atexit` — call [`crate::shutdown_default`] or [`crate::Engine::shutdown`]):
//! the engine then refuses new pushes, lets queued ops run until its
//! deadline, cancels the rest, and waits until no host worker is in or
//! entering the host bridge, so no host call happens after it returns.
//!
//! A C `atexit` handler may call [`crate::shutdown_default`] too, as long as
//! the host is still alive when it runs; if the host is already finalising,
//! the bridge says so ([`crate::HostBridge::is_finalizing`]) and the engine
//! leaks host payloads rather than call into it.

use crate::Engine;

/// Shuts its engine down within [`crate::Config::shutdown_deadline`] when
/// it drops. Made by [`Engine::exit_guard`] or
/// [`crate::default_exit_guard`].
///
/// ```
/// use forksafe::{Engine, State};
/// let engine = Engine::new(Default::default()).unwrap();
/// {
///     let _guard = engine.exit_guard();
///     engine.op("work").run(|| {}).unwrap();
/// }
/// assert_eq!(engine.state(), State::Stopped);
/// ```
#[must_use = "the engine shuts down when the guard drops"]
#[derive(Debug)]
pub struct ExitGuard<'e> {
    engine: &'e Engine,
}

impl<'e> ExitGuard<'e> {
    pub(crate) fn new(engine: &'e Engine) -> Self {
        ExitGuard { engine }
    }

    /// The engine it will shut down.
    pub fn engine(&self) -> &'e Engine {
        self.engine
    }
}

impl Drop for ExitGuard<'_> {
    fn drop(&mut self) {
        let _ = self.engine.shutdown_now();
    }
}
