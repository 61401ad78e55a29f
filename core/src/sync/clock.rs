//! Deadlines. Production: the monotonic clock. Model builds: a tick counter
//! that only [`Clock::advance`] moves, so a model fires a deadline as an
//! event it controls (loom and shuttle do not model time).
//!
//! # State
//!
//! Production: none (the OS clock). Model builds: one tick counter, moved
//! only forward and only by [`Clock::advance`], which a model calls to fire
//! every deadline at or before the next tick.

use std::time::Duration;

/// A point in time on a [`Clock`].
#[cfg(not(any(loom, shuttle)))]
pub type Instant = std::time::Instant;

/// A point in time on a [`Clock`]: a tick count in model builds.
#[cfg(any(loom, shuttle))]
pub type Instant = u64;

/// The engine's clock.
#[derive(Debug, Default)]
pub struct Clock {
    #[cfg(any(loom, shuttle))]
    ticks: super::AtomicU64,
}

impl Clock {
    super::const_in_production! {
        /// A clock reading now.
        pub fn new() -> Self {
            Clock {
                #[cfg(any(loom, shuttle))]
                ticks: super::AtomicU64::new(0),
            }
        }
    }

    /// The deadline `timeout` from now. In model builds any positive timeout
    /// ends at the next `Clock::advance` (model builds only).
    pub fn deadline_after(&self, timeout: Duration) -> Instant {
        #[cfg(not(any(loom, shuttle)))]
        {
            let now = std::time::Instant::now();
            now.checked_add(timeout)
                .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365))
        }
        #[cfg(any(loom, shuttle))]
        {
            let _ = timeout;
            self.ticks.load(super::Ordering::SeqCst) + 1
        }
    }

    /// Whether `deadline` has passed.
    pub fn passed(&self, deadline: Instant) -> bool {
        #[cfg(not(any(loom, shuttle)))]
        {
            std::time::Instant::now() >= deadline
        }
        #[cfg(any(loom, shuttle))]
        {
            self.ticks.load(super::Ordering::SeqCst) >= deadline
        }
    }

    /// Time left until `deadline`, zero once it has passed. Model builds do
    /// not model time: until the clock passes the deadline this is a
    /// positive stand-in (any positive timeout ends at the next advance).
    pub fn remaining(&self, deadline: Instant) -> Duration {
        #[cfg(not(any(loom, shuttle)))]
        {
            deadline.saturating_duration_since(std::time::Instant::now())
        }
        #[cfg(any(loom, shuttle))]
        {
            if self.passed(deadline) {
                Duration::ZERO
            } else {
                Duration::from_secs(1)
            }
        }
    }

    /// Model builds: moves time one tick on. The engine wakes its timed
    /// waiters after calling this (see `CoreEngine::advance_clock`).
    #[cfg(any(loom, shuttle))]
    pub fn advance(&self) {
        self.ticks.fetch_add(1, super::Ordering::SeqCst);
    }

    pub(super) fn park_until(&self, at: Instant) {
        #[cfg(not(any(loom, shuttle)))]
        {
            let now = std::time::Instant::now();
            if at > now {
                std::thread::park_timeout(at - now);
            }
        }
        #[cfg(any(loom, shuttle))]
        {
            if !self.passed(at) {
                super::park_current();
            }
        }
    }
}
