//! One Chrome trace object for a whole run: spans of every node and worker beside system
//! metrics as counter tracks, for Perfetto or chrome://tracing.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::Span;
use smdebug_format::system::SystemSample;

/// Builds `{"traceEvents": [...], "displayTimeUnit": "ms"}` with absolute timestamps
/// (microseconds since the epoch).
///
/// Each node is one process row (`pid`, named after the node); each (worker, phase) pair is
/// one thread row in it, named `worker-<w> <phase>`; spans are complete (`X`) events carrying
/// their step, mode and args. Each system metric (`Type/Name/Dimension`) becomes a counter
/// (`C`) track of its node, so utilization can be read against what the loop was doing.
pub fn chrome_trace(spans: &[Span], samples: &[SystemSample]) -> Value {
    let mut pids: BTreeMap<&str, usize> = BTreeMap::new();
    for node in spans
        .iter()
        .map(|s| s.node.as_str())
        .chain(samples.iter().map(|s| s.node_id.as_str()))
    {
        let next = pids.len() + 1;
        pids.entry(node).or_insert(next);
    }
    let mut events = Vec::new();
    for (node, pid) in &pids {
        events.push(json!({"name": "process_name", "ph": "M", "pid": pid,
            "args": {"name": node}}));
    }
    let mut tids: BTreeMap<(usize, Option<u32>, &str), usize> = BTreeMap::new();
    for span in spans {
        let pid = pids[span.node.as_str()];
        let next = tids.len() + 1;
        let tid = *tids
            .entry((pid, span.worker, span.phase.as_str()))
            .or_insert_with(|| {
                let worker = span
                    .worker
                    .map_or_else(|| "worker-?".to_owned(), |w| format!("worker-{w}"));
                events.push(
                    json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": next,
                    "args": {"name": format!("{worker} {}", span.phase)}}),
                );
                next
            });
        let mut args = span.args.clone();
        if let Some(step) = span.step {
            args.insert("step".to_owned(), json!(step));
        }
        if let Some(mode) = span.mode {
            args.insert("mode".to_owned(), json!(mode.name()));
        }
        events.push(
            json!({"name": span.name, "cat": span.phase, "ph": "X", "pid": pid,
            "tid": tid, "ts": span.start_us, "dur": span.duration_us(), "args": args}),
        );
    }
    for sample in samples {
        let track = [
            sample.metric_type.as_str(),
            sample.name.as_str(),
            sample.dimension.as_str(),
        ]
        .iter()
        .filter(|part| !part.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("/");
        events.push(
            json!({"name": track, "ph": "C", "pid": pids[sample.node_id.as_str()],
            "ts": sample.timestamp_us(), "args": {"value": sample.value}}),
        );
    }
    json!({"traceEvents": events, "displayTimeUnit": "ms"})
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;
    use smdebug_core::Mode;

    #[test]
    fn spans_and_counters_share_node_processes() {
        let span = Span {
            phase: "Forward".into(),
            name: "forward".into(),
            start_us: 1_700_000_000_000_000,
            end_us: 1_700_000_000_000_250,
            node: "algo-1".into(),
            worker: Some(0),
            step: Some(3),
            mode: Some(Mode::Train),
            args: Map::new(),
        };
        let sample = SystemSample {
            metric_type: "gpu".into(),
            name: "gpu0".into(),
            dimension: "GPUUtilization".into(),
            value: 12.0,
            node_id: "algo-1".into(),
            timestamp: 1_700_000_000.000_1,
        };
        let trace = chrome_trace(&[span], &[sample]);
        let events = trace["traceEvents"].as_array().unwrap();
        let complete = events.iter().find(|e| e["ph"] == "X").unwrap();
        let counter = events.iter().find(|e| e["ph"] == "C").unwrap();
        assert_eq!(complete["pid"], counter["pid"]);
        assert_eq!(complete["ts"], 1_700_000_000_000_000u64);
        assert_eq!(complete["dur"], 250);
        assert_eq!(complete["args"]["step"], 3);
        assert_eq!(counter["name"], "gpu/gpu0/GPUUtilization");
        assert_eq!(counter["ts"], 1_700_000_000_000_100u64);
        assert!(
            events
                .iter()
                .any(|e| e["name"] == "thread_name" && e["args"]["name"] == "worker-0 Forward")
        );
    }
}
