//! What this process holds, from `/proc/self`: the counts the soak and
//! leak tests compare before and after (threads, mappings, RSS). Each is 0
//! where `/proc` cannot be read.

/// A number field of `/proc/self/status` (`Threads:`, `VmRSS:` in KiB).
pub fn status_field(name: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// Threads of this process.
pub fn thread_count() -> u64 {
    status_field("Threads:")
}

/// Resident set size, KiB.
pub fn rss_kib() -> u64 {
    status_field("VmRSS:")
}

/// Memory mappings of this process (lines of `/proc/self/maps`).
pub fn mapping_count() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .map(|s| s.lines().count())
        .unwrap_or(0)
}
