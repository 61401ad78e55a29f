//! The op timeline as Chrome Trace Event JSON (loads in Perfetto and
//! `chrome://tracing`): one complete (`"ph": "X"`) event per op body run,
//! named after the op, on the thread that ran it, with its lane, op id and
//! worker in `args`; plus one `thread_name` metadata event per worker
//! thread.

use crate::Lane;
use forksafe_core::TraceEvent;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;

/// A recorded timeline ([`crate::Engine::trace_take`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// The events, ordered by start time.
    pub events: Vec<TraceEvent>,
    /// The engine's worker thread-name prefix ([`crate::Config::thread_name`]).
    pub thread_name: String,
}

fn lane_name(lane: Lane) -> &'static str {
    match lane {
        Lane::Compute => "compute",
        Lane::Host => "host",
    }
}

/// Appends `s` as a JSON string literal.
fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

impl Trace {
    /// The worker thread name of an event, as the engine names its threads.
    pub fn worker_name(&self, event: &TraceEvent) -> String {
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
        let mut out = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
        let mut threads = BTreeMap::new();
        for (i, e) in self.events.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            threads
                .entry(e.thread)
                .or_insert_with(|| self.worker_name(e));
            out.push_str("\n{\"name\":");
            json_str(&mut out, &e.name);
            let lane = lane_name(e.lane);
            let _ = write!(
                out,
                ",\"cat\":\"{lane}\",\"ph\":\"X\",\"ts\":{:.3},\"dur\":{:.3},\"pid\":{pid},\"tid\":{},\
                 \"args\":{{\"op\":{},\"lane\":\"{lane}\",\"worker\":",
                e.start_ns as f64 / 1000.0,
                e.dur_ns as f64 / 1000.0,
                e.thread,
                e.op
            );
            json_str(&mut out, &self.worker_name(e));
            out.push_str("}}");
        }
        for (tid, name) in threads {
            let _ = write!(
                out,
                ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":"
            );
            json_str(&mut out, &name);
            out.push_str("}}");
        }
        out.push_str("\n]}\n");
        out
    }

    /// Writes [`Trace::to_chrome_json`] to `w`.
    pub fn write_chrome_json(&self, mut w: impl Write) -> std::io::Result<()> {
        w.write_all(self.to_chrome_json().as_bytes())
    }
}
