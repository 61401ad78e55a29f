//! Memory per pending op: a quiesced engine accepts and defers a million
//! ops with a zero-size closure; the live heap bytes (counting allocator)
//! and the RSS before and after give the cost per pending op.

use crate::alloc::{live_by_size, live_bytes, rss_bytes, SIZES};
use crate::workloads::{warm_engine, INDEP_VARS};
use std::time::Duration;

/// Ops pushed while quiesced.
pub const PENDING_OPS: usize = 1_000_000;

/// Heap and RSS bytes per pending op.
pub struct MemResult {
    /// Live heap bytes per pending op (counting allocator).
    pub heap_per_op: f64,
    /// RSS growth per pending op.
    pub rss_per_op: f64,
    /// Where the heap bytes go: (allocation size, live allocations of that
    /// size per pending op), largest share first; sizes at or above
    /// [`SIZES`]` - 1` are one class. What is not listed is amortised growth
    /// of shared containers (per-var queues, the live index).
    pub by_size: Vec<(usize, f64)>,
}

/// Measures with `workers` compute workers; op i writes var i % 1024.
pub fn measure(workers: usize) -> MemResult {
    let (engine, vars) = warm_engine(workers, INDEP_VARS);
    let guard = engine.quiesce(Duration::from_secs(10)).expect("quiesce");
    let (heap0, rss0, hist0) = (live_bytes(), rss_bytes(), live_by_size());
    for i in 0..PENDING_OPS {
        engine
            .op("op")
            .writes(&[&vars[i % vars.len()]])
            .run(|| {})
            .expect("push");
    }
    let (heap1, rss1, hist1) = (live_bytes(), rss_bytes(), live_by_size());
    assert_eq!(engine.pending().expect("pending"), PENDING_OPS);
    drop(guard);
    engine.wait_all().expect("wait_all");
    let n = PENDING_OPS as f64;
    let mut by_size: Vec<(usize, f64)> = (0..SIZES)
        .map(|size| (size, hist1[size].saturating_sub(hist0[size]) as f64 / n))
        .filter(|(_, per_op)| *per_op >= 0.5)
        .collect();
    by_size.sort_by(|a, b| (b.0 as f64 * b.1).total_cmp(&(a.0 as f64 * a.1)));
    MemResult {
        heap_per_op: heap1.saturating_sub(heap0) as f64 / n,
        rss_per_op: rss1.saturating_sub(rss0) as f64 / n,
        by_size,
    }
}
