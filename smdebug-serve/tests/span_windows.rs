//! The spans and steps a view lists are read again from the run's trace files: the same as a
//! fresh read of every span (smdebug-read's `ProfilerReader`), for the whole run and a window,
//! in time order and sorted.

mod support;

use std::time::Duration;

use smdebug_read::profile::{ProfilerReader, Span, SpanQuery};
use smdebug_serve::{ServeOptions, Server};
use support::profile_run::write_run;
use support::{get_json, wait_for};

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
    let mut options = ServeOptions::new([dir.path()]);
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
