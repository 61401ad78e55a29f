//! The host bridge: how the engine calls into a host runtime that has a
//! global lock (CPython's GIL), and how it gets out of the host's way.
//!
//! The engine keeps two rules about it (docs/DESIGN.md, "Lanes and the host
//! lock"):
//! - **H1**: no engine lock is held while host code runs — op bodies, the
//!   bridge, drops of host payloads and tokens.
//! - **H2**: nothing that may run while the caller holds the host lock waits
//!   for a host-lane op unless it first releases the host lock through
//!   [`HostBridge::without_host_lock`].
//!
//! # State
//!
//! The bridge keeps no state here: the host lock is the host's. What the
//! engine counts about it, the host workers inside the bridge, is the host
//! lane's (`lane.rs`); which thread runs host code is the calling thread's
//! ([`with_host`] and [`released`] bracket it).

/// A host runtime with a global lock. Implementations must be re-entrant:
/// [`HostBridge::with_host_lock`] called by a thread that already holds the
/// lock runs the closure directly (as `PyGILState_Ensure` does).
///
/// ```
/// use forksafe_core::{HostBridge, NoHost};
/// let bridge = NoHost;
/// let mut ran = false;
/// bridge.with_host_lock(&mut || ran = true);
/// assert!(ran && !bridge.holds_host_lock());
/// ```
pub trait HostBridge: Send + Sync + 'static {
    /// Runs `f` with the host lock held by this thread.
    fn with_host_lock(&self, f: &mut dyn FnMut());

    /// Runs `f` with the host lock released if this thread holds it, and
    /// takes it back afterwards; runs `f` directly otherwise. Every blocking
    /// wait of the engine goes through this (H2).
    fn without_host_lock(&self, f: &mut dyn FnMut());

    /// Whether the calling thread holds the host lock.
    fn holds_host_lock(&self) -> bool;

    /// Whether the host is finalising (interpreter shutdown): the engine then
    /// never calls host code again, and leaks host payloads instead of
    /// dropping them (I8).
    fn is_finalizing(&self) -> bool {
        false
    }

    /// Whether a wait should stop with [`crate::Error::Interrupted`] (Ctrl-C).
    /// Polled by interruptible waits.
    fn interrupt_requested(&self) -> bool {
        false
    }

    /// How often a blocked wait wakes to poll
    /// [`HostBridge::interrupt_requested`]; `None` (the default) never polls.
    fn interrupt_poll(&self) -> Option<std::time::Duration> {
        None
    }

    /// Called on each engine worker thread as it starts, before it takes
    /// an op. A bridge that keeps per-thread host state from one host call
    /// to the next (CPython's thread state) marks the thread here; the
    /// default does nothing.
    fn worker_started(&self) {}

    /// Called on each engine worker thread as the last step of its loop
    /// (not when it unwinds), outside every engine lock and fork-gate
    /// section; a bridge frees what [`HostBridge::worker_started`] let it
    /// keep, and may take the host lock to do so: shutdown joins exiting
    /// workers with the host lock released (H2). Not called for a worker
    /// that never ran (a fork child's copies of the parent's workers).
    fn worker_exiting(&self) {}
}

/// The bridge of an engine with no host runtime: no lock, never finalising.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHost;

impl HostBridge for NoHost {
    fn with_host_lock(&self, f: &mut dyn FnMut()) {
        f()
    }
    fn without_host_lock(&self, f: &mut dyn FnMut()) {
        f()
    }
    fn holds_host_lock(&self) -> bool {
        false
    }
}

/// Runs `f` with the host lock released if the caller holds it (H2), and
/// returns its result.
pub(crate) fn released<R>(bridge: &dyn HostBridge, f: impl FnOnce() -> R) -> R {
    let mut f = Some(f);
    let mut out = None;
    bridge.without_host_lock(&mut || {
        if let Some(f) = f.take() {
            out = Some(f());
        }
    });
    match out {
        Some(r) => r,
        // A bridge that failed to call the closure: run it here rather than
        // lose the wait (the caller may then hold the host lock; H2 is the
        // bridge's to keep).
        None => (f.take().expect("closure not yet run"))(),
    }
}

/// Runs `f` with the host lock held, and returns its result.
pub(crate) fn with_host<R>(bridge: &dyn HostBridge, f: impl FnOnce() -> R) -> R {
    let mut f = Some(f);
    let mut out = None;
    bridge.with_host_lock(&mut || {
        if let Some(f) = f.take() {
            out = Some(f());
        }
    });
    match out {
        Some(r) => r,
        None => (f.take().expect("closure not yet run"))(),
    }
}

/// A shared bridge is a bridge: engines and tests hold one host through
/// an `Arc`.
impl<B: HostBridge + ?Sized> HostBridge for crate::sync::Arc<B> {
    fn with_host_lock(&self, f: &mut dyn FnMut()) {
        (**self).with_host_lock(f)
    }
    fn without_host_lock(&self, f: &mut dyn FnMut()) {
        (**self).without_host_lock(f)
    }
    fn holds_host_lock(&self) -> bool {
        (**self).holds_host_lock()
    }
    fn is_finalizing(&self) -> bool {
        (**self).is_finalizing()
    }
    fn interrupt_requested(&self) -> bool {
        (**self).interrupt_requested()
    }
    fn interrupt_poll(&self) -> Option<std::time::Duration> {
        (**self).interrupt_poll()
    }
    fn worker_started(&self) {
        (**self).worker_started()
    }
    fn worker_exiting(&self) {
        (**self).worker_exiting()
    }
}
