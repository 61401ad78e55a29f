//! The facade's `Mutex::try_lock`: never blocks; `None` while another
//! thread holds the lock, the lock once it is free. The Python binding's
//! deferred-drop queue relies on it never waiting (a fork child may have
//! copied the lock held).

use forksafe_core::sync::{Arc, Mutex};

#[test]
fn try_lock_never_waits_for_a_held_lock() {
    let m = Arc::new(Mutex::new(0_u32));
    let held = m.lock();
    let other = m.clone();
    let got = std::thread::spawn(move || other.try_lock().map(|g| *g))
        .join()
        .unwrap();
    assert_eq!(got, None, "held by another thread: no lock, no wait");
    drop(held);
    {
        let mut g = m.try_lock().expect("free: locked");
        *g += 1;
    }
    assert_eq!(*m.lock(), 1);
}
