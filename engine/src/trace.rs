//! The op timeline as Chrome Trace Event JSON (loads in Perfetto and
//! `chrome://tracing`): one complete (`"ph": "X"`) event per op body run,
//! named after the op, on the thread that ran it, with its lane, op id and
//! worker in `args`; plus one `thread_name` metadata event per worker
//! thread.

use crate::Lane;
use forksafe_core::TraceEvent;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;

/// A recorded timeline ([`crate::Engine::trace_take`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// The events, ordered by start time.
    pub events: Vec<TraceEvent>,
    /// The engine's worker thread-name prefix ([`crate::CoreConfig::thread_name`]).
    pub thread_name: String,
}

fn lane_name(lane: Lane) -> &'static str {
    match lane {
        Lane::Compute => "compute",
        Lane::Host => "host",
    }
}

impl Trace {
    /// The worker thread name of an event, as the engine names its threads;
    /// `<thread_name>-<lane>-pusher` for an op its pusher ran inline
    /// ([`crate::CoreConfig::run_inline_from`]), which ran on the pushing
    /// thread.
    pub fn worker_name(&self, event: &TraceEvent) -> String {
        if event.worker == 0 {
            return format!("{}-{}-pusher", self.thread_name, lane_name(event.lane));
        }
        format!(
            "{}-{}-{}",
            self.thread_name,
            lane_name(event.lane),
            event.worker
        )
    }

    /// The timeline as a Chrome Trace Event JSON document.
    ///
    /// ```
    /// use forksafe::{Config, Engine};
    /// let engine = Engine::new(Config::default()).unwrap();
    /// engine.trace_start().unwrap();
    /// engine.op("hello").run(|| {}).unwrap();
    /// engine.wait_all().unwrap();
    /// let json = engine.trace_take().unwrap().to_chrome_json();
    /// assert!(json.contains("\"name\":\"hello\""));
    /// ```
    pub fn to_chrome_json(&self) -> String {
        let pid = std::process::id();
        let mut threads = BTreeMap::new();
        let mut events: Vec<Value> = self
            .events
            .iter()
            .map(|e| {
                let worker = self.worker_name(e);
                threads.entry(e.thread).or_insert_with(|| worker.clone());
                let lane = lane_name(e.lane);
                json!({
                    "name": e.name,
                    "cat": lane,
                    "ph": "X",
                    "ts": e.start_ns as f64 / 1000.0,
                    "dur": e.dur_ns as f64 / 1000.0,
                    "pid": pid,
                    "tid": e.thread,
                    "args": { "op": e.op, "lane": lane, "worker": worker },
                })
            })
            .collect();
        events.extend(threads.into_iter().map(|(tid, name)| {
            json!({
                "name": "thread_name",
                "ph": "M",
                "pid": pid,
                "tid": tid,
                "args": { "name": name },
            })
        }));
        let doc = json!({ "displayTimeUnit": "ns", "traceEvents": events });
        let mut out = doc.to_string();
        out.push('\n');
        out
    }

    /// Writes [`Trace::to_chrome_json`] to `w`.
    pub fn write_chrome_json(&self, mut w: impl Write) -> std::io::Result<()> {
        w.write_all(self.to_chrome_json().as_bytes())
    }
}
