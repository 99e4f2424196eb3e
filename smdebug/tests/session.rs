//! The Session on real training: the digits MLP trained through one session, then read back
//! with the Trial, the profiler reader and the rules' summary, as a user would.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use smdebug::prelude::*;
use smdebug::profiler::spans::SpanConfig;
use smdebug::profiler::system::SamplerConfig;
use smdebug::read::profile::{ProfilerReader, SpanQuery, SystemQuery};
use smdebug::rules::Status;
use smdebug_examples::digits::{self, Digits};
use smdebug_examples::{Bug, TrainConfig, train_in_session};
use smdebug_format::stop::StopRequest;
use smdebug_io::stop::request_stop;
use smdebug_storage::testing::{wait_for, wait_until};

fn digits() -> (Digits, Digits) {
    Digits::load(&digits::default_path()).unwrap().split(0.2, 1)
}

/// A session on `run` with the system sampled every 100 ms and span files closed every 500 ms.
fn builder(run: &Path) -> SessionBuilder {
    Session::builder(run)
        .system(
            SamplerConfig::default()
                .interval(Duration::from_millis(100))
                .publish_interval(Duration::from_millis(500)),
        )
        .spans(SpanConfig::default().close_interval(Duration::from_millis(500)))
        .rules_poll_interval(Duration::from_millis(20))
}

fn status<'a>(summary: &'a SessionSummary, rule: &str) -> &'a smdebug::rules::RuleStatus {
    summary
        .rules
        .iter()
        .find(|r| r.rule == rule)
        .unwrap_or_else(|| panic!("no status for {rule}: {summary}"))
}

#[test]
fn one_session_records_tensors_spans_and_system_metrics_runs_the_rules_and_writes_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let (train, eval) = digits();
    let mut session = builder(&run)
        .save(SaveConfig::every(5))
        .rules(["VanishingGradient", "LossNotDecreasing", "ProfilerReport"])
        .start()
        .unwrap();
    let cfg = TrainConfig {
        epochs: 2,
        ..TrainConfig::default()
    };
    // The sampler has published samples before training starts.
    wait_until(Duration::from_secs(60), "published system samples", || {
        ProfilerReader::open(run.to_str().unwrap())
            .and_then(|r| r.system_samples(&SystemQuery::default()))
            .is_ok_and(|s| !s.is_empty())
    });
    let trained = train_in_session(&cfg, &train, &eval, &mut session);
    let summary = session.finish().unwrap();

    let eval_steps = 2 * eval.len().div_ceil(cfg.batch_size) as u64;
    assert_eq!(summary.steps, trained.steps + eval_steps, "{summary}");
    assert!(summary.problems.is_empty(), "{summary}");
    assert!(summary.records_written > 0 && summary.records_dropped == 0);
    assert!(summary.system_samples >= 2, "{summary}");
    assert_eq!(summary.stopped, None);
    for rule in ["VanishingGradient", "LossNotDecreasing"] {
        let s = status(&summary, rule);
        assert!(s.steps_evaluated > 0, "{rule} evaluated nothing: {s:?}");
        assert_ne!(s.status, Status::InProgress, "{s:?}");
    }
    assert_ne!(status(&summary, "StepOutlier").status, Status::InProgress);

    // The report is where the summary says, drawn from this run.
    let report = summary.report.as_deref().expect("a report");
    let html = std::fs::read_to_string(report).unwrap();
    assert!(html.contains("<section id=\"step-durations\""), "{report}");

    // The run reads back: every step, both modes, the end marker.
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    assert!(trial.is_complete().unwrap());
    assert_eq!(trial.modes().unwrap(), [Mode::Train, Mode::Eval]);
    let losses = trial
        .tensor("loss")
        .unwrap()
        .steps(Some(Mode::Eval))
        .unwrap();
    let every_fifth: Vec<u64> = (0..eval_steps).step_by(5).collect();
    assert_eq!(losses, every_fifth, "every 5th EVAL step saves its loss");

    // One step span per step, each with its mode and mode step; forward, backward and
    // optimizer spans inside the training steps; data loading spans in both modes.
    let reader = ProfilerReader::open(run.to_str().unwrap()).unwrap();
    let spans = reader.spans(&SpanQuery::default()).unwrap();
    assert_eq!(spans.len() as u64, summary.spans_written);
    let mut per_row: BTreeMap<&str, u64> = BTreeMap::new();
    for s in &spans {
        *per_row.entry(s.phase.as_str()).or_default() += 1;
    }
    assert_eq!(per_row["Step:ModeKeys.TRAIN"], trained.steps, "{per_row:?}");
    assert_eq!(per_row["Step:ModeKeys.EVAL"], eval_steps, "{per_row:?}");
    assert_eq!(per_row["Backward(post-forward)"], trained.steps);
    assert_eq!(per_row["Optimizer"], trained.steps);
    assert_eq!(per_row["Forward"], trained.steps + eval_steps);
    assert_eq!(per_row["DataLoaderIter"], trained.steps + eval_steps);
    let train_steps: Vec<u64> = spans
        .iter()
        .filter(|s| s.phase == "Step:ModeKeys.TRAIN")
        .filter_map(|s| s.step)
        .collect();
    assert_eq!(train_steps, (0..trained.steps).collect::<Vec<_>>());
    for fwd in spans.iter().filter(|s| s.phase == "Forward") {
        let step = spans
            .iter()
            .find(|s| s.phase.starts_with("Step:") && s.step == fwd.step && s.mode == fwd.mode)
            .unwrap_or_else(|| panic!("no step span for {fwd:?}"));
        assert!(
            step.start_us <= fwd.start_us && fwd.end_us <= step.end_us,
            "forward {fwd:?} outside its step {step:?}"
        );
    }
    let samples = reader.system_samples(&SystemQuery::default()).unwrap();
    assert!(!samples.is_empty());
}

