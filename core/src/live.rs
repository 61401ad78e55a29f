//! The live-op index (I2, I5): every accepted, not yet completed op, by
//! id, in shards picked by `id % shards` so completions on different
//! workers rarely share a lock. Within a shard, ids come in sequence, so
//! the recent ops sit in a ring of slots indexed by id (one word per op, no
//! node per op); ops that stay live while many later ones complete move to
//! an ordered map, so a long-lived op never keeps the ring long.
//!
//! # State
//!
//! An op is *live* from the moment its pusher inserts it (under all its
//! var locks, so ids enter in push order per var) until its completion or
//! cancel removes it; nothing else moves it:
//!
//! | from | to | who | serves |
//! |---|---|---|---|
//! | — | live | the pusher, in a section (`engine/push.rs`) | I2: `wait_all` and shutdown see every accepted op |
//! | live | gone | the thread that ended the op (`engine/complete.rs`), which then wakes `wait_all` waiters past it | I2 |
//! | live | gone | the fork child's settle: every inherited op but the carried one is lost (`engine/fork.rs`) | I5 |
//!
//! A fork copies the index consistently: every change happens in a
//! fork-gate section, and prepare waits for open sections.

use crate::op::{OpCell, OpStatus};
use crate::op_info::OpInfo;
use crate::sync::{Arc, CachePadded, LockRank, Mutex, MODEL_BUILD};
use std::collections::{BTreeMap, VecDeque};

/// Shards of the index in production builds (one in model builds, where
/// more shards only multiply the interleavings without adding behaviour).
const SHARDS: usize = if MODEL_BUILD { 1 } else { 16 };

/// The live ops of an engine (see the module's `# State`).
pub(crate) struct LiveIndex<P> {
    /// Padded: a pusher inserts into one shard while a worker removes from
    /// the next; unpadded, neighbouring shards shared cache lines.
    shards: Box<[CachePadded<Mutex<LiveShard<P>>>]>,
}

impl<P> LiveIndex<P> {
    pub(crate) fn new() -> Self {
        LiveIndex {
            shards: (0..SHARDS)
                .map(|_| {
                    CachePadded::new(Mutex::ranked(
                        LiveShard::new(SHARDS as u64),
                        LockRank::LiveShard,
                    ))
                })
                .collect(),
        }
    }

    /// The shard op `id` lives in.
    pub(crate) fn shard(&self, id: u64) -> &Mutex<LiveShard<P>> {
        // `SHARDS` is 1 in model builds.
        #[allow(clippy::modulo_one)]
        let shard = (id as usize) % SHARDS;
        &self.shards[shard]
    }

    /// Model builds: the shards' locks, for the fork-point check.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn watched(&self) -> impl Iterator<Item = &dyn crate::sync::ForkWatched> {
        self.shards
            .iter()
            .map(|s| &**s as &dyn crate::sync::ForkWatched)
    }

    /// The live op `id`, if it has not completed.
    pub(crate) fn get(&self, id: u64) -> Option<Arc<OpCell<P>>> {
        self.shard(id).lock().get(id).cloned()
    }

    /// Every live op, by id.
    pub(crate) fn all(&self) -> Vec<Arc<OpCell<P>>> {
        let mut ops: Vec<Arc<OpCell<P>>> = Vec::new();
        for shard in self.shards.iter() {
            ops.extend(shard.lock().iter().cloned());
        }
        ops.sort_by_key(|op| op.id);
        ops
    }

    /// How many ops are live.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    /// Whether any op pushed before `limit` is live: one look at each
    /// shard's lowest id, so a `wait_all` that checks this on each wake-up
    /// costs the same with a million ops queued as with one.
    pub(crate) fn any_below(&self, limit: u64) -> bool {
        self.shards
            .iter()
            .any(|s| s.lock().lowest().is_some_and(|l| l < limit))
    }

    /// What identifies each live op pushed before `limit`, by id: a copy
    /// per op (names included), for reports only.
    pub(crate) fn below(&self, limit: u64) -> Vec<OpInfo> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            out.extend(shard.lock().below(limit).map(|op| op.info()));
        }
        out.sort_by_key(|i| i.id);
        out
    }

    /// What identifies each live op that is running, by id.
    pub(crate) fn running(&self) -> Vec<OpInfo> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            let running = shard.iter().filter(|op| op.is(OpStatus::Running));
            out.extend(running.map(|op| op.info()));
        }
        out.sort_by_key(|i| i.id);
        out
    }
}

