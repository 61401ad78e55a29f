//! The crate's errors: [`RuntimeError`] for building and entering a
//! runtime, [`TaskError`] for what a task's [`JoinHandle`](crate::JoinHandle)
//! resolves to when the task gave no value.

use std::fmt;

/// Why a runtime could not be built, configured or entered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeError {
    /// tokio could not build the runtime (a thread or the IO driver could
    /// not be created; the message is tokio's).
    Build(String),
    /// forksafe refused the runtime's fork participant
    /// ([`forksafe::join_fork`]).
    Fork(forksafe::Error),
    /// A builder value out of range.
    Config(&'static str),
    /// `block_on` was called from inside a tokio runtime (this one's or any
    /// other's): tokio cannot nest runtimes on one thread, and the call
    /// would panic there. Await the future instead.
    InsideRuntime,
    /// This fork child could not get a signal self-pipe of its own, so a
    /// runtime here would share its parent's (the crate docs, "tokio in a
    /// fork child"); the message says what failed.
    SignalPipe(String),
    /// [`configure_global`](crate::configure_global) was called after the
    /// global runtime was configured or first used.
    AlreadyConfigured,
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Build(e) => write!(f, "building the tokio runtime: {e}"),
            RuntimeError::Fork(e) => write!(f, "joining the fork protocol: {e}"),
            RuntimeError::Config(e) => write!(f, "bad runtime configuration: {e}"),
            RuntimeError::InsideRuntime => write!(
                f,
                "block_on called from inside a tokio runtime (await the future instead)"
            ),
            RuntimeError::SignalPipe(e) => {
                write!(f, "giving this fork child its own signal pipe: {e}")
            }
            RuntimeError::AlreadyConfigured => {
                write!(f, "the global runtime is already configured or in use")
            }
        }
    }
}

impl std::error::Error for RuntimeError {}

/// Why a task's [`JoinHandle`](crate::JoinHandle) gave no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskError {
    /// The task was spawned in an ancestor process, before a fork: its
    /// runtime's threads do not exist in this process, so it never ends
    /// here. Its handle says so at once instead of waiting for ever.
    LostInFork,
    /// The task was aborted, or its runtime shut down before it finished.
    Cancelled,
    /// The task panicked (the panic's message, when it was a string).
    Panicked(String),
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::LostInFork => write!(
                f,
                "the task was spawned before a fork and does not run in this process"
            ),
            TaskError::Cancelled => write!(f, "the task was cancelled"),
            TaskError::Panicked(m) => write!(f, "the task panicked: {m}"),
        }
    }
}

impl std::error::Error for TaskError {}

impl From<tokio::task::JoinError> for TaskError {
    fn from(e: tokio::task::JoinError) -> Self {
        if e.is_cancelled() {
            return TaskError::Cancelled;
        }
        let payload = e.into_panic();
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-string panic payload".into());
        TaskError::Panicked(msg)
    }
}
