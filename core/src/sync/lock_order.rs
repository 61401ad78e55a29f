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
//!
//! The same builds check the fork gate's rule (docs/DESIGN.md, "The fork
//! gate"): every engine lock (every rank but [`LockRank::Leaf`] and
//! [`LockRank::Unranked`]) is taken inside a fork-gate section, so a fork,
//! which waits for open sections, never copies one held. Each thread
//! counts the sections it has open; taking an engine lock with none open
//! panics, on every schedule, where the models' fork-point check finds the
//! mistake only when a fork happens to land inside the lock (and loom and
//! shuttle never switch threads inside a critical section that takes no
//! other lock and touches no atomic). The few places that take engine
//! locks while no fork can happen (a fork child's settle, with the gate
//! closed; an engine nobody else can reach yet) say so with
//! [`without_section`]. The count is per thread, not per engine: a section
//! of one engine lets its thread take another engine's locks unchecked
//! (no engine code does; engines never call each other under a lock).
//!
//! # State
//!
//! Debug builds outside the models keep, per thread, the ranks of the
//! locks it holds (pushed when a ranked lock is taken, removed when its
//! guard drops) and the number of sections it has open (raised and lowered
//! by the fork gate). Only the thread itself moves them; nothing is shared.

/// Where a lock stands in the lock order: lower ranks are taken first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum LockRank {
    /// The waits inside ops (`engine/wait_graph.rs`): held while the
    /// search takes var locks and live-set shards, one at a time.
    WaitGraph = 0,
    /// A var's state (`var.rs`). Several at once only in var-id
    /// order (push).
    Var = 1,
    /// A shard of the live-op index (taken inside a push's var locks).
    LiveShard = 2,
    /// The `wait_all` waiters (taken inside a push's var locks when a
    /// shutdown refuses the push).
    AllWaiters = 3,
    /// The engine's lifecycle cell (lifecycle, quiesce holds, errors, push
    /// waiters; `engine/lifecycle_cell.rs`).
    Lifecycle = 4,
    /// A lane: its worker pool and flags (`lane.rs`; taken inside `Lifecycle` when
    /// a quiesce or shutdown pauses or resumes dispatch).
    Lane = 5,
    /// One ready queue of a lane (taken alone per op by dispatch, workers
    /// and completions; inside `Lane` when a quiesce, shutdown or fork
    /// child moves every queue).
    ReadyQueue = 6,
    /// A lock under which no other lock is taken (timed waiters, the trace
    /// recorder, the worker-handle set, the gate's waiters).
    Leaf = 7,
    /// Not in the order: the fork domain's registry and the test GIL, which
    /// are taken around engine calls, never inside an engine lock.
    #[default]
    Unranked = 8,
}

impl LockRank {
    /// Whether locks of this rank are engine state a fork copies: taken
    /// only inside a fork-gate section.
    #[cfg(all(debug_assertions, not(any(loom, shuttle))))]
    fn needs_section(self) -> bool {
        !matches!(self, LockRank::Leaf | LockRank::Unranked)
    }
}

#[cfg(all(debug_assertions, not(any(loom, shuttle))))]
mod checked {
    use super::LockRank;
    use std::cell::{Cell, RefCell};

    std::thread_local! {
        static HELD: RefCell<Vec<LockRank>> = const { RefCell::new(Vec::new()) };
        /// Fork-gate sections this thread has open, plus the
        /// [`without_section`] scopes it is in.
        static SECTIONS: Cell<usize> = const { Cell::new(0) };
    }

    /// The calling thread opened a fork-gate section.
    pub(crate) fn section_opened() {
        SECTIONS.with(|n| n.set(n.get() + 1));
    }

    /// The calling thread closed a fork-gate section.
    pub(crate) fn section_closed() {
        let _ = SECTIONS.try_with(|n| n.set(n.get().saturating_sub(1)));
    }

    /// Runs `f`, whose engine locks are taken where no fork can copy them
    /// (say why at the call): a fork child's settle, with the gate closed
    /// and no other thread; an engine not yet shared.
    pub(crate) fn without_section<R>(f: impl FnOnce() -> R) -> R {
        section_opened();
        let _scope = Closer;
        f()
    }

    /// Closes the scope of [`without_section`] on unwind too.
    struct Closer;
    impl Drop for Closer {
        fn drop(&mut self) {
            section_closed();
        }
    }

