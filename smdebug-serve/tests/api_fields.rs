//! The API's answers for a real run (a job with steps, spans, scalars, tensors, a code profile,
//! a Kineto trace, an end marker and rule statuses) conform to its JSON Schema
//! (`assets/api.schema.json`, from the response types: every key in it, every required one
//! there, of its type), and so does a pushed update of `/api/events`; `tests/api_schema.rs`
//! checks the page's scripts against the same schema. It also checks the evidence's NaN and
//! ±Inf, the span list paged from the window's end, and that the responses are gzip-compressed
//! for a client that accepts it.

mod support;

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use smdebug_core::Mode;
use smdebug_profiler::code::{CodeProfileConfig, CodeProfiler};
use smdebug_profiler::system::NodeId;
use smdebug_serve::{ServeOptions, Server};
use smdebug_storage::LocalStorage;
use support::{JobConfig, get_json, start_job, wait_for};

fn collect_keys(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                out.insert(k.clone());
                collect_keys(x, out);
            }
        }
        Value::Array(xs) => xs.iter().for_each(|x| collect_keys(x, out)),
        _ => {}
    }
}

#[test]
fn the_answers_for_a_real_run_conform_to_the_api_schema_and_are_gzipped() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let job = start_job(
        Arc::new(LocalStorage::new(&run).unwrap()),
        Some(&run),
        JobConfig {
            steps: 40,
            step_time: Duration::from_millis(5),
            sampler: true,
            start_delay: Duration::ZERO,
            slow_steps: vec![20],
        },
    );
    assert_eq!(job.join(), None);
    // A code-profile window, so that the code listing has one to describe.
    let profiler = CodeProfiler::start(
        CodeProfileConfig::default().node(NodeId::algo(1)),
        Arc::new(LocalStorage::new(&run).unwrap()),
    )
    .unwrap();
    profiler.begin(Some((Mode::Train, 3))).unwrap();
    let mut x = 1u64;
    let until = std::time::Instant::now() + Duration::from_millis(600);
    while std::time::Instant::now() < until {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    profiler.end(Some((Mode::Train, 7))).unwrap();
    assert_eq!(profiler.finish().unwrap().written, 1);
    let location = run.to_str().unwrap().to_owned();
    let mut summary = support::offline_rules(&location, &["StepOutlier", "LowGPUUtilization"]);
    // Evidence the page must show as it is: NaN and ±Inf (JSON has no such numbers).
    summary.rules[0].evidence = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.5]
        .iter()
        .map(|&v| smdebug_rules::Evidence::new("fc.weight", 7, "max", v))
        .collect();
    support::write_rules(&run, &summary);
    let mut options = ServeOptions::new(vec![location]);
    // A Kineto trace, so that the Kineto view has ranks, kernels and operators.
    options.traces = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../smdebug-read/tests/data/pytorch-profiler-traces/trace_filter__sampled_rank-0.json.gz",
    )];
    let server = Server::start(options).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    wait_for(Duration::from_secs(20), "the whole run", || {
        let v = get_json(&format!("{url}/api/runs"));
        let r = &v["runs"][0];
        let code = get_json(&format!("{url}/api/runs/0/code"));
        (r["complete"] == true
            && r["rules"].as_u64() == Some(2)
            && r["steps"].as_u64() > Some(40)
            && code["total"] == 1)
            .then_some(())
    });
    let listed = get_json(&format!("{url}/api/runs"));
    assert_eq!(listed["runs"][0]["phase"], "ended", "{listed}");
    // The evidence of a rule's finding keeps numbers as numbers.
    let over = get_json(&format!("{url}/api/runs/0/overview"));
    assert!(
        over["progress"]["step_rate"].as_f64().unwrap() > 0.0,
        "{}",
        over["progress"]
    );
    assert_eq!(over["loss"]["name"], "loss", "{}", over["loss"]);
    assert_eq!(over["loss"]["mode"], "TRAIN", "{}", over["loss"]);
    // The summary's chart of it ends at that step.
    let charts = get_json(&format!("{url}/api/runs/0/headlines?points=100"));
    assert_eq!(charts["loss"]["name"], "loss", "{charts}");
    assert_eq!(
        over["loss"]["last_step"],
        charts["loss"]["steps"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone()
    );
    let evidence: Vec<Value> = over["rules"][0]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["value"].clone())
        .collect();
    assert_eq!(
        evidence,
        vec![
            Value::from("NaN"),
            Value::from("Infinity"),
            Value::from("-Infinity"),
            Value::from(0.5)
        ]
    );
    // The span list pages back from the window's end: the latest spans, in time order.
    let all = get_json(&format!("{url}/api/runs/0/spans?points=2000"));
    let count = all["count"].as_u64().unwrap() as usize;
    let starts = |v: &Value| -> Vec<f64> {
        v["spans"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["start"].as_f64().unwrap())
            .collect()
    };
    let every = starts(&all);
    assert_eq!(every.len(), count, "a short run's spans fit in one answer");
    let last = get_json(&format!("{url}/api/runs/0/spans?last=true&limit=5"));
    assert_eq!(starts(&last), every[count - 5..].to_vec());
    let older = get_json(&format!(
        "{url}/api/runs/0/spans?last=true&limit=5&offset=5"
    ));
    assert_eq!(starts(&older), every[count - 10..count - 5].to_vec());
    assert_eq!(older["truncated"], true);
    let schema = smdebug_serve::api_schema();
    let defs = &schema["$defs"];
    let mut mismatches = Vec::new();
    let mut keys = BTreeSet::new();
    for (route, path) in [
        ("runs", "runs"),
        ("kineto", "kineto"),
        ("runs/{id}/overview", "runs/0/overview"),
        ("runs/{id}/headlines", "runs/0/headlines"),
        ("runs/{id}/system", "runs/0/system"),
        ("runs/{id}/spans", "runs/0/spans?last=true&limit=5"),
        ("runs/{id}/steps", "runs/0/steps"),
        ("runs/{id}/scalars", "runs/0/scalars?smoothing=0.6"),
        ("runs/{id}/tensor", "runs/0/tensor?name=attention"),
        ("runs/{id}/tensor2d", "runs/0/tensor2d?name=attention"),
        (
            "runs/{id}/tensor_histograms",
            "runs/0/tensor_histograms?name=attention",
        ),
        (
            "runs/{id}/scalars/values",
            "runs/0/scalars/values?regex=^loss$",
        ),
        ("runs/{id}/code", "runs/0/code"),
    ] {
        let answer = get_json(&format!("{url}/api/{path}"));
        let s = support::schema::route(&schema, route).unwrap_or_else(|| panic!("{route}"));
        mismatches.extend(support::schema::mismatches(defs, s, &answer, path));
        collect_keys(&answer, &mut keys);
    }
    // A pushed update (on this ended run a page's first push asks it to fetch; the delta's
    // lists are there, empty).
    let push = support::events(&url)
        .recv_timeout(Duration::from_secs(30))
        .unwrap();
    let s = support::schema::route(&schema, "events").unwrap();
    mismatches.extend(support::schema::mismatches(defs, s, &push, "events"));
    assert!(
        mismatches.is_empty(),
        "answers that are not what assets/api.schema.json says:\n{}",
        mismatches.join("\n")
    );
    // The check finds an answer that drifted from the schema: a key renamed, a type changed.
    let mut drifted = get_json(&format!("{url}/api/runs/0/overview"));
    let rate = drifted["progress"]["step_rate"].take();
    drifted["progress"]
        .as_object_mut()
        .unwrap()
        .remove("step_rate");
    drifted["progress"]["steps_per_s"] = rate;
    drifted["steps"] = Value::from("40");
    let overview = support::schema::route(&schema, "runs/{id}/overview").unwrap();
    assert_eq!(
        support::schema::mismatches(defs, overview, &drifted, "overview"),
        [
            "overview.progress: no step_rate",
            "overview.progress.steps_per_s: not in the schema",
            "overview.steps: \"40\" is not [\"integer\"]",
        ]
    );
    // Not vacuous: the answers had the nested parts the page draws from.
    for k in [
        "step_rate",
        "last_value",
        "evidence",
        "heatmap",
        "smoothed",
        "band_percentiles",
        "cells",
        "edges",
        "non_finite",
        "gpu_kernels",
        "top_self",
        "start_step",
        "outliers",
    ] {
        assert!(keys.contains(k), "no answer had {k}: {keys:?}");
    }

    // Compressed for a client that accepts gzip, and the same JSON once inflated.
    let plain = get_json(&format!("{url}/api/runs/0/overview"));
    let response = support::client()
        .get(format!("{url}/api/runs/0/overview"))
        .header("accept-encoding", "gzip")
        .send()
        .unwrap();
    assert_eq!(
        response.headers().get("content-encoding").unwrap(),
        "gzip",
        "{:?}",
        response.headers()
    );
    let packed = response.bytes().unwrap();
    let mut body = String::new();
    flate2::read::GzDecoder::new(&packed[..])
        .read_to_string(&mut body)
        .unwrap();
    let mut inflated: Value = serde_json::from_str(&body).unwrap();
    let mut plain = plain;
    // The step rate is measured per request; everything else is the same run's same view.
    inflated["progress"] = Value::Null;
    plain["progress"] = Value::Null;
    assert_eq!(inflated, plain);
    assert!(
        packed.len() < body.len() / 2,
        "{} of {}",
        packed.len(),
        body.len()
    );
    // The event stream too: one gzip stream, flushed after each push.
    let response = support::client()
        .get(format!("{url}/api/events"))
        .header("accept-encoding", "gzip")
        .send()
        .unwrap();
    assert_eq!(response.headers().get("content-encoding").unwrap(), "gzip");
    use std::io::BufRead;
    let first = std::io::BufReader::new(flate2::read::GzDecoder::new(response))
        .lines()
        .map(Result::unwrap)
        .find_map(|line| line.strip_prefix("data: ").map(str::to_owned))
        .unwrap();
    let push: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(push["deltas"][0]["refetch"], true, "{push}");
    server.shutdown();
}

