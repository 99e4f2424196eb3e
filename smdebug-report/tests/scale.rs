//! Reports that scale: sections comparing GPUs, nodes or cores summarize beyond a few dozen,
//! so the page for thousands of GPUs stays small and so does the process drawing it.

use std::time::Instant;

use serde_json::json;
use smdebug_format::system::system_file_key;
use smdebug_report::{LoadOptions, ReportInput, render_html};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;

/// The process's peak resident memory (`VmHWM`), bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/self/status");
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kb * 1024
}

#[test]
fn the_report_for_4000_gpus_stays_under_2_mb_and_300_mb_of_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStorage::new(dir.path()).unwrap();
    let (nodes, per_node, samples) = (8usize, 500usize, 12usize);
    let start = 1_700_000_000u64;
    for node in 0..nodes {
        let id = format!("algo-{}", node + 1);
        let mut text = String::new();
        for i in 0..samples {
            let t = start as f64 + i as f64;
            let mut line = |kind: &str, name: &str, dimension: &str, value: f64| {
                text.push_str(
                    &json!({"Type": kind, "Name": name, "Dimension": dimension,
                            "Value": value, "NodeId": id, "Timestamp": t})
                    .to_string(),
                );
                text.push('\n');
            };
            line("cpu", "total", "CPUUtilization", 50.0);
            line("memory", "MemoryUsedPercent", "Memory", 40.0);
            for g in 0..per_node {
                // Workloads of every kind: idle, busy, and in between, varying by GPU.
                let util = ((g * 37 + i * 11 + node * 5) % 101) as f64;
                line("gpu", &format!("gpu{g}"), "GPUUtilization", util);
                line(
                    "gpu",
                    &format!("gpu{g}"),
                    "GPUMemoryUtilization",
                    util / 2.0,
                );
            }
        }
        store
            .put(&system_file_key(start, &id), text.into_bytes().into())
            .unwrap();
    }
    let began = Instant::now();
    let input = ReportInput::load(dir.path(), &LoadOptions::default());
    let html = render_html(&input);
    let took = began.elapsed();
    let peak = peak_rss();
    eprintln!(
        "4,000 GPUs: page {} bytes, peak RSS {} MB, {:.1} s",
        html.len(),
        peak / 1_000_000,
        took.as_secs_f64()
    );
    if let Ok(path) = std::env::var("SMDEBUG_SCALE_DUMP") {
        std::fs::write(path, &html).unwrap();
    }
    assert!(html.contains("Load balancing"), "the section is drawn");
    // No rule ran: the section draws the recorded utilization of the first GPUs and measures
    // no distance of its own (the distances are LoadBalancing's evidence).
    assert!(
        html.contains("The LoadBalancing rule has no result for this run"),
        "the section says it has no verdict"
    );
    assert!(html.len() < 2_000_000, "{} bytes", html.len());
    assert!(peak < 300_000_000, "peak RSS {peak} bytes");
}
