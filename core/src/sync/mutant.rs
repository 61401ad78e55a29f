//! Deliberately broken variants of the engine (negative controls), for
//! model builds only: the models switch one on and check that loom or
//! shuttle catches the bug. Production builds cannot enable them: there
//! [`active`] is a constant `false` and the switch does not exist.
//!
//! The switch is a thread-local of the test's OS thread: loom and shuttle
//! run a model's threads as coroutines on that thread, so they all see it,
//! and tests running in parallel do not see each other's.

/// A broken variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutant {
    /// The seed's protocol: fork prepare waits for running host ops to
    /// finish while the forking thread holds the host lock (breaks H2).
    DrainingPrepare,
    /// Completion forgets to wake `wait_for_var` and `wait_all` waiters.
    LostNotify,
    /// Push waits for a quiesce to end without releasing the host lock
    /// (breaks H2).
    PushWaitsForQuiesce,
    /// The fork child runs inherited ops instead of completing them with
    /// `LostInFork` (breaks I5).
    ChildRerun,
    /// A thread refused at a closed fork gate counts itself in for a moment
    /// before backing out, so the OS can copy a count no thread of the
    /// child will ever take back; the child's own fork then waits for ever
    /// (breaks I5: the child works).
    CountedRefusal,
    /// A spare worker recalled to stand in for a blocked wait is counted
    /// again but never woken: the op the wait needs stays queued for ever
    /// (a lost wake-up in the pool's recall; breaks I2).
    RecallWithoutWake,
    /// A push from inside an op waits for room under the pending bound,
    /// while its own op holds the last slot (breaks the bound rule: the
    /// engine deadlocks on itself).
    PushInsideOpWaits,
}

#[cfg(any(loom, shuttle))]
std::thread_local! {
    static ACTIVE: std::cell::Cell<Option<Mutant>> = const { std::cell::Cell::new(None) };
}

/// Model builds: switches `mutant` on (or every mutant off) for models run
/// from this OS thread.
#[cfg(any(loom, shuttle))]
pub fn set(mutant: Option<Mutant>) {
    ACTIVE.with(|a| a.set(mutant));
}

/// Whether `mutant` is switched on.
#[cfg(any(loom, shuttle))]
pub fn active(mutant: Mutant) -> bool {
    ACTIVE.with(|a| a.get()) == Some(mutant)
}

/// Whether `mutant` is switched on: never, in production builds.
#[cfg(not(any(loom, shuttle)))]
pub const fn active(mutant: Mutant) -> bool {
    let _ = mutant;
    false
}
