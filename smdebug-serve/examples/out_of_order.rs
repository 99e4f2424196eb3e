//! Out-of-order system samples (issue 27, item 9): writes one system-metrics file of `N` lines
//! (default 400,000) in reverse time order, serves it, and times how long the dashboard takes
//! until `/api/runs` counts every sample; then the server's RSS. Also times the same samples
//! gathered into smdebug-profiler's `ProfileData` directly, and, for comparison, inserted one
//! by one at their place as the dashboard's own follower did before the one reader
//! (`--old-insertion`: quadratic, minutes at 400k).
//!
//! ```sh
//! cargo run --release -p smdebug-serve --example out_of_order -- 400000 [--old-insertion]
//! ```

use std::time::{Duration, Instant};

use serde_json::json;
use smdebug_profiler::reader::{ProfileData, parse_system_lines_lenient};
use smdebug_profiler::system::system_file_key;
use smdebug_serve::{ServeOptions, Server};

fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(400_000);
    let old = args.iter().any(|a| a == "--old-insertion");
    let dir = tempfile::tempdir().unwrap();
    let start = 1_700_000_000u64;
    // One file covers at most an hour: samples 8 ms apart, four series.
    let mut text = String::with_capacity(n * 120);
    for i in (0..n).rev() {
        let t = start as f64 + i as f64 * 0.008;
        text.push_str(
            &json!({"Type": "cpu", "Name": format!("cpu{}", i % 4), "Dimension": "CPUUtilization",
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

    let parsed = parse_system_lines_lenient(&key, text.as_bytes()).samples;
    let began = Instant::now();
    let mut data = ProfileData::default();
    data.add_samples(&parsed);
    println!(
        "ProfileData::add_samples: {:.3} s",
        began.elapsed().as_secs_f64()
    );
    if old {
        let began = Instant::now();
        let mut points: Vec<Vec<(u64, f64)>> = vec![Vec::new(); 4];
        for (i, s) in parsed.iter().enumerate() {
            let series = &mut points[i % 4];
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
    drop((parsed, data, text));

    let server = Server::start(ServeOptions::new(vec![dir.path().display().to_string()])).unwrap();
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
    server.shutdown();
}
