//! The process's fork domain and its `pthread_atfork` handlers.
//!
//! The handlers are registered once per process, at the first engine
//! creation, the first default-engine use or the first [`crate::fork`]
//! (as early as possible: prepare handlers run in reverse order of
//! registration, so ours run last in prepare and first in parent/child).

use crate::Error;
use forksafe_core::global::OnceFlag;
use forksafe_core::ForkDomain;

/// The fork domain of every engine in this process: const-initialised, so
/// no lazy initialisation can be half-done at a fork.
pub(crate) static DOMAIN: ForkDomain = ForkDomain::new();

/// Whether the handlers are registered.
static REGISTERED: OnceFlag = OnceFlag::new();

/// Registers the fork handlers, once per process.
pub(crate) fn ensure_registered() -> Result<(), Error> {
    REGISTERED.call_once(u64::from(std::process::id()), || {
        // Only our child handler moves the epoch: past 0, the handlers were
        // registered by an ancestor process whose thread was forked away
        // just before it could mark the flag done. Registering twice would
        // run prepare twice per fork.
        if DOMAIN.epoch() > 0 {
            return Ok(());
        }
        // SAFETY: the three handlers are `extern "C" fn()` items that live
        // for the whole program; `pthread_atfork` only stores them.
        let rc = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::ForkHandlers(format!(
                "pthread_atfork: {}",
                std::io::Error::from_raw_os_error(rc)
            )))
        }
    })
}

/// Prepare: close every engine's fork gate (no draining; bounded by the
/// longest bookkeeping section, which waits on nothing else). Runs on the
/// forking thread before the OS copies the process.
extern "C" fn prepare() {
    DOMAIN.prepare();
}

/// Parent: every engine back to exactly its pre-fork state (I6).
extern "C" fn parent() {
    DOMAIN.parent();
}

/// Child: constant time, async-signal-safe. The only call made:
///
/// - [`ForkDomain::child`] — one `AtomicU64::fetch_add` on a static (a
///   single lock-free instruction: no lock, no allocation, no syscall).
///
/// Nothing else: no allocation, no lock, no thread, no drop. Each engine
/// settles at its first call in the child instead (I5).
extern "C" fn child() {
    DOMAIN.child();
}

/// How many times this process and its ancestors forked into a child
/// since the first engine of the lineage was made (each fork child sees
/// one more than its parent did at the fork).
///
/// ```
/// let before = forksafe::fork_epoch();
/// # let _ = before;
/// ```
pub fn fork_epoch() -> u64 {
    DOMAIN.epoch()
}
