//! The op record: an accepted op's status, vars, payload and name.
//!
//! # State
//!
//! An op's status ([`OpStatus`]) lives in one atomic word with its fork
//! epoch, and moves only forward:
//!
//! | from | to | who | serves |
//! |---|---|---|---|
//! | — | `Queued` | the pusher, at accept | I1: appended to its vars first |
//! | `Queued` | `Running` | the worker that dispatches it, or its pusher running it inline ([`OpCell::try_start`]) | I2: one thread takes the payload |
//! | `Queued` | `Done` | a cancel: shutdown's sweep, a lost-in-fork settle, an unrunnable lane ([`OpCell::try_cancel`]) | I2, I5, I8 |
//! | `Running` | `Done` | completion: the body returned, its token completed or dropped ([`OpCell::try_finish`]) | I2: exactly once |
//!
//! Every move is one read-modify-write, so exactly one thread ends an op;
//! the thread that moved it out of `Queued` is the only one that takes its
//! payload. The move to `Running` also records the ready queue (queue) the
//! op was taken from, whose `running` count its completion lowers (I3),
//! and whether its pusher runs it inline (no worker runs it: a fork child
//! that carries it counts no worker for it, docs/DESIGN.md "Running
//! inline").
//! The epoch bits change only on a fork child's only thread while it
//! settles (I5), keeping the status and the queue.
//!
//! One more bit, *gone*, is set after `Done`, at the end of the
//! completion's (or cancel's) section, once the vars, errors and lane
//! counts show the op's end ([`OpCell::mark_gone`]): the live set
//! (`live.rs`) is the pushed ops not yet gone, and `wait_all` returns only
//! for gone ops, so it never sees a half-applied completion (I2).

use crate::error::{OpError, OpErrorKind};
use crate::op_info::{Lane, OpInfo, Priority};
use crate::op_name::OpName;
use crate::sync::{Arc, AtomicU32, AtomicU64, IdCell, Ordering, TakeOnce};
use crate::var::{Grantee, VarState};
use smallvec::SmallVec;

/// The most vars one op may name (reads and writes together); a push naming
/// more gets [`crate::Error::TooManyVars`].
pub const MAX_OP_VARS: usize = 65_535;

/// The state of a var whose queue holds ops of payload `P`.
pub(crate) type OpVar<P> = VarState<OpCell<P>>;

/// What an op does when it is dispatched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Run the payload; completion when it returns.
    Sync,
    /// Run the payload with a completion token.
    Async,
    /// Clear the poison of the written var (runs on error).
    ClearPoison,
    /// Delete the written var once every earlier op on it completed.
    Delete,
}

/// Where an op is in its life (see the module's `# State`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum OpStatus {
    /// Waiting for vars, or in a ready queue.
    Queued,
    /// Dispatched, not complete.
    Running,
    /// Complete: finished, failed or cancelled.
    Done,
}

impl OpStatus {
    /// The status's bits in the state word. `Done` has every status bit
    /// set, so one `fetch_or` ends any status.
    #[inline]
    const fn bits(self) -> u64 {
        match self {
            OpStatus::Queued => 0,
            OpStatus::Running => 1,
            OpStatus::Done => 3,
        }
    }

    #[inline]
    fn from_bits(bits: u64) -> OpStatus {
        match bits & STATUS {
            0 => OpStatus::Queued,
            1 => OpStatus::Running,
            _ => OpStatus::Done,
        }
    }
}

