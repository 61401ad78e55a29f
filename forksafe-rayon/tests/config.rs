//! Bad configurations of a `ForkSafePool` are typed errors, never panics,
//! and a good pool built after them works.

use forksafe_rayon::{ForkSafePool, PoolError, MAX_PREPARE_BOUND};
use std::time::Duration;

#[test]
fn bad_configurations_are_typed_errors() {
    let bad = [
        ForkSafePool::builder().thread_name("a\0b"),
        ForkSafePool::builder().thread_name("\0"),
        ForkSafePool::builder().prepare_bound(Duration::ZERO),
        ForkSafePool::builder().prepare_bound(MAX_PREPARE_BOUND + Duration::from_nanos(1)),
    ];
    for b in bad {
        let got = b.build();
        assert!(matches!(got, Err(PoolError::Config(_))), "{got:?}");
    }
}

#[test]
fn a_stack_the_os_cannot_give_is_a_build_error() {
    let got = ForkSafePool::builder()
        .num_threads(1)
        .stack_size(1 << 50)
        .build();
    assert!(matches!(got, Err(PoolError::Build(_))), "{got:?}");
}

#[test]
fn a_good_pool_works_after_bad_ones() {
    let _ = ForkSafePool::builder().thread_name("x\0").build();
    let pool = ForkSafePool::builder()
        .num_threads(2)
        .thread_name("cfg-test")
        .build()
        .unwrap();
    let sum: u64 = pool.install(|| (1..=100u64).sum());
    assert_eq!(sum, 5050);
}
