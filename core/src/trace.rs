//! The optional op timeline: one [`TraceEvent`] per op body run, with its
//! name, lane, worker and thread, recorded only while tracing is on. Off,
//! the cost is one relaxed load per body. Recording takes a short lock
//! inside a fork-gate section (so no thread holds it when the process
//! forks), never while host code runs (H1).
//!
//! # State
//!
//! | what | move | who | serves |
//! |---|---|---|---|
//! | `on` | off ↔ on | `CoreEngine::set_tracing`, in a section; on resets the start time | the cost off is one relaxed load per body |
//! | events | n → n + 1 | a body that ran while on, after it returned, in a section ([`Tracer::record`]) | I5: no thread holds the recorder's lock at a fork |
//! | events | all → none | `CoreEngine::take_trace`, in a section | — |

use crate::op::OpCell;
use crate::op_info::Lane;
use crate::sync::{AtomicBool, Mutex, Ordering, MODEL_BUILD};
use std::time::Instant;

/// One op body run: when it started and how long it took, on which worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceEvent {
    /// The op's id (push sequence number).
    pub op: u64,
    /// The op's name.
    pub name: String,
    /// The lane it ran on.
    pub lane: Lane,
    /// The index of the worker of that lane that ran it (its thread is
    /// named `<thread_name>-<lane>-<worker>`; workers are numbered from 1),
    /// or 0 when its pusher ran it inline (`Config::run_inline_from`).
    pub worker: usize,
    /// The process-unique number of the thread that ran it
    /// ([`crate::sync::thread_number`]).
    pub thread: usize,
    /// Start, in nanoseconds since tracing was turned on.
    pub start_ns: u64,
    /// Duration of the body, in nanoseconds.
    pub dur_ns: u64,
}

/// The recorder of one engine.
pub(crate) struct Tracer {
    on: AtomicBool,
    inner: Mutex<Recording>,
}

struct Recording {
    origin: Option<Instant>,
    events: Vec<TraceEvent>,
}

impl Tracer {
    pub(crate) fn new() -> Self {
        Tracer {
            on: AtomicBool::new(false),
            inner: Mutex::ranked(
                Recording {
                    origin: None,
                    events: Vec::new(),
                },
                crate::sync::LockRank::Leaf,
            ),
        }
    }

    /// Turns recording on (keeping the time origin of an earlier
    /// recording) or off; inside a section.
    pub(crate) fn set(&self, on: bool) {
        let mut r = self.inner.lock();
        if on && r.origin.is_none() {
            r.origin = Some(Instant::now());
        }
        self.on.store(on, Ordering::Relaxed);
    }

    /// The start time of a body about to run, if tracing is on: the one
    /// relaxed check on the hot path. Model builds never trace (the check
    /// would add a scheduling point to every body in every model).
    pub(crate) fn start(&self) -> Option<Instant> {
        if !MODEL_BUILD && self.on.load(Ordering::Relaxed) {
            Some(Instant::now())
        } else {
            None
        }
    }

    /// Records a body that started at `start` and has just returned; inside
    /// a section.
    pub(crate) fn record<P>(&self, op: &OpCell<P>, worker: usize, start: Instant) {
        let end = Instant::now();
        let mut r = self.inner.lock();
        let origin = *r.origin.get_or_insert(start);
        let start_ns = start.saturating_duration_since(origin).as_nanos();
        let dur_ns = end.saturating_duration_since(start).as_nanos();
        r.events.push(TraceEvent {
            op: op.id(),
            name: op.name.to_string(),
            lane: op.lane,
            worker,
            thread: crate::sync::thread_number(),
            start_ns: u64::try_from(start_ns).unwrap_or(u64::MAX),
            dur_ns: u64::try_from(dur_ns).unwrap_or(u64::MAX),
        });
    }

    /// Takes the events recorded so far, ordered by start; inside a section.
    pub(crate) fn take(&self) -> Vec<TraceEvent> {
        let mut events = std::mem::take(&mut self.inner.lock().events);
        events.sort_by_key(|e| (e.start_ns, e.op));
        events
    }
}