const STATUS_BITS: u32 = 2;
const STATUS: u64 = (1 << STATUS_BITS) - 1;
/// Bits of the queue index: a lane has at most 1024 queues (one per
/// configured worker, `Config::validate`).
const QUEUE_BITS: u32 = 10;
const QUEUE: u64 = ((1 << QUEUE_BITS) - 1) << STATUS_BITS;
/// Set with the queue when the op's pusher runs it inline (not a worker).
const INLINE: u64 = 1 << (STATUS_BITS + QUEUE_BITS);
/// The bits that say where a started op was taken from and who runs it.
const TAKEN: u64 = QUEUE | INLINE;
/// Set once a done op has left the live set: its completion has applied
/// everything it does (vars, errors, lane counts), so a `wait_all` that sees
/// it may return (I2; `live.rs`).
const GONE: u64 = 1 << (STATUS_BITS + QUEUE_BITS + 1);
/// Where the epoch starts in the state word.
const EPOCH_SHIFT: u32 = STATUS_BITS + QUEUE_BITS + 2;

/// The vars an op names, reads first, in the order given, each with
/// whether the op writes it: the one form of the list, from the spec a
/// caller builds (`spec.rs`) to the record, which keeps it as it was built
/// (no copy, no reshaping). One var without an allocation.
pub(crate) type VarList<P> = SmallVec<[(Arc<OpVar<P>>, bool); 1]>;

/// An accepted op. Guards I2: its [`OpStatus`] moves forward only, by one
/// atomic read-modify-write per move (the module's `# State`), so it
/// completes exactly once, and only the thread that moved it out of
/// `Queued` takes its payload.
/// Kept small: every pending op has one (README, "Benchmarks").
pub(crate) struct OpCell<P> {
    /// Push sequence number, unique per engine: set by the pusher under
    /// the op's var locks, before the record is shared (`sync/id_cell.rs`).
    id: IdCell,
    /// The status (low [`STATUS_BITS`] bits), above it the queue the op was
    /// taken from ([`QUEUE_BITS`] bits) and whether its pusher runs it
    /// inline (one bit), and above that the fork epoch the
    /// op's token is valid in. One word, so the op record stays small;
    /// the epoch changes only while a fork child settles, on its only
    /// thread.
    state: AtomicU64,
    /// Var grants still missing, plus one held by the pusher until every
    /// var has been appended to.
    missing: AtomicU32,
    pub(crate) lane: Lane,
    pub(crate) priority: Priority,
    pub(crate) action: Action,
    pub(crate) run_on_error: bool,
    pub(crate) name: OpName,
    vars: VarList<P>,
    payload: TakeOnce<P>,
}

