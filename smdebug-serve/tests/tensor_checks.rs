//! The dashboard reads tensors through smdebug-read's `TensorFollower`, with the `Trial`'s checks:
//! an index file naming another step's event file is left out and reported (issue 27, case 4:
//! the dashboard drew step 4's loss at step 60), and records claiming huge shapes are never
//! decoded (case 2: 86.7 s and 4.2 GB for 114 steps).

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use smdebug_core::{DType, Mode};
use smdebug_format::layout;
use smdebug_io::crafted::{CraftedRecord, point_index_at, scalar, write_step};
use smdebug_serve::{ServeOptions, Server};
use support::{get_json, wait_for};

fn serve(run: &Path) -> (Server, String) {
    let server = Server::start(ServeOptions::new([run])).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    (server, url)
}

/// The run's entry in `/api/runs` once it is complete and `done` holds.
fn wait_loaded(url: &str, done: impl Fn(&Value) -> bool) -> Value {
    wait_for(Duration::from_secs(120), "the run loaded", || {
        let v = get_json(&format!("{url}/api/runs"));
        let r = v["runs"][0].clone();
        (r["complete"] == true && r["index_pending"] == 0 && done(&r)).then_some(r)
    })
}

/// `loss`'s TRAIN series as served: (step, value) pairs.
fn loss_series(url: &str) -> Vec<(u64, f64)> {
    let sc = get_json(&format!("{url}/api/runs/0/scalars?regex=^loss$"));
    let train = sc["scalars"][0]["modes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mode"] == "TRAIN")
        .unwrap()
        .clone();
    let steps = train["steps"].as_array().unwrap();
    let values = train["values"].as_array().unwrap();
    steps
        .iter()
        .zip(values)
        .map(|(s, v)| (s.as_u64().unwrap(), v.as_f64().unwrap()))
        .collect()
}

/// The peak resident memory of this process so far (Linux `VmHWM`), in bytes.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[test]
fn an_index_file_naming_another_steps_event_file_is_not_drawn_and_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    for s in 0..61 {
        write_step(
            &run,
            s,
            "worker_0",
            Mode::Train,
            s,
            &[scalar("loss", s as f32)],
        );
    }
    point_index_at(&run, 60, "worker_0", 4);
    std::fs::write(run.join(layout::END_MARKER), b"").unwrap();
    let (server, url) = serve(&run);
    let r = wait_loaded(&url, |r| r["scalar_values"] == 60);
    assert_eq!(r["steps"], 60, "{r}");
    assert_eq!(r["last_step"], 59, "{r}");
    let loss = loss_series(&url);
    assert_eq!(loss.len(), 60);
    assert!(
        loss.iter().all(|&(step, v)| v == step as f64 && step != 60),
        "{loss:?}"
    );
    let overview = get_json(&format!("{url}/api/runs/0/overview"));
    let warnings: Vec<&str> = overview["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(&layout::index_file(60, "worker_0"))
                && w.contains("is not the event file of step 60")
                && w.contains("left out")),
        "{warnings:?}"
    );
    server.shutdown();
}

#[test]
fn records_claiming_huge_shapes_are_never_decoded_by_the_dashboard() {
    const STEPS: u64 = 114;
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    for s in 0..STEPS {
        let records = [
            scalar("loss", s as f32),
            CraftedRecord::Fill {
                name: "mask".into(),
                dtype: DType::F32,
                dims: vec![1 << 28],
            },
        ];
        write_step(&run, s, "worker_0", Mode::Train, s, &records);
    }
    std::fs::write(run.join(layout::END_MARKER), b"").unwrap();
    let before = peak_rss();
    let (server, url) = serve(&run);
    // Generous: a single decode of one record is 1 GiB; the former follower took 86.7 s.
    let r = wait_loaded(&url, |r| r["scalar_values"] == STEPS);
    assert_eq!(r["tensors"], 2, "{r}");
    assert_eq!(loss_series(&url).len(), STEPS as usize);
    let sc = get_json(&format!("{url}/api/runs/0/scalars"));
    let names: Vec<&str> = sc["scalars"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["loss"], "`mask` is listed, and no scalar");
    if let (Some(before), Some(after)) = (before, peak_rss()) {
        let grown = after.saturating_sub(before);
        eprintln!("peak RSS {before} -> {after} bytes");
        assert!(grown < 256 << 20, "peak RSS grew by {grown} bytes");
    }
    server.shutdown();
}

