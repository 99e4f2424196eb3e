//! Errors as a person expects them, through the API of a real server: a run path that does not
//! exist says so (and since when it has been waited for), never an empty wait; "Download
//! report" of a run with nothing to report is refused with why, never an empty report with
//! 200; and the numbers of an ended job hold still: all its planned steps done ("5500 of
//! 5500", not the last step's number "5499 of 5500") and its rate the run's average.

mod support;

use std::sync::Arc;
use std::time::Duration;

use smdebug_serve::{ServeOptions, Server};
use smdebug_storage::LocalStorage;
use support::{JobConfig, client, get_json, start_job, wait_for};

#[test]
fn a_location_that_names_none_is_refused_at_start_naming_it() {
    for bad in ["s3:/bucket/run", "foo://x/run"] {
        let Err(e) = Server::start(ServeOptions::new(["/tmp/a-run", bad])) else {
            panic!("{bad} was served");
        };
        assert!(e.to_string().contains(bad), "{bad}: {e}");
    }
}

#[test]
fn a_path_that_does_not_exist_says_so_and_has_no_report() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-run");
    let location = missing.to_str().unwrap().to_owned();
    let mut options = ServeOptions::new(vec![location.clone()]);
    options.poll = Duration::from_millis(50);
    let server = Server::start(options).unwrap();
    let api = server.url().trim_end_matches('/').to_owned();
    let run = wait_for(Duration::from_secs(30), "the missing run said so", || {
        let v = get_json(&format!("{api}/api/runs"))["runs"][0].clone();
        v["missing_since"].as_f64().map(|_| v)
    });
    assert_eq!(run["exists"], false, "{run}");
    let since = run["missing_since"].as_f64().unwrap();
    let now = get_json(&format!("{api}/api/runs"))["server_time"]
        .as_f64()
        .unwrap();
    assert!(since <= now && now - since < 60.0, "{since} {now}");
    // The first screen's sentence says so too (not "waiting for the run to start").
    let health = get_json(&format!("{api}/api/runs/0/overview"))["health"].clone();
    assert_eq!(
        health["sentence"], "No run here: the folder does not exist (waiting for it)",
        "{health}"
    );
    // No report of nothing: 404 with why.
    let r = client()
        .get(format!("{api}/api/runs/0/report"))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let body: serde_json::Value = r.json().unwrap();
    let why = body["error"].as_str().unwrap();
    assert!(
        why.contains("does not exist") && why.contains(&location),
        "{why}"
    );

    // The folder appears, empty: no longer missing, still nothing to report.
    std::fs::create_dir_all(&missing).unwrap();
    wait_for(Duration::from_secs(30), "the folder found", || {
        get_json(&format!("{api}/api/runs"))["runs"][0]["missing_since"]
            .is_null()
            .then_some(())
    });
    let r = client()
        .get(format!("{api}/api/runs/0/report"))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let body: serde_json::Value = r.json().unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("nothing of the run"),
        "{body}"
    );
    server.shutdown();
}

#[test]
fn an_ended_job_has_done_all_its_planned_steps_at_its_average_rate() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("job");
    std::fs::create_dir_all(&run).unwrap();
    let storage = Arc::new(LocalStorage::new(&run).unwrap());
    start_job(
        storage,
        Some(&run),
        JobConfig {
            steps: 60,
            step_time: Duration::from_millis(5),
            sampler: false,
            start_delay: Duration::ZERO,
            slow_steps: Vec::new(),
        },
    )
    .join();
    let mut options = ServeOptions::new([&run]);
    options.poll = Duration::from_millis(50);
    let server = Server::start(options).unwrap();
    let api = server.url().trim_end_matches('/').to_owned();
    let state = wait_for(Duration::from_secs(60), "the ended run", || {
        let v = get_json(&format!("{api}/api/runs"))["runs"][0].clone();
        (v["complete"] == true && v["planned_steps"].as_u64().is_some()).then_some(v)
    });
    // Every global step the job planned (TRAIN and EVAL) is done: the count equals the plan,
    // where the last step's number is one less.
    let planned = state["planned_steps"].as_u64().unwrap();
    assert_eq!(state["steps_done"].as_u64(), Some(planned), "{state}");
    assert_eq!(state["last_step"].as_u64(), Some(planned - 1), "{state}");
    let o = get_json(&format!("{api}/api/runs/0/overview"));
    let p = &o["progress"];
    assert_eq!(p["rate_over_run"], true, "{p}");
    assert_eq!(p["eta_s"], serde_json::Value::Null, "{p}");
    // The average over the run after the warm-up: its steps over its time, every mode's.
    let steps = p["rate_steps"].as_f64().unwrap();
    let window = p["rate_window_s"].as_f64().unwrap();
    assert_eq!(steps, (planned - 1 - 5) as f64, "{p}");
    assert!(
        (p["step_rate"].as_f64().unwrap() - steps / window).abs() < 1e-9,
        "{p}"
    );
    server.shutdown();
}
