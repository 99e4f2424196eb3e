//! The dashboard's HTTP API against real runs: written by the hook, the writer, the span
//! recorder and the rule runner, on local disk and on a real S3 server (moto), followed live.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use smdebug_format::system::system_file_key;
use smdebug_rules::{RuleRunner, RuleSpec};
use smdebug_serve::downsample::MAX_POINTS;
use smdebug_serve::{ServeOptions, Server, expand_runs};
use smdebug_storage::Storage;
use smdebug_storage::testing::MotoServer;
use smdebug_storage::{LocalStorage, Location};
use support::{JobConfig, client, get_json, start_job, wait_for};

fn local(dir: &Path) -> Arc<dyn Storage> {
    Arc::new(LocalStorage::new(dir).unwrap())
}

fn quick_job(steps: u64) -> JobConfig {
    JobConfig {
        steps,
        step_time: Duration::from_millis(4),
        sampler: false,
        start_delay: Duration::ZERO,
        slow_steps: Vec::new(),
    }
}

fn serve(runs: Vec<String>) -> Server {
    Server::start(ServeOptions::new(runs)).unwrap()
}

fn base(server: &Server) -> String {
    server.url().trim_end_matches('/').to_owned()
}

/// Writes `n` samples of `name` on node algo-1 at 100 ms from `start_s`, in one file a minute
/// as the sampler does (a file holds one window), with `spike` at sample `spike_at`.
fn write_samples(
    store: &dyn Storage,
    name: &str,
    start_s: u64,
    n: usize,
    spike_at: usize,
    spike: f64,
) {
    for (minute, chunk_start) in (0..n).step_by(600).enumerate() {
        let file_start = start_s + minute as u64 * 60;
        let mut lines = String::new();
        for i in chunk_start..(chunk_start + 600).min(n) {
            let value = if i == spike_at {
                spike
            } else {
                (i % 50) as f64
            };
            lines.push_str(
                &json!({"Type": "cpu", "Name": name, "Dimension": "CPUUtilization",
                        "Value": value, "NodeId": "algo-1",
                        "Timestamp": start_s as f64 + i as f64 * 0.1})
                .to_string(),
            );
            lines.push('\n');
        }
        let key = system_file_key(file_start, "algo-1");
        // A second series of the same minutes goes into the same files.
        let mut text = store.get(&key).map(|b| b.to_vec()).unwrap_or_default();
        text.extend_from_slice(lines.as_bytes());
        store.put(&key, text.into()).unwrap();
    }
}

