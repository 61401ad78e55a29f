//! [`RuntimeBuilder`]: the tokio settings a
//! [`ForkSafeRuntime`](crate::ForkSafeRuntime) builds each process's runtime
//! with, checked once at `build` (in `runtime.rs`, beside what it builds).

use crate::error::RuntimeError;
use std::time::Duration;

/// The longest prepare bound accepted (a fork waits at most this long for
/// the runtime's `block_on` calls in flight).
pub const MAX_PREPARE_BOUND: Duration = Duration::from_secs(3600);

/// Which of tokio's schedulers each process's runtime uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// tokio's multi-thread scheduler: worker threads run tasks whether or
    /// not a thread is inside `block_on`.
    MultiThread,
    /// tokio's current-thread scheduler: tasks run only while a thread is
    /// inside `block_on`.
    CurrentThread,
}

/// How a [`ForkSafeRuntime`](crate::ForkSafeRuntime) builds the runtime of each process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeBuilder {
    pub(crate) flavor: Flavor,
    pub(crate) worker_threads: Option<usize>,
    pub(crate) thread_name: String,
    pub(crate) stack_size: Option<usize>,
    pub(crate) enable_io: bool,
    pub(crate) enable_time: bool,
    pub(crate) max_blocking_threads: usize,
    pub(crate) prepare_bound: Duration,
}

impl Default for RuntimeBuilder {
    fn default() -> Self {
        RuntimeBuilder {
            flavor: Flavor::MultiThread,
            worker_threads: None,
            thread_name: "forksafe-tokio".into(),
            stack_size: None,
            enable_io: true,
            enable_time: true,
            max_blocking_threads: 64,
            prepare_bound: Duration::from_secs(2),
        }
    }
}

impl RuntimeBuilder {
    /// A multi-thread runtime with io and time on (tokio's
    /// `Builder::new_multi_thread().enable_all()`), at most 64 blocking
    /// threads and a 2 s prepare bound.
    pub fn new_multi_thread() -> Self {
        Self::default()
    }

    /// A current-thread runtime with io and time on.
    pub fn new_current_thread() -> Self {
        RuntimeBuilder {
            flavor: Flavor::CurrentThread,
            ..Self::default()
        }
    }

    /// Worker threads of a multi-thread runtime (tokio's default: one per
    /// CPU). At least 1.
    pub fn worker_threads(mut self, n: usize) -> Self {
        self.worker_threads = Some(n);
        self
    }

    /// The name of the runtime's threads (no NUL byte).
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.thread_name = name.into();
        self
    }

    /// Each thread's stack size in bytes.
    pub fn thread_stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Whether the IO driver (sockets, and tokio's signal and process
    /// drivers) is on; default on.
    pub fn enable_io(mut self, on: bool) -> Self {
        self.enable_io = on;
        self
    }

    /// Whether the time driver (`tokio::time`) is on; default on.
    pub fn enable_time(mut self, on: bool) -> Self {
        self.enable_time = on;
        self
    }

    /// The cap on threads of the blocking pool (`spawn_blocking`,
    /// `tokio::fs`); default 64, at least 1. They stay alive while the
    /// runtime lives, so a fork never catches one leaving (the crate docs,
    /// "Threads").
    pub fn max_blocking_threads(mut self, n: usize) -> Self {
        self.max_blocking_threads = n;
        self
    }

    /// How long a fork waits for the runtime's `block_on` calls in flight
    /// (default 2 s; between 1 ns and [`MAX_PREPARE_BOUND`]).
    pub fn prepare_bound(mut self, bound: Duration) -> Self {
        self.prepare_bound = bound;
        self
    }

    pub(crate) fn check(&self) -> Result<(), RuntimeError> {
        if self.prepare_bound.is_zero() || self.prepare_bound > MAX_PREPARE_BOUND {
            return Err(RuntimeError::Config(
                "prepare_bound must be positive and at most MAX_PREPARE_BOUND",
            ));
        }
        if self.thread_name.contains('\0') {
            return Err(RuntimeError::Config("thread_name must not contain NUL"));
        }
        if self.worker_threads == Some(0) {
            return Err(RuntimeError::Config("worker_threads must be at least 1"));
        }
        if self.max_blocking_threads == 0 {
            return Err(RuntimeError::Config(
                "max_blocking_threads must be at least 1",
            ));
        }
        if self.stack_size == Some(0) {
            return Err(RuntimeError::Config("thread_stack_size must be positive"));
        }
        Ok(())
    }

    /// tokio's builder for these settings.
    pub(crate) fn tokio_builder(&self) -> tokio::runtime::Builder {
        let mut b = match self.flavor {
            Flavor::MultiThread => tokio::runtime::Builder::new_multi_thread(),
            Flavor::CurrentThread => tokio::runtime::Builder::new_current_thread(),
        };
        if let Some(n) = self.worker_threads {
            b.worker_threads(n);
        }
        if let Some(s) = self.stack_size {
            b.thread_stack_size(s);
        }
        if self.enable_io {
            b.enable_io();
        }
        if self.enable_time {
            b.enable_time();
        }
        b.thread_name(self.thread_name.clone())
            .max_blocking_threads(self.max_blocking_threads)
            // Idle blocking threads stay until the runtime shuts down: a
            // thread leaving at a fork can leave std's thread registry
            // locked in the child (FORK-SAFETY.md, L8).
            .thread_keep_alive(Duration::from_secs(u64::from(u32::MAX)));
        b
    }
}
