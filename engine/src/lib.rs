//! forksafe: placeholder until the engine issue.
pub use forksafe_core as core;
