//! A value of each process's own whose long uses pass a work gate: the
//! shape of a thread pool or an async runtime that joins the fork protocol
//! (`forksafe-rayon`'s pool, `forksafe-tokio`'s runtime). Design note:
//! docs/PARTICIPANTS.md.
//!
//! # State
//!
//! | part | state | moved by | serves |
//! |---|---|---|---|
//! | `epochs` | this process's gate and value, or none yet | the first use in each process | a fork child never reaches its parent's gate or value ([`ForkLocal`]: an ancestor's entry is never returned, never dropped) |
//! | the epoch's `gate` | open → closed → open; closed for good at exit | [`GatedLocal::prepare`] (close, wait bounded), [`GatedLocal::parent`] (open), [`GatedLocal::close_for_exit`] | I5 for the value: with the gate closed and no pass held, no use is half done at the fork |
//! | the epoch's `value` | not built → built | [`GatedLocal::get_or_try_init`] and [`GatedLocal::with`], inside a pass | a prepare that closed the gate and saw no pass knows no build is under way (no thread of it starting) |

use crate::domain::ForkDomain;
use crate::fork_local::ForkLocal;
use crate::participant::PrepareDeadline;
use crate::work_gate::WorkGate;

/// A per-process value whose uses pass a work gate (see the module's
/// `# State`). Guards I5 for the value's work: a fork copies no use half
/// done unless its prepare bound passed.
///
/// ```
/// use forksafe_core::{ForkDomain, GatedLocal};
/// let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
/// let pool: GatedLocal<String> = GatedLocal::new(domain);
/// let len = pool.with(|| Ok::<_, ()>("a pool".to_string()), |p| p.len()).unwrap();
/// assert_eq!(len, 6);
/// domain.prepare();
/// domain.child();
/// assert!(pool.get().is_none(), "the child builds its own");
/// ```
pub struct GatedLocal<T> {
    domain: &'static ForkDomain,
    epochs: ForkLocal<Epoch<T>>,
}

impl<T> std::fmt::Debug for GatedLocal<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatedLocal")
            .field("built_here", &self.get().is_some())
            .finish()
    }
}

/// One process's gate and value.
struct Epoch<T> {
    gate: WorkGate,
    value: ForkLocal<T>,
}

impl<T> GatedLocal<T> {
    crate::sync::const_in_production! {
        /// An empty cell of `domain`'s epochs.
        pub fn new(domain: &'static ForkDomain) -> Self {
            GatedLocal { domain, epochs: ForkLocal::new(domain) }
        }
    }

    fn epoch(&self) -> &Epoch<T> {
        let built = self.epochs.get_or_try_init(|| {
            Ok::<_, std::convert::Infallible>(Epoch {
                gate: WorkGate::new(),
                value: ForkLocal::new(self.domain),
            })
        });
        match built {
            Ok(e) => e,
            Err(never) => match never {},
        }
    }

    /// This process's value, if built here.
    pub fn get(&self) -> Option<&T> {
        self.epochs.get().and_then(|e| e.value.get())
    }

    /// This process's value, built by `init` inside a pass of the gate if
    /// it is not built here yet (waiting first while a fork prepares). For
    /// uses that need no pass of their own (handing work to the value's
    /// threads, say).
    pub fn get_or_try_init<E>(&self, init: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        let epoch = self.epoch();
        if let Some(v) = epoch.value.get() {
            return Ok(v);
        }
        let _pass = epoch.gate.enter();
        epoch.value.get_or_try_init(init)
    }

    /// Runs `f` with this process's value (built by `init` if needed)
    /// inside one pass of the gate: a fork's prepare step waits, bounded,
    /// for `f` to return, and a use started while a fork prepares waits for
    /// the fork.
    pub fn with<R, E>(
        &self,
        init: impl FnOnce() -> Result<T, E>,
        f: impl FnOnce(&T) -> R,
    ) -> Result<R, E> {
        let epoch = self.epoch();
        if control!(GatedLocalSkipsPass) {
            if let Some(v) = epoch.value.get() {
                return Ok(f(v));
            }
        }
        let _pass = epoch.gate.enter();
        let v = epoch.value.get_or_try_init(init)?;
        Ok(f(v))
    }

    /// Uses in flight in this process.
    pub fn in_flight(&self) -> usize {
        self.epochs.get().map_or(0, |e| e.gate.in_flight())
    }

    /// The prepare step: holds new uses and waits for those in flight
    /// until `deadline`; false if some were still in flight then. Nothing
    /// to wait for if this process never used the value.
    pub fn prepare(&self, deadline: &PrepareDeadline<'_>) -> bool {
        self.epochs
            .get()
            .is_none_or(|e| e.gate.close_and_wait(deadline))
    }

    /// The parent step: lets uses in again.
    pub fn parent(&self) {
        if let Some(e) = self.epochs.get() {
            e.gate.open();
        }
    }

    /// A drained fork's wait: until no use is in flight, or `deadline`.
    pub fn drain(&self, deadline: &PrepareDeadline<'_>) -> bool {
        self.epochs.get().is_none_or(|e| e.gate.wait_idle(deadline))
    }

    /// At exit: holds new uses for good and waits for those in flight
    /// until `deadline`.
    pub fn close_for_exit(&self, deadline: &PrepareDeadline<'_>) -> bool {
        self.prepare(deadline)
    }
}
