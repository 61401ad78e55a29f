//! The op timeline: enable tracing, run ops on both lanes, write Chrome
//! Trace Event JSON, parse it back, and check one complete event per op with
//! its name, lane and thread.

use forksafe::{Config, CoreConfig, Engine};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

const OPS: usize = 500;

#[test]
fn timeline_has_one_complete_event_per_op() {
    let engine = Engine::new(Config {
        core: CoreConfig {
            compute_workers: 2,
            thread_name: "tl".into(),
            ..CoreConfig::default()
        },
        ..Config::default()
    })
    .unwrap();
    let vars: Vec<_> = (0..8).map(|_| engine.new_var().unwrap()).collect();
    // Untraced ops before and after do not appear.
    engine.op("before").writes(&[&vars[0]]).run(|| {}).unwrap();
    engine.wait_all().unwrap();
    engine.trace_start().unwrap();
    for i in 0..OPS {
        let b = engine
            .op(format!("op-{i}"))
            .writes(&[&vars[i % vars.len()]]);
        let b = if i % 5 == 0 { b.host() } else { b };
        b.run(|| {}).unwrap();
    }
    engine.wait_all().unwrap();
    engine.trace_stop().unwrap();
    engine.op("after").writes(&[&vars[0]]).run(|| {}).unwrap();
    engine.wait_all().unwrap();

    let trace = engine.trace_take().unwrap();
    let mut json = Vec::new();
    trace.write_chrome_json(&mut json).unwrap();
    let doc: Value = serde_json::from_slice(&json).expect("valid JSON");
    let events = doc["traceEvents"].as_array().expect("traceEvents array");

    let complete: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(complete.len(), OPS, "one complete event per traced op");
    let mut names = BTreeSet::new();
    let mut threads = BTreeSet::new();
    for e in &complete {
        let name = e["name"].as_str().expect("name");
        let i: usize = name.strip_prefix("op-").expect("op name").parse().unwrap();
        assert!(names.insert(i), "op {i} appears twice");
        let lane = e["args"]["lane"].as_str().expect("lane");
        assert_eq!(lane, if i % 5 == 0 { "host" } else { "compute" });
        assert_eq!(e["cat"].as_str(), Some(lane));
        let worker = e["args"]["worker"].as_str().expect("worker");
        assert!(worker.starts_with(&format!("tl-{lane}-")), "{worker}");
        assert!(e["ts"].as_f64().expect("ts") >= 0.0);
        assert!(e["dur"].as_f64().expect("dur") >= 0.0);
        assert!(e["pid"].as_u64().is_some());
        threads.insert(e["tid"].as_u64().expect("tid"));
    }
    assert_eq!(names.len(), OPS);

    // Every thread that ran an op is named by a metadata event.
    let named: BTreeMap<u64, &str> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    for t in &threads {
        assert!(named.contains_key(t), "thread {t} has no name event");
    }
    assert!(named.values().all(|n| n.starts_with("tl-")));

    // Taking the trace empties it.
    assert!(engine.trace_take().unwrap().events.is_empty());
}

#[test]
fn names_are_escaped() {
    let engine = Engine::new(Config::default()).unwrap();
    engine.trace_start().unwrap();
    engine
        .op("quote \" back \\ nl \n tab \t")
        .run(|| {})
        .unwrap();
    engine.wait_all().unwrap();
    let doc: Value = serde_json::from_str(&engine.trace_take().unwrap().to_chrome_json()).unwrap();
    let x: Vec<&Value> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .collect();
    assert_eq!(x.len(), 1);
    assert_eq!(x[0]["name"], "quote \" back \\ nl \n tab \t");
}
