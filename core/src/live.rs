//! The live set (I2, I5): every accepted op whose completion has not yet
//! been applied in full. Nothing in it is touched per op by two cores:
//!
//! - A push appends its op to the pushing thread's own shard (picked by
//!   [`thread_shard`], so one thread always uses one shard, and the shard's
//!   lock and records stay in that thread's cache).
//! - A completion does not touch the index. As the last step of its
//!   section it marks the op *gone* in the op's own state word
//!   ([`OpCell::mark_gone`]) and wakes the `wait_all` callers blocked on
//!   that op (`engine/waiters.rs`).
//! - The records of gone ops are dropped lazily, by whoever next looks at
//!   the shard: its pusher, every [`TRIM_EVERY`] pushes (from the front:
//!   records are in id order and most ops end in about that order), a
//!   `wait_all` or shutdown scan (from the front), and a sweep of the whole
//!   shard once it has doubled since the last sweep (a long-lived op at the
//!   front keeps the front trim from reaching the rest).
//!
//! What the index is asked — which live op below a limit a `wait_all`
//! waits on next, which ones are left, every live op for a fork child or
//! shutdown — is answered by scanning the shards and reading records' gone
//! bits: rare calls pay, the per-op path does not.
//!
//! # State
//!
//! A record is *listed live*, then *listed gone*, then *dropped*:
//!
//! | from | to | who | serves |
//! |---|---|---|---|
//! | — | listed live | the pusher, in a section, under its var locks, before the state check (`engine/admission.rs`) | I2: `wait_all` and shutdown see every accepted op |
//! | listed live | listed gone | the thread that ended the op, last in its completion's section ([`OpCell::mark_gone`] in `engine/complete.rs`), then it wakes the waiters blocked on the op | I2: a waiter that sees *gone* sees the completion's effects |
//! | listed live | listed gone | the fork child's settle: every inherited op but the carried one is lost (`engine/fork.rs`) | I5 |
//! | listed gone | dropped | whoever next trims the shard: its pusher, a scan, a sweep | flat memory |
//!
//! A shard holds at most [`TRIM_EVERY`] records more than it held live at
//! its pusher's last trim, and at most twice the live records it had at its
//! last sweep (at least [`SWEEP_FROM`]), so memory follows the pending ops
//! and stays flat in a long run. A fork copies the index consistently:
//! every change happens in a fork-gate section, and prepare waits for open
//! sections.
//!
//! # Why a waiter is never left asleep
//!
//! A `wait_all` caller scans, finds a live op below its limit (its
//! *blocker*), records that op's id in its registration, and then — after a
//! SeqCst fence — reads the op's gone bit once more; it parks only if the
//! op is still live. A completion sets the gone bit, then — after a SeqCst
//! fence — reads the waiters' registrations and wakes the ones blocked on
//! its op. With a fence on both sides, at least one of the two sees the
//! other's write (the store-buffering pattern): either the waiter sees the
//! op gone and scans again, or the completion sees the waiter and wakes
//! it. The loom control `CompletionSkipsFence` removes the completion's
//! fence and loom finds the lost wake-up.

use crate::op::{OpCell, OpStatus};
use crate::op_info::OpInfo;
use crate::sync::{thread_shard, Arc, CachePadded, LockRank, Mutex, MODEL_BUILD};
use std::collections::VecDeque;

/// Shards of the index in production builds (one in model builds, where
/// every thread shares one shard and more would only multiply the
/// interleavings).
const SHARDS: usize = if MODEL_BUILD { 1 } else { 16 };

/// A pusher trims its shard's front once every this many pushes: each
/// trim reads the state words of the ops it passes, which their workers
/// wrote, so trimming in batches reads each once, long after it ended.
pub(crate) const TRIM_EVERY: usize = if MODEL_BUILD { 1 } else { 64 };