#[test]
fn a_tensor_over_the_servers_budget_is_refused_with_its_name_and_size() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let weight = smdebug_core::Tensor::from_bytes(
        DType::F32,
        vec![1000],
        (0..1000).flat_map(|i| (i as f32).to_le_bytes()).collect(),
    )
    .unwrap();
    for step in 0..3u64 {
        write_step(
            &run,
            step,
            "worker_0",
            Mode::Train,
            step,
            &[
                scalar("loss", 1.0),
                CraftedRecord::Tensor("fc.weight".into(), weight.clone()),
            ],
        );
    }
    std::fs::write(run.join(layout::END_MARKER), b"").unwrap();
    let answer = |max_tensor_bytes: u64| {
        let mut options = ServeOptions::new([&run]);
        options.max_tensor_bytes = max_tensor_bytes;
        let server = Server::start(options).unwrap();
        let url = server.url().trim_end_matches('/').to_owned();
        wait_loaded(&url, |_| true);
        let r = support::client()
            .get(format!("{url}/api/runs/0/tensor?name=fc.weight"))
            .send()
            .unwrap();
        (r.status().as_u16(), r.text().unwrap())
    };
    let (status, body) = answer(smdebug_read::trial::DEFAULT_MAX_TENSOR_BYTES);
    assert_eq!(status, 200, "{body}");
    // 1,000 float32 values need 4,000 bytes as stored (and more as f64): over 1,000.
    let (status, body) = answer(1000);
    assert!(status >= 400, "served over the budget: {status} {body}");
    assert!(body.contains("fc.weight"), "{body}");
    assert!(body.contains("1000"), "{body}");
}

#[test]
fn many_scalars_are_paged() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let records: Vec<CraftedRecord> = (0..300)
        .map(|i| scalar(&format!("metric_{i:03}"), i as f32))
        .collect();
    for step in 0..2u64 {
        write_step(&run, step, "worker_0", Mode::Train, step, &records);
    }
    std::fs::write(run.join(layout::END_MARKER), b"").unwrap();
    let (_server, url) = serve(&run);
    wait_loaded(&url, |_| true);
    let page = |query: &str| get_json(&format!("{url}/api/runs/0/scalars?{query}"));
    let names = |v: &Value| -> Vec<String> {
        v["scalars"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let first = page("");
    assert_eq!(first["series_total"], 300);
    assert_eq!(names(&first).len(), 64, "the default page");
    assert_eq!(names(&first)[0], "metric_000");
    assert_eq!(first["next_offset"], 64);
    let widest = page("limit=100000");
    assert_eq!(names(&widest).len(), 256, "the largest page");
    let last = page("offset=256&limit=256");
    assert_eq!(names(&last).len(), 44);
    assert_eq!(names(&last)[0], "metric_256");
    assert!(last["next_offset"].is_null());
    // The filter counts what it matches.
    let filtered = page("regex=^metric_00");
    assert_eq!(filtered["series_total"], 10);
    assert!(filtered["next_offset"].is_null());
}

/// A run whose files came from two jobs (a killed job's and the next one's, written by a tool
/// that claims nothing): the dashboard says so among the run's warnings.
#[test]
fn a_run_holding_two_jobs_files_is_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    for s in 0..4 {
        write_step(
            &run,
            s,
            "worker_0",
            Mode::Train,
            s,
            &[scalar("loss", s as f32)],
        );
    }
    std::fs::write(run.join(layout::END_MARKER), b"").unwrap();
    let storage = smdebug_storage::open_storage(run.to_str().unwrap()).unwrap();
    for job in ["killed-job", "next-job"] {
        let identity = smdebug_io::jobs::identity_here(job.into(), "worker_0".into(), 0, 1);
        smdebug_io::jobs::JobClaim::start(storage.clone(), identity)
            .unwrap()
            .finish()
            .unwrap();
    }
    let (server, url) = serve(&run);
    let warnings = wait_for(Duration::from_secs(60), "the run's warnings", || {
        let overview = get_json(&format!("{url}/api/runs/0/overview"));
        let w: Vec<String> = overview["warnings"]
            .as_array()?
            .iter()
            .filter_map(|w| w.as_str().map(str::to_owned))
            .collect();
        (!w.is_empty()).then_some(w)
    });
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("the run holds the files of 2 jobs")
                && w.contains("killed-job")
                && w.contains("next-job")),
        "{warnings:?}"
    );
    server.shutdown();
}