#[test]
fn a_stop_request_written_by_another_process_reaches_the_loop_at_its_next_step() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let mut session = builder(&run)
        .no_system()
        .stop_poll_interval(Duration::from_millis(20))
        .start()
        .unwrap();
    // Another process (the dashboard's Stop, `smdebug rules --follow` in another job) writes
    // the request through its own handle on the run.
    let other = smdebug_storage::open_storage(run.to_str().unwrap()).unwrap();
    let mut step = 0u64;
    // One step per look: the loop trains until it hears the request.
    let stopped_at = wait_for(
        Duration::from_secs(30),
        "the request to reach the loop",
        || {
            session.hook().save_scalar("loss", 1.0, &["losses"]);
            let status = session.step().unwrap();
            assert_eq!(status.step, step);
            if step == 3 {
                request_stop(other.as_ref(), &StopRequest::new("stop from the dashboard")).unwrap();
            }
            step += 1;
            status.stop_requested().then_some(step - 1)
        },
    );
    assert!(stopped_at > 3);
    let summary = session.finish().unwrap();
    // A person's request: a reason, no rule.
    assert_eq!(
        summary.stopped,
        Some(StopCause::from("stop from the dashboard"))
    );
    assert_eq!(summary.steps, stopped_at + 1);
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    assert_eq!(
        trial.end_reason().unwrap().map(|r| r.to_string()),
        Some("stopped: stop from the dashboard".to_string())
    );
}

/// The digits MLP trained with an exploding loss and ExplodingTensor set to stop the job, the
/// rules polling every `poll` when given: whether the loop stopped, the steps it trained, the
/// steps it had planned, and the session's summary.
fn stopped_by_exploding_tensor(poll: Option<Duration>) -> (bool, u64, u64, SessionSummary) {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let (train, eval) = digits();
    let mut builder = builder(&run).no_system().save(SaveConfig::every(1));
    if let Some(poll) = poll {
        builder = builder.rules_poll_interval(poll);
    }
    let mut session = builder
        .rule_spec(
            RuleSpec::parse("ExplodingTensor")
                .unwrap()
                .action(ActionConfig::StopTraining),
        )
        .start()
        .unwrap();
    let cfg = TrainConfig {
        epochs: 20,
        bug: Some(Bug::ExplodingLoss),
        ..TrainConfig::default()
    };
    let trained = train_in_session(&cfg, &train, &eval, &mut session);
    let summary = session.finish().unwrap();
    let planned = (cfg.epochs * train.len().div_ceil(cfg.batch_size)) as u64;
    (trained.stopped.is_some(), trained.steps, planned, summary)
}

#[test]
fn a_rule_that_fires_with_a_stop_action_stops_the_job_early() {
    let (stopped, steps, planned, summary) = stopped_by_exploding_tensor(None);
    assert!(stopped, "{summary}");
    assert!(steps < planned);
    assert_eq!(
        status(&summary, "ExplodingTensor").status,
        Status::IssuesFound
    );
    // A rule's request: the rule and the step it fired at travel with the reason.
    let cause = summary.stopped.as_ref().unwrap();
    assert!(cause.reason.contains("ExplodingTensor"), "{cause:?}");
    assert_eq!(cause.rule.as_deref(), Some("ExplodingTensor"), "{cause:?}");
    assert!(cause.step.is_some_and(|s| s < steps), "{cause:?}");
    assert!(
        summary
            .to_string()
            .contains(&format!("stopped early: {}", cause.reason)),
        "{summary}"
    );
}

