//! Ops: a payload with the vars it reads and writes, a lane, a name and a
//! priority. Core is generic over the payload, so the models use small
//! cloneable effect descriptors and the engine crate uses closures.

use crate::error::OpError;
use crate::op_name::OpName;
use crate::sync::{Arc, AtomicU32, AtomicU64, Ordering, TakeOnce};
use crate::token::CompletionToken;
use crate::var::{Var, VarState};
use smallvec::SmallVec;

/// The most vars one op may name (reads and writes together); a push naming
/// more gets [`crate::Error::TooManyVars`].
pub const MAX_OP_VARS: usize = 65_535;

/// The vars an [`OpSpec`] reads or writes: two without an allocation.
pub(crate) type OpVars<P> = SmallVec<[Var<P>; 2]>;

/// Which worker pool runs an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Plain Rust work.
    Compute,
    /// Work that calls host code; runs through the [`crate::HostBridge`]
    /// with the host lock taken around it.
    Host,
}

impl Lane {
    pub(crate) const ALL: [Lane; 2] = [Lane::Compute, Lane::Host];
    pub(crate) fn index(self) -> usize {
        match self {
            Lane::Compute => 0,
            Lane::Host => 1,
        }
    }
}

/// Priority bands of the ready queue: FIFO within a band; see
/// [`crate::ready::STARVATION_LIMIT`] for the bound on starving lower bands.
/// Priority never reorders ops on one var (I1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum Priority {
    /// Dispatched first.
    High,
    /// The default.
    #[default]
    Normal,
    /// Dispatched last, but never starved past the bound.
    Low,
}

impl Priority {
    pub(crate) fn index(self) -> usize {
        match self {
            Priority::High => 0,
            Priority::Normal => 1,
            Priority::Low => 2,
        }
    }
}

/// What identifies an op in reports and errors.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OpInfo {
    /// Push sequence number, unique per engine.
    pub id: u64,
    /// The name given at push (`"op"` if none).
    pub name: String,
    /// The lane it was pushed to.
    pub lane: Lane,
    /// Its priority band.
    pub priority: Priority,
}

/// An op body. `token` is `Some` for async ops: the op completes when the
/// token is completed (or dropped, which completes it with an error).
/// A sync op completes when `run` returns.
pub trait Payload: Send + Sized + 'static {
    /// Runs the body. `Err(message)` fails the op and poisons what it writes.
    fn run(self, token: Option<CompletionToken<Self>>) -> Result<(), String>;
}

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

/// A request to push an op. Build with [`OpSpec::new`].
///
/// ```
/// # use forksafe_core::{OpSpec, Lane, Priority, Payload, CompletionToken};
/// struct Nop;
/// impl Payload for Nop {
///     fn run(self, _t: Option<CompletionToken<Self>>) -> Result<(), String> { Ok(()) }
/// }
/// let spec = OpSpec::new(Nop).name("nop").lane(Lane::Compute).priority(Priority::High);
/// # let _ = spec;
/// ```
pub struct OpSpec<P> {
    pub(crate) payload: Option<P>,
    pub(crate) reads: OpVars<P>,
    pub(crate) writes: OpVars<P>,
    pub(crate) lane: Lane,
    pub(crate) priority: Priority,
    pub(crate) name: Option<OpName>,
    pub(crate) run_on_error: bool,
    pub(crate) action: Action,
}

impl<P: Payload> OpSpec<P> {
    /// A sync compute op of normal priority with no vars.
    pub fn new(payload: P) -> Self {
        OpSpec {
            payload: Some(payload),
            reads: OpVars::new(),
            writes: OpVars::new(),
            lane: Lane::Compute,
            priority: Priority::Normal,
            name: None,
            run_on_error: false,
            action: Action::Sync,
        }
    }

    pub(crate) fn internal(action: Action, var: &Var<P>, name: &'static str) -> Self {
        OpSpec {
            payload: None,
            reads: OpVars::new(),
            writes: std::iter::once(var.clone()).collect(),
            lane: Lane::Compute,
            priority: Priority::Normal,
            name: Some(OpName::from_static(name)),
            run_on_error: true,
            action,
        }
    }

