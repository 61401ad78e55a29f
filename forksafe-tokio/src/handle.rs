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

    pub(crate) fn is_built(&self) -> bool {
        self.shared.is_built()
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

    /// tokio's handle of this process's runtime, for APIs that take one.
    /// Valid in this process only: a fork child must ask again (the
    /// parent's handle reaches a runtime whose threads are not there).
    pub fn tokio_handle(&self) -> Result<tokio::runtime::Handle, RuntimeError> {
        Ok(self.shared.runtime()?.handle().clone())
    }
}
