//! A refused push drops its payload like a cancelled op's: a host-lane
//! payload under the host lock, with no engine lock held (H1). Dropping a
//! host payload is host code (a Python callable's refcount).

use forksafe_core::gil::GilBridge;
use forksafe_core::sync::Arc as FArc;
use forksafe_core::{Config, Engine, Error, ForkDomain, Lane, OpSpec, Payload};
use std::sync::{Arc, Mutex};

/// Records, when dropped, whether the host lock was held.
struct Job {
    gil: FArc<GilBridge>,
    dropped_with_host_lock: Arc<Mutex<Vec<bool>>>,
}

impl Payload for Job {
    fn run(self, _token: Option<forksafe_core::CompletionToken<Self>>) -> Result<(), String> {
        Ok(())
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        let held = self.gil.lock().held_by_me();
        self.dropped_with_host_lock.lock().unwrap().push(held);
    }
}

fn world() -> (Engine<Job>, FArc<GilBridge>, Arc<Mutex<Vec<bool>>>) {
    let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    let gil = FArc::new(GilBridge::new());
    let engine = Engine::with_bridge(domain, Config::default(), Box::new(gil.clone())).unwrap();
    (engine, gil, Arc::new(Mutex::new(Vec::new())))
}

fn host_op(gil: &FArc<GilBridge>, log: &Arc<Mutex<Vec<bool>>>) -> OpSpec<Job> {
    OpSpec::new(Job {
        gil: gil.clone(),
        dropped_with_host_lock: log.clone(),
    })
    .lane(Lane::Host)
}

#[test]
fn payload_of_a_push_on_a_deleted_var_is_dropped_under_the_host_lock() {
    let (e, gil, log) = world();
    let x = e.new_var().unwrap();
    e.delete_var(&x).unwrap();
    e.wait_all().unwrap();
    let spec = host_op(&gil, &log).writes(&[x.clone()]);
    assert_eq!(e.push(spec), Err(Error::DeletedVar));
    assert_eq!(*log.lock().unwrap(), vec![true]);
    e.shutdown(std::time::Duration::from_secs(10)).unwrap();
}

#[test]
fn payload_of_a_push_after_shutdown_is_dropped_under_the_host_lock() {
    let (e, gil, log) = world();
    e.shutdown(std::time::Duration::from_secs(10)).unwrap();
    assert_eq!(e.push(host_op(&gil, &log)), Err(Error::ShutDown));
    assert_eq!(*log.lock().unwrap(), vec![true]);
}

#[test]
fn payload_of_a_compute_push_refused_is_dropped_without_it() {
    let (e, gil, log) = world();
    e.shutdown(std::time::Duration::from_secs(10)).unwrap();
    let spec = host_op(&gil, &log).lane(Lane::Compute);
    assert_eq!(e.push(spec), Err(Error::ShutDown));
    assert_eq!(*log.lock().unwrap(), vec![false]);
}