/// The rules of a job of one process look when its writer has written a step, not only at
/// their poll: with a poll of an hour, the rule still stops the job early, and the session
/// still finishes at once (the end marker wakes them too).
#[test]
fn rules_woken_by_the_writer_stop_the_job_without_waiting_for_their_poll() {
    let (stopped, steps, planned, summary) =
        stopped_by_exploding_tensor(Some(Duration::from_secs(3600)));
    assert!(stopped, "{summary}");
    assert!(steps < planned, "{summary}");
    assert_eq!(
        status(&summary, "ExplodingTensor").status,
        Status::IssuesFound
    );
    assert!(summary.problems.is_empty(), "{summary}");
}

#[test]
fn dropping_a_session_ends_the_run_like_finish() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    {
        let mut session = builder(&run).no_system().start().unwrap();
        for _ in session.data(0..4) {
            session.forward(|| ());
            session.hook().save_scalar("loss", 0.5, &["losses"]);
            session.step().unwrap();
        }
    }
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    assert!(trial.is_complete().unwrap());
    let reader = ProfilerReader::open(run.to_str().unwrap()).unwrap();
    let steps = reader
        .spans(&SpanQuery::default().phase("Step:ModeKeys.GLOBAL"))
        .unwrap();
    assert_eq!(steps.len(), 4, "the spans were published before the end");
}

#[test]
fn configuration_errors_and_an_unreachable_store_fail_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let err = builder(&run).rule("NoSuchRule").start().unwrap_err();
    assert!(err.to_string().contains("NoSuchRule"), "{err}");
    let err = builder(&run)
        .rule("LossNotDecreasing:num_steps=often")
        .start()
        .unwrap_err();
    assert!(err.to_string().contains("num_steps"), "{err}");
    let bad_regex = Collection::new("relus").with_regex("relu[");
    assert!(
        bad_regex.is_err(),
        "a bad regex is refused where it is given"
    );
    assert!(
        !run.join("training_job_end.ts").exists(),
        "a session that did not start ends no run"
    );

    // An object store nobody listens on: a clear error naming the store, before any step.
    let port = smdebug_storage::testing::free_port();
    let err = Session::builder("s3://nobody/run")
        .storage_options(smdebug_storage::testing::s3_options(port))
        .start()
        .unwrap_err();
    assert!(
        err.to_string().contains("nobody"),
        "the error names the store: {err}"
    );
}

#[test]
fn a_location_holding_an_ended_run_is_refused_unless_told_to_replace_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let first = |n: u64| {
        let mut session = builder(&run)
            .no_system()
            .save(SaveConfig::every(1))
            .overwrite(true)
            .start()
            .unwrap();
        for _ in 0..n {
            session.hook().save_scalar("loss", 1.0, &["losses"]);
            session.step().unwrap();
        }
        session.finish().unwrap();
    };
    first(5);
    let err = builder(&run).no_system().start().unwrap_err();
    assert!(
        matches!(err, smdebug::Error::RunExists { .. }),
        "a second job would mix its steps with the first's: {err}"
    );
    assert!(err.to_string().contains("overwrite"), "{err}");
    // Replaced: only the second job's steps are left.
    first(2);
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    assert_eq!(trial.steps(None).unwrap(), [0, 1]);
}

/// The README's loop is the quickstart example's, line for line, so the README shows code that
/// compiles (the example is built by clippy's `--all-targets` and run in CI below).
#[test]
fn the_readme_shows_the_quickstart_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../README.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/quickstart.rs")).unwrap();
    let body = example
        .split("    let mut session = Session::builder")
        .nth(1)
        .expect("the example builds a session")
        .split("    Ok(())")
        .next()
        .unwrap();
    for line in body.lines().filter(|l| !l.trim().is_empty()) {
        let line = line.strip_prefix("    ").unwrap_or(line);
        assert!(readme.contains(line.trim()), "README lacks `{line}`");
    }
}

