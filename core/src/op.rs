//! Ops: a payload with the vars it reads and writes, a lane, a name and a
//! priority. Core is generic over the payload, so the models use small
//! cloneable effect descriptors and the engine crate uses closures.

use crate::error::OpError;
use crate::sync::{AtomicU64, AtomicUsize, Mutex, Ordering};
use crate::token::CompletionToken;
use crate::var::Var;

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
    pub(crate) reads: Vec<Var<P>>,
    pub(crate) writes: Vec<Var<P>>,
    pub(crate) lane: Lane,
    pub(crate) priority: Priority,
    pub(crate) name: Option<String>,
    pub(crate) run_on_error: bool,
    pub(crate) action: Action,
}

impl<P: Payload> OpSpec<P> {
    /// A sync compute op of normal priority with no vars.
    pub fn new(payload: P) -> Self {
        OpSpec {
            payload: Some(payload),
            reads: Vec::new(),
            writes: Vec::new(),
            lane: Lane::Compute,
            priority: Priority::Normal,
            name: None,
            run_on_error: false,
            action: Action::Sync,
        }
    }

    pub(crate) fn internal(action: Action, var: &Var<P>, name: &str) -> Self {
        OpSpec {
            payload: None,
            reads: Vec::new(),
            writes: vec![var.clone()],
            lane: Lane::Compute,
            priority: Priority::Normal,
            name: Some(name.to_string()),
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
    /// Vars the op reads, taken by value (no copy of the list when none
    /// were given before).
    pub fn reads_vec(mut self, mut vars: Vec<Var<P>>) -> Self {
        if self.reads.is_empty() {
            self.reads = vars;
        } else {
            self.reads.append(&mut vars);
        }
        self
    }
    /// Vars the op writes, taken by value (no copy of the list when none
    /// were given before).
    pub fn writes_vec(mut self, mut vars: Vec<Var<P>>) -> Self {
        if self.writes.is_empty() {
            self.writes = vars;
        } else {
            self.writes.append(&mut vars);
        }
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
    /// A name for reports and errors.
    pub fn name(mut self, name: impl Into<String>) -> Self {
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

/// Op status: queued (waiting for vars or in a ready queue), running
/// (dispatched, not complete), done.
pub(crate) const QUEUED: usize = 0;
pub(crate) const RUNNING: usize = 1;
pub(crate) const DONE: usize = 2;

/// An accepted op. Guards I2: `status` moves QUEUED → RUNNING → DONE or
/// QUEUED → DONE by compare-and-swap, so it completes exactly once.
pub(crate) struct OpCell<P> {
    pub(crate) info: OpInfo,
    /// The fork epoch its token is valid in.
    pub(crate) epoch: AtomicU64,
    pub(crate) reads: Vec<Var<P>>,
    pub(crate) writes: Vec<Var<P>>,
    pub(crate) run_on_error: bool,
    pub(crate) action: Action,
    /// Var grants still missing, plus one held by the pusher until every
    /// var has been appended to.
    pub(crate) missing: AtomicUsize,
    pub(crate) status: AtomicUsize,
    pub(crate) payload: Mutex<Option<P>>,
}

impl<P> OpCell<P> {
    /// Records one more var grant; true when the op became ready.
    pub(crate) fn grant(&self) -> bool {
        self.missing.fetch_sub(1, Ordering::AcqRel) == 1
    }

    pub(crate) fn try_start(&self) -> bool {
        self.status
            .compare_exchange(QUEUED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Marks the op done; returns the status it had, or `None` if it was
    /// already done (a second completion).
    pub(crate) fn try_finish(&self) -> Option<usize> {
        let before = self.status.swap(DONE, Ordering::AcqRel);
        (before != DONE).then_some(before)
    }

    /// Marks a queued (not dispatched) op done, for cancellation.
    pub(crate) fn try_cancel(&self) -> bool {
        self.status
            .compare_exchange(QUEUED, DONE, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Every var the op names, with whether it writes it.
    pub(crate) fn vars(&self) -> impl Iterator<Item = (&Var<P>, bool)> {
        self.reads
            .iter()
            .map(|v| (v, false))
            .chain(self.writes.iter().map(|v| (v, true)))
    }

    pub(crate) fn is(&self, status: usize) -> bool {
        self.status.load(Ordering::Acquire) == status
    }

    pub(crate) fn error(&self, kind: crate::error::OpErrorKind) -> OpError {
        OpError::new(self.info.clone(), kind)
    }
}
