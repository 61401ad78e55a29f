//! The op body ([`Payload`]) and the token an async body completes its op
//! with (I2: completed exactly once; dropped unfinished = completed with an
//! error, never a hang). Both live in the engine module: a token completes
//! through the engine, and a payload's signature names the token.
//!
//! # State
//!
//! A token is *held* by its op's body (or whoever the body handed it to)
//! until it is *used*: [`CompletionToken::complete`] completes the op
//! once (a second call is `AlreadyCompleted`), and a drop of an unused
//! token completes it with `TokenDropped`, unless the op's own body is
//! unwinding (then the worker completes it with the panic). The op's status
//! (`op.rs`) is what makes the completion exactly once (I2).

use super::complete::{Outcome, Which};
use super::shared::Shared;
use crate::error::{BodyError, OpError, OpErrorKind, Result};
use crate::op::{OpCell, OpStatus};
use crate::sync::Arc;
use std::fmt;

/// An op body. `token` is `Some` for async ops: the op completes when the
/// token is completed (or dropped, which completes it with an error).
/// A sync op completes when `run` returns.
pub trait Payload: Send + Sized + 'static {
    /// Runs the body. `Err(failure)` fails the op and poisons what it
    /// writes; the failure's error value, if any, travels with the poison.
    fn run(self, token: Option<CompletionToken<Self>>) -> std::result::Result<(), BodyError>;
}

/// Completes an async op. Completing it twice is [`crate::Error::AlreadyCompleted`];
/// completing it in a fork child, where the op was lost, is
/// [`crate::Error::StaleEpoch`]; dropping it unfinished completes the op with
/// [`OpErrorKind::TokenDropped`]. Guards I2.
pub struct CompletionToken<P: Payload> {
    shared: Arc<Shared<P>>,
    op: Arc<OpCell<P>>,
}

impl<P: Payload> fmt::Debug for CompletionToken<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CompletionToken(op '{}' #{})",
            self.op.name,
            self.op.id()
        )
    }
}

impl<P: Payload> CompletionToken<P> {
    /// The token of async op `op`, handed to its body.
    pub(crate) fn new(shared: Arc<Shared<P>>, op: Arc<OpCell<P>>) -> Self {
        CompletionToken { shared, op }
    }

    /// Completes the op: `Ok(())` succeeds, `Err(message)` fails it and
    /// poisons what it writes (I7).
    pub fn complete(&self, result: std::result::Result<(), String>) -> Result<()> {
        let outcome = result.map_err(|m| self.op.error(OpErrorKind::Failed(m)));
        complete_by_token(&self.shared, &self.op, outcome)
    }

    /// Whether the op has completed (by this token or otherwise).
    pub fn is_completed(&self) -> bool {
        self.op.is(OpStatus::Done)
    }

    /// The id of the op this token completes.
    pub fn op_id(&self) -> u64 {
        self.op.id()
    }
}

impl<P: Payload> Drop for CompletionToken<P> {
    fn drop(&mut self) {
        if self.op.is(OpStatus::Done) {
            return;
        }
        // Dropped while the op's own body unwinds from a panic: the worker
        // that runs the body completes the op with that panic (I7), so the
        // error keeps the panic's message instead of `TokenDropped`.
        if crate::sync::panicking() && self.shared.calling_op() == Some(self.op.id()) {
            return;
        }
        let err = self.op.error(OpErrorKind::TokenDropped);
        // A stale or already completed token has nothing left to complete.
        // The one other error, ForkInProgress, needs a token dropped by the
        // forking thread inside the fork window (from another atfork
        // handler); that op stays pending (known limitation, see README).
        let _ = complete_by_token(&self.shared, &self.op, Err(err));
    }
}

/// Completes `op` from its token, then brings the workers its completion
/// planned to life: a typed error if it is done already or belongs to an
/// earlier fork epoch.
fn complete_by_token<P: Payload>(
    this: &Arc<Shared<P>>,
    op: &Arc<OpCell<P>>,
    outcome: std::result::Result<(), OpError>,
) -> Result<()> {
    let outcome = match outcome {
        Ok(()) => Outcome::Ok,
        Err(e) => Outcome::Raised(e),
    };
    super::finish::finish_op(this, op, outcome, None, Which::AnyLive).map(|_| ())
}
