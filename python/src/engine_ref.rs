//! Which engine a Python object, an op payload or a future talks to: an
//! explicit one (owned by its Python object) or the process default.

use forksafe::Engine;
use forksafe_core::sync::Arc;

/// An explicit engine (shared by its Python object, its arrays and the ops
/// that touch them) or the process-wide default one.
#[derive(Clone)]
pub(crate) enum EngineRef {
    Owned(Arc<Engine>),
    Default(&'static Engine),
}

impl EngineRef {
    /// A reference that does not keep an owned engine alive (op payloads
    /// hold these: a payload owning its engine would make a cycle, and an
    /// engine whose Python object is gone would never shut down).
    pub(crate) fn downgrade(&self) -> WeakEngineRef {
        match self {
            EngineRef::Owned(e) => WeakEngineRef::Owned(Arc::downgrade(e)),
            EngineRef::Default(e) => WeakEngineRef::Default(e),
        }
    }
}

/// [`EngineRef::downgrade`].
#[derive(Clone)]
pub(crate) enum WeakEngineRef {
    Owned(forksafe_core::sync::Weak<Engine>),
    Default(&'static Engine),
}

impl WeakEngineRef {
    /// The engine, if it is still alive.
    pub(crate) fn upgrade(&self) -> Option<EngineRef> {
        match self {
            WeakEngineRef::Owned(w) => w.upgrade().map(EngineRef::Owned),
            WeakEngineRef::Default(e) => Some(EngineRef::Default(e)),
        }
    }
}

impl std::ops::Deref for EngineRef {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        match self {
            EngineRef::Owned(e) => e,
            EngineRef::Default(e) => e,
        }
    }
}
