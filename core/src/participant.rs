//! Fork participants: foreign components (a thread pool, a cache, a
//! connection) that join the fork protocol of a [`ForkDomain`] next to its
//! engines. The design note is `docs/PARTICIPANTS.md`.
//!
//! The participant's handle and joining are in `join.rs`.
//!
//! A participant gives two steps, [`ForkParticipant::prepare`] and
//! [`ForkParticipant::parent`]; it has no child step. Its child side
//! follows I5 like an engine's: the atfork child handler does nothing for
//! it, and the participant's first use in the child rebuilds what it owns,
//! keyed by the fork epoch ([`crate::ForkLocal`]), after asking
//! [`crate::Participation::inherited`] whether the state the fork copied was
//! prepared.
//!
//! # State
//!
//! Each joined participant has a record ([`Joined`]) holding the outcome
//! of the last prepare step run for it, with the epoch the child of that
//! fork has. Only the forking thread writes it, while it holds the
//! domain's `forking` flag (one fork at a time), so a fork copies whatever
//! the forking thread last wrote.
//!
//! | from | to | who | serves |
//! |---|---|---|---|
//! | — | no outcome (`for_epoch == 0`) | [`ForkDomain::join`] | a child forked before the participant's first prepare sees it unprepared |
//! | any | `Prepared` for epoch `e + 1` | the forking thread, when prepare returned before its deadline | I5: the child may go on from the copied state |
//! | any | `Panicked` / `Overran` for `e + 1` | the forking thread, when prepare panicked or returned late | I5, and the fork's bound: the fork proceeds; the child rebuilds |
//!
//! In a child at epoch `c`, [`crate::Participation::inherited`] reads the copied
//! record: `Prepared` only if its outcome is `Prepared` *for `c`*; an
//! outcome for another epoch (a participant that joined between the
//! prepare steps and the fork) reads as [`Inherited::Unprepared`] with
//! [`PrepareFailure::NotPrepared`].
//!
//! The bound: the forking thread runs each prepare step inline, with a
//! deadline `bound` after the step starts, and catches a panic. A step
//! that returns late is marked `Overran` (the fork has waited for it; the
//! participant must honour the deadline it is given, see the trait). No
//! watchdog thread runs the steps: a thread started or ending at a fork
//! can leave std's thread-start lock held in the child (`sync/exits.rs`).

use crate::sync::{AtomicU64, AtomicUsize, Clock, Instant, Ordering};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

/// A foreign component's steps in a fork domain's fork protocol. Both run
/// on the forking thread, once per fork, in the order participants joined.
///
/// Rules (docs/PARTICIPANTS.md):
/// - `prepare` runs before any engine's fork gate closes: it may use
///   engines and wait, but it must return by `deadline` (poll
///   [`PrepareDeadline::passed`] or wait at most
///   [`PrepareDeadline::remaining`]). It must not fork, and must not wait
///   for the host lock (the forking thread may hold it).
/// - `parent` runs in the parent after the fork, once for every prepare
///   that ran (whatever its outcome), so it can undo what prepare did.
/// - There is no child step. In the child, rebuild lazily at first use
///   (keyed by the fork epoch: [`crate::ForkLocal`]), and ask
///   [`crate::Participation::inherited`] whether the copied state was prepared.
///
/// A panic in either step is caught: the fork proceeds, and the child sees
/// [`Inherited::Unprepared`].
///
/// ```
/// use forksafe_core::{ForkDomain, ForkParticipant, Inherited, PrepareDeadline};
/// use std::time::Duration;
///
/// struct Quiet;
/// impl ForkParticipant for Quiet {
///     fn name(&self) -> &str { "quiet" }
///     fn prepare(&self, _deadline: &PrepareDeadline<'_>) {}
///     fn parent(&self) {}
/// }
///
/// let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
/// let p = domain.join(Box::new(Quiet), Duration::from_millis(100)).unwrap();
/// assert_eq!(p.inherited(), Inherited::Fresh);
/// domain.prepare();
/// domain.child(); // as the atfork child handler would: the child's view
/// assert_eq!(p.inherited(), Inherited::Prepared);
/// ```
pub trait ForkParticipant: Send + Sync {
    /// A name for reports.
    fn name(&self) -> &str;
    /// Before the fork: bring the state to a point a copy can go on from
    /// (finish or hold in-flight work), by `deadline`.
    fn prepare(&self, deadline: &PrepareDeadline<'_>);
    /// After the fork, in the parent: undo what `prepare` did.
    fn parent(&self);
    /// Optional, before a fork, when the forking code can wait without
    /// holding anything (the host lock released: a drained fork, or a
    /// Python `os.register_at_fork` before-hook): wait, until `deadline`,
    /// for the work in flight to end, without holding new work. The
    /// prepare step that follows then finds little or nothing to wait for.
    /// Default: nothing.
    fn drain(&self, deadline: &PrepareDeadline<'_>) {
        let _ = deadline;
    }
    /// Optional, when the process is about to exit (an `atexit` hook):
    /// hold new work for good and wait, until `deadline`, for the work in
    /// flight. A host whose threads must not return into it after it
    /// finalises (CPython: a thread that takes the GIL back then is torn
    /// down mid-call) calls this before finalising. Default: nothing.
    fn at_exit(&self, deadline: &PrepareDeadline<'_>) {
        let _ = deadline;
    }
}

/// A step run outside a fork, bounded: [`ForkParticipant::drain`] or
/// [`ForkParticipant::at_exit`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum BoundedStep {
    Drain,
    AtExit,
}

