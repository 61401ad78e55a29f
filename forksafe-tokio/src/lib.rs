//! `forksafe-tokio`: a tokio runtime that survives `fork()`.
//!
//! tokio does not support fork: a child inherits the runtime's memory but
//! none of its threads, so a `block_on` on the inherited runtime waits for
//! ever, and anything the child registers with the inherited IO driver lands
//! in the epoll instance it shares with its parent, whose driver may then
//! block on the child's events. Rust-backed Python libraries with a static
//! runtime hit it under `multiprocessing`, PyTorch DataLoader workers,
//! gunicorn `--preload` and Celery. [`ForkSafeRuntime`] owns one tokio
//! runtime per process:
//!
//! - In a fork child, the first use builds a fresh runtime (its own
//!   threads, its own epoll instance). The parent's is never used, joined
//!   or dropped in the child; see "What leaks".
//! - Before a fork, its prepare step (a forksafe fork participant,
//!   [`forksafe::join_fork`]) holds new [`RuntimeHandle::block_on`] calls
//!   and waits, bounded by [`RuntimeBuilder::prepare_bound`], for those in
//!   flight, so the child does not copy their results half-written. If they
//!   do not finish in time the fork goes ahead and
//!   [`ForkSafeRuntime::inherited`] says so in the child.
//! - A task spawned before the fork and awaited in the child ends with
//!   [`TaskError::LostInFork`] at once ([`JoinHandle`]), never a hang.
//! - [`global_runtime`] is the process-wide runtime, for libraries that keep
//!   one in a static.
//!
//! ```
//! use forksafe_tokio::ForkSafeRuntime;
//!
//! let rt = ForkSafeRuntime::new().unwrap();
//! let task = rt.spawn(async { 40 + 2 }).unwrap();
//! let value = rt.block_on(async move { task.await }).unwrap();
//! assert_eq!(value, Ok(42));
//! ```
//!
//! # tokio in a fork child, module by module
//!
//! What a child may use of tokio once its parent used the same module,
//! each checked by a real fork in `tests/fork_modules.rs` (the parent uses
//! the module, forks, the child uses it on its own runtime, and then the
//! parent uses it again):
//!
//! | module | in a fork child, on its own runtime | the parent afterwards | why |
//! |---|---|---|---|
//! | `net` (TCP, UDP, Unix sockets on loopback) | works | works | each runtime has its own epoll instance; the child never registers with the parent's, which it shares with the parent |
//! | `time` (sleep, interval, timeout) | works | works | each runtime has its own timer wheel |
//! | `fs` | works | works | each runtime has its own blocking pool |
//! | `sync` (channels, `Mutex`, `Notify`) | works | works | process memory only, no driver |
//! | `io` (duplex, copies) | works | works | |
//! | `signal` | works, and the parent keeps receiving its own signals while the child lives | works | tokio sends every signal through one process-wide socket pair, which a child shares with its parent: their drivers would drain each other's wake-ups, and the child's `recv()` would wait for ever. The child's first `ForkSafeRuntime` swaps in a socket pair of its own under the same descriptors first (`src/signal_pipe.rs`; Linux) |
//! | `process` (spawn, `wait`, `output`) | works | works | on Linux tokio waits for a child process through a pidfd of the runtime's own; the SIGCHLD path uses the swapped pipe |
//!
//! Not supported in a fork child:
//!
//! - **tokio's `parking_lot` feature** (part of `full`): tokio's locks are
//!   then parking_lot's, whose process-wide parking table keeps entries of
//!   the parent's threads, which the child does not have; a child using
//!   `io` on such a build crashed in `parking_lot_core` ("null pointer
//!   dereference"). Depend on tokio with the features you use instead of
//!   `full`.
//! - **a plain tokio runtime** used in the parent: its child hangs at the
//!   first `block_on` (`plain_runtime_child_hangs` in the tests). A plain
//!   runtime built in the child before its first `ForkSafeRuntime` shares
//!   the parent's signal pipe.
//!
//! # Threads
//!
//! A raw fork that catches a thread of this process starting or leaving can
//! leave std's thread registry locked in the child, where no thread can then
//! start (FORK-SAFETY.md, L8). The runtime's worker threads start when it
//! is built, inside a pass of the gate a fork's prepare step closes; idle
//! blocking-pool threads stay alive while the runtime lives (at most
//! [`RuntimeBuilder::max_blocking_threads`], default 64), so none leaves at
//! a fork. Not covered: a fork at the instant tokio starts a new blocking
//! thread (the pool grows on demand, from inside tokio, where no hook sees
//! it start).
//!
//! # What leaks
//!
//! Nothing in a process that does not fork, and nothing per fork in the
//! parent. In each fork child whose parent had built the runtime, the
//! parent's runtime object (its scheduler, driver and task memory, and the
//! file descriptors of its epoll instance and wake-up eventfd; no thread)
//! stays allocated and unused for the child's life: one per fork
//! generation. `tests/fork.rs` (`leaks`) measures it.

mod builder;
mod error;
mod global;
mod handle;
mod join;
mod runtime;
mod shared;
mod signal_pipe;

pub use builder::{Flavor, RuntimeBuilder, MAX_PREPARE_BOUND};
pub use error::{RuntimeError, TaskError};
pub use global::{configure_global, global_runtime};
pub use handle::RuntimeHandle;
pub use join::JoinHandle;
pub use runtime::ForkSafeRuntime;

pub use forksafe::Inherited;
