//! The lock order, checked: each engine lock has a [`LockRank`], and a
//! thread may take a lock only while every ranked lock it holds ranks
//! lower (var locks may nest among themselves: a push takes all of an op's
//! var locks, in var-id order). The table is in the crate docs ("Lock
//! order").
//!
//! Debug builds outside the model checkers keep, per thread, the ranks of
//! the locks it holds, and panic naming both locks when one is taken out of
//! order, so every plain test (core's unit and integration tests, the
//! engine's real-thread and real-fork tests, the proptests; `[profile.test]`
//! keeps debug assertions on) checks the order on every lock it takes.
//! Release builds and model builds keep nothing and check nothing: the
//! field and the thread-local do not exist there.

/// Where a lock stands in the lock order: lower ranks are taken first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum LockRank {
    /// A var's state (`VarState::inner`). Several at once only in var-id
    /// order (push).
    Var = 1,
    /// A shard of the live-op index.
    LiveShard = 2,
    /// The `wait_all` waiters (taken inside a live shard by completion).
    AllWaiters = 3,
    /// The engine's control state (lifecycle, errors, push waiters).
    Control = 4,
    /// A lane: its ready queue and worker pool (taken inside `Control` when
    /// a quiesce or shutdown pauses or resumes dispatch).
    Lane = 5,
    /// One ready queue of a lane (taken alone per op by dispatch, workers
    /// and completions; inside `Lane` when a quiesce, shutdown or fork
    /// child moves every slot).
    Slot = 6,
    /// A lock under which no other lock is taken (timed waiters, the trace
    /// recorder, the worker-handle set, the gate's waiters).
    Leaf = 7,
    /// Not in the order: the fork domain's registry and the test GIL, which
    /// are taken around engine calls, never inside an engine lock.
    #[default]
    Unranked = 8,
}

#[cfg(all(debug_assertions, not(any(loom, shuttle))))]
mod checked {
    use super::LockRank;
    use std::cell::RefCell;

    std::thread_local! {
        static HELD: RefCell<Vec<LockRank>> = const { RefCell::new(Vec::new()) };
    }

    /// Records that the calling thread takes a lock of `rank`; panics if it
    /// holds a lock that must come after it.
    pub(crate) fn acquire(rank: LockRank) {
        if rank == LockRank::Unranked {
            return;
        }
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(&top) = held.iter().max() {
                let nests = top < rank || (top == rank && rank == LockRank::Var);
                assert!(
                    nests,
                    "lock order violated: a {rank:?} lock taken while a {top:?} lock is held \
                     (forksafe-core's crate docs, \"Lock order\")"
                );
            }
            held.push(rank);
        });
    }

    /// Records that the calling thread released a lock of `rank`.
    pub(crate) fn release(rank: LockRank) {
        if rank == LockRank::Unranked {
            return;
        }
        // `try_with`: a guard dropped during thread teardown finds the
        // thread-local gone; nothing is left to check then.
        let _ = HELD.try_with(|held| {
            let mut held = held.borrow_mut();
            if let Some(i) = held.iter().rposition(|r| *r == rank) {
                held.remove(i);
            }
        });
    }
}

#[cfg(all(debug_assertions, not(any(loom, shuttle))))]
pub(crate) use checked::{acquire, release};

#[cfg(all(test, debug_assertions, not(any(loom, shuttle))))]
mod tests {
    use super::LockRank;
    use crate::sync::Mutex;

    #[test]
    fn locks_taken_in_rank_order_pass() {
        let var = Mutex::ranked(0, LockRank::Var);
        let var2 = Mutex::ranked(0, LockRank::Var);
        let lane = Mutex::ranked(0, LockRank::Lane);
        let a = var.lock();
        let b = var2.lock();
        let c = lane.lock();
        drop((a, b, c));
        // Released in any order, the record is empty again.
        let c = lane.lock();
        drop(c);
        let _a = var.lock();
    }

    #[test]
    #[should_panic(expected = "lock order violated: a Control lock taken while a Lane lock")]
    fn a_lock_taken_out_of_order_panics() {
        let ctl = Mutex::ranked(0, LockRank::Control);
        let lane = Mutex::ranked(0, LockRank::Lane);
        let _l = lane.lock();
        let _c = ctl.lock();
    }

    #[test]
    #[should_panic(expected = "a Lane lock taken while a Lane lock")]
    fn two_locks_of_one_rank_other_than_var_panic() {
        let a = Mutex::ranked(0, LockRank::Lane);
        let b = Mutex::ranked(0, LockRank::Lane);
        let _a = a.lock();
        let _b = b.lock();
    }

    #[test]
    fn unranked_locks_are_not_checked() {
        let gil = Mutex::new(0);
        let lane = Mutex::ranked(0, LockRank::Lane);
        let _l = lane.lock();
        let _g = gil.lock();
    }
}
