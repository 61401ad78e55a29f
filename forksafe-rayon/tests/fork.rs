//! `ForkSafePool` across real forks, in a `harness = false` binary
//! (libtest's threads could hold locks at a fork). Each scenario forks with
//! a raw `fork()` and checks the child under a watchdog that kills a child
//! that hangs (which a plain rayon pool does: its threads are not copied).
//!
//! - `used_then_forked`: the parent uses the pool; each child runs
//!   `install` + `par_iter`, `join` and `scope` with right results, and
//!   reads `Prepared`.
//! - `forked_while_busy`: another thread of the parent is inside a long
//!   `install` at each fork; prepare waits for it (bound 5 s): the child
//!   reads `Prepared` and sees that call's results whole.
//! - `forked_past_the_bound`: the call in flight outlasts a 1 ms bound: the
//!   fork goes ahead and the child reads `Unprepared(Overran)`, and its own
//!   pool still works.
//! - `nested`: a child forks a grandchild, which uses the pool.
//! - `dropped_then_forked`: a pool is dropped right before the fork; the
//!   child can start threads (no pool thread was on its way out).
//!
//! `FORKSAFE_ROUNDS` sets the forks per scenario (default 50).

use forksafe::{Inherited, PrepareFailure};
use forksafe_rayon::ForkSafePool;
use forksafe_testkit::child::{fork_raw, quiet_panics, wait_child};
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

fn rounds() -> usize {
    std::env::var("FORKSAFE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50)
}

fn work(pool: &ForkSafePool) -> Result<(), String> {
    let n = 10_000u64;
    let sum: u64 = pool
        .try_install(|| (1..=n).into_par_iter().map(|x| x * 2).sum())
        .map_err(|e| e.to_string())?;
    if sum != n * (n + 1) {
        return Err(format!("par_iter sum {sum}"));
    }
    let (a, b) = pool.join(|| 1, || 2);
    if (a, b) != (1, 2) {
        return Err("join".into());
    }
    let hits = AtomicU64::new(0);
    pool.scope(|s| {
        for _ in 0..8 {
            s.spawn(|_| {
                hits.fetch_add(1, Ordering::Relaxed);
            });
        }
    });
    if hits.into_inner() != 8 {
        return Err("scope".into());
    }
    Ok(())
}

fn fork_and_check(what: &str, round: usize, f: impl FnOnce() -> Result<String, String>) {
    let pid = fork_raw(f).expect("fork");
    wait_child(pid, LIMIT).unwrap_or_else(|e| panic!("{what}, round {round}: {e}"));
}

fn used_then_forked() {
    let pool = ForkSafePool::builder()
        .num_threads(3)
        .build()
        .expect("pool");
    work(&pool).expect("parent");
    for round in 0..rounds() {
        fork_and_check("used_then_forked", round, || {
            if pool.inherited() != Inherited::Prepared {
                return Err(format!("inherited {:?}", pool.inherited()));
            }
            work(&pool)?;
            if pool.current_num_threads() != 3 {
                return Err(format!("{} threads", pool.current_num_threads()));
            }
            Ok(String::new())
        });
        work(&pool).expect("parent after the fork");
    }
}

/// A thread of the parent keeps `pool` busy with calls that fill a vector
/// with `i` then check it, so a copy taken mid-call would hold a mix.
fn busy(
    pool: Arc<ForkSafePool>,
    stop: Arc<AtomicBool>,
    data: Arc<std::sync::Mutex<Vec<u64>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut i = 0u64;
        while !stop.load(Ordering::Acquire) {
            i += 1;
            pool.install(|| {
                let mut v = data.lock().unwrap();
                v.par_iter_mut().for_each(|x| *x = i);
                std::thread::sleep(Duration::from_millis(2));
            });
        }
    })
}

fn forked_while_busy() {
    let pool = Arc::new(
        ForkSafePool::builder()
            .num_threads(2)
            .prepare_bound(Duration::from_secs(5))
            .build()
            .expect("pool"),
    );
    let data = Arc::new(std::sync::Mutex::new(vec![0u64; 4096]));
    let stop = Arc::new(AtomicBool::new(false));
    let t = busy(pool.clone(), stop.clone(), data.clone());
    for round in 0..rounds() {
        fork_and_check("forked_while_busy", round, || {
            if pool.inherited() != Inherited::Prepared {
                return Err(format!("inherited {:?}", pool.inherited()));
            }
            // The parent's call had ended: its lock is free, its data whole.
            let v = data
                .try_lock()
                .map_err(|_| "the data lock was copied held".to_string())?;
            if v.iter().any(|&x| x != v[0]) {
                return Err("half-written results copied".into());
            }
            drop(v);
            work(&pool)?;
            Ok(String::new())
        });
    }
    stop.store(true, Ordering::Release);
    t.join().expect("busy thread");
}

fn forked_past_the_bound() {
    let pool = Arc::new(
        ForkSafePool::builder()
            .num_threads(2)
            .prepare_bound(Duration::from_millis(1))
            .build()
            .expect("pool"),
    );
    let entered = Arc::new(AtomicBool::new(false));
    let release = Arc::new(AtomicBool::new(false));
    let t = {
        let (pool, entered, release) = (pool.clone(), entered.clone(), release.clone());
        std::thread::spawn(move || {
            pool.install(|| {
                entered.store(true, Ordering::Release);
                while !release.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        })
    };
    while !entered.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    for round in 0..rounds().min(10) {
        fork_and_check("forked_past_the_bound", round, || {
            let want = Inherited::Unprepared(PrepareFailure::Overran);
            if pool.inherited() != want {
                return Err(format!("inherited {:?}", pool.inherited()));
            }
            work(&pool)?;
            Ok(String::new())
        });
    }
    release.store(true, Ordering::Release);
    t.join().expect("long call");
}

fn nested() {
    let pool = ForkSafePool::builder()
        .num_threads(2)
        .build()
        .expect("pool");
    work(&pool).expect("parent");
    for round in 0..rounds().min(20) {
        fork_and_check("nested", round, || {
            work(&pool)?;
            let grandchild = fork_raw(|| {
                work(&pool)?;
                Ok(String::new())
            })
            .map_err(|e| e.to_string())?;
            wait_child(grandchild, LIMIT)?;
            work(&pool)?;
            Ok(String::new())
        });
    }
}

fn dropped_then_forked() {
    for round in 0..rounds() {
        let pool = ForkSafePool::builder()
            .num_threads(4)
            .build()
            .expect("pool");
        work(&pool).expect("parent");
        drop(pool);
        fork_and_check("dropped_then_forked", round, || {
            std::thread::spawn(|| ())
                .join()
                .map_err(|_| "thread".to_string())?;
            let fresh = ForkSafePool::builder()
                .num_threads(2)
                .build()
                .map_err(|e| e.to_string())?;
            work(&fresh)?;
            Ok(String::new())
        });
    }
}

fn main() {
    quiet_panics(None);
    let scenarios: [(&'static str, fn()); 5] = [
        ("used_then_forked", used_then_forked),
        ("forked_while_busy", forked_while_busy),
        ("forked_past_the_bound", forked_past_the_bound),
        ("nested", nested),
        ("dropped_then_forked", dropped_then_forked),
    ];
    forksafe_testkit::harness::main_timed("forksafe-rayon", &scenarios);
}