    /// Records that the calling thread takes a lock of `rank`; panics if it
    /// holds a lock that must come after it.
    pub(crate) fn acquire(rank: LockRank) {
        if rank == LockRank::Unranked {
            return;
        }
        if rank.needs_section() {
            let open = SECTIONS.try_with(|n| n.get()).unwrap_or(0);
            assert!(
                open > 0,
                "an engine lock ({rank:?}) {}: a fork could copy it held (docs/DESIGN.md, \
                 \"The fork gate\")",
                super::SECTION_FAILURE
            );
        }
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(&top) = held.iter().max() {
                let nests = top < rank || (top == rank && rank == LockRank::Var);
                assert!(
                    nests,
                    "{}: a {rank:?} lock taken while a {top:?} lock is held (forksafe-core's \
                     crate docs, \"Lock order\")",
                    super::ORDER_FAILURE
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
pub(crate) use checked::{acquire, release, section_closed, section_opened, without_section};

/// The start of the lock-order check's panic message.
const ORDER_FAILURE: &str = "lock order violated";
/// A part of the section check's panic message.
const SECTION_FAILURE: &str = "taken outside a fork-gate section";

/// Whether a panic message is one of these checks' (a worker aborts on
/// them, `engine/worker.rs`).
pub(crate) fn is_debug_check_failure(message: &str) -> bool {
    message.starts_with(ORDER_FAILURE) || message.contains(SECTION_FAILURE)
}

/// Release and model builds: nothing is counted.
#[cfg(not(all(debug_assertions, not(any(loom, shuttle)))))]
#[inline(always)]
pub(crate) fn section_opened() {}

/// Release and model builds: nothing is counted.
#[cfg(not(all(debug_assertions, not(any(loom, shuttle)))))]
#[inline(always)]
pub(crate) fn section_closed() {}

/// Release and model builds: runs `f`.
#[cfg(not(all(debug_assertions, not(any(loom, shuttle)))))]
#[inline(always)]
pub(crate) fn without_section<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(all(test, debug_assertions, not(any(loom, shuttle))))]
mod tests {
    use super::{without_section, LockRank};
    use crate::sync::Mutex;

    // Locks of no engine: each test takes them as if inside a section.

    #[test]
    fn locks_taken_in_rank_order_pass() {
        without_section(|| {
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
        });
    }

    #[test]
    #[should_panic(expected = "lock order violated: a Lifecycle lock taken while a Lane lock")]
    fn a_lock_taken_out_of_order_panics() {
        without_section(|| {
            let ctl = Mutex::ranked(0, LockRank::Lifecycle);
            let lane = Mutex::ranked(0, LockRank::Lane);
            let _l = lane.lock();
            let _c = ctl.lock();
        });
    }

    #[test]
    #[should_panic(expected = "a Lane lock taken while a Lane lock")]
    fn two_locks_of_one_rank_other_than_var_panic() {
        without_section(|| {
            let a = Mutex::ranked(0, LockRank::Lane);
            let b = Mutex::ranked(0, LockRank::Lane);
            let _a = a.lock();
            let _b = b.lock();
        });
    }

    #[test]
    fn unranked_locks_are_not_checked() {
        without_section(|| {
            let gil = Mutex::new(0);
            let lane = Mutex::ranked(0, LockRank::Lane);
            let _l = lane.lock();
            let _g = gil.lock();
        });
    }

    #[test]
    #[should_panic(expected = "an engine lock (ReadyQueue) taken outside a fork-gate section")]
    fn an_engine_lock_outside_a_section_panics() {
        let queue = Mutex::ranked(0, LockRank::ReadyQueue);
        let _s = queue.lock();
    }

    #[test]
    #[should_panic(expected = "an engine lock (Var) taken outside a fork-gate section")]
    fn a_try_lock_outside_a_section_panics_too() {
        let var = Mutex::ranked(0, LockRank::Var);
        let _v = var.try_lock();
    }

    #[test]
    fn leaf_and_unranked_locks_need_no_section() {
        let leaf = Mutex::ranked(0, LockRank::Leaf);
        let gil = Mutex::new(0);
        drop((leaf.lock(), gil.lock()));
    }

    #[test]
    fn a_worker_recognises_each_checks_failure() {
        for (rank, needs_section) in [(LockRank::ReadyQueue, true), (LockRank::Lane, false)] {
            let msg = std::panic::catch_unwind(|| {
                let outer = Mutex::ranked(0, LockRank::ReadyQueue);
                let inner = Mutex::ranked(0, rank);
                if needs_section {
                    drop(inner.lock());
                } else {
                    without_section(|| {
                        let _o = outer.lock();
                        let _i = inner.lock();
                    });
                }
            })
            .expect_err("the check fired");
            let msg = msg.downcast_ref::<String>().expect("a formatted message");
            assert!(super::is_debug_check_failure(msg), "{msg}");
        }
        assert!(!super::is_debug_check_failure(
            "attempt to subtract with overflow"
        ));
    }

    #[test]
    fn the_scope_ends_with_its_closure() {
        without_section(|| drop(Mutex::ranked(0, LockRank::Lane).lock()));
        let after = std::panic::catch_unwind(|| drop(Mutex::ranked(0, LockRank::Lane).lock()));
        assert!(after.is_err(), "the exemption outlived its scope");
        // And on unwind out of the scope.
        let _ = std::panic::catch_unwind(|| without_section(|| panic!("inside")));
        let after = std::panic::catch_unwind(|| drop(Mutex::ranked(0, LockRank::Lane).lock()));
        assert!(after.is_err(), "an unwinding scope left the exemption on");
    }
}