    /// Vars the op reads.
    pub fn reads(mut self, vars: &[Var<P>]) -> Self {
        self.reads.extend(vars.iter().cloned());
        self
    }
    /// Vars the op writes.
    pub fn writes(mut self, vars: &[Var<P>]) -> Self {
        self.writes.extend(vars.iter().cloned());
        self
    }
    /// Vars the op reads, taken by value (no handle is cloned).
    pub fn reads_vec(mut self, vars: impl IntoIterator<Item = Var<P>>) -> Self {
        self.reads.extend(vars);
        self
    }
    /// Vars the op writes, taken by value (no handle is cloned).
    pub fn writes_vec(mut self, vars: impl IntoIterator<Item = Var<P>>) -> Self {
        self.writes.extend(vars);
        self
    }
    /// The lane (default compute).
    pub fn lane(mut self, lane: Lane) -> Self {
        self.lane = lane;
        self
    }
    /// The priority band (default normal).
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }
    /// A name for reports and errors: a string literal is kept without a
    /// copy (see [`OpName`]).
    pub fn name(mut self, name: impl Into<OpName>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Run even if a var it touches is poisoned (I7 opt-out).
    pub fn run_on_error(mut self) -> Self {
        self.run_on_error = true;
        self
    }
    /// Make it async: the body gets a [`CompletionToken`].
    pub fn asynchronous(mut self) -> Self {
        self.action = Action::Async;
        self
    }
}

/// Op status, in the low bits of [`OpCell`]'s state word: queued (waiting
/// for vars or in a ready queue), running (dispatched, not complete), done.
/// `DONE` has every status bit set, so one `fetch_or` ends any status.
pub(crate) const QUEUED: u64 = 0;
pub(crate) const RUNNING: u64 = 1;
pub(crate) const DONE: u64 = 3;
const STATUS_BITS: u32 = 2;
const STATUS: u64 = (1 << STATUS_BITS) - 1;

/// The vars of an accepted op, reads first, in the order given, each with
/// whether the op writes it: one var without an allocation, more in one
/// boxed slice.
pub(crate) enum VarList<P> {
    One([(Arc<VarState<P>>, bool); 1]),
    Many(Box<[(Arc<VarState<P>>, bool)]>),
}

impl<P> VarList<P> {
    /// The vars of `reads` then `writes`.
    pub(crate) fn new(
        reads: impl IntoIterator<Item = Var<P>>,
        writes: impl IntoIterator<Item = Var<P>>,
    ) -> Self {
        let uses = reads
            .into_iter()
            .map(|v| (v.state, false))
            .chain(writes.into_iter().map(|v| (v.state, true)));
        let mut uses = uses.peekable();
        match (uses.next(), uses.peek()) {
            (Some(only), None) => VarList::One([only]),
            (first, _) => {
                // Sized up front: collecting a chain would allocate room for
                // four and shrink it, a second allocator call per op.
                let mut many =
                    Vec::with_capacity(usize::from(first.is_some()) + uses.size_hint().0);
                many.extend(first);
                many.extend(uses);
                VarList::Many(many.into_boxed_slice())
            }
        }
    }

    pub(crate) fn as_slice(&self) -> &[(Arc<VarState<P>>, bool)] {
        match self {
            VarList::One(one) => one,
            VarList::Many(many) => many,
        }
    }
}

/// An accepted op. Guards I2: its status moves QUEUED → RUNNING → DONE or
/// QUEUED → DONE by atomic read-modify-write, so it completes exactly once,
/// and only the thread that moved it out of QUEUED takes its payload.
/// Kept small: every pending op has one (README, "Benchmarks").
pub(crate) struct OpCell<P> {
    /// Push sequence number, unique per engine.
    pub(crate) id: u64,
    /// The status (low [`STATUS_BITS`] bits) and, above it, the fork epoch
    /// the op's token is valid in. One word, so the op record stays small;
    /// the epoch changes only while a fork child settles, on its only
    /// thread.
    state: AtomicU64,
    /// Var grants still missing, plus one held by the pusher until every
    /// var has been appended to.
    pub(crate) missing: AtomicU32,
    pub(crate) lane: Lane,
    pub(crate) priority: Priority,
    pub(crate) action: Action,
    pub(crate) run_on_error: bool,
    pub(crate) name: OpName,
    pub(crate) vars: VarList<P>,
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
            id,
            state: AtomicU64::new(epoch << STATUS_BITS | QUEUED),
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

