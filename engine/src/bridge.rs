//! Host bridges: how host-lane ops take the host runtime's global lock
//! (CPython's GIL) and how the engine gets out of its way. Implement
//! [`HostBridge`] for your host; [`NoHost`] is the bridge of an engine
//! without one. (forksafe's own tests use a GIL-like test host from the
//! unpublished `forksafe-testkit` crate.)
//!
//! ```
//! use forksafe::bridge::HostBridge;
//! use forksafe::{Config, Engine};
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//!
//! /// A host whose "lock" only counts the host calls made.
//! #[derive(Default)]
//! struct Counting(AtomicUsize);
//! impl HostBridge for Counting {
//!     fn with_host_lock(&self, f: &mut dyn FnMut()) {
//!         self.0.fetch_add(1, Ordering::SeqCst);
//!         f()
//!     }
//!     fn without_host_lock(&self, f: &mut dyn FnMut()) {
//!         f()
//!     }
//!     fn holds_host_lock(&self) -> bool {
//!         false
//!     }
//! }
//!
//! let host = Arc::new(Counting::default());
//! let engine = Engine::with_bridge(Config::default(), Box::new(host.clone())).unwrap();
//! let v = engine.new_var().unwrap();
//! engine.op("host").writes(&[&v]).host().run(|| {}).unwrap();
//! engine.wait_for_var(&v).unwrap();
//! assert_eq!(host.0.load(Ordering::SeqCst), 1);
//! ```

pub use forksafe_core::{HostBridge, NoHost};