/// Below this many records a shard is never swept. The same in model
/// builds, whose few ops never reach it: a sweep is one thread's work under
/// the shard lock (unit-tested below), and reading every record's gone bit
/// on each push multiplied the executions loom explores without adding a
/// behaviour.
pub(crate) const SWEEP_FROM: usize = 1024;

/// The live ops of an engine (see the module's `# State`).
pub(crate) struct LiveIndex<P> {
    /// Padded: each belongs to the threads that push into it.
    shards: Box<[CachePadded<Mutex<LiveShard<P>>>]>,
}

impl<P> LiveIndex<P> {
    pub(crate) fn new() -> Self {
        LiveIndex {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::ranked(LiveShard::new(), LockRank::LiveShard)))
                .collect(),
        }
    }

    /// Lists `op` as live in the calling thread's shard; inside a section.
    pub(crate) fn insert(&self, op: Arc<OpCell<P>>) {
        self.shards[thread_shard(SHARDS)].lock().insert(op);
    }

    /// Model builds: the shards' locks, for the fork-point check.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn watched(&self) -> impl Iterator<Item = &dyn crate::sync::ForkWatched> {
        self.shards
            .iter()
            .map(|s| &**s as &dyn crate::sync::ForkWatched)
    }

    /// The live op `id`, if it is listed and not gone.
    pub(crate) fn get(&self, id: u64) -> Option<Arc<OpCell<P>>> {
        self.shards.iter().find_map(|s| s.lock().get(id).cloned())
    }

    /// Every live op, by id.
    pub(crate) fn all(&self) -> Vec<Arc<OpCell<P>>> {
        let mut ops: Vec<Arc<OpCell<P>>> = Vec::new();
        for shard in self.shards.iter() {
            ops.extend(shard.lock().live().cloned());
        }
        ops.sort_by_key(|op| op.id());
        ops
    }

    /// How many ops are live: a look at every record, after trimming each
    /// shard's front (no count is kept: it would be a shared write per
    /// completion).
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let mut shard = s.lock();
                shard.trim();
                shard.live().count()
            })
            .sum()
    }

    /// A live op pushed before `limit`, other than `except`, if any: the
    /// one a waiter for everything below `limit` blocks on next. The newest
    /// such op of the first shard that has one: ops end in about push
    /// order, so the newest is about the last to end, and the waiter is
    /// woken about once per shard instead of once per op (waiting on the
    /// oldest would wake it at nearly every completion). Trims
    /// each shard's front on the way, and looks back from `limit`, so a
    /// `wait_all` with a million ops queued reads a few records per
    /// wake-up, not every op.
    pub(crate) fn blocker_below(&self, limit: u64, except: Option<u64>) -> Option<Arc<OpCell<P>>> {
        self.shards.iter().find_map(|s| {
            let mut shard = s.lock();
            shard.trim();
            let end = shard.records.partition_point(|op| op.id() < limit);
            shard
                .records
                .range(..end)
                .rev()
                .find(|op| Some(op.id()) != except && !op.is_gone())
                .cloned()
        })
    }

    /// What identifies each live op pushed before `limit`, by id: a copy
    /// per op (names included), for reports only.
    pub(crate) fn below(&self, limit: u64) -> Vec<OpInfo> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            let below = shard.live().take_while(|op| op.id() < limit);
            out.extend(below.map(|op| op.info()));
        }
        out.sort_by_key(|i| i.id);
        out
    }

    /// What identifies each live op that is running, by id.
    pub(crate) fn running(&self) -> Vec<OpInfo> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            let running = shard.live().filter(|op| op.is(OpStatus::Running));
            out.extend(running.map(|op| op.info()));
        }
        out.sort_by_key(|i| i.id);
        out
    }
}

/// The records of one shard: its live ops and the gone ones not yet
/// dropped, in id order.
pub(crate) struct LiveShard<P> {
    records: VecDeque<Arc<OpCell<P>>>,
    /// The next push trims once `records` is this long.
    trim_at: usize,
    /// The next trim sweeps the whole shard once `records` is this long.
    sweep_at: usize,
}

