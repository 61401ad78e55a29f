//! Host bridges: how host-lane ops take the host runtime's global lock
//! (CPython's GIL) and how the engine gets out of its way. The trait and
//! the no-host bridge are core's; [`GilBridge`] is a test host that behaves
//! like the GIL.
//!
//! ```
//! use forksafe::bridge::GilBridge;
//! use forksafe::{Config, Engine};
//! use std::sync::Arc;
//! let gil = Arc::new(GilBridge::new());
//! let engine = Engine::with_bridge(Config::default(), Box::new(gil.clone())).unwrap();
//! let v = engine.new_var().unwrap();
//! engine.op("host").writes(&[&v]).host().run(|| {}).unwrap();
//! engine.wait_for_var(&v).unwrap();
//! assert_eq!(gil.calls(), 1);
//! ```

pub use forksafe_core::gil::{GilBridge, HostLock};
pub use forksafe_core::{HostBridge, NoHost};
