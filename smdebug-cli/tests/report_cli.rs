//! `smdebug report` on real runs: a digits training run recorded with capture, the system
//! sampler and framework spans; offline, following the run live, with Kineto traces, and on bad
//! input.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use smdebug::Session;
use smdebug_core::{Collection, Hook, SaveConfig};
use smdebug_examples::digits::{self, Digits};
use smdebug_examples::{Bug, TrainConfig, train_in_session};
use smdebug_io::OverflowPolicy;
use smdebug_io::writer::Writer;
use smdebug_profiler::spans::SpanConfig;
use smdebug_profiler::system::SamplerConfig;
use smdebug_read::profile::{ProfilerReader, SystemQuery};
use smdebug_storage::testing::{wait_for_exit, wait_until};
use support::{smdebug, smdebug_command};

/// Waits until the sampler of the session writing `run` has published a sample taken at or
/// after `since_us`.
fn wait_for_samples_after(run: &Path, since_us: u64) {
    let query = SystemQuery::default().time_range(since_us, u64::MAX);
    wait_until(Duration::from_secs(60), "a published system sample", || {
        ProfilerReader::open(run)
            .and_then(|r| r.system_samples(&query))
            .is_ok_and(|s| !s.is_empty())
    });
}

/// Trains the digits MLP into `run` in a session: capture, sampler (100 ms) and spans on.
fn record(run: &Path, bug: Option<Bug>, epochs: usize) {
    std::fs::create_dir_all(run).unwrap();
    let mut session = Session::builder(run)
        .save(SaveConfig::every(1))
        .collection(Collection::new("gradients").with_save_config(SaveConfig::every(5)))
        .collection(Collection::new("weights").with_save_config(SaveConfig::every(5)))
        .overflow(OverflowPolicy::Block)
        .system(
            SamplerConfig::default()
                .interval(Duration::from_millis(100))
                .publish_interval(Duration::from_millis(500)),
        )
        .spans(SpanConfig::default().close_interval(Duration::from_millis(500)))
        .start()
        .unwrap();
    let data = Digits::load(&digits::default_path()).unwrap();
    let (tr, ev) = data.split(0.2, 1);
    let cfg = TrainConfig {
        epochs,
        bug,
        input_side: Some(16),
        ..TrainConfig::default()
    };
    // System samples before the training and after it (the report's timeline spans both).
    wait_for_samples_after(run, 0);
    train_in_session(&cfg, &tr, &ev, &mut session);
    let trained = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    wait_for_samples_after(run, trained.as_micros() as u64);
    let summary = session.finish().unwrap();
    assert!(summary.problems.is_empty(), "{summary}");
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn section_ids(html: &str) -> Vec<String> {
    html.match_indices("<section id=\"")
        .map(|(at, m)| {
            let rest = &html[at + m.len()..];
            rest[..rest.find('"').unwrap()].to_string()
        })
        .collect()
}

#[test]
fn a_recorded_run_gets_a_report_with_every_section_and_one_json_per_rule() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    record(&run, Some(Bug::ExplodingLoss), 2);
    let page_dir = dir.path().join("pages");
    let html_path = page_dir.join("report.html");
    let out_dir = dir.path().join("rule-json");
    let out = smdebug(&[
        "report",
        run.to_str().unwrap(),
        "-o",
        html_path.to_str().unwrap(),
        "--rule-json",
        out_dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Where -o points: the page, and the notebook and rules' summary named after it.
    assert_eq!(
        listing(&page_dir),
        ["report.html", "report.ipynb", "report.rules.json"]
    );
    // Written, and rules found issues: exit 1.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("ExplodingTensor"), "{stdout}");
    // Where the page went (ProfilerReport's details used to be lost in the summary).
    assert!(
        stdout.contains(&format!("report: {}", html_path.display())),
        "{stdout}"
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    let ids = section_ids(&html);
    let want: Vec<String> = smdebug_report::SECTIONS
        .iter()
        .map(|(id, _)| id.to_string())
        .collect();
    assert_eq!(ids, want);
    // The rules' verdicts are in the page and in one JSON file each.
    let exploding = read_json(&out_dir.join("ExplodingTensor.json"));
    assert_eq!(exploding["status"], "IssuesFound");
    assert_eq!(exploding["kind"], "debugging");
    assert!(!exploding["recommendation"].as_str().unwrap().is_empty());
    let overall = read_json(&out_dir.join("OverallSystemUsage.json"));
    assert_eq!(overall["kind"], "profiler");
    assert!(overall["datapoints"].as_u64().unwrap() > 0);
    // ProfilerReport's status is its rules': IssuesFound when one of them found issues.
    let report = read_json(&out_dir.join("ProfilerReport.json"));
    let fired: Vec<&str> = smdebug_rules::builtin_profiler_rules()
        .iter()
        .map(|b| b.name)
        .filter(|name| read_json(&out_dir.join(format!("{name}.json")))["status"] == "IssuesFound")
        .collect();
    let want = if fired.is_empty() {
        "NoIssuesFound"
    } else {
        "IssuesFound"
    };
    assert_eq!(report["status"], want, "{report}");
    assert!(report["message"].as_str().unwrap().contains("report.html"));
    for name in [
        "CPUBottleneck",
        "StepOutlier",
        "Dataloader",
        "VanishingGradient",
    ] {
        assert!(out_dir.join(format!("{name}.json")).exists(), "{name}");
    }
    // The loss curve is drawn, the page asks for nothing outside itself.
    assert!(html.contains("loss"));
    for needle in ["<link", "src=\"http", "https://", "<script src"] {
        assert!(!html.contains(needle), "{needle}");
    }
    // The run's own rule summary was not touched.
    assert!(!run.join("rules/rule_job_summary.json").exists());
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_report_writes_the_page_alone_where_it_was_asked() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    record(&run, None, 1);
    // A folder of the person's own, with a file of the name a rule result would take.
    let folder = dir.path().join("docs");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("StepOutlier.json"), "mine").unwrap();
    let html_path = folder.join("x.html");
    let out = smdebug(&[
        "report",
        run.to_str().unwrap(),
        "-o",
        html_path.to_str().unwrap(),
    ]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The page, and its notebook and rules' summary named after it: the person's own file
    // is untouched.
    assert_eq!(
        listing(&folder),
        ["StepOutlier.json", "x.html", "x.ipynb", "x.rules.json"]
    );
    assert_eq!(
        std::fs::read_to_string(folder.join("StepOutlier.json")).unwrap(),
        "mine"
    );
}

#[test]
fn follow_regenerates_the_report_while_the_run_is_written_and_ends_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let html_path = dir.path().join("live/report.html");
    let mut child = smdebug_command()
        .args([
            "report",
            run.to_str().unwrap(),
            "-o",
            html_path.to_str().unwrap(),
            "--follow",
            "--interval",
            "1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A slow loop: the report must appear before the run ends.
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(Writer::open(run.to_str().unwrap()).unwrap())
        .unwrap();
    let mut step = 0u64;
    wait_until(
        Duration::from_secs(60),
        "a report saying the run is still being written",
        || {
            // One step per look: the run grows while the report is awaited.
            hook.save_scalar("loss", 1.0 / (step as f64 + 1.0), &["losses"]);
            hook.step();
            step += 1;
            std::fs::read_to_string(&html_path)
                .is_ok_and(|html| html.contains("still being written"))
        },
    );
    hook.close();
    drop(hook);
    let status = wait_for_exit(
        &mut child,
        Duration::from_secs(60),
        "report --follow to end with the run",
    );
    let out = child.wait_with_output().unwrap();
    assert!(status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(
        !html.contains("still being written"),
        "the final report knows the run ended"
    );
}

#[test]
fn kineto_traces_alone_or_beside_a_run_fill_the_operator_section() {
    let dir = tempfile::tempdir().unwrap();
    let trace: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../smdebug-read/tests/data/pytorch-profiler-traces/trace_filter__sampled_rank-0.json.gz",
    );
    assert!(trace.exists(), "{}", trace.display());
    let html_path = dir.path().join("traces.html");
    let out = smdebug(&[
        "report",
        "--trace",
        trace.to_str().unwrap(),
        "-o",
        html_path.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    let top = &html[html.find("id=\"top-operators\"").unwrap()..];
    let top = &top[..top.find("</section>").unwrap()];
    assert!(
        top.contains("<svg") || top.contains("<table"),
        "operators drawn"
    );
    assert!(!top.contains("class=\"missing\""), "{top}");
}

#[test]
fn a_missing_run_or_a_bad_rule_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let out = smdebug(&[
        "report",
        dir.path().join("nothing").to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing"), "{err}");
    assert!(!html.exists());

    let run = dir.path().join("run");
    record(&run, None, 1);
    let out = smdebug(&[
        "report",
        run.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
        "--rule",
        "ProfilerReport:CPUBottleneck_nope=3",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nope"), "{err}");
}
