//! `forksafe-core`: the model-checked concurrency core of forksafe.
//!
//! A dependency engine in the family of MXNet's ThreadedEngine — vars, ops
//! with read and write sets, per-var ordering, worker lanes, waits — plus
//! the quiesce / fork / shutdown protocol and the host-lock rules, written
//! once against the [`sync`] facade so the same code builds for production
//! and under loom (`--cfg loom`) and shuttle (`--cfg shuttle`).
//!
//! The invariants (`docs/DESIGN.md` in the repository is the contract) and
//! the part that keeps each, one hop away. Each part is one file whose
//! module docs have a `# State` section: the states, who moves them, and
//! which invariant each move serves.
//! - **I1** per-var order: the var's queue (`var.rs`), appended under all
//!   of an op's var locks at once, in var-id order (`engine/admission.rs`).
//! - **I2** exactly-once completion: the op's status (`OpStatus`) moves
//!   forward only (`op.rs`), completion (`engine/complete.rs`),
//!   [`CompletionToken`] (`engine/token.rs`); no accepted op is forgotten:
//!   the live index (`live.rs`), the op's gone bit (`op.rs`) and the
//!   waiters (`engine/waiters.rs`); no accepted op is stranded without a
//!   worker: the worker pool (`pool.rs`), the lane (`lane.rs`) and the
//!   start-failure path (`engine/worker.rs`).
//! - **I3** quiesce: [`QuiesceGuard`] (`engine/quiesce.rs`), the lifecycle
//!   cell (`engine/lifecycle_cell.rs`), each ready queue's `paused` and
//!   `running` (`ready/queue.rs`).
//! - **I4** host-lock liveness: follows from H1 and H2 ([`HostBridge`],
//!   `host.rs`).
//! - **I5** fork child, **I6** fork parent: [`ForkDomain`] (`domain.rs`),
//!   the fork gate (`fork_gate.rs`), the epoch cell and its settle-once
//!   (`epoch.rs`), the child's settle (`engine/fork.rs`); no engine thread
//!   mid-exit at a fork: workers leave only at shutdown (`pool.rs`), spawns
//!   are counted (`sync/exits.rs`). Foreign components join the same
//!   protocol as fork participants, rules P1–P4 (`participant.rs`,
//!   `join.rs`, design note `docs/PARTICIPANTS.md`): bounded prepare steps
//!   before the gates close, parent steps after, and a lazy child side
//!   keyed by the fork epoch (`fork_local.rs`), with their long work
//!   counted by a work gate (`work_gate.rs`).
//! - **I7** errors and poison: the var's poison (`var.rs`), completion
//!   (`engine/complete.rs`), the errors kept for `wait_all`
//!   (`engine/lifecycle_cell.rs`).
//! - **I8** shutdown: [`CoreEngine::shutdown`] (`engine/shutdown.rs`), the
//!   lifecycle table (`lifecycle.rs`, applied in
//!   `engine/lifecycle_cell.rs`), the lanes' `stopped` and bridge count
//!   (`lane.rs`), the ready queues' `stopped` (`ready/queue.rs`), the
//!   pool's stop.
//! - **H1**, **H2**: `host.rs`; bodies run outside every engine lock
//!   (`engine/run.rs`); waits park with the host lock released
//!   (`engine/shared.rs`, `Shared::park`).
//! - **The bound rule** (a push from inside an op never waits for room):
//!   `engine/admission.rs`.
//!
//! # One op's path
//!
//! An op moves through the engine's files in one direction
//! (docs/DESIGN.md, "One op's path", walks it): `engine/admission.rs`
//! (checks, the pending bound, the append to its vars) →
//! `engine/dispatch.rs` (a ready queue, a worker woken) →
//! `engine/worker.rs` (the worker that takes it) → `engine/run.rs` (its
//! body) → `engine/complete.rs` (its vars released, the next ops granted
//! and dispatched, waiters woken). `engine/shared.rs` wires the parts
//! together and is the only file with an `impl Shared`.
//!
//! # Layers
//!
//! No two modules import each other, directly or round a cycle
//! (`scripts/check-import-cycles.py`, run in CI). From the bottom: the
//! [`sync`] facade; plain data (`op_info.rs`, `op_name.rs`, `error.rs`,
//! `lifecycle.rs`); the var's queue (`var.rs`, generic over the op record
//! so it names no op); the op record (`op.rs`); what a caller names
//! (`spec.rs`); the parts (`epoch.rs`, `fork_gate.rs`, `live.rs`,
//! `pool.rs`, `lane.rs`, `ready/`, `trace.rs`, `participant.rs`,
//! `work_gate.rs`, `domain.rs`, `join.rs`, `fork_local.rs`); the engine
//! (`engine/`), whose steps reach the parts only through their methods.
//! The negative controls (`controls.rs`) are compiled for the models only
//! and reach into the parts they break; production files name them only in
//! a `control!` hook, which compiles to nothing there.
//!
//! # Lock order
//!
//! Every engine lock has a [`sync::LockRank`]; a thread takes a lock only
//! while every ranked lock it holds ranks lower. Debug builds check it on
//! every lock (`sync/lock_order.rs`), so the plain test suites check it.
//! The fork gate's section is not a lock, but it is entered first: no thread
//! waits at the gate while holding an engine lock. The same debug builds
//! check that every engine lock (ranks 0–6) is taken inside a section, so
//! a fork never copies one held: taking one outside panics at once, on
//! every schedule (the only exceptions, a fork child's settle and an engine
//! not yet shared, say why at `sync::without_section`).
//!
//! | rank | lock | taken inside |
//! |---|---|---|
//! | — | fork-gate section (`fork_gate.rs`) | nothing: entered first |
//! | 0 | the waits inside ops (`engine/wait_graph.rs`) | a section |
//! | 1 | a var's state (`var.rs`), several only in var-id order (push) | a section, or the waits inside ops (one at a time) |
//! | 2 | a live-index shard (`live.rs`), one at a time | a push's var locks, or the waits inside ops |
//! | 3 | the `wait_all` waiters | a push's var locks (a push refused by a shutdown) |
//! | 4 | the lifecycle cell (lifecycle, quiesce holds, errors, push waiters) | a section |
//! | 5 | a lane (worker pool, flags; `lane.rs`), one at a time | the lifecycle cell (pause, resume) |
//! | 6 | a ready queue (`ready/queue.rs`), one at a time | a lane (pause, stop, fork child) |
//! | 7 | leaves: timed waiters, trace recorder, gate waiters | anything above |
//! | — | unranked: the domain registry, the test GIL | outside engine locks |
//!
//! Core never calls `fork()`: the engine crate's `pthread_atfork` handlers
//! call [`ForkDomain::prepare`], [`ForkDomain::parent`] and
//! [`ForkDomain::child`].