/// The deadline of a prepare step.
#[derive(Debug)]
pub struct PrepareDeadline<'a> {
    clock: &'a Clock,
    at: Instant,
}

impl<'a> PrepareDeadline<'a> {
    /// The deadline `timeout` from now on `clock` (for code that drives a
    /// [`crate::WorkGate`] outside a participant's steps).
    pub fn after(clock: &'a Clock, timeout: Duration) -> Self {
        PrepareDeadline {
            clock,
            at: clock.deadline_after(timeout),
        }
    }

    /// Whether the deadline has passed.
    pub fn passed(&self) -> bool {
        self.clock.passed(self.at)
    }

    /// Time left, zero once passed. (Model builds do not model time: a
    /// positive stand-in until the model's clock passes the deadline.)
    pub fn remaining(&self) -> Duration {
        self.clock.remaining(self.at)
    }
}

/// Why a participant's state was not prepared at the fork that made this
/// process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrepareFailure {
    /// Its prepare step panicked.
    Panicked,
    /// Its prepare step returned after its deadline.
    Overran,
    /// No prepare step ran for it at that fork (it joined while the fork
    /// was being prepared).
    NotPrepared,
}

/// What a participant's state is, as the fork that made this process left
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Inherited {
    /// No fork since the participant joined: the state is this process's
    /// own.
    Fresh,
    /// A fork child, and the prepare step returned in time: the copied
    /// state is as prepare left it.
    Prepared,
    /// A fork child, and the copied state may be mid-change: rebuild it.
    Unprepared(PrepareFailure),
}

const NONE: usize = 0;
const PREPARED: usize = 1;
const PANICKED: usize = 2;
const OVERRAN: usize = 3;

/// A participant as its domain holds it (see the module's `# State`).
/// Guards P1 (its prepare step bounded, panics caught, outcome marked) and
/// P3 (the outcome a child reads is the one its own fork's prepare step
/// wrote), docs/DESIGN.md "Fork participants".
pub(crate) struct Joined {
    pub(crate) id: u64,
    participant: Box<dyn ForkParticipant>,
    bound: Duration,
    /// The epoch the participant joined in.
    joined_in: u64,
    /// The child epoch the outcome is for (0: none yet).
    for_epoch: AtomicU64,
    /// `NONE`, `PREPARED`, `PANICKED` or `OVERRAN`.
    outcome: AtomicUsize,
}

impl Joined {
    pub(crate) fn new(
        id: u64,
        participant: Box<dyn ForkParticipant>,
        bound: Duration,
        joined_in: u64,
    ) -> Joined {
        Joined {
            id,
            participant,
            bound,
            joined_in,
            for_epoch: AtomicU64::new(0),
            outcome: AtomicUsize::new(NONE),
        }
    }

    pub(crate) fn name(&self) -> &str {
        self.participant.name()
    }

    /// Runs the prepare step for the fork from `epoch`, bounded, and
    /// records its outcome for the child (epoch + 1).
    pub(crate) fn prepare(&self, clock: &Clock, epoch: u64) {
        let deadline = PrepareDeadline::after(clock, self.bound);
        let returned = catch_unwind(AssertUnwindSafe(|| self.participant.prepare(&deadline)));
        let outcome = match returned {
            Err(_) => PANICKED,
            Ok(()) if deadline.passed() && !control!(TrustLatePrepare) => OVERRAN,
            Ok(()) => PREPARED,
        };
        // Outcome first: a fork copies both, and only this thread writes.
        self.outcome.store(outcome, Ordering::Release);
        self.for_epoch.store(epoch + 1, Ordering::Release);
    }

    /// Runs `step`, bounded by `timeout` (a panic is caught). Returns
    /// whether it returned in time.
    pub(crate) fn run(&self, step: BoundedStep, clock: &Clock, timeout: Duration) -> bool {
        let deadline = PrepareDeadline::after(clock, timeout);
        let returned = catch_unwind(AssertUnwindSafe(|| match step {
            BoundedStep::Drain => self.participant.drain(&deadline),
            BoundedStep::AtExit => self.participant.at_exit(&deadline),
        }));
        returned.is_ok() && !deadline.passed()
    }

    /// Runs the parent step (a panic is caught: the parent goes on).
    pub(crate) fn parent(&self) {
        let _ = catch_unwind(AssertUnwindSafe(|| self.participant.parent()));
    }

    pub(crate) fn inherited(&self, epoch: u64) -> Inherited {
        if epoch == self.joined_in {
            return Inherited::Fresh;
        }
        if self.for_epoch.load(Ordering::Acquire) != epoch {
            return Inherited::Unprepared(PrepareFailure::NotPrepared);
        }
        match self.outcome.load(Ordering::Acquire) {
            PREPARED => Inherited::Prepared,
            PANICKED => Inherited::Unprepared(PrepareFailure::Panicked),
            OVERRAN => Inherited::Unprepared(PrepareFailure::Overran),
            _ => Inherited::Unprepared(PrepareFailure::NotPrepared),
        }
    }
}