#[test]
fn long_series_are_downsampled_and_a_zoom_gets_the_raw_samples() {
    let dir = tempfile::tempdir().unwrap();
    let store = local(dir.path());
    // 50,000 samples at 100 ms (83 minutes) in one file, one spike.
    let start = 1_700_000_000;
    write_samples(store.as_ref(), "cpu0", start, 50_000, 31_337, 100.0);
    let server = serve(vec![dir.path().to_str().unwrap().into()]);
    let url = base(&server);
    let runs = wait_for(Duration::from_secs(20), "the samples", || {
        let v = get_json(&format!("{url}/api/runs"));
        (v["runs"][0]["samples"] == 50_000).then_some(v)
    });
    assert_eq!(runs["runs"][0]["exists"], true);
    let sys = get_json(&format!("{url}/api/runs/0/system"));
    // Per-core utilization is drawn in the heatmap (one row a core), not as a timeline.
    assert!(sys["series"].as_array().unwrap().is_empty(), "{sys}");
    let heat = &sys["heatmap"]["rows"];
    assert_eq!(heat.as_array().unwrap().len(), 1, "{heat}");
    assert!(heat[0]["values"].as_array().unwrap().len() <= 300);

    // A total series for the timeline: 20,000 samples 1,000 s later, one spike.
    write_samples(store.as_ref(), "total", start + 1_020, 20_000, 12_345, 99.0);
    wait_for(Duration::from_secs(20), "the total series", || {
        (get_json(&format!("{url}/api/runs"))["runs"][0]["samples"] == 70_000).then_some(())
    });
    let sys = get_json(&format!("{url}/api/runs/0/system"));
    let total = sys["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "total")
        .unwrap()
        .clone();
    let t = total["data"]["t"].as_array().unwrap();
    let v = total["data"]["v"].as_array().unwrap();
    assert_eq!(total["data"]["total"], 20_000);
    assert!(
        t.len() <= MAX_POINTS && t.len() > MAX_POINTS / 2,
        "{}",
        t.len()
    );
    assert!(v.iter().any(|x| x == 99.0), "the spike was lost");
    // Asking for more than the cap still gets the cap.
    let big = get_json(&format!("{url}/api/runs/0/system?points=1000000"));
    for s in big["series"].as_array().unwrap() {
        assert!(s["data"]["t"].as_array().unwrap().len() <= MAX_POINTS);
    }
    // Zoom on 10 s around the spike: the 101 raw samples, and the one before the window and
    // the one after it (a line crosses the window's edges).
    let spike_t = (start + 1_020) as f64 + 12_345.0 * 0.1;
    let zoom = get_json(&format!(
        "{url}/api/runs/0/system?from={}&to={}",
        spike_t - 5.0,
        spike_t + 5.0
    ));
    let total = zoom["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "total")
        .unwrap();
    let zt: Vec<f64> = total["data"]["t"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert!((102..=103).contains(&zt.len()), "{}", zt.len());
    let inside = &zt[1..zt.len() - 1];
    assert!(
        inside
            .iter()
            .all(|&x| x >= spike_t - 5.0 - 1e-6 && x <= spike_t + 5.0 + 1e-6)
    );
    assert!(
        zt[0] < spike_t - 5.0 && zt[zt.len() - 1] > spike_t + 5.0,
        "{zt:?}"
    );
    server.shutdown();
}

#[test]
fn a_live_run_is_followed_from_before_it_exists_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("not-yet");
    let server = serve(vec![run.to_str().unwrap().into()]);
    let url = base(&server);
    let first = get_json(&format!("{url}/api/runs"));
    assert_eq!(first["runs"][0]["exists"], false, "{first}");
    assert_eq!(first["runs"][0]["name"], "not-yet");

    // Server-sent events in a thread: each `runs` event's body.
    let (tx, rx) = mpsc::channel::<Value>();
    let events_url = format!("{url}/api/events");
    let reader = std::thread::spawn(move || {
        let response = reqwest::blocking::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap()
            .get(events_url)
            .send()
            .unwrap();
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        for line in BufReader::new(response).lines() {
            let Ok(line) = line else { break };
            if let Some(data) = line.strip_prefix("data: ") {
                let v: Value = serde_json::from_str(data).unwrap();
                let done = v["runs"][0]["complete"] == true;
                if tx.send(v).is_err() || done {
                    break;
                }
            }
        }
    });
    let initial = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(initial["runs"][0]["exists"], false);

    std::fs::create_dir_all(&run).unwrap();
    let job = start_job(
        local(&run),
        Some(&run),
        JobConfig {
            steps: 40,
            step_time: Duration::from_millis(20),
            sampler: true,
            start_delay: Duration::from_millis(300),
            slow_steps: vec![16, 33],
        },
    );
    // Steps appear in the pushed events while the job runs (not only at its end).
    let mut seen_running = false;
    let mut last = initial;
    while last["runs"][0]["complete"] != true {
        last = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("an event within 30 s");
        let steps = last["runs"][0]["steps"].as_u64().unwrap();
        if steps > 0 && last["runs"][0]["complete"] == false {
            seen_running = true;
        }
    }
    assert!(seen_running, "no event showed the run in progress");
    assert_eq!(job.join(), None);
    reader.join().unwrap();
    // 40 train steps and 4 eval steps, as global steps.
    let end = wait_for(Duration::from_secs(10), "the last spans", || {
        let v = get_json(&format!("{url}/api/runs/0/overview"));
        (v["steps"] == 44 && v["samples"].as_u64().unwrap() > 0).then_some(v)
    });
    assert_eq!(end["complete"], true);
    assert_eq!(end["end_reason"], "completed");
    let nodes = end["nodes"].as_array().unwrap();
    assert_eq!(nodes[0]["node"], "algo-1");
    let cpu = nodes[0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "CPU utilization")
        .unwrap();
    for k in ["min", "p50", "p90", "p99", "max"] {
        assert!(cpu[k].is_number(), "{cpu}");
    }
    assert!(
        cpu["min"].as_f64() <= cpu["p50"].as_f64() && cpu["p99"].as_f64() <= cpu["max"].as_f64()
    );
    assert!(end["phases"]["training_loop"].as_f64().unwrap() > 0.0);

    // The page marks StepOutlier's own outliers: none before the rule ran, its steps after.
    let train_of = |v: &Value| -> Option<Value> {
        v["series"]
            .as_array()?
            .iter()
            .find(|s| s["mode"] == "TRAIN")
            .cloned()
    };
    let before = wait_for(Duration::from_secs(10), "all step spans", || {
        let v = get_json(&format!("{url}/api/runs/0/steps?last=10"));
        (train_of(&v)?["count"] == 40).then_some(v)
    });
    let unjudged = train_of(&before).unwrap();
    assert_eq!(unjudged["outliers"], json!([]), "{unjudged}");
    assert!(unjudged["outlier_limit"].is_null(), "{unjudged}");
    let summary = RuleRunner::builder(&run)
        .spec(RuleSpec::parse("StepOutlier:stddev=2").unwrap())
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let rule = summary
        .rules
        .iter()
        .find(|r| r.rule == "StepOutlier")
        .unwrap();
    let judged = rule
        .profiler_details()
        .unwrap()
        .and_then(|d| d.step_outliers().cloned())
        .expect("StepOutlier's typed details");
    let verdict = &judged.nodes["algo-1"]["TRAIN"];
    let mut rule_steps: Vec<u64> = verdict.outlier_steps.iter().map(|o| o.step).collect();
    rule_steps.sort_unstable();
    let steps = wait_for(Duration::from_secs(10), "StepOutlier's verdict", || {
        let v = get_json(&format!("{url}/api/runs/0/steps?last=10"));
        (train_of(&v)?["outlier_limit"].is_number()).then_some(v)
    });
    let train = train_of(&steps).unwrap();
    // Steps 16 and 33 slept through a long backward pass: outliers, the rule's and the page's.
    let mut outliers: Vec<u64> = train["outliers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["step"].as_u64().unwrap())
        .collect();
    outliers.sort_unstable();
    assert!(
        outliers.contains(&16) && outliers.contains(&33),
        "{outliers:?} {train}"
    );
    assert_eq!(outliers, rule_steps);
    assert_eq!(
        train["outlier_limit"].as_f64(),
        Some(verdict.outlier_limit_s)
    );
    // The rules list carries the same details.
    let runs = get_json(&format!("{url}/api/runs/0/overview"));
    let listed = runs["rules"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "StepOutlier"))
        .unwrap_or_else(|| panic!("{runs}"));
    assert_eq!(
        smdebug_rules::profiler::Details::decode(&listed["details"])
            .unwrap()
            .and_then(|d| d.step_outliers().cloned()),
        Some(judged)
    );
    assert_eq!(listed["problems"], serde_json::json!([]));
    let phases = &steps["phases"];
    assert_eq!(phases["steps"].as_array().unwrap().len(), 10);
    for p in [
        "DataLoaderIter",
        "Forward",
        "Backward(post-forward)",
        "Optimizer",
    ] {
        assert!(
            phases["phases"].as_array().unwrap().iter().any(|x| x == p),
            "{phases}"
        );
    }
    let hist: u64 = steps["histogram"]["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(hist, 44);

    // Scalars per mode, with a regex; tensors over steps and as a 2-D grid.
    let sc = get_json(&format!("{url}/api/runs/0/scalars?regex=^lo"));
    let names: Vec<&str> = sc["scalars"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["loss"]);
    let modes: Vec<(&str, usize)> = sc["scalars"][0]["modes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["mode"].as_str().unwrap(),
                m["steps"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(modes, [("EVAL", 4), ("TRAIN", 40)]);
    // Each value's wall time is its event record's (the writer's clock), and the relative axis
    // starts at the earliest.
    let mut first_wall = f64::INFINITY;
    for mode in sc["scalars"][0]["modes"].as_array().unwrap() {
        let steps = mode["steps"].as_array().unwrap();
        let walls = mode["wall_times"].as_array().unwrap();
        assert_eq!(steps.len(), walls.len(), "{mode}");
        for (step, wall) in steps.iter().zip(walls) {
            let step = step.as_u64().unwrap();
            let path = smdebug_format::layout::event_file(step, "worker_0");
            let bytes = std::fs::read(run.join(&path)).unwrap();
            let events = smdebug_format::read_tensor_file(
                &bytes,
                &path,
                smdebug_format::record::PayloadCrcPolicy::AcceptBoth,
            )
            .unwrap();
            let record = events.iter().find(|e| e.name == "loss").unwrap();
            let wall = wall.as_f64().unwrap();
            assert!(
                (wall - record.wall_time).abs() < 1e-4,
                "step {step}: {wall} served, {} in the record",
                record.wall_time
            );
            first_wall = first_wall.min(record.wall_time);
        }
    }
    let served_first = sc["first_wall_time"].as_f64().unwrap();
    assert!(
        served_first <= first_wall && first_wall - served_first < 60.0,
        "{sc}"
    );
    let zoomed = get_json(&format!(
        "{url}/api/runs/0/scalars?regex=loss&from=10&to=19.5&points=50"
    ));
    // x is the global step: global step 10 is the first eval step.
    let train = &zoomed["scalars"][0]["modes"][1];
    assert_eq!(train["steps"], json!([11, 12, 13, 14, 15, 16, 17, 18, 19]));
    let steps_zoomed = client()
        .get(format!("{url}/api/runs/0/steps?from=1&to=2.5&last=5"))
        .send()
        .unwrap();
    assert_eq!(steps_zoomed.status(), 200);
    let bad = client()
        .get(format!("{url}/api/runs/0/scalars?regex=("))
        .send()
        .unwrap();
    assert_eq!(bad.status(), 400);
    let t = get_json(&format!("{url}/api/runs/0/tensor?name=fc.weight&steps=5"));
    assert_eq!(t["steps"].as_array().unwrap().len(), 5);
    let first = &t["steps"][0];
    assert_eq!(first["min"], -1.0);
    assert_eq!(first["bands"].as_array().unwrap().len(), 9);
    let grid = get_json(&format!("{url}/api/runs/0/tensor2d?name=attention&step=0"));
    assert_eq!(grid["shape"], json!([8, 8]));
    assert_eq!(grid["cells"][0][7], 7.0);
    assert_eq!(grid["cells"][3][3], 0.0);

    // Spans in a window around the custom span, whose name is returned as data, verbatim.
    let spans = get_json(&format!("{url}/api/runs/0/spans"));
    assert!(
        spans["spans"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["phase"] == support::HOSTILE_NAME),
        "{spans}"
    );
    server.shutdown();
}

#[test]
fn rule_verdicts_report_download_and_stop_requests() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("job");
    std::fs::create_dir_all(&run).unwrap();
    start_job(local(&run), Some(&run), quick_job(30)).join();
    let location = run.to_str().unwrap().to_owned();
    let server = serve(vec![location.clone()]);
    let url = base(&server);
    wait_for(Duration::from_secs(20), "the run", || {
        (get_json(&format!("{url}/api/runs"))["runs"][0]["complete"] == true).then_some(())
    });
    let before = get_json(&format!("{url}/api/runs/0/overview"));
    assert_eq!(before["rules_written"], false);

    // A rule runner writes its verdicts into the run: they appear in the overview.
    RuleRunner::builder(&location)
        .spec(RuleSpec::parse("LossNotDecreasing:num_steps=5").unwrap())
        .spec(RuleSpec::parse("StepOutlier").unwrap())
        // A tree model's rule on a network's run: it has nothing to check.
        .spec(RuleSpec::parse("TreeDepth").unwrap())
        .write_into_run(true)
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let over = wait_for(Duration::from_secs(10), "the rule statuses", || {
        let v = get_json(&format!("{url}/api/runs/0/overview"));
        (v["rules"].as_array().unwrap().len() == 3).then_some(v)
    });
    let loss = over["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "LossNotDecreasing")
        .unwrap();
    assert_eq!(loss["status"], "NoIssuesFound", "{loss}");
    assert!(!loss["recommendation"].as_str().unwrap().is_empty());
    assert!(!loss["description"].as_str().unwrap().is_empty());
    // A rule that checked nothing says so, and why; the run list counts it.
    let tree = over["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "TreeDepth")
        .unwrap();
    assert_eq!(tree["status"], "NoData", "{tree}");
    let reason = tree["message"].as_str().unwrap();
    assert!(
        reason.contains("no tensor of this run matched") && reason.contains("trees/Node"),
        "{reason}"
    );
    let listed = get_json(&format!("{url}/api/runs"));
    assert_eq!(listed["runs"][0]["no_data"], 1, "{listed}");
    assert_eq!(listed["runs"][0]["issues"], 0, "{listed}");

    // The report, generated on demand.
    let report = client()
        .get(format!("{url}/api/runs/0/report"))
        .send()
        .unwrap();
    assert_eq!(report.status(), 200);
    assert!(
        report.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .contains("job-profiler-report.html")
    );
    let html = report.text().unwrap();
    assert!(html.contains("<section id=\"job-summary\""));
    assert!(html.contains("LossNotDecreasing"));
    assert!(
        html.contains("<td class=\"status NoData\"") && html.contains("trees/Node"),
        "the report shows TreeDepth's NoData and its reason"
    );

    // Stop: refused without confirmation, written with it, as smdebug_io::stop reads it.
    assert_eq!(over["writable"], true);
    let unconfirmed = client()
        .post(format!("{url}/api/runs/0/stop"))
        .json(&json!({}))
        .send()
        .unwrap();
    assert_eq!(unconfirmed.status(), 400);
    assert!(!run.join("stop_request.json").exists());
    let confirmed = client()
        .post(format!("{url}/api/runs/0/stop"))
        .json(&json!({"confirm": true, "reason": "from the test"}))
        .send()
        .unwrap();
    assert_eq!(confirmed.status(), 200);
    assert_eq!(
        confirmed.json::<serde_json::Value>().unwrap(),
        json!({"requested": true, "already": null})
    );
    // A second press keeps the request the job stops for, and says so.
    let again = client()
        .post(format!("{url}/api/runs/0/stop"))
        .json(&json!({"confirm": true, "reason": "pressed again"}))
        .send()
        .unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(
        again.json::<serde_json::Value>().unwrap(),
        json!({"requested": true, "already": "from the test"})
    );
    let request = smdebug_io::stop::read_stop_request(local(&run).as_ref())
        .unwrap()
        .unwrap();
    assert_eq!(request.reason, "from the test");
    let seen = wait_for(Duration::from_secs(10), "the stop request", || {
        let v = get_json(&format!("{url}/api/runs"));
        v["runs"][0]["stop_requested"].as_str().map(str::to_owned)
    });
    assert_eq!(seen, "from the test");
    server.shutdown();

    // A read-only server cannot stop anything.
    let mut options = ServeOptions::new(vec![location]);
    options.read_only = true;
    let ro = Server::start(options).unwrap();
    let url = base(&ro);
    wait_for(Duration::from_secs(20), "the run", || {
        (get_json(&format!("{url}/api/runs"))["runs"][0]["complete"] == true).then_some(())
    });
    assert_eq!(
        get_json(&format!("{url}/api/runs"))["runs"][0]["writable"],
        false
    );
    let refused = client()
        .post(format!("{url}/api/runs/0/stop"))
        .json(&json!({"confirm": true}))
        .send()
        .unwrap();
    assert_eq!(refused.status(), 403);
    ro.shutdown();
}

#[test]
fn a_stop_request_from_the_dashboard_stops_a_live_job() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("long");
    std::fs::create_dir_all(&run).unwrap();
    let job = start_job(
        local(&run),
        Some(&run),
        JobConfig {
            steps: 100_000,
            step_time: Duration::from_millis(10),
            sampler: false,
            start_delay: Duration::ZERO,
            slow_steps: Vec::new(),
        },
    );
    let server = serve(vec![run.to_str().unwrap().into()]);
    let url = base(&server);
    wait_for(Duration::from_secs(30), "steps and the write check", || {
        let v = get_json(&format!("{url}/api/runs"));
        (v["runs"][0]["steps"].as_u64().unwrap() > 3 && v["runs"][0]["writable"] == true)
            .then_some(())
    });
    let r = client()
        .post(format!("{url}/api/runs/0/stop"))
        .json(&json!({"confirm": true, "reason": "enough"}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    // Bounded: if the job ignored the request, this fails and dropping the job ends it.
    let ended = wait_for(Duration::from_secs(30), "the end marker", || {
        let v = get_json(&format!("{url}/api/runs"));
        (v["runs"][0]["complete"] == true && !v["runs"][0]["end_reason"].is_null()).then_some(v)
    });
    // The dashboard's Stop is a person's: a reason, no rule.
    assert_eq!(job.join(), Some(smdebug_core::StopCause::from("enough")));
    assert_eq!(ended["runs"][0]["end_reason"], "stopped: enough");
    server.shutdown();
}

#[test]
fn the_token_is_required_and_headers_are_strict() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = ServeOptions::new([dir.path()]);
    options.token = Some("s3cret-token".into());
    let server = Server::start(options).unwrap();
    assert!(
        server.url().ends_with("/?token=s3cret-token"),
        "{}",
        server.url()
    );
    let root = format!("http://{}", server.addr());
    let c = client();
    // The page itself holds no run data and loads without the token (then asks for it).
    let page = c.get(format!("{root}/")).send().unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"));
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"));
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    let html = page.text().unwrap();
    // No inline script or style, nothing from another host.
    assert!(!html.contains("<script>") && !html.contains("style="));
    assert!(!html.contains("http://") && !html.contains("https://"));
    for path in [
        "/api/runs",
        "/api/runs/0/overview",
        "/api/events",
        "/api/kineto",
    ] {
        let r = c.get(format!("{root}{path}")).send().unwrap();
        assert_eq!(r.status(), 401, "{path}");
        let r = c
            .get(format!("{root}{path}?token=wrong-token!"))
            .send()
            .unwrap();
        assert_eq!(r.status(), 401, "{path}");
    }
    let r = c
        .get(format!("{root}/api/runs"))
        .header("x-smdebug-token", "s3cret-token")
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = c
        .get(format!("{root}/api/runs?token=s3cret-token"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    let stop = c
        .post(format!("{root}/api/runs/0/stop"))
        .json(&json!({"confirm": true}))
        .send()
        .unwrap();
    assert_eq!(stop.status(), 401);
    server.shutdown();

    // Without a token (loopback), a foreign Host header is refused: no DNS rebinding.
    let open = serve(vec![dir.path().to_str().unwrap().into()]);
    assert!(open.token().is_none());
    let url = base(&open);
    let r = c
        .get(format!("{url}/api/runs"))
        .header("host", "attacker.example:80")
        .send()
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(
        c.get(format!("{url}/api/runs")).send().unwrap().status(),
        200
    );
    // The page's script never writes markup.
    let js = c
        .get(format!("{url}/assets/app.js"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(
        !js.contains("innerHTML")
            && !js.contains("outerHTML")
            && !js.contains("insertAdjacentHTML")
    );
    assert!(!js.contains("eval(") && !js.contains("document.write"));
    open.shutdown();
}

#[test]
fn a_folder_of_runs_is_served_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["run-a", "run-b"] {
        let run = dir.path().join(name);
        std::fs::create_dir_all(&run).unwrap();
        start_job(local(&run), Some(&run), quick_job(5)).join();
    }
    std::fs::create_dir_all(dir.path().join("not-a-run")).unwrap();
    let expanded = expand_runs(&[Location::Local(dir.path().into())]);
    let names: Vec<&str> = expanded.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(names, ["run-a", "run-b"]);
    let server = serve(vec![dir.path().to_str().unwrap().into()]);
    let url = base(&server);
    let runs = wait_for(Duration::from_secs(20), "both runs", || {
        let v = get_json(&format!("{url}/api/runs"));
        v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["complete"] == true && r["steps"] == 5)
            .then_some(v)
    });
    assert_eq!(runs["runs"].as_array().unwrap().len(), 2);
    assert_eq!(runs["runs"][1]["name"], "run-b");
    let missing = client()
        .get(format!("{url}/api/runs/7/overview"))
        .send()
        .unwrap();
    assert_eq!(missing.status(), 404);
    server.shutdown();
}

#[test]
fn an_s3_run_is_followed_live() {
    let moto = MotoServer::start();
    moto.create_bucket("dash");
    let url = "s3://dash/jobs/live";
    let storage = smdebug_storage::open_storage_with(url, &moto.options()).unwrap();
    let mut options = ServeOptions::new([url]);
    options.storage = moto.options();
    let server = Server::start(options).unwrap();
    let base = base(&server);
    let job = start_job(
        storage,
        None,
        JobConfig {
            steps: 12,
            step_time: Duration::from_millis(30),
            sampler: false,
            start_delay: Duration::from_millis(200),
            slow_steps: Vec::new(),
        },
    );
    wait_for(
        Duration::from_secs(60),
        "steps on S3 while the job runs",
        || {
            let v = get_json(&format!("{base}/api/runs"));
            (v["runs"][0]["steps"].as_u64().unwrap() > 0 && v["runs"][0]["complete"] == false)
                .then_some(())
        },
    );
    job.join();
    let done = wait_for(Duration::from_secs(60), "the end on S3", || {
        let v = get_json(&format!("{base}/api/runs/0/overview"));
        (v["complete"] == true && v["steps"] == 13 && v["spans"].as_u64().unwrap() > 0).then_some(v)
    });
    assert_eq!(done["writable"], true);
    let sc = get_json(&format!("{base}/api/runs/0/scalars"));
    assert_eq!(sc["scalars"].as_array().unwrap().len(), 2, "{sc}");
    server.shutdown();
}

/// A scaled-down version of the benchmark's synthetic run (BENCHMARKS.md): `steps` train steps
/// with a step span each and `tensors` scalars a step written by the hook and writer, an eval
/// step every 500. Returns the number of scalar values written.
fn write_large_run(dir: &Path, steps: u64, tensors: usize) -> usize {
    use smdebug_core::Mode;
    use smdebug_profiler::spans::{Phase, SpanConfig, SpanRecorder};
    use smdebug_profiler::system::NodeId;
    use std::time::UNIX_EPOCH;

    let storage = local(dir);
    let (spans, guard) = SpanRecorder::start(
        SpanConfig::default()
            .node(NodeId::algo(1))
            .worker(0)
            .queue_capacity(1 << 16),
        Arc::clone(&storage),
    )
    .unwrap();
    let start_us = 1_700_000_000_000_000u64;
    for step in 0..steps {
        let at = UNIX_EPOCH + Duration::from_micros(start_us + step * 10_000);
        let len = if step % 997 == 500 { 30_000 } else { 9_000 };
        spans.record(
            Phase::Step(Mode::Train),
            None,
            at,
            Duration::from_micros(len),
            Some((Mode::Train, step)),
        );
    }
    guard.finish().unwrap();
    let mut hook = smdebug_testkit::runs::every_step_hook(dir);
    let mut written = 0;
    for step in 0..steps {
        let mode = if step % 500 == 499 {
            Mode::Eval
        } else {
            Mode::Train
        };
        hook.set_mode(mode);
        for i in 0..tensors {
            let name = if i == 0 {
                "loss".to_owned()
            } else {
                format!("metric_{i:02}")
            };
            let value = ((step as f64) / (10.0 + i as f64)).sin() + i as f64;
            hook.save_scalar(&name, value, &[if i == 0 { "losses" } else { "metrics" }]);
            written += 1;
        }
        hook.step();
    }
    hook.close();
    written
}

#[test]
fn a_large_run_is_read_in_bulk_held_compactly_and_never_sent_past_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let (steps, tensors) = (5_000u64, 8usize);
    let written = write_large_run(dir.path(), steps, tensors);
    let server = serve(vec![dir.path().to_str().unwrap().into()]);
    let url = base(&server);
    let run = wait_for(Duration::from_secs(120), "every scalar", || {
        let v = get_json(&format!("{url}/api/runs"));
        let r = &v["runs"][0];
        (r["complete"] == true && r["index_pending"] == 0 && r["scalar_values"] == written)
            .then_some(r.clone())
    });
    // Every value held once, in columns: no copy per mode, no second reader's index.
    assert_eq!(run["steps"], steps);
    assert_eq!(run["tensors"], tensors);
    assert_eq!(run["trial_open"], false, "{run}");

    // Every series of every view, at any asked budget, within the cap.
    let capped = |v: &Value, what: &str| {
        let n = v.as_array().unwrap().len();
        assert!(n <= MAX_POINTS, "{what}: {n} points");
        n
    };
    for query in ["", "?points=1000000"] {
        let sc = get_json(&format!("{url}/api/runs/0/scalars{query}"));
        let list = sc["scalars"].as_array().unwrap();
        assert_eq!(list.len(), tensors);
        for s in list {
            let modes = s["modes"].as_array().unwrap();
            let train = modes.iter().find(|m| m["mode"] == "TRAIN").unwrap();
            let eval = modes.iter().find(|m| m["mode"] == "EVAL").unwrap();
            assert_eq!(train["total"], steps - steps / 500);
            assert_eq!(eval["total"], steps / 500);
            let n = capped(&train["steps"], "a scalar");
            assert!(n > MAX_POINTS / 2, "{n}");
            assert_eq!(capped(&train["values"], "a scalar"), n);
        }
        let st = get_json(&format!("{url}/api/runs/0/steps{query}"));
        let series = st["series"].as_array().unwrap();
        assert!(!series.is_empty());
        for s in series {
            assert_eq!(s["count"], steps);
            capped(&s["data"]["t"], "step durations");
        }
        let sys = get_json(&format!("{url}/api/runs/0/system{query}"));
        for s in sys["series"].as_array().unwrap() {
            capped(&s["data"]["t"], "a system series");
        }
        let spans = get_json(&format!("{url}/api/runs/0/spans{query}"));
        assert_eq!(spans["count"], steps);
        capped(&spans["spans"], "spans");
        assert_eq!(spans["truncated"], true);
    }
    // A zoomed window gets every raw value inside it (finer than the whole-run view).
    let zoom = get_json(&format!(
        "{url}/api/runs/0/scalars?regex=^loss$&from=1000&to=1400"
    ));
    let train = &zoom["scalars"][0]["modes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mode"] == "TRAIN")
        .unwrap()
        .clone();
    let xs: Vec<u64> = train["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as u64)
        .collect();
    // Global steps 1000..=1400 less the eval step 1499 (outside) and 999 (outside): 401.
    assert_eq!(xs.len(), 401, "{xs:?}");
    assert_eq!((xs[0], xs[400]), (1000, 1400));
    let want = (1000f64 / 10.0).sin();
    assert!((train["values"][0].as_f64().unwrap() - want).abs() < 1e-12);
    // A scalar's reductions over steps come from the columns: the trial stays closed.
    let t = get_json(&format!("{url}/api/runs/0/tensor?name=loss&steps=50"));
    assert_eq!(t["steps"].as_array().unwrap().len(), 50);
    assert_eq!(t["total_steps"], steps);
    let runs = get_json(&format!("{url}/api/runs"));
    assert_eq!(runs["runs"][0]["trial_open"], false);
    server.shutdown();
}

#[test]
fn an_s3_folder_of_runs_is_served_side_by_side() {
    let moto = MotoServer::start();
    moto.create_bucket("fleet");
    for name in ["job-a", "job-b"] {
        let storage =
            smdebug_storage::open_storage_with(format!("s3://fleet/team/{name}"), &moto.options())
                .unwrap();
        start_job(storage, None, quick_job(4)).join();
    }
    // Something under the prefix that is not a run is not served.
    let other =
        smdebug_storage::open_storage_with("s3://fleet/team/notes", &moto.options()).unwrap();
    other.put("readme.txt", "not a run".into()).unwrap();

    let s3 = |url: &str| Location::parse(url).unwrap();
    let expanded = smdebug_serve::expand_runs_with(&[s3("s3://fleet/team/")], &moto.options());
    assert_eq!(
        expanded,
        [
            ("job-a".to_owned(), s3("s3://fleet/team/job-a")),
            ("job-b".to_owned(), s3("s3://fleet/team/job-b")),
        ]
    );
    // A run itself is one run, not a folder of runs.
    let one = smdebug_serve::expand_runs_with(&[s3("s3://fleet/team/job-a")], &moto.options());
    assert_eq!(one.len(), 1);

    let mut options = ServeOptions::new(["s3://fleet/team/"]);
    options.storage = moto.options();
    let server = Server::start(options).unwrap();
    let url = base(&server);
    let runs = wait_for(Duration::from_secs(60), "both S3 runs", || {
        let v = get_json(&format!("{url}/api/runs"));
        let list = v["runs"].as_array().unwrap().clone();
        list.iter()
            .all(|r| r["complete"] == true && r["steps"] == 4 && r["scalar_values"] == 8)
            .then_some(list)
    });
    let names: Vec<&str> = runs.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["job-a", "job-b"]);
    for id in 0..2 {
        let sc = get_json(&format!("{url}/api/runs/{id}/scalars?regex=^loss$"));
        assert_eq!(sc["scalars"][0]["modes"][0]["total"], 4, "{sc}");
    }
    server.shutdown();
}

/// A rules summary written by another version of the rules (StepOutlier's findings under a
/// renamed field, one of its parameters renamed) is not taken for "no result": the rule list
/// carries each problem with the field it names, the step charts say StepOutlier's findings do
/// not read instead of "no verdict yet", and the status as recorded is still shown.
#[test]
fn a_drifted_rules_summary_is_said_in_the_rule_list_and_the_steps() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    start_job(local(&run), Some(&run), quick_job(20)).join();
    let summary = RuleRunner::builder(&run)
        .spec(RuleSpec::parse("StepOutlier").unwrap())
        .write_into_run(true)
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let recorded = summary.rule("StepOutlier").unwrap();
    assert!(recorded.problems().is_empty());
    assert!(recorded.profiler_details().unwrap().is_some());
    let file = run.join(smdebug_rules::runner::SUMMARY_FILE);
    let mut json: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let outlier = json["rules"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["rule"] == "StepOutlier")
        .unwrap();
    let details = outlier["details"].as_object_mut().unwrap();
    let nodes = details.remove("nodes").unwrap();
    details.insert("per_node".into(), nodes);
    let params = outlier["parameters"].as_object_mut().unwrap();
    let stddev = params.remove("stddev").unwrap();
    params.insert("std_dev".into(), stddev);
    std::fs::write(&file, serde_json::to_vec_pretty(&json).unwrap()).unwrap();

    let server = serve(vec![run.to_str().unwrap().into()]);
    let url = base(&server);
    let overview = wait_for(Duration::from_secs(20), "the rules summary", || {
        let v = get_json(&format!("{url}/api/runs/0/overview"));
        (v["rules"].as_array().is_some_and(|r| !r.is_empty())).then_some(v)
    });
    let listed = overview["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "StepOutlier")
        .unwrap();
    assert_eq!(listed["status"], recorded.status.name());
    let problems: Vec<&str> = listed["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].contains("parameters") && problems[0].contains("std_dev"),
        "{problems:?}"
    );
    assert!(
        problems[1].contains("findings") && problems[1].contains("nodes"),
        "{problems:?}"
    );
    // Kept as recorded: the page's JSON is the file's.
    assert!(listed["details"]["per_node"].is_object(), "{listed}");
    let steps = get_json(&format!("{url}/api/runs/0/steps?last=10"));
    let unread = steps["outliers_unread"].as_str().unwrap_or_default();
    assert!(
        unread.contains("StepOutlier") && unread.contains("nodes"),
        "{steps}"
    );
    for series in steps["series"].as_array().unwrap() {
        assert_eq!(series["outliers"], json!([]), "{series}");
        assert!(series["outlier_limit"].is_null(), "{series}");
    }
    server.shutdown();
}
