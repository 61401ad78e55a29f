//! `forksafe-proptests`: differential property tests of forksafe against a
//! serial reference (docs/DESIGN.md, "Crates").
//!
//! - [`program`]: a small program language over a handful of vars: ops
//!   that read and write values (sync, async, host; succeeding, failing,
//!   panicking, waiting inside their body), var deletes, poison clears,
//!   waits on a var, `wait_all`, quiesce/resume, and forks.
//! - [`reference`](mod@reference): the serial reference interpreter (push order, one op
//!   at a time, docs/DESIGN.md's error rules).
//! - [`exec`]: runs a program on the real engine beside the reference and
//!   compares at every wait; a fork's child checks its state against the
//!   reference at the fork point and runs the rest of the program.
//! - [`strategy`]: proptest strategies (shrinkable); [`decode`](mod@decode): bytes to
//!   programs for the fuzz targets, and back.
//! - [`lifecycle`]: concurrent lifecycle sequences (push, wait, quiesce,
//!   resume, shutdown, simulated fork from several threads) for the
//!   `lifecycle` fuzz target.
//! - [`forking`]: what a fork child may use (write(2), `_exit`) and the
//!   parent's watchdog.
//!
//! The tests are `tests/differential.rs` (a `harness = false` binary: it
//! forks) and `tests/fuzz_corpus_replay.rs` (replays `fuzz/corpus` on
//! stable).

pub mod data;
pub mod decode;
pub mod exec;
pub mod forking;
pub mod lifecycle;
pub mod program;
pub mod reference;
pub mod strategy;

pub use decode::{decode, encode};
pub use exec::{run_program, Options, Stats};
pub use lifecycle::{decode_lifecycle, run_lifecycle, Lifecycle};
pub use program::{Program, Stmt};
