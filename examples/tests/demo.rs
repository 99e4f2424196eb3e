//! The README's main command, as a user runs it: a healthy run goes to the end with every rule
//! quiet that stops jobs; with `--bug exploding` the rules following the run stop it early and
//! say why; both write the profiling report and the rules' summary.

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use smdebug_core::EndReason;
use smdebug_io::trial::Trial;

fn demo(out: &Path, extra: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(["--out", out.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn summary(run: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(run.join("rules/rule_job_summary.json")).unwrap())
        .unwrap()
}

fn rule<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == name)
        .unwrap_or_else(|| panic!("{name} missing"))
}

#[test]
fn a_healthy_run_goes_to_the_end_with_capture_profiling_rules_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let stdout = demo(&run, &["--epochs", "3"]);
    assert!(stdout.contains("the job ran to the end"), "{stdout}");
    let s = summary(&run);
    assert_eq!(s["finished"], true);
    for name in ["VanishingGradient", "ExplodingTensor", "DeadRelu"] {
        assert_eq!(rule(&s, name)["status"], "NoIssuesFound", "{name}");
        assert!(rule(&s, name)["datapoints"].as_u64().unwrap() > 0, "{name}");
    }
    assert!(
        rule(&s, "OverallFrameworkMetrics")["datapoints"]
            .as_u64()
            .unwrap()
            > 0
    );
    let report = run.join("report/profiler-report.html");
    assert!(stdout.contains(&report.display().to_string()), "{stdout}");
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("id=\"step-durations\""));
    assert!(run.join("report/ExplodingTensor.json").exists());
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    assert_eq!(trial.end_reason().unwrap(), Some(EndReason::Completed));
    // 3 epochs of 45 training steps, plus 12 evaluation steps each.
    assert_eq!(trial.global_steps(None).unwrap().len(), 3 * (45 + 12));
}

#[test]
fn an_exploding_loss_is_stopped_early_by_the_rule_that_saw_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let stdout = demo(&run, &["--bug", "exploding"]);
    assert!(stdout.contains("STOPPED EARLY"), "{stdout}");
    let s = summary(&run);
    let exploding = rule(&s, "ExplodingTensor");
    assert_eq!(exploding["status"], "IssuesFound");
    assert_eq!(exploding["actions"][0], "stop_training");
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    match trial.end_reason().unwrap() {
        Some(EndReason::Stopped(reason)) => assert!(reason.contains("ExplodingTensor"), "{reason}"),
        other => panic!("the run should say it was stopped: {other:?}"),
    }
    // Stopped well before the 450 planned training steps.
    let train_steps = trial.steps(Some(smdebug_core::Mode::Train)).unwrap().len();
    assert!(train_steps < 450, "{train_steps} steps");
    let first = exploding["first_fired_step"].as_u64().unwrap();
    assert!((first as usize) < train_steps);
    let report = std::fs::read_to_string(run.join("report/profiler-report.html")).unwrap();
    assert!(report.contains("ExplodingTensor"));
}