impl<P> LiveShard<P> {
    pub(crate) fn new() -> Self {
        LiveShard {
            records: VecDeque::new(),
            trim_at: TRIM_EVERY,
            sweep_at: SWEEP_FROM,
        }
    }

    /// Adds `op`, keeping id order: one thread's ops come in id order, but
    /// two threads sharing a shard may arrive the other way round.
    pub(crate) fn insert(&mut self, op: Arc<OpCell<P>>) {
        if self.records.len() >= self.trim_at {
            self.trim();
        }
        match self.records.back() {
            Some(last) if last.id() > op.id() => {
                let at = self.records.partition_point(|r| r.id() < op.id());
                self.records.insert(at, op);
            }
            _ => self.records.push_back(op),
        }
    }

    /// Drops the gone records at the front, and every gone record once the
    /// shard has doubled since the last sweep; gives back room a drained
    /// burst left.
    pub(crate) fn trim(&mut self) {
        while self.records.front().is_some_and(|op| op.is_gone()) {
            self.records.pop_front();
        }
        if self.records.len() >= self.sweep_at {
            self.records.retain(|op| !op.is_gone());
            self.sweep_at = SWEEP_FROM.max(2 * self.records.len());
        }
        let len = self.records.len();
        if self.records.capacity() > SWEEP_FROM && len * 4 < self.records.capacity() {
            self.records.shrink_to(SWEEP_FROM.max(2 * len));
        }
        self.trim_at = len + TRIM_EVERY;
    }

    /// The live op `id`, if any (records are in id order).
    pub(crate) fn get(&self, id: u64) -> Option<&Arc<OpCell<P>>> {
        let at = self.records.partition_point(|r| r.id() < id);
        self.records
            .get(at)
            .filter(|op| op.id() == id && !op.is_gone())
    }

    /// The live ops in id order.
    pub(crate) fn live(&self) -> impl Iterator<Item = &Arc<OpCell<P>>> {
        self.records.iter().filter(|op| !op.is_gone())
    }
}

#[cfg(test)]
mod tests {
    use super::{LiveIndex, LiveShard, SWEEP_FROM, TRIM_EVERY};
    use crate::op::{bare_op, OpCell};
    use crate::sync::Arc;
    use std::collections::BTreeMap;

    fn op(id: u64) -> Arc<OpCell<()>> {
        Arc::new(bare_op(id, 0))
    }