#[test]
fn the_run_state_says_a_rule_stopped_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let storage = Arc::new(LocalStorage::new(&run).unwrap());
    let job = start_job(
        Arc::clone(&storage) as Arc<dyn smdebug_storage::Storage>,
        Some(&run),
        JobConfig {
            steps: 100_000,
            step_time: Duration::from_millis(5),
            sampler: false,
            start_delay: Duration::ZERO,
            slow_steps: Vec::new(),
        },
    );
    let server = Server::start(ServeOptions::new([&run])).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    wait_for(Duration::from_secs(30), "a live run", || {
        let v = get_json(&format!("{url}/api/runs"));
        (v["runs"][0]["phase"] == "live" && v["runs"][0]["steps"].as_u64() > Some(3)).then_some(())
    });
    let mut request = smdebug_format::stop::StopRequest::new("ExplodingTensor fired at step 4");
    request.rule = Some("ExplodingTensor".into());
    request.step = Some(4);
    smdebug_io::stop::request_stop(storage.as_ref(), &request).unwrap();
    assert!(
        job.join().is_some(),
        "the job did not honour the stop request"
    );
    let state = wait_for(Duration::from_secs(30), "the stopped state", || {
        let v = get_json(&format!("{url}/api/runs"));
        (v["runs"][0]["complete"] == true).then(|| v["runs"][0].clone())
    });
    assert_eq!(state["phase"], "stopped_by_rule", "{state}");
    assert_eq!(state["stop_rule"], "ExplodingTensor", "{state}");
    assert!(
        state["end_reason"].as_str().unwrap().starts_with("stopped"),
        "{state}"
    );
    server.shutdown();
}