/// The hook of a negative control (`controls.rs`, model builds only).
/// `control!(Name)` is whether that control is on: `false` outside model
/// builds, so the branch compiles away. `control!(Name if cond)` is whether
/// it is on and `cond` (a predicate in `controls`) holds: also `false`
/// outside model builds, where `cond` is not compiled. `control!(Name =>
/// expr)` evaluates `expr` (a call of the broken variant in `controls`)
/// only when it is on, and is nothing outside model builds.
macro_rules! control {
    ($m:ident) => {{
        #[cfg(any(loom, shuttle))]
        let on = crate::controls::active(crate::controls::Mutant::$m);
        #[cfg(not(any(loom, shuttle)))]
        let on = false;
        on
    }};
    ($m:ident if $cond:expr) => {{
        #[cfg(any(loom, shuttle))]
        let on = crate::controls::active(crate::controls::Mutant::$m) && $cond;
        #[cfg(not(any(loom, shuttle)))]
        let on = false;
        on
    }};
    ($m:ident => $e:expr) => {
        #[cfg(any(loom, shuttle))]
        if crate::controls::active(crate::controls::Mutant::$m) {
            $e;
        }
    };
    ($m:ident => let $name:ident = $e:expr) => {
        #[cfg(any(loom, shuttle))]
        let $name = if crate::controls::active(crate::controls::Mutant::$m) {
            Some($e)
        } else {
            None
        };
    };
}

pub mod sync;

mod bound;
mod carried;
#[cfg(any(loom, shuttle))]
pub mod controls;
mod current;
mod domain;
mod drain;
mod engine;
mod epoch;
mod error;
mod fork_gate;
mod fork_local;
mod gated_local;
pub mod global;
mod host;
mod ids;
mod join;
mod lane;
pub mod lifecycle;
mod live;
mod op;
mod op_info;
mod op_name;
mod participant;
mod pool;
mod ready;
mod report;
mod spec;
mod trace;
mod var;
mod work_gate;

pub use domain::ForkDomain;

/// The id of the op whose body the calling thread is running (of any
/// engine), if any: for a body that names itself in what it reports.
pub fn running_op() -> Option<u64> {
    current::running_op().map(|r| r.op)
}

pub use drain::DomainQuiesce;
pub use engine::{
    CompletionToken, Config, CoreEngine, ForkReport, Payload, QuiesceGuard, ShutdownReport,
    DEFAULT_MAX_STAND_INS,
};
#[cfg(any(loom, shuttle))]
pub use engine::{EngineLock, ForkPoint, ForkSnapshot};
pub use error::{BodyError, Error, OpError, OpErrorKind, Result};
pub use fork_local::ForkLocal;
pub use gated_local::GatedLocal;
pub use host::{HostBridge, NoHost};
pub use join::Participation;
pub use lifecycle::State;
pub use op::MAX_OP_VARS;
pub use op_info::{Lane, OpInfo, Priority};
pub use op_name::OpName;
pub use participant::{ForkParticipant, Inherited, PrepareDeadline, PrepareFailure};
pub use ready::STARVATION_LIMIT;
pub use spec::{OpSpec, Var};
pub use trace::TraceEvent;
pub use work_gate::{WorkGate, WorkPass};
