//! The server's memory while a person clicks through a whole run (issue 25 item 3): the report
//! download, a weight tensor's views and zooms add little to what the followed run holds, and
//! the peak stays under 300 MB. (`examples/serve_memory.py` measures the same on the 85,500-step
//! demo run and the synthetic 1-hour run; BENCHMARKS.md has the figures.)

mod support;

use std::time::Duration;

use serde_json::json;
use smdebug_core::{Mode, TensorView};
use smdebug_format::system::system_file_key;
use smdebug_serve::{ServeOptions, Server};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;
use smdebug_testkit::runs::every_step_hook;
use support::{client, get_json, wait_for};

const STEPS: u64 = 12_000;
const SCALARS: usize = 25;

/// VmRSS and VmHWM of this process, in MB.
fn memory_mb() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| -> f64 {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in /proc/self/status"));
        let kb: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Resets this process's VmHWM to its current RSS (Linux's `clear_refs`, value 5).
fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}

/// A run written by the real hook and writer: 12,000 steps of 25 scalars (300,000 values), a
/// 64×64 weight every 100 steps, an eval loss every 10 steps, and 200,000 system samples.
fn write_run(dir: &std::path::Path) {
    let mut hook = every_step_hook(dir);
    let names: Vec<String> = (0..SCALARS).map(|i| format!("metric_{i:02}")).collect();
    for step in 0..STEPS {
        hook.set_mode(Mode::Train);
        for (i, name) in names.iter().enumerate() {
            let value = (i as f64 + 1.0) / (step as f64 + 1.0);
            hook.save_scalar(name, value, &["metrics"]);
        }
        if step % 100 == 0 {
            let weight: Vec<f32> = (0..4096)
                .map(|i| ((i % 64) as f32 - 32.0) / (32.0 + step as f32))
                .collect();
            hook.save_tensor(
                "fc1.weight",
                &TensorView::from_slice(&weight, &[64, 64]).unwrap(),
                &["weights"],
            );
        }
        hook.step();
        if step % 10 == 9 {
            hook.set_mode(Mode::Eval);
            hook.save_scalar("metric_00", 2.0 / (step as f64 + 1.0), &["metrics"]);
            hook.step();
        }
    }
    hook.close();
    let storage = LocalStorage::new(dir).unwrap();
    let start = 1_700_000_000u64;
    for minute in 0..4u64 {
        let mut text = String::new();
        for i in 0..50_000u64 {
            let t = (start + minute * 60) as f64 + i as f64 * 0.0012;
            text.push_str(
                &json!({"Type": "cpu", "Name": format!("cpu{}", i % 8),
                        "Dimension": "CPUUtilization", "Value": (i % 97) as f64,
                        "NodeId": "algo-1", "Timestamp": t})
                .to_string(),
            );
            text.push('\n');
        }
        let key = system_file_key(start + minute * 60, "algo-1");
        storage.put(&key, text.into_bytes().into()).unwrap();
    }
}

#[test]
fn clicking_through_a_whole_run_keeps_the_server_under_300_mb() {
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path());
    let location = dir.path().to_str().unwrap().to_owned();
    reset_peak();
    let (base_rss, _) = memory_mb();
    let server = Server::start(ServeOptions::new(vec![location])).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    let api = format!("{url}/api/runs/0");
    wait_for(Duration::from_secs(600), "the whole run read", || {
        let r = &get_json(&format!("{url}/api/runs"))["runs"][0];
        (r["complete"] == true
            && r["index_pending"] == 0
            && r["samples"] == 200_000
            && r["scalar_values"].as_u64() >= Some(STEPS * SCALARS as u64))
        .then_some(())
    });
    let (loaded_rss, loaded_peak) = memory_mb();
    let http = client();
    let fetch = |path: &str| {
        let response = http.get(format!("{api}{path}")).send().unwrap();
        assert_eq!(response.status(), 200, "{path}");
        response.bytes().unwrap().len()
    };
    // What a person clicks: the report (twice), the weight's distribution and its 2-D view at
    // the first and the last step, and zooms into every chart.
    for _ in 0..2 {
        assert!(fetch("/report") > 10_000);
    }
    fetch("/tensor?name=fc1.weight&steps=200");
    fetch("/tensor2d?name=fc1.weight");
    fetch("/tensor2d?name=fc1.weight&step=0");
    let start = 1_700_000_000.0;
    for i in 0..10 {
        let from = start + i as f64 * 24.0;
        fetch(&format!("/system?from={from}&to={}", from + 12.0));
        fetch(&format!("/steps?from={from}&to={}", from + 12.0));
        let step = i * STEPS / 10;
        fetch(&format!("/scalars?from={step}&to={}", step + 600));
    }
    let (end_rss, peak) = memory_mb();
    eprintln!(
        "memory: before the server {base_rss:.0} MB; run loaded {loaded_rss:.0} MB (peak \
         {loaded_peak:.0}); after the clicks {end_rss:.0} MB, peak {peak:.0} MB"
    );
    assert!(peak < 300.0, "peak {peak:.0} MB");
    // The clicks add little to what the followed run holds: reading the scalars again through
    // a `Trial` for the report, as the download did, added more than this on this run.
    assert!(
        peak - loaded_peak < 96.0,
        "the clicks raised the peak from {loaded_peak:.0} MB to {peak:.0} MB"
    );
    server.shutdown();
}
