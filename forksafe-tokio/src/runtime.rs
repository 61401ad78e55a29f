//! [`ForkSafeRuntime`]: the runtime's owner, joined to the fork protocol;
//! its per-process state is `shared.rs`'s.

use crate::builder::RuntimeBuilder;
use crate::error::RuntimeError;
use crate::handle::RuntimeHandle;
use crate::shared::{RuntimeParticipant, Shared};
use forksafe::{Inherited, Participation};
use forksafe_core::sync::Arc;
use std::fmt;

/// A tokio runtime that survives `fork()` (see the crate docs). It owns the
/// runtime's place in the fork protocol; its calls (`block_on`, `spawn`,
/// `spawn_blocking`, `tokio_handle`) are its [`RuntimeHandle`]'s, reached
/// through `Deref`.
pub struct ForkSafeRuntime {
    handle: RuntimeHandle,
    participation: Participation,
}

impl std::ops::Deref for ForkSafeRuntime {
    type Target = RuntimeHandle;
    fn deref(&self) -> &RuntimeHandle {
        &self.handle
    }
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
            handle: RuntimeHandle::new(shared),
            participation,
        })
    }

    /// A cheap, clonable handle that reaches this runtime from anywhere,
    /// and in a fork child reaches the child's runtime (see
    /// [`RuntimeHandle`]).
    pub fn handle(&self) -> RuntimeHandle {
        self.handle.clone()
    }

    /// Whether this process has built its runtime (false in a fork child
    /// until its first use).
    pub fn is_built(&self) -> bool {
        self.handle.is_built()
    }

    /// What the fork that made this process left the runtime as:
    /// [`Inherited::Unprepared`] if `block_on` calls were still in flight
    /// when the prepare bound passed, [`Inherited::Prepared`] if not, or
    /// [`Inherited::Fresh`] if the runtime was built in this process.
    pub fn inherited(&self) -> Inherited {
        self.participation.inherited()
    }
}
