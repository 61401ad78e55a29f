//! Core's integration tests, one module per file, built as one binary (see
//! `autotests` in core/Cargo.toml).

mod audit_gaps;
mod batch;
mod drain_global;
mod facade_try_lock;
mod fork_steps;
mod host_lock;
mod inside_ops;
mod observable_details;
mod op_name;
mod participants;
mod real_fork;
mod real_threads;
mod run_inline;
mod scheduling;
mod smoke;
mod support;
mod worker_exits;