    fn ids<'a>(ops: impl Iterator<Item = &'a Arc<OpCell<()>>>) -> Vec<u64> {
        ops.map(|op| op.id()).collect()
    }

    /// The bound of the module's `# State`: a shard holds at most
    /// `TRIM_EVERY` records more than the larger of `SWEEP_FROM` and twice
    /// its live ops at the last sweep; checked against the most live ops
    /// the test ever had, which bounds both.
    fn bounded(shard: &LiveShard<()>, most_live: usize) {
        let bound = SWEEP_FROM.max(2 * most_live) + TRIM_EVERY + 1;
        assert!(
            shard.records.len() <= bound,
            "{} records",
            shard.records.len()
        );
    }

    #[test]
    fn the_shard_answers_like_an_ordered_map() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut shard = LiveShard::new();
        let mut map: BTreeMap<u64, Arc<OpCell<()>>> = BTreeMap::new();
        let mut next_id = 0;
        let mut most_live = 0;
        // Ids taken by a push that has not listed its op yet (another
        // thread sharing the shard): they arrive out of order.
        let mut late: Vec<u64> = Vec::new();
        for step in 0..40_000 {
            let roll = next() % 100;
            if roll < 45 {
                next_id += 1;
                if next() % 8 == 0 {
                    late.push(next_id);
                    continue;
                }
                let o = op(next_id);
                shard.insert(o.clone());
                map.insert(next_id, o);
            } else if roll < 50 && !late.is_empty() {
                let id = late.swap_remove(0);
                let o = op(id);
                shard.insert(o.clone());
                map.insert(id, o);
            } else {
                // An op ends: mostly an old one, sometimes any.
                let live: Vec<u64> = map.keys().copied().collect();
                if live.is_empty() {
                    continue;
                }
                let pick = if next() % 4 == 0 {
                    live[(next() as usize) % live.len()]
                } else {
                    live[(next() as usize) % live.len().min(8)]
                };
                if let Some(o) = map.remove(&pick) {
                    o.mark_gone();
                }
                if next() % 16 == 0 {
                    shard.trim();
                }
            }
            most_live = most_live.max(map.len());
            assert_eq!(ids(shard.live()), map.keys().copied().collect::<Vec<_>>());
            let probe = next() % (next_id + 2);
            assert_eq!(
                shard.get(probe).map(|o| o.id()),
                map.get(&probe).map(|o| o.id()),
                "step {step}"
            );
            bounded(&shard, most_live);
        }
    }

    #[test]
    fn a_long_lived_op_does_not_keep_the_shard_long() {
        let mut shard = LiveShard::new();
        shard.insert(op(0));
        for id in 1..100_000 {
            let o = op(id);
            shard.insert(o.clone());
            o.mark_gone();
            bounded(&shard, 2);
        }
        assert_eq!(ids(shard.live()), vec![0]);
    }

    #[test]
    fn a_drained_burst_gives_its_room_back() {
        let mut shard = LiveShard::new();
        let burst: Vec<_> = (0..100_000).map(op).collect();
        for o in &burst {
            shard.insert(o.clone());
        }
        for o in &burst {
            o.mark_gone();
        }
        drop(burst);
        // Within `TRIM_EVERY` pushes the pusher trims.
        let after: Vec<u64> = (100_000..100_000 + TRIM_EVERY as u64).collect();
        for &id in &after {
            shard.insert(op(id));
        }
        assert_eq!(ids(shard.live()), after);
        assert!(shard.records.len() <= 2 * TRIM_EVERY);
        assert!(shard.records.capacity() <= 4 * SWEEP_FROM);
    }

    #[test]
    fn blocker_below_finds_what_a_waiter_waits_for() {
        // An index of no engine: no fork can copy its locks.
        crate::sync::without_section(blocker_below_checks);
    }

    fn blocker_below_checks() {
        let index: LiveIndex<()> = LiveIndex::new();
        let limits = [0, 1, 5, 17, 40, 41, 100, u64::MAX];
        let check = |index: &LiveIndex<()>| {
            for limit in limits {
                let below = index.below(limit);
                let first = index.blocker_below(limit, None).map(|o| o.id());
                assert_eq!(first.is_some(), !below.is_empty(), "limit {limit}");
                assert!(first.is_none_or(|f| below.iter().any(|i| i.id == f)));
                // With the only op below excepted, nothing is left.
                if let [only] = below.as_slice() {
                    assert!(index.blocker_below(limit, Some(only.id)).is_none());
                }
            }
        };
        check(&index);
        let live: Vec<_> = [3, 4, 16, 17, 23, 40].into_iter().map(op).collect();
        for o in &live {
            index.insert(o.clone());
        }
        assert_eq!(index.len(), live.len());
        assert_eq!(index.get(17).map(|o| o.id()), Some(17));
        assert_eq!(index.blocker_below(4, None).map(|o| o.id()), Some(3));
        assert!(index.blocker_below(3, None).is_none());
        check(&index);
        // They end oldest first, so the lowest live id passes each limit
        // in turn.
        for o in &live {
            o.mark_gone();
            assert!(index.get(o.id()).is_none());
            check(&index);
        }
        assert!(index.blocker_below(u64::MAX, None).is_none());
        assert_eq!((index.len(), index.all().len()), (0, 0));
    }
}
