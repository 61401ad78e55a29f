//! `forksafe-core`: the model-checked concurrency core of forksafe.
//!
//! A dependency engine in the family of MXNet's ThreadedEngine — vars, ops
//! with read and write sets, per-var ordering, worker lanes, waits — plus
//! the quiesce / fork / shutdown protocol and the host-lock rules, written
//! once against the [`sync`] facade so the same code builds for production
//! and under loom (`--cfg loom`) and shuttle (`--cfg shuttle`).
//!
//! The invariants (`docs/DESIGN.md` in the repository is the contract) and
//! the part that keeps each, one hop away:
//! - **I1** per-var order: [`Var`] queues (`var.rs`), appended under all of
//!   an op's var locks at once, in var-id order (`engine/push.rs`).
//! - **I2** exactly-once completion: the op's status word (`op.rs`),
//!   completion (`engine/complete.rs`), [`CompletionToken`]; no accepted op
//!   is stranded without a worker: the worker pool (`pool.rs`, its
//!   `# State`) and its start-failure path (`engine/worker.rs`).
//! - **I3** quiesce: [`QuiesceGuard`], the lanes' `paused` and `running`
//!   (`ready.rs`, `engine/quiesce.rs`).
//! - **I4** host-lock liveness: follows from H1 and H2 ([`HostBridge`],
//!   `host.rs`).
//! - **I5** fork child, **I6** fork parent: [`ForkDomain`] (`domain.rs`),
//!   the fork gate (`gate.rs`), the child's settle (`engine/fork.rs`); no
//!   engine thread mid-exit at a fork: workers leave only at shutdown
//!   (`pool.rs`), spawns are counted (`sync/exits.rs`).
//! - **I7** errors and poison: completion (`engine/complete.rs`).
//! - **I8** shutdown: [`Engine::shutdown`] (`engine/shutdown.rs`), the
//!   pool's stop.
//! - **H1**, **H2**: `host.rs`; waits park with the host lock released
//!   (`engine/mod.rs`, `Shared::park`).
//! - **The bound rule** (a push from inside an op never waits for room):
//!   `engine/push.rs`.
//!
//! # Lock order
//!
//! Every engine lock has a [`sync::LockRank`]; a thread takes a lock only
//! while every ranked lock it holds ranks lower. Debug builds check it on
//! every lock (`sync/lock_order.rs`), so the plain test suites check it.
//! The fork gate's section is not a lock, but it is entered first: no thread
//! waits at the gate while holding an engine lock.
//!
//! | rank | lock | taken inside |
//! |---|---|---|
//! | — | fork-gate section (`gate.rs`) | nothing: entered first |
//! | 1 | a var's state (`var.rs`), several only in var-id order (push) | a section |
//! | 2 | a live-index shard (`live.rs`), one at a time | a push's var locks |
//! | 3 | the `wait_all` waiters | a live shard (completion) |
//! | 4 | the control state (lifecycle, errors, push waiters) | a section |
//! | 5 | a lane (ready queue, worker pool), one at a time | control (pause, resume) |
//! | 6 | leaves: timed waiters, trace recorder, gate waiters | anything above |
//! | — | unranked: the domain registry, the test GIL | outside engine locks |
//!
//! Core never calls `fork()`: the engine crate's `pthread_atfork` handlers
//! call [`ForkDomain::prepare`], [`ForkDomain::parent`] and
//! [`ForkDomain::child`].

pub mod sync;

mod current;
mod domain;
mod drain;
mod engine;
mod error;
mod gate;
pub mod gil;
pub mod global;
mod host;
pub mod lifecycle;
mod live;
mod op;
mod op_name;
mod pool;
mod ready;
mod token;
mod trace;
mod var;

pub use domain::ForkDomain;
pub use drain::DomainQuiesce;
#[cfg(any(loom, shuttle))]
pub use engine::ForkSnapshot;
pub use engine::{Config, Engine, ForkReport, QuiesceGuard, ShutdownReport, DEFAULT_MAX_STAND_INS};
pub use error::{Error, OpError, OpErrorKind, Result};
pub use host::{HostBridge, NoHost};
pub use lifecycle::State;
pub use op::{Lane, OpInfo, OpSpec, Payload, Priority, MAX_OP_VARS};
pub use op_name::OpName;
pub use ready::STARVATION_LIMIT;
pub use token::CompletionToken;
pub use trace::TraceEvent;
pub use var::Var;
