//! The process-wide runtime: [`global_runtime`] and its one-time
//! [`configure_global`].
//!
//! # State
//!
//! | slot | state | moved by | serves |
//! |---|---|---|---|
//! | `CONFIG` | empty → the settings | the first `configure_global`, or the first `global_runtime` (the defaults) | the settings are chosen once; a later `configure_global` is [`RuntimeError::AlreadyConfigured`] |
//! | `GLOBAL` | empty → the runtime | the first `global_runtime` | one runtime per process lineage; each slot is filled by one compare-and-swap, so a fork never copies one half-filled |

use crate::builder::RuntimeBuilder;
use crate::error::RuntimeError;
use crate::runtime::ForkSafeRuntime;
use forksafe_core::global::LazySlot;
use forksafe_core::sync::{AtomicUsize, Ordering};

/// The settings the global runtime is built with.
struct Chosen {
    builder: RuntimeBuilder,
    /// Which `configure_global` call chose them (0: the defaults).
    by: usize,
}

static CONFIG: LazySlot<Chosen> = LazySlot::new();
/// Numbers the `configure_global` calls, from 1.
static CALLS: AtomicUsize = AtomicUsize::new(1);
static GLOBAL: LazySlot<ForkSafeRuntime> = LazySlot::new();

/// Chooses the settings of [`global_runtime`] before its first use. Once
/// only: a second call, or a call after the global runtime was first used,
/// is [`RuntimeError::AlreadyConfigured`]; settings out of range are
/// [`RuntimeError::Config`] and choose nothing.
///
/// ```
/// use forksafe_tokio::{configure_global, global_runtime, RuntimeBuilder, RuntimeError};
/// configure_global(RuntimeBuilder::new_multi_thread().worker_threads(2)).unwrap();
/// assert_eq!(global_runtime().unwrap().block_on(async { 1 }).unwrap(), 1);
/// let again = configure_global(RuntimeBuilder::new_current_thread());
/// assert_eq!(again.unwrap_err(), RuntimeError::AlreadyConfigured);
/// ```
pub fn configure_global(builder: RuntimeBuilder) -> Result<(), RuntimeError> {
    builder.check()?;
    let me = CALLS.fetch_add(1, Ordering::Relaxed);
    let chosen = CONFIG.get_or_try_init(|| Ok::<_, RuntimeError>(Chosen { builder, by: me }))?;
    if chosen.by != me {
        return Err(RuntimeError::AlreadyConfigured);
    }
    Ok(())
}

/// The process's shared runtime, built at first use with the settings of
/// [`configure_global`] (or [`RuntimeBuilder::new_multi_thread`]'s): the
/// fork-safe stand-in for a library's `static RUNTIME: OnceLock<Runtime>`.
/// In a fork child the same value builds the child's own runtime at its
/// first use.
///
/// ```
/// let rt = forksafe_tokio::global_runtime().unwrap();
/// assert_eq!(rt.block_on(async { 2 + 2 }).unwrap(), 4);
/// ```
pub fn global_runtime() -> Result<&'static ForkSafeRuntime, RuntimeError> {
    GLOBAL.get_or_try_init(|| {
        let chosen = CONFIG.get_or_try_init(|| {
            Ok::<_, RuntimeError>(Chosen {
                builder: RuntimeBuilder::default(),
                by: 0,
            })
        })?;
        chosen.builder.clone().build()
    })
}
