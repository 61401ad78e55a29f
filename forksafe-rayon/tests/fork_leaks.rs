//! What a `ForkSafePool` leaks per fork, measured (a `harness = false`
//! binary). The parent uses the pool and forks `FORKSAFE_ROUNDS` children
//! (default 1000; the figure is 10,000); each child uses the pool
//! (building its own) and exits. The parent's threads, mappings and RSS
//! are read from /proc before and after: threads and mappings must not
//! grow, RSS by at most 4 MiB (allocator noise, not per-fork growth: 1000
//! forks leaking even 4 KiB each would pass 4 MiB). Then a chain of nested
//! children, each using the pool, reports the RSS each generation has on
//! its parent's
//! (the parent's pool object, left allocated in the child).

use forksafe_rayon::ForkSafePool;
use forksafe_testkit::child::{fork_raw, say, wait_child};
use forksafe_testkit::proc_counts::{mapping_count as mappings, status_field as status_kib};
use rayon::prelude::*;
use std::time::{Duration, Instant};

fn use_pool(pool: &ForkSafePool) -> Result<(), String> {
    let sum: u64 = pool
        .try_install(|| (0..1000u64).into_par_iter().sum())
        .map_err(|e| e.to_string())?;
    if sum == 499_500 {
        Ok(())
    } else {
        Err(format!("sum {sum}"))
    }
}

fn chain(pool: &ForkSafePool, depth: usize, parent_rss: u64) -> Result<String, String> {
    use_pool(pool)?;
    let rss = status_kib("VmRSS:");
    say(&format!(
        "    generation {depth}: RSS {rss} KiB ({:+} KiB on its parent's)\n",
        rss as i64 - parent_rss as i64
    ));
    if depth == 16 {
        return Ok(String::new());
    }
    let pid = fork_raw(|| chain(pool, depth + 1, rss)).map_err(|e| e.to_string())?;
    wait_child(pid, Duration::from_secs(60))?;
    Ok(String::new())
}

fn fork_leaks() {
    let rounds: usize = std::env::var("FORKSAFE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let pool = ForkSafePool::builder()
        .num_threads(2)
        .build()
        .expect("pool");
    use_pool(&pool).expect("parent");
    // Warm up: the first forks settle the allocator's arenas.
    for _ in 0..20 {
        let pid = fork_raw(|| use_pool(&pool).map(|_| String::new())).expect("fork");
        wait_child(pid, Duration::from_secs(30)).expect("child");
    }
    let (threads0, maps0, rss0) = (status_kib("Threads:"), mappings(), status_kib("VmRSS:"));
    let start = Instant::now();
    for round in 0..rounds {
        let pid = fork_raw(|| use_pool(&pool).map(|_| String::new())).expect("fork");
        wait_child(pid, Duration::from_secs(30)).unwrap_or_else(|e| panic!("round {round}: {e}"));
        use_pool(&pool).expect("parent");
    }
    let (threads1, maps1, rss1) = (status_kib("Threads:"), mappings(), status_kib("VmRSS:"));
    println!(
        "fork_leaks: {rounds} forks in {:.1} s; parent threads {threads0} -> {threads1}, \
         mappings {maps0} -> {maps1}, RSS {rss0} -> {rss1} KiB",
        start.elapsed().as_secs_f64()
    );
    assert_eq!(threads1, threads0, "threads grew");
    assert!(maps1 <= maps0, "mappings grew: {maps0} -> {maps1}");
    assert!(rss1 <= rss0 + 4096, "RSS grew: {rss0} -> {rss1} KiB");
    println!("fork_leaks: a chain of nested children, each using the pool:");
    let rss = status_kib("VmRSS:");
    let pid = fork_raw(|| chain(&pool, 1, rss)).expect("fork");
    wait_child(pid, Duration::from_secs(120)).expect("chain");
}

fn main() {
    forksafe_testkit::harness::main(&[("fork_leaks", fork_leaks)]);
}
