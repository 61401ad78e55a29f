//! The lifecycle state machine: every edge in one table (docs/DESIGN.md,
//! "Lifecycle, fork and shutdown"). The fork window (prepare → parent/child)
//! is orthogonal to these states: it is the closed fork gate, and the state
//! is the same on both sides of it except in the child.
//!
//! # State
//!
//! The states are [`State`]'s; every edge is a row of [`next`], applied
//! only by the engine's lifecycle cell under its lock
//! (`engine/lifecycle_cell.rs`), which names who applies each event. The table is
//! total: an edge the protocol refuses is an `Err`, and the state does not
//! move.

use crate::error::Error;

/// Where an engine is in its life. Guards I3 (quiesce) and I8 (shutdown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Dispatching ops.
    Running,
    /// A quiesce is held and ops dispatched before it are still running.
    Quiescing,
    /// A quiesce is held and nothing runs: no op, no engine lock in a worker.
    Quiesced,
    /// Pushes fail; queued ops run until the deadline, then are cancelled.
    ShuttingDown,
    /// No op runs and no host code is called again.
    Stopped,
}

/// What happens to an engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// A quiesce is taken (nested ones count).
    Quiesce,
    /// Every op dispatched before the quiesce has completed.
    Drained,
    /// The quiesce deadline passed first; that quiesce is dropped.
    QuiesceTimeout {
        /// Whether other quiesces are still held.
        others_held: bool,
    },
    /// A quiesce guard is dropped.
    Resume {
        /// Whether other quiesces are still held.
        others_held: bool,
    },
    /// `shutdown(deadline)` is called.
    Shutdown,
    /// Shutdown finished: no worker is in or entering the host bridge.
    Stopped,
    /// The fork child settles its engine at its first call.
    ForkChild,
}

/// The next state, or the error the call that caused `event` returns.
/// Fork prepare and parent do not change the state (the parent goes back to
/// exactly its pre-fork state, I6), so they have no row here.
pub fn next(state: State, event: Event) -> Result<State, Error> {
    use Event as E;
    use State as S;
    match (state, event) {
        (S::ShuttingDown | S::Stopped, E::Quiesce) => Err(Error::ShutDown),
        (S::Running | S::Quiescing, E::Quiesce) => Ok(S::Quiescing),
        (S::Quiesced, E::Quiesce) => Ok(S::Quiesced),

        (S::Quiescing | S::Quiesced, E::Drained) => Ok(S::Quiesced),
        (s, E::Drained) => Ok(s),

        (S::Quiescing | S::Quiesced, E::QuiesceTimeout { others_held: true }) => Ok(state),
        (S::Quiescing | S::Quiesced, E::QuiesceTimeout { others_held: false }) => Ok(S::Running),
        (s, E::QuiesceTimeout { .. }) => Ok(s),

        (S::Quiescing | S::Quiesced, E::Resume { others_held: true }) => Ok(state),
        (S::Quiescing | S::Quiesced, E::Resume { others_held: false }) => Ok(S::Running),
        // A guard outliving a shutdown or a fork is inert.
        (s, E::Resume { .. }) => Ok(s),

        // Shutdown from any state; a quiesce held is overridden (its guard
        // becomes inert) so queued ops can finish before the deadline.
        (S::Running | S::Quiescing | S::Quiesced, E::Shutdown) => Ok(S::ShuttingDown),
        (S::ShuttingDown, E::Shutdown) => Ok(S::ShuttingDown),
        (S::Stopped, E::Shutdown) => Ok(S::Stopped),

        (_, E::Stopped) => Ok(S::Stopped),

        // The child has no quiesce holders (their threads are gone, or their
        // guards belong to the old epoch); a fork during shutdown leaves the
        // child's engine stopped.
        (S::Running | S::Quiescing | S::Quiesced, E::ForkChild) => Ok(S::Running),
        (S::ShuttingDown | S::Stopped, E::ForkChild) => Ok(S::Stopped),
    }
}

impl State {
    #[inline]
    pub(crate) fn code(self) -> usize {
        self as usize
    }
    #[inline]
    pub(crate) fn from_code(code: usize) -> State {
        match code {
            0 => State::Running,
            1 => State::Quiescing,
            2 => State::Quiesced,
            3 => State::ShuttingDown,
            _ => State::Stopped,
        }
    }
    /// Whether pushes are refused.
    pub fn refuses_pushes(self) -> bool {
        matches!(self, State::ShuttingDown | State::Stopped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [State; 5] = [
        State::Running,
        State::Quiescing,
        State::Quiesced,
        State::ShuttingDown,
        State::Stopped,
    ];

    #[test]
    fn codes_round_trip() {
        for s in ALL {
            assert_eq!(State::from_code(s.code()), s);
        }
    }

    #[test]
    fn shutdown_is_reachable_from_every_state_and_sticks() {
        for s in ALL {
            let after = next(s, Event::Shutdown).unwrap();
            assert!(after.refuses_pushes(), "{s:?} -> {after:?}");
            assert_eq!(next(after, Event::Stopped).unwrap(), State::Stopped);
            assert_eq!(next(State::Stopped, Event::Quiesce), Err(Error::ShutDown));
        }
    }

    #[test]
    fn fork_child_keeps_stopped_engines_stopped() {
        for s in ALL {
            let child = next(s, Event::ForkChild).unwrap();
            assert_eq!(child == State::Stopped, s.refuses_pushes(), "{s:?}");
        }
    }

    #[test]
    fn quiesce_nests_and_a_missed_deadline_releases_only_its_own_hold() {
        let s = next(State::Running, Event::Quiesce).unwrap();
        let s = next(s, Event::Drained).unwrap();
        assert_eq!(s, State::Quiesced);
        let s = next(s, Event::Quiesce).unwrap();
        assert_eq!(s, State::Quiesced);
        assert_eq!(
            next(s, Event::QuiesceTimeout { others_held: true }).unwrap(),
            State::Quiesced
        );
        assert_eq!(
            next(s, Event::Resume { others_held: false }).unwrap(),
            State::Running
        );
    }
}
