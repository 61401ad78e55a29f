//! A counting global allocator: bytes currently allocated through the
//! global allocator, for the memory-per-pending-op measurement.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting live bytes.
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static CALLS: AtomicUsize = AtomicUsize::new(0);

/// Size classes of the live-allocation histogram: one per byte size below
/// `SIZES - 1`, the last one for everything larger.
pub const SIZES: usize = 1024;

/// Live allocations by requested size (the last class: larger ones).
static BY_SIZE: [AtomicUsize; SIZES] = [const { AtomicUsize::new(0) }; SIZES];

fn class(size: usize) -> usize {
    size.min(SIZES - 1)
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees carry over; the counter is only
// bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout (the caller upholds
        // `GlobalAlloc::alloc`'s contract).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
            CALLS.fetch_add(1, Ordering::Relaxed);
            BY_SIZE[class(layout.size())].fetch_add(1, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
            CALLS.fetch_add(1, Ordering::Relaxed);
            BY_SIZE[class(layout.size())].fetch_add(1, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by this allocator (so by `System`)
        // with `layout`, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        BY_SIZE[class(layout.size())].fetch_sub(1, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `realloc`'s
        // contract for `ptr`, `layout` and `new_size`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            CALLS.fetch_add(1, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            BY_SIZE[class(new_size)].fetch_add(1, Ordering::Relaxed);
            BY_SIZE[class(layout.size())].fetch_sub(1, Ordering::Relaxed);
        }
        p
    }
}

/// Bytes currently allocated through the global allocator.
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Allocation calls (alloc, alloc_zeroed, realloc) so far, all threads.
pub fn alloc_calls() -> usize {
    CALLS.load(Ordering::Relaxed)
}

/// A snapshot of the live-allocation histogram (count per size class).
pub fn live_by_size() -> Vec<usize> {
    BY_SIZE.iter().map(|c| c.load(Ordering::Relaxed)).collect()
}

/// The resident set size of this process in bytes (`/proc/self/statm`).
pub fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * usize::try_from(page).unwrap_or(4096)
}
