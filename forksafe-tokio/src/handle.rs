//! [`RuntimeHandle`]: a clonable way to reach a [`ForkSafeRuntime`]'s
//! runtime of the current process from any thread or task.

use crate::error::RuntimeError;
use crate::join::JoinHandle;
use crate::shared::Shared;
use forksafe_core::sync::Arc;
use std::future::Future;

/// A handle of a [`ForkSafeRuntime`](crate::ForkSafeRuntime). Unlike tokio's
/// `Handle`, it names the runtime, not one process's copy of it: each call
/// reaches the runtime of the process it is made in, so a handle kept across
/// a fork works in the child (building the child's runtime at its first
/// use) and never reaches the parent's.
///
/// ```
/// let rt = forksafe_tokio::ForkSafeRuntime::new().unwrap();
/// let h = rt.handle();
/// let task = std::thread::spawn(move || h.block_on(async { 5 }).unwrap());
/// assert_eq!(task.join().unwrap(), 5);
/// ```
#[derive(Clone)]
pub struct RuntimeHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for RuntimeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeHandle").finish_non_exhaustive()
    }
}

impl RuntimeHandle {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        RuntimeHandle { shared }
    }

    /// [`ForkSafeRuntime::block_on`](crate::ForkSafeRuntime::block_on).
    pub fn block_on<F: Future>(&self, fut: F) -> Result<F::Output, RuntimeError> {
        self.shared.block_on(fut)
    }

    /// [`ForkSafeRuntime::spawn`](crate::ForkSafeRuntime::spawn).
    pub fn spawn<F>(&self, fut: F) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.shared.spawn(fut)
    }

    /// [`ForkSafeRuntime::spawn_blocking`](crate::ForkSafeRuntime::spawn_blocking).
    pub fn spawn_blocking<F, R>(&self, f: F) -> Result<JoinHandle<R>, RuntimeError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.shared.spawn_blocking(f)
    }

    /// tokio's handle of this process's runtime (valid in this process only).
    pub fn tokio_handle(&self) -> Result<tokio::runtime::Handle, RuntimeError> {
        Ok(self.shared.runtime()?.handle().clone())
    }
}
