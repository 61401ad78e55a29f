//! `forksafe`: a dependency-tracking asynchronous operation engine that
//! stays correct across `fork()`.
//!
//! Ops are closures with the vars they read and write; each var's ops take
//! effect in push order (writes alone, reads between writes together), on
//! a compute lane or on a host lane that calls host code (an embedding
//! interpreter) with the host's global lock held through a
//! [`HostBridge`]. The concurrency core — locks, queues, the worker loop,
//! the quiesce/fork/shutdown protocol — is the `forksafe-core` crate, model-checked
//! under loom and shuttle; this crate sizes its pools, registers the real
//! `pthread_atfork` handlers, and adds the default engine, [`fork`] and the
//! exit hook.
//!
//! ```
//! use forksafe::{Config, Engine};
//! let engine = Engine::new(Config::default()).unwrap();
//! let x = engine.new_var().unwrap();
//! engine.op("fill x").writes(&[&x]).run(|| { /* compute */ }).unwrap();
//! engine.op("use x").reads(&[&x]).host().run(|| { /* call the host */ }).unwrap();
//! engine.wait_all().unwrap();
//! ```
//!
//! # Data vars and values out of ops
//!
//! A [`Data<T>`] is a var that owns a value: an op names it like any var,
//! and its body borrows the value through [`Access`] — `&T` for a read,
//! `&mut T` for a write — with no lock, since the engine already orders the
//! ops on each var (I9, the access grant). [`OpBuilder::run_with`] returns
//! an [`OpHandle`] whose `wait` gives the body's return value;
//! [`Engine::get`] reads a data var's value once its earlier writes are
//! done.
//!
//! ```
//! use forksafe::{Config, Engine};
//! let engine = Engine::new(Config::default()).unwrap();
//! let counter = engine.data(0_u64).unwrap();
//! for _ in 0..3 {
//!     let c = counter.clone();
//!     engine.op("bump").writes(&[counter.var()])
//!         .run_with(move |acc| acc.write(&c).map(|mut n| *n += 1)).unwrap();
//! }
//! assert_eq!(engine.get(&counter).unwrap(), 3);
//! ```
//!
//! # Fork
//!
//! - Raw `fork()` (libc, nix, a library, `std::process::Command`) works:
//!   the prepare handler makes every engine's state consistent without
//!   waiting for any op (so it cannot deadlock on a host lock the forking
//!   thread holds), the parent goes on exactly as before, and in the child
//!   every op pending at the fork completes with
//!   [`OpErrorKind::LostInFork`] without running. See `FORK-SAFETY.md` at the
//!   top of the repository (the fork-safety audit).
//! - [`fork`] quiesces every engine first (bounded by
//!   [`Config::fork_drain`]), so no op is mid-flight at the fork.
//! - Components that are not engines (a thread pool, a cache) join the
//!   same protocol with [`join_fork`]: a bounded prepare step, a parent
//!   step, and a lazy child side ([`ForkLocal`]).
//!
//! # Errors, panics, exit
//!
//! Bad input is a typed [`Error`]. An op that fails or panics poisons the
//! vars it writes; with `panic = "abort"`, a panicking op aborts the
//! process. Statics are never dropped: see [`ExitGuard`] for shutting the
//! engine down before the process exits.

mod atfork;
pub mod bridge;
mod config;
mod data;
mod default;
mod engine;
mod exit;
mod fork;
mod op;
mod participant;
mod scope;
mod task;
mod trace;

pub use atfork::fork_epoch;
pub use bridge::{HostBridge, NoHost};
pub use config::{Config, MAX_DEADLINE};
pub use data::{Access, Data, NotTaken, OpHandle, Read, Write};
pub use default::{
    default_engine, default_engine_if_started, default_exit_guard, init_default, shutdown_default,
};
pub use engine::{Engine, OpId};
pub use exit::ExitGuard;
pub use fork::{fork, fork_with, DrainReport, Forked};
pub use op::OpBuilder;
pub use participant::{
    drain_participants, exit_participants, join_fork, ForkLocal, ForkParticipant, GatedLocal,
    Inherited, Participation, PrepareDeadline, PrepareFailure, WorkGate, WorkPass,
};
pub use scope::{Scope, ScopedOp};
pub use task::{Task, Token};
pub use trace::Trace;

pub use forksafe_core::{
    running_op, BodyError, Error, ForkReport, Lane, OpError, OpErrorKind, OpInfo, OpName, Priority,
    Result, ShutdownReport, State, TraceEvent, DEFAULT_MAX_STAND_INS, MAX_OP_VARS,
};

/// The core engine's sizing and limits, held by [`Config::core`].
pub use forksafe_core::Config as CoreConfig;

/// An op of the production engine built for a batch push: from
/// [`OpBuilder::into_spec`], pushed with
/// [`forksafe_core::CoreEngine::push_batch`].
pub type OpSpec = forksafe_core::OpSpec<Task>;

/// A var of the production engine: a handle naming a resource, whose
/// version each completed write bumps. Vars survive a fork.
pub type Var = forksafe_core::Var<Task>;

/// A held quiesce of one engine ([`CoreEngine::quiesce`](forksafe_core::CoreEngine::quiesce)).
pub type QuiesceGuard = forksafe_core::QuiesceGuard<Task>;

/// The README's Rust example ("Use it"), compiled and run as a doctest so
/// it stays true.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExample;
