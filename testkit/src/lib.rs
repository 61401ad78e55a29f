//! `forksafe-testkit`: what forksafe's test suites share, kept out of the
//! published crates (docs/DESIGN.md, "Testing real forks").
//!
//! - [`gil`]: [`GilBridge`], a host lock that behaves like CPython's GIL
//!   (re-entrant, released around waits, still held by the forking thread
//!   in a fork child), the host the seed's scenarios run against in core's
//!   tests, the engine's tests, the models and the differential tests.
//!   Written against `forksafe_core::sync`, so in model builds it is
//!   checked with the engine.
//! - [`child`]: running code in a fork child (reports with one
//!   `write(2)`, leaves with `_exit`) and the one watchdog that waits for a
//!   child, kills it and fails instead of hanging; its limits scale with
//!   `FORKSAFE_WATCHDOG_SCALE`.
//! - [`counters`]: per-op run counters, the payload helper the fork tests
//!   check "ran exactly once" and "never ran again" with.
//! - [`proc_counts`]: this process's threads, mappings and RSS, which the
//!   soak and leak tests compare before and after.

pub mod child;
pub mod counters;
pub mod gil;
pub mod harness;
pub mod proc_counts;

pub use gil::{GilBridge, HostLock};