/// Below this length the ring is never compacted.
const COMPACT_FROM: usize = 1024;

/// The live ops of one shard. Its ids are all `≡ r (mod stride)` for one
/// `r` (the engine picks the shard by `id % stride`), so `id / stride`
/// numbers them without gaps.
pub(crate) struct LiveShard<P> {
    /// The number of shards.
    stride: u64,
    /// `id / stride` of the op in `recent[0]`.
    base: u64,
    /// Slots for `id / stride = base, base + 1, …`; the first, if any, is
    /// live.
    recent: VecDeque<Option<Arc<OpCell<P>>>>,
    /// Live ops in `recent`.
    in_recent: usize,
    /// Live ops below the ring (`id / stride < base`): inserted out of
    /// order, or moved out of the ring's front by compaction.
    older: BTreeMap<u64, Arc<OpCell<P>>>,
}

impl<P> LiveShard<P> {
    /// An empty shard of `stride` shards.
    pub(crate) fn new(stride: u64) -> Self {
        LiveShard {
            stride: stride.max(1),
            base: 0,
            recent: VecDeque::new(),
            in_recent: 0,
            older: BTreeMap::new(),
        }
    }

    /// The ring slot of `id`, if the ring covers it.
    fn slot(&self, id: u64) -> Option<usize> {
        let k = (id / self.stride).checked_sub(self.base)?;
        usize::try_from(k).ok().filter(|&k| k < self.recent.len())
    }

    /// Adds live op `id`.
    pub(crate) fn insert(&mut self, id: u64, op: Arc<OpCell<P>>) {
        let key = id / self.stride;
        if self.recent.is_empty() {
            if self
                .older
                .last_key_value()
                .is_some_and(|(&last, _)| id <= last)
            {
                self.older.insert(id, op);
            } else {
                self.base = key;
                self.recent.push_back(Some(op));
                self.in_recent = 1;
            }
            return;
        }
        let Some(k) = key
            .checked_sub(self.base)
            .and_then(|k| usize::try_from(k).ok())
        else {
            self.older.insert(id, op);
            return;
        };
        if k >= self.recent.len() {
            self.recent.resize(k + 1, None);
        }
        if self.recent[k].replace(op).is_none() {
            self.in_recent += 1;
        }
        self.compact();
    }

    /// Removes live op `id`, returning it.
    pub(crate) fn remove(&mut self, id: u64) -> Option<Arc<OpCell<P>>> {
        let Some(k) = self.slot(id) else {
            return self.older.remove(&id);
        };
        let op = self.recent[k].take()?;
        self.in_recent -= 1;
        self.drop_empty_front();
        // Give back what a burst of pending ops grew, a little at a time.
        if self.recent.capacity() > COMPACT_FROM && self.recent.len() * 4 < self.recent.capacity() {
            self.recent.shrink_to(self.recent.len() * 2);
        }
        Some(op)
    }

    fn drop_empty_front(&mut self) {
        while let Some(None) = self.recent.front() {
            self.recent.pop_front();
            self.base += 1;
        }
    }

    /// Keeps a long ring at most twice as long as its live ops: moves the
    /// front's live ops to the map and drops its empty slots.
    fn compact(&mut self) {
        while self.recent.len() > COMPACT_FROM && self.recent.len() > 2 * self.in_recent {
            if let Some(Some(op)) = self.recent.pop_front() {
                self.in_recent -= 1;
                self.older.insert(op.id, op);
            }
            self.base += 1;
        }
        self.drop_empty_front();
    }

    /// Live op `id`, if any.
    pub(crate) fn get(&self, id: u64) -> Option<&Arc<OpCell<P>>> {
        match self.slot(id) {
            Some(k) => self.recent[k].as_ref(),
            None => self.older.get(&id),
        }
    }

    /// The lowest live id.
    pub(crate) fn lowest(&self) -> Option<u64> {
        self.iter().next().map(|op| op.id)
    }

    /// How many ops are live.
    pub(crate) fn len(&self) -> usize {
        self.in_recent + self.older.len()
    }

    /// The live ops in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<OpCell<P>>> {
        self.older.values().chain(self.recent.iter().flatten())
    }

    /// The live ops with an id below `limit`, in id order.
    pub(crate) fn below(&self, limit: u64) -> impl Iterator<Item = &Arc<OpCell<P>>> {
        self.iter().take_while(move |op| op.id < limit)
    }
}

