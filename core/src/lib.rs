//! `forksafe-core`: the model-checked concurrency core of forksafe.
//!
//! A dependency engine in the family of MXNet's ThreadedEngine — vars, ops
//! with read and write sets, per-var ordering, worker lanes, waits — plus
//! the quiesce / fork / shutdown protocol and the host-lock rules, written
//! once against the [`sync`] facade so the same code builds for production
//! and under loom (`--cfg loom`) and shuttle (`--cfg shuttle`).
//!
//! The invariants (DESIGN.md) and where they are kept:
//! - **I1** per-var order: [`Var`] queues (`var.rs`), appended under all of
//!   an op's var locks at once.
//! - **I2** exactly-once completion: op status CAS, [`CompletionToken`].
//! - **I3** quiesce: [`QuiesceGuard`], the lanes' `paused` and `running`.
//! - **I4** host-lock liveness: follows from H1 and H2 ([`HostBridge`]).
//! - **I5** fork child, **I6** fork parent: [`ForkDomain`], the fork gate.
//! - **I7** errors and poison: completion (`engine/complete.rs`).
//! - **I8** shutdown: [`Engine::shutdown`].
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
mod ready;
mod token;
mod trace;
mod var;

pub use domain::ForkDomain;
pub use drain::DomainQuiesce;
#[cfg(any(loom, shuttle))]
pub use engine::ForkSnapshot;
pub use engine::{Config, Engine, ForkReport, QuiesceGuard, ShutdownReport};
pub use error::{Error, OpError, OpErrorKind, Result};
pub use host::{HostBridge, NoHost};
pub use lifecycle::State;
pub use op::{Lane, OpInfo, OpSpec, Payload, Priority, MAX_OP_VARS};
pub use op_name::OpName;
pub use ready::STARVATION_LIMIT;
pub use token::CompletionToken;
pub use trace::TraceEvent;
pub use var::Var;
