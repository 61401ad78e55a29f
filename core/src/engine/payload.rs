//! What happens to a payload that does not run: the poison that skips it,
//! and its drop by the host rules (H1: never under an engine lock; I8:
//! never host code once the host is finalising). Shared by the steps that
//! run ops (`run.rs`), cancel them (`shutdown.rs`) and fail them for want
//! of a worker (`spawn.rs`).
//!
//! # State
//!
//! A payload is taken out of its op record once (`op.rs`, by the thread
//! that moved the op out of `Queued`), then run (`run.rs`), dropped here,
//! or leaked here when its drop would be host code the engine may no
//! longer call.

use super::shared::Shared;
use super::Payload;
use crate::error::OpError;
use crate::op::OpCell;
use crate::op_info::Lane;

/// The error a var of `op` is poisoned with, unless the op runs on
/// error; `None` if the fork gate refuses (only the forking thread).
pub(crate) fn poison_of<P: Payload>(shared: &Shared<P>, op: &OpCell<P>) -> Option<OpError> {
    let _section = shared.enter().ok()?;
    poison_of_in_section(op)
}

/// [`poison_of`], inside a section (per op: inlined into the body path).
#[inline]
pub(crate) fn poison_of_in_section<P>(op: &OpCell<P>) -> Option<OpError> {
    if op.run_on_error {
        return None;
    }
    op.vars().find_map(|(v, _)| v.lock().poison().cloned())
}

/// Takes the payload of an op that the calling thread moved out of
/// QUEUED without running it (cancelled, or failed for want of a
/// worker), inside a section; `None` if the fork gate refuses (only the
/// forking thread).
///
/// # Safety
///
/// The calling thread's own completion moved `op` out of QUEUED, so no
/// worker has taken or will take its payload.
pub(crate) unsafe fn take_cancelled_payload<P: Payload>(
    shared: &Shared<P>,
    op: &OpCell<P>,
) -> Option<P> {
    let _section = shared.enter().ok()?;
    // SAFETY: the caller's contract: no other thread takes it.
    unsafe { op.take_payload() }
}

/// Drops a payload that will not run: host payloads through the bridge
/// while the host is alive, leaked once it is finalising (H1, I8).
pub(crate) fn drop_payload<P: Payload>(
    shared: &Shared<P>,
    lane: Lane,
    payload: P,
    host_allowed: bool,
) {
    match lane {
        Lane::Compute => drop(payload),
        Lane::Host if host_allowed && !shared.bridge().is_finalizing() => {
            crate::host::with_host(shared.bridge(), move || drop(payload))
        }
        Lane::Host => std::mem::forget(payload),
    }
}