impl<P> OpCell<P> {
    /// A queued op of fork epoch `epoch`, still missing `missing` grants.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: u64,
        epoch: u64,
        name: OpName,
        lane: Lane,
        priority: Priority,
        action: Action,
        run_on_error: bool,
        vars: VarList<P>,
        missing: u32,
        payload: Option<P>,
    ) -> Self {
        OpCell {
            id: IdCell::new(id),
            state: AtomicU64::new(epoch << EPOCH_SHIFT | OpStatus::Queued.bits()),
            missing: AtomicU32::new(missing),
            lane,
            priority,
            action,
            run_on_error,
            name,
            vars,
            payload: TakeOnce::new(payload),
        }
    }

    /// Model snapshots: var grants still missing.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn missing(&self) -> u32 {
        self.missing.load(Ordering::Acquire)
    }

    /// The op's push sequence number.
    #[inline]
    pub(crate) fn id(&self) -> u64 {
        self.id.get()
    }

    /// Numbers a record built before its id was taken: only its pusher,
    /// under the op's var locks, before the record is shared.
    pub(crate) fn set_id(&self, id: u64) {
        self.id.set(id);
    }

    /// Records one more var grant; true when the op became ready.
    pub(crate) fn grant(&self) -> bool {
        self.grant_many(1)
    }

    /// Records `n` grants at once (a pusher's: the vars granted at append
    /// plus its own), in one read-modify-write; true when the op became
    /// ready.
    pub(crate) fn grant_many(&self, n: u32) -> bool {
        self.missing.fetch_sub(n, Ordering::AcqRel) == n
    }

    /// Moves the status from `from` to `to` if it is `from`, setting the
    /// queue and inline bits to `taken` if given; the epoch bits are kept
    /// (they change only on a fork child's only thread).
    fn change_status(&self, from: OpStatus, to: OpStatus, taken: Option<u64>) -> bool {
        let mut now = self.state.load(Ordering::Acquire);
        loop {
            if OpStatus::from_bits(now) != from {
                return false;
            }
            let taken_bits = taken.unwrap_or(now & TAKEN);
            match self.state.compare_exchange(
                now,
                now & !(STATUS | TAKEN) | taken_bits | to.bits(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => now = actual,
            }
        }
    }

    /// Marks a queued op running, taken from ready queue `queue` by a
    /// worker, or by its pusher to run inline (`inline`).
    pub(crate) fn try_start(&self, queue: usize, inline: bool) -> bool {
        let taken = (queue as u64) << STATUS_BITS & QUEUE | if inline { INLINE } else { 0 };
        self.change_status(OpStatus::Queued, OpStatus::Running, Some(taken))
    }

    /// Whether the op's pusher runs it inline (meaningful once it has
    /// started).
    pub(crate) fn runs_inline(&self) -> bool {
        self.state.load(Ordering::Acquire) & INLINE != 0
    }

    /// The queue the op was taken from (meaningful once it has started).
    pub(crate) fn queue(&self) -> usize {
        ((self.state.load(Ordering::Acquire) & QUEUE) >> STATUS_BITS) as usize
    }

    /// Marks the op done; returns the status it had, or `None` if it was
    /// already done (a second completion).
    pub(crate) fn try_finish(&self) -> Option<OpStatus> {
        let before =
            OpStatus::from_bits(self.state.fetch_or(OpStatus::Done.bits(), Ordering::AcqRel));
        (before != OpStatus::Done).then_some(before)
    }

    /// Marks a queued (not dispatched) op done, for cancellation.
    pub(crate) fn try_cancel(&self) -> bool {
        self.change_status(OpStatus::Queued, OpStatus::Done, None)
    }

    /// Marks a done op as gone from the live set, once its completion has
    /// applied everything it does: the last step of a completion or cancel,
    /// in its section (`live.rs`'s `# State`).
    pub(crate) fn mark_gone(&self) {
        self.state.fetch_or(GONE, Ordering::Release);
    }

    /// Whether the op has left the live set ([`OpCell::mark_gone`]); what
    /// its completion did happens before a `true` here.
    pub(crate) fn is_gone(&self) -> bool {
        self.state.load(Ordering::Acquire) & GONE != 0
    }

    /// The status now.
    pub(crate) fn status(&self) -> OpStatus {
        OpStatus::from_bits(self.state.load(Ordering::Acquire))
    }

    pub(crate) fn is(&self, status: OpStatus) -> bool {
        self.status() == status
    }

    /// The fork epoch the op's token is valid in.
    pub(crate) fn epoch(&self) -> u64 {
        self.state.load(Ordering::Acquire) >> EPOCH_SHIFT
    }

    /// Moves the op to fork epoch `epoch`, keeping its status; only on a
    /// fork child's only thread, while it settles.
    pub(crate) fn set_epoch(&self, epoch: u64) {
        let kept = self.state.load(Ordering::Acquire) & (STATUS | TAKEN | GONE);
        self.state
            .store(epoch << EPOCH_SHIFT | kept, Ordering::Release);
    }

    /// The `i`th var the op names (reads first), with whether it writes it.
    pub(crate) fn var(&self, i: usize) -> (&Arc<OpVar<P>>, bool) {
        let (v, write) = &self.vars[i];
        (v, *write)
    }

    /// Every var the op names, with whether it writes it.
    pub(crate) fn vars(&self) -> impl Iterator<Item = (&Arc<OpVar<P>>, bool)> {
        self.vars.iter().map(|(v, write)| (v, *write))
    }

    /// Takes the payload.
    ///
    /// # Safety
    ///
    /// The caller moved the status out of `Queued` ([`OpCell::try_start`],
    /// [`OpCell::try_cancel`]) and has not taken the payload before, or it is
    /// a fork child's only thread settling the engine.
    pub(crate) unsafe fn take_payload(&self) -> Option<P> {
        // SAFETY: passed on from the caller; the status change (AcqRel)
        // orders this take after the push that stored the payload.
        unsafe { self.payload.take() }
    }

    /// A copy of the payload (model snapshots).
    ///
    /// # Safety
    ///
    /// The fork gate is closed, so no thread takes the payload meanwhile.
    #[cfg(any(loom, shuttle))]
    pub(crate) unsafe fn cloned_payload(&self) -> Option<P>
    where
        P: Clone,
    {
        // SAFETY: passed on from the caller.
        unsafe { self.payload.cloned() }
    }

    /// What identifies the op in reports and errors.
    pub(crate) fn info(&self) -> OpInfo {
        OpInfo {
            id: self.id(),
            name: self.name.to_string(),
            lane: self.lane,
            priority: self.priority,
        }
    }

    pub(crate) fn error(&self, kind: OpErrorKind) -> OpError {
        OpError::new(self.info(), kind)
    }
}