    /// Records one more var grant; true when the op became ready.
    pub(crate) fn grant(&self) -> bool {
        self.missing.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// Moves the status from `from` to `to` if it is `from`; the epoch bits
    /// are kept (they change only on a fork child's only thread).
    fn change_status(&self, from: u64, to: u64) -> bool {
        let mut now = self.state.load(Ordering::Acquire);
        loop {
            if now & STATUS != from {
                return false;
            }
            match self.state.compare_exchange(
                now,
                now & !STATUS | to,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => now = actual,
            }
        }
    }

    pub(crate) fn try_start(&self) -> bool {
        self.change_status(QUEUED, RUNNING)
    }

    /// Marks the op done; returns the status it had, or `None` if it was
    /// already done (a second completion).
    pub(crate) fn try_finish(&self) -> Option<u64> {
        let before = self.state.fetch_or(DONE, Ordering::AcqRel) & STATUS;
        (before != DONE).then_some(before)
    }

    /// Marks a queued (not dispatched) op done, for cancellation.
    pub(crate) fn try_cancel(&self) -> bool {
        self.change_status(QUEUED, DONE)
    }

    /// The status (model snapshots).
    #[cfg(any(loom, shuttle))]
    pub(crate) fn status(&self) -> u64 {
        self.state.load(Ordering::Acquire) & STATUS
    }

    pub(crate) fn is(&self, status: u64) -> bool {
        self.state.load(Ordering::Acquire) & STATUS == status
    }

    /// The fork epoch the op's token is valid in.
    pub(crate) fn epoch(&self) -> u64 {
        self.state.load(Ordering::Acquire) >> STATUS_BITS
    }

    /// Moves the op to fork epoch `epoch`, keeping its status; only on a
    /// fork child's only thread, while it settles.
    pub(crate) fn set_epoch(&self, epoch: u64) {
        let status = self.state.load(Ordering::Acquire) & STATUS;
        self.state
            .store(epoch << STATUS_BITS | status, Ordering::Release);
    }

    /// Every var the op names, with whether it writes it.
    pub(crate) fn vars(&self) -> impl Iterator<Item = (&Arc<VarState<P>>, bool)> {
        self.vars.as_slice().iter().map(|(v, write)| (v, *write))
    }

    /// Takes the payload.
    ///
    /// # Safety
    ///
    /// The caller moved the status out of `QUEUED` ([`OpCell::try_start`],
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
            id: self.id,
            name: self.name.to_string(),
            lane: self.lane,
            priority: self.priority,
        }
    }

    pub(crate) fn error(&self, kind: crate::error::OpErrorKind) -> OpError {
        OpError::new(self.info(), kind)
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
        VarList::new(Vec::new(), Vec::new()),
        0,
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::{bare_op, DONE, QUEUED, RUNNING};

    fn op(epoch: u64) -> super::OpCell<()> {
        bare_op(7, epoch)
    }

    /// A fork child moves the op that forked to its epoch (I5); the op must
    /// still be running there, and finish once.
    #[test]
    fn a_new_epoch_keeps_the_status() {
        let queued = op(3);
        queued.set_epoch(4);
        assert!(queued.is(QUEUED));
        assert_eq!(queued.epoch(), 4);

        let running = op(3);
        assert!(running.try_start());
        running.set_epoch(4);
        assert!(running.is(RUNNING));
        assert_eq!(running.epoch(), 4);
        assert_eq!(running.try_finish(), Some(RUNNING));
        assert!(running.is(DONE));
        assert_eq!(running.epoch(), 4);
        assert_eq!(running.try_finish(), None);
    }
}