#[test]
fn the_dashboards_stop_button_stops_a_loop_that_checks_its_steps() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let mut session = builder(&run)
        .no_system()
        .stop_poll_interval(Duration::from_millis(20))
        .dashboard(smdebug::serve::ServeOptions::default())
        .start()
        .unwrap();
    let url = session.dashboard_url().expect("a dashboard").to_string();
    let root = url.trim_end_matches('/').to_string();
    let client = reqwest::blocking::Client::new();
    let mut pressed = false;
    let mut steps = 0u64;
    // One step per look: the loop trains until the button's request reaches it.
    wait_until(
        Duration::from_secs(60),
        "the button to stop the loop",
        || {
            session.hook().save_scalar("loss", 1.0, &["losses"]);
            let status = session.step().unwrap();
            steps += 1;
            if status.stop_requested() {
                return true;
            }
            if !pressed && steps >= 5 {
                // What the page's Stop button sends, after its confirmation.
                let r = client
                    .post(format!("{root}/api/runs/0/stop"))
                    .json(&serde_json::json!({"confirm": true, "reason": "pressed Stop"}))
                    .send()
                    .unwrap();
                pressed = r.status() == 200;
            }
            false
        },
    );
    assert!(pressed);
    let summary = session.finish().unwrap();
    assert_eq!(summary.stopped, Some(StopCause::from("pressed Stop")));
    assert_eq!(summary.dashboard.as_deref(), Some(url.as_str()));
}

/// Burns about `ms` milliseconds of CPU: the loop's "forward pass" in the code-profile test.
#[inline(never)]
fn busy_forward_pass(ms: u64) -> f64 {
    let started = Instant::now();
    let mut x = 1.0f64;
    while started.elapsed() < Duration::from_millis(ms) {
        for _ in 0..10_000 {
            x = (x * 1.000_001 + 0.5).sqrt();
        }
    }
    x
}

#[test]
fn the_code_profile_samples_the_loop_inside_its_window_and_lands_in_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let mut session = builder(&run)
        .no_system()
        .save(SaveConfig::every(5))
        .code_profiling(Window::steps(3, 40))
        .rule("ProfilerReport")
        .start()
        .unwrap();
    session.set_mode(Mode::Train).unwrap();
    // 40 steps of 50 ms in the window: the first window of a process starts sampling late,
    // and a loaded machine gives the process fewer ticks.
    for _ in session.data(0..50) {
        let loss = session.forward(|| busy_forward_pass(50));
        session.hook().save_scalar("loss", loss, &["losses"]);
        session.step().unwrap();
    }
    let summary = session.finish().unwrap();
    assert_eq!(summary.code_profiles, 1, "{summary}");
    assert!(summary.problems.is_empty(), "{summary}");

    let reader = ProfilerReader::open(run.to_str().unwrap()).unwrap();
    let profiles = reader.code_profiles().unwrap();
    assert_eq!(profiles.windows.len(), 1);
    let window = &profiles.windows[0].summary;
    assert_eq!(window.steps_label(), "TRAIN steps 3–42");
    // The label is the steps alone only when the sampler ran for 90 % of the window or more:
    // `start()` readied the sampler (it takes a tenth of a second or more in a fresh process),
    // so the window opened at step 3 is sampled from step 3, not some 0.5 s later.
    assert!(window.samples > 0);
    let hot = window
        .top_total
        .iter()
        .find(|f| f.function.contains("busy_forward_pass"))
        .unwrap_or_else(|| panic!("the hot function is not on top: {:?}", window.top_total));
    assert!(hot.share > 0.5, "{hot:?}");
    let html = std::fs::read_to_string(summary.report.unwrap()).unwrap();
    assert!(
        html.contains("TRAIN steps 3–42"),
        "the report shows the window"
    );
}

#[test]
fn rules_in_the_session_make_the_hook_save_what_they_read_and_say_when_nothing_applied() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let (train, eval) = digits();
    // The loop's own schedule saves nothing at all: what is saved is what the rules asked for.
    let mut session = builder(&run)
        .no_system()
        .save(SaveConfig::new(SaveConfigMode::never()))
        .rules(["VanishingGradient", "LossNotDecreasing", "TreeDepth"])
        .start()
        .unwrap();
    let cfg = TrainConfig {
        epochs: 1,
        ..TrainConfig::default()
    };
    train_in_session(&cfg, &train, &eval, &mut session);
    let summary = session.finish().unwrap();
    let vanishing = status(&summary, "VanishingGradient");
    assert_eq!(vanishing.status, Status::NoIssuesFound, "{vanishing:?}");
    assert!(vanishing.datapoints > 0);
    // LossNotDecreasing's losses were saved at the steps it asked for (every 25th of each
    // mode), too few in one epoch for the two windows of 10 it compares: it read the TRAIN
    // ones (the mode it follows; the EVAL steps are not its to judge), and says it could not
    // judge rather than pass.
    let losses = status(&summary, "LossNotDecreasing");
    assert_eq!(losses.status, Status::NoData, "{losses:?}");
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    let saved = trial
        .tensor("loss")
        .unwrap()
        .steps(Some(Mode::Train))
        .unwrap();
    assert!(!saved.is_empty());
    let judged = (losses.steps_judged, losses.steps_in_scope);
    assert_eq!(
        judged,
        (saved.len() as u64, saved.len() as u64),
        "{losses:?}"
    );
    assert!(
        losses.message.contains("never had enough to judge")
            && losses.message.contains("two windows of 10 losses"),
        "{}",
        losses.message
    );
    // No tree model here: a status of its own, with the reason, and never a pass.
    let tree = status(&summary, "TreeDepth");
    assert_eq!(tree.status, Status::NoData, "{tree:?}");
    assert!(!tree.message.is_empty());

    let gradients = trial
        .tensor_names_filtered(Some("gradients"), None)
        .unwrap();
    assert!(
        !gradients.is_empty(),
        "the gradients VanishingGradient reads were saved"
    );
    assert!(
        trial
            .tensor_names_filtered(Some("weights"), None)
            .unwrap()
            .is_empty(),
        "nothing else was"
    );
}