impl<P> Grantee for OpCell<P> {
    fn id(&self) -> u64 {
        OpCell::id(self)
    }

    fn grant(&self) -> bool {
        OpCell::grant(self)
    }
}

/// Unit tests: a compute op `id` of fork epoch `epoch`, with no vars, no
/// payload and nothing to wait for.
#[cfg(test)]
pub(crate) fn bare_op(id: u64, epoch: u64) -> OpCell<()> {
    OpCell::new(
        id,
        epoch,
        OpName::default(),
        Lane::Compute,
        Priority::Normal,
        Action::Sync,
        false,
        VarList::new(),
        0,
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::{bare_op, OpStatus};

    fn op(epoch: u64) -> super::OpCell<()> {
        bare_op(7, epoch)
    }

    /// A fork child moves the op that forked to its epoch (I5); the op must
    /// still be running there, and finish once.
    #[test]
    fn a_new_epoch_keeps_the_status() {
        let queued = op(3);
        queued.set_epoch(4);
        assert!(queued.is(OpStatus::Queued));
        assert_eq!(queued.epoch(), 4);

        let running = op(3);
        assert!(running.try_start(1023, true));
        running.set_epoch(4);
        assert!(running.is(OpStatus::Running));
        assert_eq!(running.epoch(), 4);
        assert_eq!((running.queue(), running.runs_inline()), (1023, true));
        assert_eq!(running.try_finish(), Some(OpStatus::Running));
        assert!(running.is(OpStatus::Done));
        assert_eq!(running.epoch(), 4);
        assert_eq!(running.try_finish(), None);
        assert_eq!(running.queue(), 1023);
        // Gone only when marked, and a new epoch keeps it (a fork copies
        // only whole completions).
        assert!(!running.is_gone());
        running.mark_gone();
        running.set_epoch(5);
        assert!(running.is_gone() && running.is(OpStatus::Done));
        assert_eq!((running.epoch(), running.queue()), (5, 1023));
    }

    /// The queue a start records is the one its completion finds, and a
    /// cancel leaves it alone (I3: the right queue's `running` falls).
    #[test]
    fn a_start_records_its_slot() {
        let a = op(u64::MAX >> 14);
        assert!(a.try_start(5, false));
        assert_eq!((a.queue(), a.epoch()), (5, u64::MAX >> 14));
        assert!(!a.runs_inline());
        assert!(!a.try_start(6, true));
        assert_eq!((a.queue(), a.runs_inline()), (5, false));
        let b = op(1);
        assert!(b.try_cancel());
        assert!(!b.try_start(2, true));
        assert_eq!((b.queue(), b.runs_inline()), (0, false));
    }
}
