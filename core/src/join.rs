//! A fork participant's handle ([`Participation`]) and
//! [`ForkDomain::join`]: the part of `participant.rs` that names the
//! domain (kept apart so the domain, which runs the steps, and the
//! participant record do not import each other).
//!
//! # State
//!
//! A [`Participation`] is *joined* (its record in the domain's
//! participants, taking part in every fork) until it *leaves*, once:
//! [`Participation::leave`] or its drop, whichever comes first (`left`
//! says which has run). Leaving waits for a fork in progress, so a
//! participant never misses the parent step of a prepare it ran (P2).

use crate::domain::ForkDomain;
use crate::participant::{ForkParticipant, Inherited, Joined};
use crate::sync::Arc;
use std::time::Duration;

/// A participant's place in a domain: it takes part in every fork until
/// this is dropped (or [`Participation::leave`] is called).
pub struct Participation {
    domain: &'static ForkDomain,
    joined: Arc<Joined>,
    left: bool,
}

impl std::fmt::Debug for Participation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Participation")
            .field("name", &self.joined.name())
            .field("inherited", &self.inherited())
            .finish()
    }
}

impl Participation {
    /// What the fork that made this process left the participant's state
    /// as (see [`Inherited`]).
    pub fn inherited(&self) -> Inherited {
        self.joined.inherited(self.domain.epoch())
    }

    /// Leaves the domain: no further prepare or parent step runs.
    /// Errors: [`crate::Error::ForkInProgress`] if called from a prepare or
    /// parent step (then it leaves when dropped instead).
    pub fn leave(mut self) -> crate::Result<()> {
        self.domain.leave(self.joined.id)?;
        self.left = true;
        Ok(())
    }
}

impl Drop for Participation {
    fn drop(&mut self) {
        if !self.left {
            let _ = self.domain.leave(self.joined.id);
        }
    }
}

impl ForkDomain {
    /// Adds `participant` to every fork of this domain from now on: its
    /// prepare step runs before each fork, bounded by `bound`, and its
    /// parent step after it.
    ///
    /// Errors: [`crate::Error::ZeroTimeout`] for a zero bound;
    /// [`crate::Error::ForkInProgress`] from a fork's own steps.
    pub fn join(
        &'static self,
        participant: Box<dyn ForkParticipant>,
        bound: Duration,
    ) -> crate::Result<Participation> {
        if bound.is_zero() {
            return Err(crate::Error::ZeroTimeout);
        }
        let joined = Arc::new(Joined::new(
            self.next_engine_id(),
            participant,
            bound,
            self.epoch(),
        ));
        self.add_participant(joined.clone())?;
        Ok(Participation {
            domain: self,
            joined,
            left: false,
        })
    }
}
