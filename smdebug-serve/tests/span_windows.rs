//! The spans and steps a view lists are read again from the run's trace files: the same as a
//! fresh read of every span (smdebug-read's `ProfilerReader`), for the whole run and a window,
//! in time order and sorted.

mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use smdebug_core::Mode;
use smdebug_format::layout::END_MARKER;
use smdebug_format::system::system_file_key;
use smdebug_profiler::spans::{Phase, SpanConfig, SpanRecorder};
use smdebug_profiler::system::NodeId;
use smdebug_read::profile::{ProfilerReader, Span, SpanQuery};
use smdebug_serve::{ServeOptions, Server};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;
use support::{get_json, wait_for};

/// A run of `steps` steps (a step span and four phase spans each, a trace file a minute) over
/// `minutes` of system metrics, ended.
fn write_run(dir: &std::path::Path, steps: u64, minutes: u64) -> (u64, u64) {
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir).unwrap());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let start_s = now - now % 60 - minutes * 60;
    let mut samples = 0;
    for minute in 0..minutes {
        let file_start = start_s + minute * 60;
        let mut text = String::new();
        for i in 0..600u64 {
            let t = file_start as f64 + i as f64 * 0.1;
            let k = (minute * 600 + i) as f64;
            let mut push = |ty: &str, name: &str, dim: &str, v: f64| {
                text.push_str(&format!(
                    "{{\"Type\":\"{ty}\",\"Name\":\"{name}\",\"Dimension\":\"{dim}\",\"Value\":{v:.2},\"NodeId\":\"algo-1\",\"Timestamp\":{t:.1}}}\n"
                ));
                samples += 1;
            };
            for c in 0..2 {
                push(
                    "cpu",
                    &format!("cpu{c}"),
                    "CPUUtilization",
                    (k + c as f64) % 100.0,
                );
            }
            push("cpu", "total", "CPUUtilization", (k * 7.0) % 100.0);
            for g in 0..2 {
                push(
                    "gpu",
                    &format!("gpu{g}"),
                    "GPUUtilization",
                    (k * 3.0 + g as f64) % 100.0,
                );
            }
            push("memory", "MemoryUsedPercent", "", 30.0 + k / 1e4);
        }
        storage
            .put(
                &system_file_key(file_start, "algo-1"),
                text.into_bytes().into(),
            )
            .unwrap();
    }
    let (spans, guard) = SpanRecorder::start(
        SpanConfig::default()
            .node(NodeId::algo(1))
            .worker(0)
            .queue_capacity(1 << 20),
        Arc::clone(&storage),
    )
    .unwrap();
    let step_us = minutes * 60 * 1_000_000 / steps;
    let at = |us: u64| UNIX_EPOCH + Duration::from_micros(start_s * 1_000_000 + us);
    for step in 0..steps {
        let t0 = step * step_us;
        let d = step_us / 10 + step % 7;
        spans.record(
            Phase::Step(Mode::Train),
            None,
            at(t0),
            Duration::from_micros(8 * d),
            Some((Mode::Train, step)),
        );
        for (i, phase) in [
            Phase::DataLoading,
            Phase::Forward,
            Phase::Backward,
            Phase::Optimizer,
        ]
        .into_iter()
        .enumerate()
        {
            spans.record(
                phase,
                None::<std::borrow::Cow<'static, str>>,
                at(t0 + 2 * d * i as u64),
                Duration::from_micros(2 * d),
                Some((Mode::Train, step)),
            );
        }
        if (step + 1) % (steps / minutes) == 0 {
            spans.flush().unwrap();
        }
    }
    let report = guard.finish().unwrap();
    assert_eq!(report.dropped, 0);
    storage.put(END_MARKER, "completed".into()).unwrap();
    (samples, steps * 5)
}

/// `(phase, start, end)` of the rows of a span list, in µs.
fn rows(list: &serde_json::Value) -> Vec<(String, u64, u64)> {
    list["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let us = |x: &serde_json::Value| (x.as_f64().unwrap() * 1e6).round() as u64;
            (
                r["phase"].as_str().unwrap().to_owned(),
                us(&r["start"]),
                us(&r["end"]),
            )
        })
        .collect()
}

fn of(spans: &[&Span]) -> Vec<(String, u64, u64)> {
    spans
        .iter()
        .map(|s| (s.phase.clone(), s.start_us, s.end_us))
        .collect()
}

