//! A lane's ready ops and workers: per-worker ready queues (slots, `slot.rs`, in
//! [`ReadyQueues`], each under its own lock), and beside them, under the
//! lane's lock ([`crate::sync::LockRank::Lane`]), the lane's worker pool
//! ([`Pool`]), the shutdown flag and the host bridge count. Every change
//! happens inside a fork-gate section. The hand-off protocol (which queue
//! an op goes to, when a worker is woken, why no wake-up is lost) is in
//! `README.md` beside this file.
//!
//! # State
//!
//! A ready op (every var granted) is *queued* on one slot, then
//! *dispatched*: taken by a worker (its home slot first, then the others),
//! counted in the `running` of the slot it came from until it completes
//! (I2, I3).
//!
//! | what | from | to | who | serves |
//! |---|---|---|---|---|
//! | op | — | queued | the grant that made it ready (`engine/worker.rs`, `dispatch`): a pusher queues on the slot its id picks, a completing worker on its home slot | I1: only granted ops queue |
//! | op | queued | dispatched | a worker, under the slot's lock, unless the slot is `paused` or `stopped` (`Slot::take`); or a completing worker that found its home slot empty, taking the op it made ready | I3: nothing starts while a quiesce holds |
//! | op | — | dispatched inline | its pusher, when the op is ready at its push and the slot it picks already holds `Config::run_inline_from` ops, under the slot's lock, unless the slot is `paused` or `stopped` (`Slot::start_inline`); counted in `running` and in `inline` | I3; the rule is docs/DESIGN.md "Running inline" |
//! | op | dispatched | — | its completion, under the lock of the slot that counted it (`running` falls; its drain waiters woken) | I3: a quiesce drains |
//! | op | queued | — | shutdown's cancel sweep or the fork child's settle ([`ReadyQueues::drain`]) | I8, I5 |
//! | slots | dispatching | paused | a quiesce, every slot under the control and lane locks (`engine/quiesce.rs`) | I3 |
//! | slots | paused | dispatching | the last quiesce released, a shutdown, or the fork child | I3, I8 |
//! | lane, slots | any | stopped | shutdown, once the deadline passed (`engine/shutdown.rs`); never left but by a fork child of a running engine | I8 |
//! | worker | busy | idle | the worker, under the lane lock, before it looks at every slot once more and parks | no lost wake-up (`README.md`) |
//! | worker | idle | busy | a dispatch that read a non-zero *wanted* word, under the lane lock ([`Pool::wake_idle`]) | I2: a queued op finds a worker |
//! | worker | busy | spinning (production only) | the worker, before its look, for a moment before it registers idle ([`SpinHint`], `spin_hint.rs`) | a hint, never a decision |
//! | op record | completed | retired | its compute worker, 32 at a time (1 in model builds), under its home slot's lock, in a section | memory: freed where it was allocated (`README.md`) |
//! | op record | retired | freed | the next pusher queueing on that slot, after it left its section; or leaked by a fork child | H1, I5: no payload dropped inside a section or in a child |
//!
//! `in_bridge` counts host workers inside or entering the host bridge;
//! shutdown waits for it to reach zero before it returns (I8: no host call
//! after shutdown). Priority picks among one slot's ready ops only, so it
//! never reorders two ops of one var (I1); [`STARVATION_LIMIT`] bounds how
//! long a low band waits in its slot.

mod bands;
mod queues;
mod slot;
mod spin_hint;

pub use bands::STARVATION_LIMIT;
pub(crate) use queues::ReadyQueues;
pub(crate) use slot::{Take, RETIRED_BATCH};
pub(crate) use spin_hint::SpinHint;

use crate::op_info::Lane;
use crate::pool::Pool;
use crate::sync::Thread;

/// A worker's lane and its home slot: where the ops its completions make
/// ready are queued, and where it looks first.
#[derive(Clone, Copy)]
pub(crate) struct Home {
    pub(crate) lane: Lane,
    pub(crate) slot: usize,
}

/// One lane's workers and flags, under the lane's lock. Guards I8
/// (`stopped`, `in_bridge`); its `pool` keeps the sizing rule (see
/// [`crate::pool`]) and publishes the *wanted* word its dispatches read.
pub(crate) struct LaneState {
    /// The lane's worker threads.
    pub(crate) pool: Pool,
    /// Shutdown finished: workers exit and nobody enters the host bridge.
    pub(crate) stopped: bool,
    /// Host workers inside or entering the host bridge.
    pub(crate) in_bridge: usize,
    /// Threads waiting for `in_bridge` to fall (shutdown).
    pub(crate) drain_waiters: Vec<Thread>,
}

impl LaneState {
    /// A lane of `workers` workers, with at most `max_stand_ins` blocked
    /// waits inside ops at once.
    pub(crate) fn new(workers: usize, max_stand_ins: usize) -> Self {
        LaneState {
            pool: Pool::new(workers, max_stand_ins),
            stopped: false,
            in_bridge: 0,
            drain_waiters: Vec::new(),
        }
    }
}
