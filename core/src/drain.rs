//! Drained fork support: quiesce every engine of a fork domain at once,
//! bounded by one deadline, before a fork (docs/DESIGN.md, "Drained fork"). Each
//! engine's quiesce waits with the host lock released through its own
//! bridge (H2). Core never forks: the engine crate's `forksafe::fork()`
//! calls [`ForkDomain::quiesce_all`], forks, and drops the result.
//!
//! # State
//!
//! A [`DomainQuiesce`] holds one quiesce guard per engine that drained in
//! time, and the ops still running in those that did not. It moves nothing
//! itself: each guard's drop releases its engine's hold (I3), and guards
//! of a fork child's parent epoch are inert there.

use crate::domain::ForkDomain;
use crate::error::{Error, Result};
use crate::lifecycle::State;
use crate::op_info::OpInfo;
use crate::sync::Clock;
use std::time::Duration;

/// Every engine of a domain quiesced (those that drained in time). Dispatch
/// resumes in each engine when this drops; in a fork child the guards are
/// inert (they belong to the parent's epoch). Guards I3 across engines.
#[must_use = "the quiesce ends when this drops"]
pub struct DomainQuiesce {
    /// Guards first, handles after: a guard's drop resumes its engine.
    guards: Vec<Box<dyn Send>>,
    /// Per engine id, the ops still running when the deadline passed.
    timed_out: Vec<(u64, Vec<OpInfo>)>,
}

impl std::fmt::Debug for DomainQuiesce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DomainQuiesce")
            .field("engines", &self.guards.len())
            .field("timed_out", &self.timed_out)
            .finish()
    }
}

impl DomainQuiesce {
    /// Whether every engine drained before the deadline.
    pub fn drained(&self) -> bool {
        self.timed_out.is_empty()
    }

    /// For each engine that missed the deadline, its id and the ops still
    /// running then (they are inherited by a child forked now).
    pub fn timed_out(&self) -> &[(u64, Vec<OpInfo>)] {
        &self.timed_out
    }

    /// How many engines are held quiesced.
    pub fn engines(&self) -> usize {
        self.guards.len()
    }
}

impl ForkDomain {
    /// Quiesces every live engine of the domain, one after another, within
    /// `timeout` in all. An engine that misses the deadline is not held
    /// (its quiesce is dropped, as [`crate::CoreEngine::quiesce`] does) and is
    /// listed in [`DomainQuiesce::timed_out`]; the caller may fork anyway.
    /// Stopped engines are skipped.
    ///
    /// Errors: [`Error::ZeroTimeout`]; [`Error::ShutDown`] if an engine is
    /// shutting down (nothing stays held); [`Error::ForkInProgress`] from
    /// the forking thread inside a fork window.
    ///
    /// ```
    /// use forksafe_core::ForkDomain;
    /// use std::time::Duration;
    /// let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    /// let held = domain.quiesce_all(Duration::from_secs(1)).unwrap();
    /// assert!(held.drained());
    /// ```
    pub fn quiesce_all(&self, timeout: Duration) -> Result<DomainQuiesce> {
        if timeout.is_zero() {
            return Err(Error::ZeroTimeout);
        }
        let members = self.member_handles()?;
        if members.iter().any(|m| m.state() == State::ShuttingDown) {
            return Err(Error::ShutDown);
        }
        // One deadline shared by the engines' quiesces.
        let clock = Clock::new();
        let deadline = clock.deadline_after(timeout);
        let mut held = DomainQuiesce {
            guards: Vec::with_capacity(members.len()),
            timed_out: Vec::new(),
        };
        for m in members.iter() {
            if m.state() == State::Stopped {
                continue;
            }
            // At least a millisecond: an engine already idle still gets its
            // quiesce; a busy one reports its running ops.
            let left = clock.remaining(deadline).max(Duration::from_millis(1));
            match m.quiesce(left) {
                Ok(guard) => held.guards.push(guard),
                Err(Error::Timeout { pending }) => held.timed_out.push((m.id(), pending)),
                Err(Error::ShutDown) if m.state() == State::Stopped => {}
                Err(e) => return Err(e),
            }
        }
        drop(members);
        Ok(held)
    }
}
