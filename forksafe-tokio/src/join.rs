//! [`JoinHandle`]: a tokio task's handle that knows which process's runtime
//! runs the task.
//!
//! # State
//!
//! | state | moved by | serves |
//! |---|---|---|
//! | same epoch: the inner tokio handle is live | `spawn` | awaiting, aborting and dropping it are tokio's |
//! | an ancestor's epoch (this process is a fork child) | the fork | the task's runtime has no thread here: polling gives [`TaskError::LostInFork`] at once and dropping leaks the inner handle, never touching the parent's runtime (whose locks and wakers may have been copied mid-use) |

use crate::error::TaskError;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The handle of a task spawned on a
/// [`ForkSafeRuntime`](crate::ForkSafeRuntime): await it for the task's
/// value, or the [`TaskError`] that replaced it. In a fork child, a handle
/// of a task spawned before the fork resolves at once to
/// [`TaskError::LostInFork`] (see the module's `# State`).
///
/// ```
/// let rt = forksafe_tokio::RuntimeBuilder::new_multi_thread().worker_threads(1).build().unwrap();
/// let task = rt.spawn(async { 6 * 7 }).unwrap();
/// assert_eq!(rt.block_on(task).unwrap(), Ok(42));
/// ```
#[must_use = "a dropped handle detaches its task"]
pub struct JoinHandle<T> {
    inner: ManuallyDrop<tokio::task::JoinHandle<T>>,
    /// The fork epoch of the process that spawned the task.
    epoch: u64,
}

impl<T> std::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinHandle")
            .field("epoch", &self.epoch)
            .field("lost_in_fork", &self.is_lost_in_fork())
            .finish()
    }
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(inner: tokio::task::JoinHandle<T>, epoch: u64) -> Self {
        JoinHandle {
            inner: ManuallyDrop::new(inner),
            epoch,
        }
    }

    /// Whether the task was spawned before a fork that made this process.
    pub fn is_lost_in_fork(&self) -> bool {
        self.epoch != forksafe::fork_epoch()
    }

    /// Whether the task has finished (a task lost in a fork never does).
    pub fn is_finished(&self) -> bool {
        !self.is_lost_in_fork() && self.inner.is_finished()
    }

    /// Aborts the task (tokio's `JoinHandle::abort`); nothing for a task
    /// lost in a fork, which does not run here.
    pub fn abort(&self) {
        if !self.is_lost_in_fork() {
            self.inner.abort();
        }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, TaskError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.is_lost_in_fork() {
            return Poll::Ready(Err(TaskError::LostInFork));
        }
        // `JoinHandle<T>` is `Unpin`, so the inner handle may be polled
        // through a plain `&mut`.
        Pin::new(&mut *self.inner)
            .poll(cx)
            .map(|r| r.map_err(TaskError::from))
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if self.is_lost_in_fork() {
            // The parent's runtime owns the task's memory; touching it here
            // could take a lock copied held. Leaked, like the parent's
            // runtime itself.
            return;
        }
        // SAFETY: `inner` is dropped once, here, and never used again.
        unsafe { ManuallyDrop::drop(&mut self.inner) }
    }
}
