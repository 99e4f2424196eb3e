//! Out-of-order system samples (issue 27, item 9): writes one system-metrics file of `N` lines
//! (default 400,000) in reverse time order, serves it, and times how long the dashboard takes
//! until `/api/runs` counts every sample; then the server's RSS. Also times the same samples
//! gathered into smdebug-read's `ProfileData` directly, and, for comparison, inserted one
//! by one at their place as the dashboard's own follower did before the one reader
//! (`--old-insertion`: quadratic, minutes at 400k). Then downloads the report (drawn from the
//! follower's state, with 100,000 step spans beside the samples) and prints the server's RSS
//! after it and its peak.
//!
//! ```sh
//! cargo run --release -p smdebug-serve --example out_of_order -- 400000 [--series K] [--old-insertion]
//! ```

use std::time::{Duration, Instant};

use serde_json::json;
use smdebug_format::system::system_file_key;
use smdebug_read::profile::{ProfileData, parse_system_lines_lenient};
use smdebug_serve::{ServeOptions, Server};

fn rss_mb() -> f64 {
    status_mb("VmRSS:")
}

fn status_mb(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(400_000);
    let old = args.iter().any(|a| a == "--old-insertion");
    // `--series K`: the samples spread over K series (default 1: one series of `N` points).
    let series: usize = args
        .iter()
        .position(|a| a == "--series")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(1)
        .max(1);
    let dir = tempfile::tempdir().unwrap();
    let start = 1_700_000_000u64;
    // One file covers at most an hour: samples 8 ms apart, four series.
    let mut text = String::with_capacity(n * 120);
    for i in (0..n).rev() {
        let t = start as f64 + i as f64 * 0.008;
        text.push_str(
            &json!({"Type": "cpu", "Name": format!("cpu{}", i % series), "Dimension": "CPUUtilization",
                    "Value": (i % 100) as f64, "NodeId": "algo-1", "Timestamp": t})
            .to_string(),
        );
        text.push('\n');
    }
    let key = system_file_key(start, "algo-1");
    let path = dir.path().join(&key);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &text).unwrap();
    println!(
        "{n} lines in reverse time order, {} MB",
        text.len() / (1 << 20)
    );

    drop(text);
    // 100,000 step spans in 50 trace files.
    for file in 0..50u64 {
        let base = start * 1_000_000 + file * 2000 * 10_000;
        let mut events = vec![json!({"name": "process_name", "ph": "M", "pid": 0,
                                     "args": {"name": "Step:ModeKeys.TRAIN"}})];
        for i in 0..2000u64 {
            events.push(json!({"name": "Step:ModeKeys.TRAIN", "ph": "X", "pid": 0,
                "ts": base + i * 10_000, "dur": 8000 + (i % 7) * 100,
                "args": {"step_num": (file * 2000 + i).to_string()}}));
        }
        let key = smdebug_format::trace::trace_file_key(base + 2000 * 10_000, 0, "algo-1");
        let path = dir.path().join(key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, serde_json::to_vec(&events).unwrap()).unwrap();
    }

    let server = Server::start(ServeOptions::new([dir.path()])).unwrap();
    let url = format!("{}api/runs", server.url());
    let client = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap();
    let began = Instant::now();
    loop {
        let runs: serde_json::Value = client.get(&url).send().unwrap().json().unwrap();
        if runs["runs"][0]["samples"] == n {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "dashboard: every sample counted after {:.3} s; RSS {:.0} MB",
        began.elapsed().as_secs_f64(),
        rss_mb()
    );
    loop {
        let runs: serde_json::Value = client.get(&url).send().unwrap().json().unwrap();
        if runs["runs"][0]["spans"] == 100_000 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    println!("with 100,000 spans: RSS {:.0} MB", rss_mb());
    // The peak from here on (Linux: resets VmHWM to the current RSS).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    for attempt in 1..=3 {
        let began = Instant::now();
        let report = client
            .get(format!("{}api/runs/0/report", server.url()))
            .send()
            .unwrap()
            .text()
            .unwrap();
        println!(
            "report {attempt}: {} KB in {:.2} s; RSS after {:.0} MB, peak {:.0} MB",
            report.len() / 1024,
            began.elapsed().as_secs_f64(),
            rss_mb(),
            status_mb("VmHWM:")
        );
    }
    server.shutdown();

    // The same samples gathered directly, after the server is gone.
    let text = std::fs::read(&path).unwrap();
    let parsed = parse_system_lines_lenient(&key, &text).samples;
    let began = Instant::now();
    let mut data = ProfileData::default();
    data.add_samples(&parsed);
    println!(
        "ProfileData::add_samples: {:.3} s",
        began.elapsed().as_secs_f64()
    );
    if old {
        let began = Instant::now();
        let mut points: Vec<Vec<(u64, f64)>> = vec![Vec::new(); series];
        let count = points.len();
        for (i, s) in parsed.iter().enumerate() {
            let series = &mut points[i % count];
            let point = (s.timestamp_us(), s.value);
            if series.last().is_some_and(|last| last.0 > point.0) {
                let pos = series.partition_point(|p| p.0 <= point.0);
                series.insert(pos, point);
            } else {
                series.push(point);
            }
        }
        println!(
            "one insertion per sample (the dashboard's former follower): {:.3} s",
            began.elapsed().as_secs_f64()
        );
    }
}
