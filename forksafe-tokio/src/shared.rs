//! What a [`ForkSafeRuntime`](crate::ForkSafeRuntime) shares with its
//! handles and its fork participant: the settings and the per-process
//! runtime.
//!
//! # State
//!
//! The runtime is a [`GatedLocal`] (its states and moves are
//! `forksafe_core::GatedLocal`'s, model-checked in `models/`): each process
//! builds its own at its first use, inside a pass of the gate; every
//! `block_on` holds a pass for its whole call; the participant's `prepare`
//! closes the gate and waits, bounded, for the passes held, and `parent`
//! opens it. A fork child never reaches its parent's runtime, and never
//! drops it.

use crate::builder::RuntimeBuilder;
use crate::error::RuntimeError;
use crate::join::JoinHandle;
use forksafe::{ForkParticipant, GatedLocal, PrepareDeadline};
use forksafe_core::sync::Arc;
use std::future::Future;

/// What the runtime shares with its fork participant and its handles.
pub(crate) struct Shared {
    config: RuntimeBuilder,
    runtime: GatedLocal<OwnedRuntime>,
}

/// A runtime that shuts down with a bound when dropped (always `Some`
/// until then).
struct OwnedRuntime(Option<tokio::runtime::Runtime>);

impl OwnedRuntime {
    fn get(&self) -> &tokio::runtime::Runtime {
        match &self.0 {
            Some(rt) => rt,
            None => unreachable!("an OwnedRuntime is emptied only by its drop"),
        }
    }
}

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        let Some(rt) = self.0.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            // Dropped from async code, where tokio may not block.
            rt.shutdown_background();
        } else {
            // Wait for the threads to leave, so none is on its way out at
            // a later fork; bounded, as a blocking task may never end.
            rt.shutdown_timeout(std::time::Duration::from_secs(1));
        }
    }
}

impl Shared {
    pub(crate) fn new(config: RuntimeBuilder) -> Shared {
        Shared {
            config,
            runtime: GatedLocal::new(),
        }
    }

    fn build_runtime(&self) -> Result<OwnedRuntime, RuntimeError> {
        // A fork child's first runtime must not share its parent's signal
        // self-pipe (`signal_pipe.rs`).
        crate::signal_pipe::detach().map_err(RuntimeError::SignalPipe)?;
        self.config
            .tokio_builder()
            .build()
            .map(|rt| OwnedRuntime(Some(rt)))
            .map_err(|e| RuntimeError::Build(e.to_string()))
    }

    /// This process's runtime, built here first (inside a pass of the gate)
    /// if this process has not used it yet.
    pub(crate) fn runtime(&self) -> Result<&tokio::runtime::Runtime, RuntimeError> {
        Ok(self.runtime.get_or_try_init(|| self.build_runtime())?.get())
    }

    /// Runs `fut` to completion on this process's runtime, inside a pass of
    /// the gate a fork's prepare step closes.
    pub(crate) fn block_on<F: Future>(&self, fut: F) -> Result<F::Output, RuntimeError> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(RuntimeError::InsideRuntime);
        }
        self.runtime
            .with(|| self.build_runtime(), |rt| rt.get().block_on(fut))
    }

    pub(crate) fn spawn<F>(&self, fut: F) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let rt = self.runtime()?;
        Ok(JoinHandle::new(rt.spawn(fut), forksafe::fork_epoch()))
    }

    pub(crate) fn spawn_blocking<F, R>(&self, f: F) -> Result<JoinHandle<R>, RuntimeError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let rt = self.runtime()?;
        Ok(JoinHandle::new(
            rt.spawn_blocking(f),
            forksafe::fork_epoch(),
        ))
    }

    pub(crate) fn is_built(&self) -> bool {
        self.runtime.get().is_some()
    }
}

/// The runtime's steps in the fork protocol.
pub(crate) struct RuntimeParticipant {
    shared: Arc<Shared>,
}

impl RuntimeParticipant {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        RuntimeParticipant { shared }
    }
}

impl ForkParticipant for RuntimeParticipant {
    fn name(&self) -> &str {
        &self.shared.config.thread_name
    }

    fn prepare(&self, deadline: &PrepareDeadline<'_>) {
        self.shared.runtime.prepare(deadline);
    }

    fn drain(&self, deadline: &PrepareDeadline<'_>) {
        self.shared.runtime.drain(deadline);
    }

    fn at_exit(&self, deadline: &PrepareDeadline<'_>) {
        // Closed for good: a `block_on` made from now on waits (a Python
        // thread that returned into a finalised interpreter would be torn
        // down mid-call); the calls in flight get until the deadline.
        self.shared.runtime.close_for_exit(deadline);
    }

    fn parent(&self) {
        self.shared.runtime.parent();
    }
}
