//! [`ForkSafeRuntime`]: the runtime's owner, joined to the fork protocol;
//! its per-process state is `shared.rs`'s.

use crate::builder::RuntimeBuilder;
use crate::error::RuntimeError;
use crate::handle::RuntimeHandle;
use crate::join::JoinHandle;
use crate::shared::{RuntimeParticipant, Shared};
use forksafe::{Inherited, Participation};
use forksafe_core::sync::Arc;
use std::fmt;
use std::future::Future;

/// A tokio runtime that survives `fork()` (see the crate docs).
pub struct ForkSafeRuntime {
    shared: Arc<Shared>,
    participation: Participation,
}

impl fmt::Debug for ForkSafeRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ForkSafeRuntime")
            .field("built_here", &self.is_built())
            .field("inherited", &self.inherited())
            .finish()
    }
}

impl RuntimeBuilder {
    /// Checks the settings, builds this process's runtime and joins it to
    /// the fork protocol.
    ///
    /// ```
    /// use forksafe_tokio::{RuntimeBuilder, RuntimeError};
    /// use std::time::Duration;
    /// let bad = RuntimeBuilder::new_multi_thread().worker_threads(0).build();
    /// assert!(matches!(bad, Err(RuntimeError::Config(_))));
    /// let bad = RuntimeBuilder::new_multi_thread().prepare_bound(Duration::ZERO).build();
    /// assert!(matches!(bad, Err(RuntimeError::Config(_))));
    /// let rt = RuntimeBuilder::new_current_thread().build().unwrap();
    /// assert_eq!(rt.block_on(async { 7 }).unwrap(), 7);
    /// ```
    pub fn build(self) -> Result<ForkSafeRuntime, RuntimeError> {
        self.check()?;
        ForkSafeRuntime::from_builder(self)
    }
}

impl ForkSafeRuntime {
    /// A multi-thread runtime with tokio's defaults, io and time on
    /// ([`RuntimeBuilder::new_multi_thread`]).
    pub fn new() -> Result<ForkSafeRuntime, RuntimeError> {
        RuntimeBuilder::new_multi_thread().build()
    }

    fn from_builder(config: RuntimeBuilder) -> Result<ForkSafeRuntime, RuntimeError> {
        let bound = config.prepare_bound;
        let shared = Arc::new(Shared::new(config));
        let participation =
            forksafe::join_fork(Box::new(RuntimeParticipant::new(shared.clone())), bound)
                .map_err(RuntimeError::Fork)?;
        // Build now, so a bad configuration fails here and not at first use.
        shared.runtime()?;
        Ok(ForkSafeRuntime {
            shared,
            participation,
        })
    }

    /// Runs `fut` to completion on this process's runtime (tokio's
    /// `Runtime::block_on`), building the runtime first in a fork child
    /// that has not used it yet. A fork waits, up to the prepare bound, for
    /// the calls in flight; a call made while a fork prepares waits for the
    /// fork. From inside a tokio runtime it is
    /// [`RuntimeError::InsideRuntime`] (tokio would panic).
    ///
    /// ```
    /// let rt = forksafe_tokio::ForkSafeRuntime::new().unwrap();
    /// let v = rt.block_on(async {
    ///     tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    ///     "slept"
    /// });
    /// assert_eq!(v.unwrap(), "slept");
    /// let nested = rt.block_on(async { rt.block_on(async {}) }).unwrap();
    /// assert_eq!(nested, Err(forksafe_tokio::RuntimeError::InsideRuntime));
    /// ```
    pub fn block_on<F: Future>(&self, fut: F) -> Result<F::Output, RuntimeError> {
        self.shared.block_on(fut)
    }

    /// Spawns `fut` on this process's runtime (tokio's `Runtime::spawn`).
    /// Its handle resolves to [`TaskError::LostInFork`](crate::TaskError::LostInFork)
    /// when awaited in a fork child.
    pub fn spawn<F>(&self, fut: F) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.shared.spawn(fut)
    }

    /// Runs `f` on this process's blocking pool (tokio's
    /// `Runtime::spawn_blocking`).
    ///
    /// ```
    /// let rt = forksafe_tokio::ForkSafeRuntime::new().unwrap();
    /// let task = rt.spawn_blocking(|| 1 + 1).unwrap();
    /// assert_eq!(rt.block_on(task).unwrap(), Ok(2));
    /// ```
    pub fn spawn_blocking<F, R>(&self, f: F) -> Result<JoinHandle<R>, RuntimeError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.shared.spawn_blocking(f)
    }

    /// A cheap, clonable handle that reaches this runtime from anywhere,
    /// and in a fork child reaches the child's runtime (see
    /// [`RuntimeHandle`]).
    pub fn handle(&self) -> RuntimeHandle {
        RuntimeHandle::new(self.shared.clone())
    }

    /// tokio's handle of this process's runtime, for APIs that take one.
    /// Valid in this process only: a fork child must ask again (the
    /// parent's handle reaches a runtime whose threads are not there).
    pub fn tokio_handle(&self) -> Result<tokio::runtime::Handle, RuntimeError> {
        Ok(self.shared.runtime()?.handle().clone())
    }

    /// Whether this process has built its runtime (false in a fork child
    /// until its first use).
    pub fn is_built(&self) -> bool {
        self.shared.is_built()
    }

    /// What the fork that made this process left the runtime as:
    /// [`Inherited::Unprepared`] if `block_on` calls were still in flight
    /// when the prepare bound passed, [`Inherited::Prepared`] if not, or
    /// [`Inherited::Fresh`] if the runtime was built in this process.
    pub fn inherited(&self) -> Inherited {
        self.participation.inherited()
    }
}