#[cfg(test)]
mod tests {
    use super::{LiveIndex, LiveShard, COMPACT_FROM};
    use crate::op::{bare_op, OpCell};
    use crate::sync::Arc;
    use std::collections::BTreeMap;

    fn op(id: u64) -> Arc<OpCell<()>> {
        Arc::new(bare_op(id, 0))
    }

    fn ids<'a>(ops: impl Iterator<Item = &'a Arc<OpCell<()>>>) -> Vec<u64> {
        ops.map(|op| op.id).collect()
    }

    /// Checks every query of `shard` against the same ops in a map.
    fn same(shard: &LiveShard<()>, map: &BTreeMap<u64, Arc<OpCell<()>>>, probe: u64) {
        assert_eq!(shard.len(), map.len());
        assert_eq!(shard.lowest(), map.keys().next().copied());
        assert_eq!(ids(shard.iter()), map.keys().copied().collect::<Vec<_>>());
        assert_eq!(
            ids(shard.below(probe)),
            map.range(..probe).map(|(k, _)| *k).collect::<Vec<_>>()
        );
        assert_eq!(
            shard.get(probe).map(|op| op.id),
            map.get(&probe).map(|op| op.id)
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
        for stride in [1, 3, 16] {
            let residue = stride / 2;
            let mut shard = LiveShard::new(stride);
            let mut map: BTreeMap<u64, Arc<OpCell<()>>> = BTreeMap::new();
            let mut next_key = 0;
            // Keys handed out but not inserted yet: pushes that took an id
            // and have not reached the index.
            let mut late: Vec<u64> = Vec::new();
            for step in 0..20_000 {
                let roll = next() % 100;
                let id = if roll < 45 {
                    next_key += 1;
                    if next() % 8 == 0 {
                        late.push(next_key * stride + residue);
                        continue;
                    }
                    next_key * stride + residue
                } else if roll < 50 && !late.is_empty() {
                    late.swap_remove(0)
                } else {
                    // Remove a live op: mostly an old one, sometimes any.
                    let live: Vec<u64> = map.keys().copied().collect();
                    if live.is_empty() {
                        continue;
                    }
                    let pick = if next() % 4 == 0 {
                        live[(next() as usize) % live.len()]
                    } else {
                        live[(next() as usize) % live.len().min(8)]
                    };
                    let removed = shard.remove(pick).map(|op| op.id);
                    assert_eq!(removed, map.remove(&pick).map(|op| op.id), "step {step}");
                    assert_eq!(shard.remove(pick).map(|op| op.id), None);
                    same(&shard, &map, pick);
                    continue;
                };
                shard.insert(id, op(id));
                map.insert(id, op(id));
                let probe = (next() % (next_key + 2)) * stride + residue;
                same(&shard, &map, probe);
            }
        }
    }

    #[test]
    fn any_below_agrees_with_the_list_of_ops_below() {
        // An index of no engine: no fork can copy its locks.
        crate::sync::without_section(any_below_agrees);
    }

    fn any_below_agrees() {
        let index: LiveIndex<()> = LiveIndex::new();
        let limits = [0, 1, 5, 17, 40, 41, 100];
        let check = |index: &LiveIndex<()>| {
            for limit in limits {
                assert_eq!(
                    index.any_below(limit),
                    !index.below(limit).is_empty(),
                    "limit {limit}"
                );
            }
        };
        check(&index);
        // Live ids spread over several shards, then removed oldest first,
        // so the lowest live id moves past each limit in turn.
        let live = [3, 4, 16, 17, 23, 40];
        for id in live {
            index.shard(id).lock().insert(id, op(id));
        }
        assert!(index.any_below(4) && !index.any_below(3));
        check(&index);
        for id in live {
            index.shard(id).lock().remove(id);
            check(&index);
        }
        assert!(!index.any_below(u64::MAX));
    }

    #[test]
    fn a_long_lived_op_does_not_keep_the_ring_long() {
        let mut shard = LiveShard::new(1);
        shard.insert(0, op(0));
        for id in 1..100_000 {
            shard.insert(id, op(id));
            shard.remove(id);
            assert!(
                shard.recent.len() <= COMPACT_FROM + 1,
                "ring of {}",
                shard.recent.len()
            );
            // A short ring is never compacted.
            assert_eq!(shard.older.is_empty(), id < COMPACT_FROM as u64, "op {id}");
        }
        assert_eq!(ids(shard.iter()), vec![0]);
        assert_eq!((shard.len(), shard.lowest()), (1, Some(0)));
        assert!(shard.recent.capacity() <= 4 * COMPACT_FROM);
    }

    #[test]
    fn a_ring_that_jumps_ahead_past_a_long_lived_op_is_compacted() {
        let mut shard = LiveShard::new(1);
        shard.insert(0, op(0));
        // Ids 1..2000 are taken by pushes that have not reached the index.
        for id in 2000..10_000 {
            shard.insert(id, op(id));
            shard.remove(id);
            assert!(
                shard.recent.len() <= COMPACT_FROM + 1,
                "ring of {}",
                shard.recent.len()
            );
        }
        assert_eq!((shard.len(), shard.lowest()), (1, Some(0)));
    }

    #[test]
    fn only_a_ring_less_than_half_live_is_compacted() {
        let n = 4 * COMPACT_FROM as u64;
        // Half live: kept as it is.
        let mut shard = LiveShard::new(1);
        for id in 0..n {
            shard.insert(id, op(id));
        }
        for id in (1..n).step_by(2) {
            shard.remove(id);
        }
        shard.insert(n, op(n));
        assert!(shard.older.is_empty());
        // A third live: the front moves to the map until half is live.
        let mut shard = LiveShard::new(1);
        for id in 0..n {
            shard.insert(id, op(id));
            if id % 3 != 0 {
                shard.remove(id);
            }
        }
        assert!(!shard.older.is_empty());
        // Short, or at most twice as long as its live ops at the last insert.
        assert!(shard.recent.len() <= COMPACT_FROM.max(2 * shard.in_recent) + 2);
        assert_eq!(shard.len(), (0..n).filter(|id| id % 3 == 0).count());
    }

    #[test]
    fn the_ring_gives_room_back_only_when_mostly_empty() {
        // A small ring keeps its room.
        let mut shard = LiveShard::new(1);
        for id in 0..1000 {
            shard.insert(id, op(id));
        }
        let small = shard.recent.capacity();
        for id in 0..1000 {
            shard.remove(id);
        }
        assert_eq!(shard.recent.capacity(), small);
        // A large one keeps it while a quarter or more is in use, then
        // gives back at most down to twice its length.
        let mut shard = LiveShard::new(1);
        for id in 0..100_000 {
            shard.insert(id, op(id));
        }
        let mut shrinks = 0;
        for id in 0..100_000 {
            let before = shard.recent.capacity();
            shard.remove(id);
            let (len, after) = (shard.recent.len(), shard.recent.capacity());
            if len * 4 >= before {
                assert_eq!(after, before, "shrank at {len} of {before}");
            } else if after != before {
                shrinks += 1;
                assert!(
                    after >= 2 * len && after < before,
                    "{before} -> {after} at {len}"
                );
            }
        }
        assert!(shrinks > 0);
        assert!(shard.recent.capacity() <= 4 * COMPACT_FROM);
    }

    #[test]
    fn a_late_op_below_moved_ones_stays_in_order() {
        let mut shard = LiveShard::new(1);
        for id in 0..3000 {
            if id == 3 {
                continue; // taken, not yet inserted
            }
            shard.insert(id, op(id));
            if id != 0 && id != 5 {
                shard.remove(id);
            }
        }
        assert!(shard.recent.is_empty());
        shard.insert(3, op(3));
        assert_eq!(ids(shard.iter()), vec![0, 3, 5]);
        assert_eq!(ids(shard.below(4)), vec![0, 3]);
        assert_eq!(shard.remove(3).map(|op| op.id), Some(3));
        shard.insert(3000, op(3000));
        assert_eq!(ids(shard.iter()), vec![0, 5, 3000]);
    }

    #[test]
    fn a_drained_burst_gives_its_ring_back() {
        let mut shard = LiveShard::new(1);
        for id in 0..100_000 {
            shard.insert(id, op(id));
        }
        for id in 0..100_000 {
            shard.remove(id);
        }
        assert_eq!(shard.len(), 0);
        assert!(shard.recent.capacity() <= 4 * COMPACT_FROM);
    }
}
