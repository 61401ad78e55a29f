//! Dispatch, the second step of an op's path: a ready op (every var
//! granted) goes to a ready queue of its lane, and an idle worker is woken
//! or a new one planned only when the lane wants one. The hand-off protocol
//! and why no wake-up is lost are `ready/README.md`; the queues are
//! `ready/`'s and the workers `lane.rs`'s. Ops the workers take from here
//! run in `worker.rs` and `run.rs`.
//!
//! # State
//!
//! Dispatch owns no state of its own: it moves the ready queues' and the
//! pool's (their `# State` tables), and a pusher's [`PushSide`], which
//! lives for one push:
//!
//! | what | move | who | serves |
//! |---|---|---|---|
//! | `freed` | empty → a batch of records | the pusher's dispatch, under the queue lock, when the queue holds a batch handed back by the workers | memory: a record is freed by the thread that allocated it (`ready/README.md`) |
//! | `freed` | a batch → freed | the pusher, once it left its section | H1: no payload dropped inside a section |
//! | `inline_from` | set once | the push (`admission.rs`, `Config::run_inline_from`) | docs/DESIGN.md "Running inline" |

use super::shared::Shared;
use super::Payload;
use crate::op::OpCell;
use crate::op_info::Lane;
use crate::pool::Spawns;
use crate::ready::Home;
use crate::sync::{Arc, MODEL_BUILD};

/// What a pushing thread brings to [`dispatch`] (see the module's
/// `# State`).
pub(crate) struct PushSide<P> {
    /// Receives the completed op records a queue kept for a pusher to free
    /// (`ready/queue.rs`, `retired`), freed when this drops, once the pusher
    /// left its section.
    freed: Vec<Arc<OpCell<P>>>,
    /// `Some(n)`: the pusher may run a compute-lane op inline when its
    /// queue already holds `n` queued ops.
    inline_from: Option<usize>,
}

impl<P> PushSide<P> {
    /// A pusher that may run a compute-lane op inline from `inline_from`
    /// queued ops.
    pub(crate) fn new(inline_from: Option<usize>) -> Self {
        PushSide {
            freed: Vec::new(),
            inline_from,
        }
    }

    /// Whether this pusher may run ops inline at all.
    pub(crate) fn may_run_inline(&self) -> bool {
        self.inline_from.is_some()
    }

    /// Frees the records taken from the queues; outside every section
    /// (H1).
    pub(crate) fn free_handed_back(&mut self) {
        self.freed.clear();
    }
}

/// Queues ready ops and wakes or plans workers; inside a section. A
/// pushed op goes to the queue its id picks; an op made ready by a
/// worker's completion (`home`) goes to that worker's home queue, and
/// the worker takes one such op itself when nothing waits in its home
/// queue (saves a queue round trip; never overtakes a queued op there).
/// Consecutive ops bound for the same queue are queued in one hold of its
/// lock (a batch push sorts its ready ops by queue for this). The lane
/// lock is taken only when the pool wants it: an idle worker to wake or a
/// worker to start (`ready/README.md`). A pusher passes its
/// [`PushSide`]: the completed op records the queue kept for a pusher to
/// free once it has left its section (`ready/queue.rs`, `retired`), and
/// whether it may take the op to run inline (returned; docs/DESIGN.md
/// "Running inline").
pub(crate) fn dispatch<P: Payload>(
    shared: &Shared<P>,
    ops: impl IntoIterator<Item = Arc<OpCell<P>>>,
    home: Option<Home>,
    spawns: &mut Spawns,
    mut pusher: Option<&mut PushSide<P>>,
) -> Option<Arc<OpCell<P>>> {
    let mut taken = None;
    let inline_from = pusher.as_ref().and_then(|p| p.inline_from);
    let mut ops = ops.into_iter().peekable();
    while let Some(first) = ops.next() {
        let lane = first.lane;
        let ready = shared.ready(lane);
        let own = home.filter(|h| h.lane == lane);
        let target = |op: &OpCell<P>| own.map_or_else(|| ready.queue_for(op.id()), |h| h.queue);
        let index = target(&first);
        let early = control!(WantedReadBeforeQueue) && ready.wants_worker();
        // Ops queued in this hold, each of which may want a worker.
        let mut queued = 0usize;
        {
            let mut queue = ready.queue(index).lock();
            let mut next = Some(first);
            while let Some(op) = next.take() {
                let from = inline_from.filter(|_| taken.is_none() && lane == Lane::Compute);
                // Decided and counted under the queue lock, as a take is:
                // a quiesce that paused this queue is never passed (I3).
                if from.is_some_and(|from| queue.start_inline(&op, index, from)) {
                    taken = Some(op);
                } else if queue.held() {
                    queue.push(op);
                } else if taken.is_none() && own.is_some() && queue.is_empty() {
                    // Counted under the queue lock, as a take is (I3).
                    if queue.start(&op, index) {
                        taken = Some(op);
                    }
                } else {
                    queue.push(op);
                    queued += 1;
                }
                next = ops.next_if(|op| op.lane == lane && target(op) == index);
            }
            if queued > 0 {
                if let Some(pusher) = pusher.as_deref_mut() {
                    queue.take_retired(&mut pusher.freed);
                }
            }
        }
        if queued == 0 {
            continue;
        }
        if !MODEL_BUILD {
            shared.spin_hint(lane).queued();
        }
        // After the queue's lock is released: a worker that registered
        // as idle before this push published it before it looked at
        // this queue (no lost wake-up, `ready/README.md`). One worker
        // woken or planned per op queued, while the pool wants one.
        for _ in 0..queued {
            let wants = if control!(WantedReadBeforeQueue) {
                early
            } else {
                ready.wants_worker()
            };
            if !wants {
                break;
            }
            let mut ls = shared.lane(lane).lock();
            if let Some(t) = ls.pool_mut().wake_idle() {
                drop(ls);
                t.unpark();
            } else if let Some(start) = ls.grow() {
                spawns.push((lane, start));
            } else {
                break;
            }
        }
    }
    taken
}
