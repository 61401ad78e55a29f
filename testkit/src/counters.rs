//! Per-op run counters: op `i`'s body bumps counter `i` as its last step,
//! so a counter of 0 means the body never got that far, and a copy taken
//! in a fork child at its first step says what had run at the fork.

use forksafe_core::sync::{Arc, AtomicU32, Ordering};

/// One counter per op: how many times its body ran.
pub type Counters = Arc<Vec<AtomicU32>>;

/// `n` counters at zero.
pub fn counters(n: usize) -> Counters {
    Arc::new((0..n).map(|_| AtomicU32::new(0)).collect())
}

/// The counters' values now.
pub fn snapshot(c: &Counters) -> Vec<u32> {
    c.iter().map(|x| x.load(Ordering::SeqCst)).collect()
}

/// Records one run of op `i`.
pub fn bump(c: &Counters, i: usize) {
    c[i].fetch_add(1, Ordering::SeqCst);
}
