//! Finishing an op, the fifth step of its path: its completion
//! (`complete.rs`, the one place an op becomes done), then the workers that
//! completion planned for the ops it made ready, brought to life once its
//! section has ended (`spawn.rs`). Every caller that ends an op comes
//! here: a worker after the body, a pusher that ran it inline, a token, a
//! shutdown's cancel.
//!
//! # State
//!
//! None of its own: [`finish_op`] moves the completion's state
//! (`complete.rs`'s table), then the pool's (`spawn.rs`).

use super::complete::{self, Outcome, Which};
use super::shared::Shared;
use super::spawn::start_workers;
use super::Payload;
use crate::error::Result;
use crate::op::OpCell;
use crate::ready::Home;
use crate::sync::Arc;

/// Completes `op` with `outcome`, restricted by `which` (see
/// [`complete::complete`]), then brings the workers it planned to life.
/// Returns a newly ready op the calling worker (`home`) runs next, and
/// whether this call completed the op.
pub(crate) fn finish_op<P: Payload>(
    this: &Arc<Shared<P>>,
    op: &Arc<OpCell<P>>,
    outcome: Outcome,
    home: Option<Home>,
    which: Which,
) -> Result<(Option<Arc<OpCell<P>>>, bool)> {
    let (next, done, spawns) = complete::complete(this, op, outcome, home, which)?.into_parts();
    // A start failure fails the ops it strands (see `start_workers`);
    // this completion itself is done.
    let _ = start_workers(this, spawns);
    Ok((next, done))
}