#[test]
fn spans_and_steps_read_again_are_those_of_a_fresh_read() {
    let dir = tempfile::tempdir().unwrap();
    let (samples, span_count) = write_run(dir.path(), 3_000, 10);
    let mut all = ProfilerReader::open(dir.path())
        .unwrap()
        .spans(&SpanQuery::default())
        .unwrap();
    all.sort_by_key(|s| (s.start_us, s.end_us));
    assert_eq!(all.len() as u64, span_count);
    let mut options = ServeOptions::new(vec![dir.path().to_str().unwrap().to_owned()]);
    options.read_only = true;
    let server = Server::start(options).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    wait_for(Duration::from_secs(300), "the whole run read", || {
        let r = get_json(&format!("{url}/api/runs"))["runs"][0].clone();
        (r["complete"] == true
            && r["samples"].as_u64() == Some(samples)
            && r["spans"].as_u64() == Some(span_count))
        .then_some(())
    });
    let api = format!("{url}/api/runs/0");
    let every: Vec<&Span> = all.iter().collect();
    // The whole run's last rows, and a page before them.
    let last = get_json(&format!("{api}/spans?last=true&limit=25&offset=30"));
    assert_eq!(last["count"].as_u64(), Some(span_count));
    let n = every.len();
    assert_eq!(rows(&last), of(&every[n - 55..n - 30]));
    let first = get_json(&format!("{api}/spans?limit=25&offset=7"));
    assert_eq!(rows(&first), of(&every[7..32]));
    // Sorted by duration, the longest first (ties in time order), a page in.
    let mut by_duration = every.clone();
    by_duration.sort_by_key(|s| (std::cmp::Reverse(s.duration_us()), s.start_us, s.end_us));
    let sorted = get_json(&format!(
        "{api}/spans?limit=25&offset=40&sort=duration&order=desc"
    ));
    let got: Vec<u64> = rows(&sorted).iter().map(|r| r.2 - r.1).collect();
    let want: Vec<u64> = by_duration[40..65]
        .iter()
        .map(|s| s.duration_us())
        .collect();
    assert_eq!(got, want);
    // A window of 90 s cutting trace files at both ends: its count, totals and rows.
    let t0 = every[0].start_us as f64 / 1e6;
    let (from, to) = (t0 + 100.5, t0 + 190.25);
    let inside: Vec<&Span> = every
        .iter()
        .copied()
        .filter(|s| s.end_us as f64 >= from * 1e6 && s.start_us as f64 <= to * 1e6)
        .collect();
    let window = get_json(&format!(
        "{api}/spans?last=true&limit=25&from={from}&to={to}"
    ));
    assert_eq!(window["count"].as_u64(), Some(inside.len() as u64));
    assert_eq!(rows(&window), of(&inside[inside.len() - 25..]));
    let totals: u64 = window["totals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["count"].as_u64().unwrap())
        .sum();
    assert_eq!(totals, inside.len() as u64);
    // The window's steps: every step span starting in it, its slowest first.
    let steps = get_json(&format!("{api}/steps?last=5&slowest=3&from={from}&to={to}"));
    let step_spans: Vec<&Span> = every
        .iter()
        .copied()
        .filter(|s| s.phase == "Step:ModeKeys.TRAIN")
        .filter(|s| s.start_us as f64 >= from * 1e6 && s.start_us as f64 <= to * 1e6)
        .collect();
    assert!(step_spans.len() > 100);
    assert_eq!(
        steps["window_steps"].as_u64(),
        Some(step_spans.len() as u64)
    );
    let slowest = step_spans.iter().map(|s| s.duration_us()).max().unwrap();
    let top = steps["slowest"][0]["duration"].as_f64().unwrap();
    assert!((top - slowest as f64 / 1e6).abs() < 1e-6, "{top} {slowest}");
    // The whole run's slowest steps, from those kept, with their phases read again.
    let whole = get_json(&format!("{api}/steps?last=5&slowest=3"));
    let longest = every
        .iter()
        .filter(|s| s.phase == "Step:ModeKeys.TRAIN")
        .map(|s| s.duration_us())
        .max()
        .unwrap();
    let row = &whole["slowest"][0];
    assert!((row["duration"].as_f64().unwrap() - longest as f64 / 1e6).abs() < 1e-6);
    assert_eq!(row["phases"].as_object().unwrap().len(), 4, "{row}");
    assert_eq!(whole["phases"]["steps"].as_array().unwrap().len(), 5);
    assert_eq!(whole["window_steps"].as_u64(), Some(3_000));
    server.shutdown();
}
