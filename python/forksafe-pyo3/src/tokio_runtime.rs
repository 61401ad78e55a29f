//! Rust futures as Python awaitables on a fork-safe tokio runtime (the
//! `tokio` feature): [`ForkSafeTokio`] implements pyo3-async-runtimes'
//! generic `Runtime` and `ContextExt` traits on
//! [`forksafe_tokio::global_runtime`], so its `future_into_py` and
//! `into_future` work in a process and in each of its fork children, each
//! on its own runtime. [`future_into_py`] and [`block_on`] are the two
//! calls an extension needs.
//!
//! ```no_run
//! use pyo3::prelude::*;
//!
//! /// `await ext.sleep_then(x)` in asyncio, in a parent or a fork child.
//! #[pyfunction]
//! fn sleep_then(py: Python<'_>, x: u64) -> PyResult<Bound<'_, PyAny>> {
//!     forksafe_pyo3::tokio_runtime::future_into_py(py, async move {
//!         tokio::time::sleep(std::time::Duration::from_millis(1)).await;
//!         Ok(x)
//!     })
//! }
//!
//! /// The same, blocking the caller with the GIL released.
//! #[pyfunction]
//! fn sleep_then_sync(py: Python<'_>, x: u64) -> PyResult<u64> {
//!     forksafe_pyo3::tokio_runtime::block_on(py, async move {
//!         tokio::time::sleep(std::time::Duration::from_millis(1)).await;
//!         x
//!     })
//! }
//! ```
//!
//! [`crate::install_hooks`] covers the runtime: its before-fork hook waits,
//! with the GIL released, for the `block_on` calls in flight, and its exit
//! hook holds new ones.

use crate::hooks::{detach, to_py_err};
use pyo3::prelude::*;
use pyo3_async_runtimes::generic::{self, ContextExt, JoinError, Runtime};
use pyo3_async_runtimes::TaskLocals;
use std::cell::OnceCell;
use std::future::Future;
use std::pin::Pin;

tokio::task_local! {
    /// The Python event loop and context of the task that awaits.
    static TASK_LOCALS: OnceCell<TaskLocals>;
}

/// pyo3-async-runtimes' runtime type for [`forksafe_tokio::global_runtime`].
#[derive(Debug, Clone, Copy)]
pub struct ForkSafeTokio;

/// Why a task spawned for Python gave no result.
#[derive(Debug)]
pub struct TaskFailure(String);

impl JoinError for TaskFailure {
    /// Reported as a panic, so pyo3-async-runtimes resolves the Python
    /// future with an exception instead of leaving it pending (a runtime
    /// that cannot be built, or a task lost in a fork, would otherwise
    /// never resolve it).
    fn is_panic(&self) -> bool {
        true
    }

    fn into_panic(self) -> Box<dyn std::any::Any + Send + 'static> {
        Box::new(self.0)
    }
}

type Handle = Pin<Box<dyn Future<Output = Result<(), TaskFailure>> + Send>>;

/// A task that may call into Python (pyo3-async-runtimes resolves the
/// Python future from inside it): each poll holds a pass of the gate the
/// exit hook closes ([`crate::hooks::python_pass`]), so once the
/// interpreter starts to finalise no poll runs and no task takes the GIL.
struct PythonPolls<F> {
    inner: Pin<Box<F>>,
}

impl<F: Future> Future for PythonPolls<F> {
    type Output = F::Output;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let _pass = crate::hooks::python_pass();
        self.inner.as_mut().poll(cx)
    }
}

fn failed(e: impl std::fmt::Display) -> Handle {
    let msg = e.to_string();
    Box::pin(async move { Err(TaskFailure(msg)) })
}

impl Runtime for ForkSafeTokio {
    type JoinError = TaskFailure;
    type JoinHandle = Handle;

    fn spawn<F>(fut: F) -> Handle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let fut = PythonPolls {
            inner: Box::pin(fut),
        };
        match forksafe_tokio::global_runtime().and_then(|rt| rt.spawn(fut)) {
            Ok(task) => Box::pin(async move { task.await.map_err(|e| TaskFailure(e.to_string())) }),
            Err(e) => failed(e),
        }
    }

    fn spawn_blocking<F>(f: F) -> Handle
    where
        F: FnOnce() + Send + 'static,
    {
        let f = move || {
            let _pass = crate::hooks::python_pass();
            f()
        };
        match forksafe_tokio::global_runtime().and_then(|rt| rt.spawn_blocking(f)) {
            Ok(task) => Box::pin(async move { task.await.map_err(|e| TaskFailure(e.to_string())) }),
            Err(e) => failed(e),
        }
    }
}

impl ContextExt for ForkSafeTokio {
    fn scope<F, R>(locals: TaskLocals, fut: F) -> Pin<Box<dyn Future<Output = R> + Send>>
    where
        F: Future<Output = R> + Send + 'static,
    {
        let cell = OnceCell::new();
        let _ = cell.set(locals);
        Box::pin(TASK_LOCALS.scope(cell, fut))
    }

    fn get_task_locals() -> Option<TaskLocals> {
        TASK_LOCALS
            .try_with(|c| c.get().cloned())
            .unwrap_or_default()
    }
}

/// `fut` as a Python awaitable (an `asyncio.Future` of the running event
/// loop), run on this process's fork-safe runtime.
pub fn future_into_py<F, T>(py: Python<'_>, fut: F) -> PyResult<Bound<'_, PyAny>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'py> IntoPyObject<'py> + Send + 'static,
{
    generic::future_into_py::<ForkSafeTokio, F, T>(py, fut)
}

/// Runs `fut` to completion on this process's fork-safe runtime with the
/// GIL released ([`detach`]); a runtime error is a Python `RuntimeError`.
pub fn block_on<F>(py: Python<'_>, fut: F) -> PyResult<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    detach(py, || {
        forksafe_tokio::global_runtime()
            .and_then(|rt| rt.block_on(fut))
            .map_err(to_py_err)
    })
}
