//! A lane's ready ops: per-worker ready queues (`queue.rs`, gathered in
//! [`ReadyQueues`], `queues.rs`), each under its own lock, and the lane's
//! spin hint (`spin_hint.rs`). The lane's workers and flags are
//! `lane.rs`'s. Every change happens inside a fork-gate section. The
//! hand-off protocol (which queue an op goes to, when a worker is woken,
//! why no wake-up is lost) is in `README.md` beside this file.
//!
//! # State
//!
//! This table is an op's life in its lane's ready queues; a queue's own
//! flags and counts are `queue.rs`'s table, the records kept for pushers
//! `retired.rs`'s, the spin hint `spin_hint.rs`'s.
//!
//! | from | to | who | serves |
//! |---|---|---|---|
//! | — | queued | the grant that made it ready (`engine/dispatch.rs`): a pusher queues on the queue its id picks, a completing worker on its home queue | I1: only granted ops queue |
//! | queued | dispatched | a worker, under the queue's lock, its home queue first, then the others in turn, unless the queue is `paused` or `stopped` ([`ReadyQueues::take`]); or a completing worker that found its home queue empty, taking the op it made ready | I3: nothing starts while a quiesce holds |
//! | — | dispatched inline | its pusher, when the op is ready at its push and the queue it picks already holds `Config::run_inline_from` ops, under the queue's lock, unless the queue is held | I3; the rule is docs/DESIGN.md "Running inline" |
//! | dispatched | — | its completion, under the lock of the queue that counted it | I3: a quiesce drains |
//! | queued | — | shutdown's cancel sweep, a lane that cannot run it, or the fork child's settle ([`ReadyQueues::drain`]) | I8, I2, I5 |
//!
//! Priority picks among one queue's ready ops only (`bands.rs`), so it
//! never reorders two ops of one var (I1); [`STARVATION_LIMIT`] bounds how
//! long a low band waits in its queue.

mod bands;
mod queue;
mod queues;
mod retired;
mod spin_hint;

pub use bands::STARVATION_LIMIT;
pub(crate) use queue::Take;
pub(crate) use queues::ReadyQueues;
pub(crate) use retired::RETIRED_BATCH;
pub(crate) use spin_hint::SpinHint;

use crate::op_info::Lane;

/// A worker's lane and its home queue: where the ops its completions make
/// ready are queued, and where it looks first.
#[derive(Clone, Copy)]
pub(crate) struct Home {
    pub(crate) lane: Lane,
    pub(crate) queue: usize,
}