/// Makes a FIFO at `path` (no writer ever opens it).
fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
}

#[test]
fn an_unreadable_stop_request_is_said_in_the_summary_and_the_dashboard_and_a_good_one_still_stops()
{
    // (what is written, a word the reason must hold)
    let cases: [(&str, &str); 4] = [
        ("not json", "not a stop request"),
        ("wrong type", "invalid type"),
        ("70 kB", "more than the 65536 bytes"),
        ("fifo", "a FIFO, not a regular file"),
    ];
    for (case, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let mut session = builder(&run)
            .no_system()
            .stop_poll_interval(Duration::from_millis(20))
            .dashboard(smdebug::serve::ServeOptions::default())
            .start()
            .unwrap();
        let root = session
            .dashboard_url()
            .expect("a dashboard")
            .trim_end_matches('/')
            .to_string();
        let request = run.join("stop_request.json");
        std::fs::create_dir_all(&run).unwrap();
        match case {
            "not json" => std::fs::write(&request, "stop, please").unwrap(),
            "wrong type" => std::fs::write(&request, r#"{"reason": ["stop"]}"#).unwrap(),
            "70 kB" => std::fs::write(
                &request,
                serde_json::json!({"reason": "z".repeat(70_000)}).to_string(),
            )
            .unwrap(),
            _ => mkfifo(&request),
        }
        // The job trains on (no one can tell what the request asked), and the dashboard says
        // why the request is not honoured.
        let client = reqwest::blocking::Client::new();
        let started = Instant::now();
        let what = format!("{case}: the dashboard to show the unreadable request");
        // One step per look: the job trains on while the dashboard is asked.
        let shown = wait_for(Duration::from_secs(60), &what, || {
            session.hook().save_scalar("loss", 1.0, &["losses"]);
            let status = session.step().unwrap();
            assert!(!status.stop_requested(), "{case}: {status:?}");
            let runs: serde_json::Value = client
                .get(format!("{root}/api/runs"))
                .send()
                .unwrap()
                .json()
                .unwrap();
            // The stop watcher looks every 20 ms: train on for at least 15 of its looks (a
            // window in which the job must not stop), not only until the error shows.
            let error = runs["runs"][0]["stop_request_error"].as_str()?;
            (started.elapsed() > Duration::from_millis(300)).then(|| error.to_string())
        });
        assert!(shown.contains(expected), "{case}: {shown}");
        // A request written properly afterwards stops the job.
        std::fs::remove_file(&request).unwrap();
        request_stop(
            smdebug_storage::open_storage(run.to_str().unwrap())
                .unwrap()
                .as_ref(),
            &StopRequest::new("asked properly"),
        )
        .unwrap();
        let what = format!("{case}: the proper request to stop the job");
        wait_until(Duration::from_secs(30), &what, || {
            session.hook().save_scalar("loss", 1.0, &["losses"]);
            session.step().unwrap().stop_requested()
        });
        let summary = session.finish().unwrap();
        assert_eq!(summary.stopped, Some(StopCause::from("asked properly")));
        let said: Vec<&String> = summary
            .problems
            .iter()
            .filter(|p| p.contains("stop request could not be read"))
            .collect();
        assert_eq!(said.len(), 1, "{case}: said once: {summary}");
        assert!(said[0].contains(expected), "{case}: {summary}");
        assert!(
            summary.to_string().contains(expected),
            "{case}: the printed summary says it too: {summary}"
        );
    }
}
