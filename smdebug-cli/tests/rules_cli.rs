//! `smdebug rules` on real runs: exit 0 when no rule found issues, 1 when one did, 2 on errors;
//! `--json` statuses; `--list`.

mod support;

use serde_json::Value;
use smdebug_core::{Mode, TensorView};
use smdebug_testkit::runs::every_step_hook;
use support::smdebug;

fn write_run(dir: &std::path::Path, nan_at: Option<u64>) -> String {
    let run = dir.join("run");
    let mut hook = every_step_hook(&run);
    hook.set_mode(Mode::Train);
    for step in 0..12u64 {
        let mut g: Vec<f32> = (0..64)
            .map(|i| 0.01 * (i as f32 + 1.0) / (step as f32 + 1.0))
            .collect();
        if nan_at == Some(step) {
            g[3] = f32::NAN;
        }
        hook.save_tensor(
            "gradient/fc1.weight",
            &TensorView::from_slice(&g, &[8, 8]).unwrap(),
            &["gradients"],
        );
        hook.save_scalar("loss", 2.0 / (step as f64 + 1.0), &["losses"]);
        hook.step();
    }
    hook.close();
    run.to_str().unwrap().to_string()
}

#[test]
fn exit_status_and_json_follow_what_the_rules_found() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write_run(&dir.path().join("bad"), Some(5));
    let out = smdebug(&["rules", &bad, "--rule", "ExplodingTensor", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rule = &summary["rules"][0];
    assert_eq!(rule["rule"], "ExplodingTensor");
    assert_eq!(rule["status"], "IssuesFound");
    assert_eq!(rule["first_fired_step"], 5);

    let good = write_run(&dir.path().join("good"), None);
    let out = smdebug(&[
        "rules",
        &good,
        "--rule",
        "ExplodingTensor",
        "--rule",
        "VanishingGradient:threshold=1e-9",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// VanishingGradient asked for on the XGBoost hook's run: it checked nothing (the run has no
/// gradients), which is not a pass: exit 2, with the reason. The same rule in the default set
/// does not change the exit status, and a rule that checked something keeps 0 or 1.
#[test]
fn a_rule_asked_for_that_had_no_data_exits_2_and_says_why() {
    let xgb = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../smdebug-io/tests/data/hooks/xgb_healthy");
    let xgb = xgb.to_str().unwrap();
    let out = smdebug(&["rules", xgb, "--rule", "VanishingGradient"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stdout.contains("VanishingGradient") && stdout.contains("NoData"),
        "{stdout}"
    );
    assert!(
        stderr.contains("rule VanishingGradient had no data to check")
            && stderr.contains("`gradients`"),
        "{stderr}"
    );
    let out = smdebug(&[
        "rules",
        xgb,
        "--rule",
        "vanishing_gradient",
        "--rule",
        "TreeDepth",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["rules"][0]["status"], "NoData");
    assert!(
        summary["rules"][0]["message"]
            .as_str()
            .unwrap()
            .contains("no tensor of this run matched the rule's selection")
    );
    assert_ne!(summary["rules"][1]["status"], "NoData");
    // A rule with data: its own verdict decides.
    let out = smdebug(&["rules", xgb, "--rule", "TreeDepth"]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{:?}", out.status);
    // The default set holds VanishingGradient too; there it only reports.
    let out = smdebug(&["rules", xgb, "--json"]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{:?}", out.status);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let vanishing = summary["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == "VanishingGradient")
        .unwrap();
    assert_eq!(vanishing["status"], "NoData");
}

#[test]
fn bad_input_exits_2_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let run = write_run(dir.path(), None);
    for args in [
        vec!["rules", run.as_str(), "--rule", "NoSuchRule"],
        vec![
            "rules",
            run.as_str(),
            "--rule",
            "VanishingGradient:threshold=tiny",
        ],
        vec![
            "rules",
            run.as_str(),
            "--rule",
            "VanishingGradient:no_such_param=1",
        ],
        vec![
            "rules",
            run.as_str(),
            "--rule",
            "ExplodingTensor:tensor_regex=fc1(",
        ],
        vec!["rules", "/no/such/run", "--rule", "ExplodingTensor"],
    ] {
        let out = smdebug(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(!out.stderr.is_empty(), "{args:?} said nothing on stderr");
    }
}

#[test]
fn list_names_every_rule_with_its_defaults() {
    let out = smdebug(&["rules", "--list"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for rule in [
        "VanishingGradient",
        "ExplodingTensor",
        "LossNotDecreasing",
        "TreeDepth",
        "StalledTraining",
    ] {
        assert!(text.contains(rule), "{rule} missing from --list");
    }
    assert!(
        text.contains("1e-7") || text.contains("1e-07"),
        "VanishingGradient's default threshold"
    );
}

#[test]
fn list_shows_profiler_rules_with_their_kind() {
    let out = smdebug(&["rules", "--list"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for rule in [
        "LowGPUUtilization",
        "CPUBottleneck",
        "StepOutlier",
        "OverallSystemUsage",
    ] {
        let line = text
            .lines()
            .find(|l| l.starts_with(rule))
            .unwrap_or_else(|| panic!("{rule} missing from --list"));
        assert!(line.contains("profiler"), "{line}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("VanishingGradient") && l.contains("debugging"))
    );
    let out = smdebug(&["rules", "--list", "--json"]);
    let rules: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules = rules.as_array().unwrap();
    assert_eq!(rules.len(), 31);
    let cpu = rules.iter().find(|r| r["name"] == "CPUBottleneck").unwrap();
    assert_eq!(cpu["kind"], "profiler");
    assert_eq!(cpu["config_name"], "cpu_bottleneck");
    assert_eq!(cpu["defaults"]["cpu_threshold"], 90.0);
    assert!(!cpu["recommendation"].as_str().unwrap().is_empty());
}

/// A run with nothing but a GPU at 5 % for 3 s, in the system-metrics format.
fn write_idle_gpu_run(dir: &std::path::Path) -> String {
    use smdebug_format::system::SystemSample;
    use smdebug_format::system::system_file_key;
    let start_s = 1_700_000_000u64;
    let mut text = String::new();
    for i in 0..30 {
        let sample = SystemSample {
            metric_type: "gpu".into(),
            name: "gpu0".into(),
            dimension: "GPUUtilization".into(),
            value: 5.0,
            node_id: "algo-1".into(),
            timestamp: start_s as f64 + i as f64 * 0.1,
        };
        text.push_str(&serde_json::to_string(&sample).unwrap());
        text.push('\n');
    }
    let path = dir.join("run").join(system_file_key(start_s, "algo-1"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    dir.join("run").to_str().unwrap().to_string()
}

#[test]
fn profiler_rules_run_on_a_run_with_only_profiler_data() {
    let dir = tempfile::tempdir().unwrap();
    let run = write_idle_gpu_run(dir.path());
    let out = smdebug(&[
        "rules",
        &run,
        "--rule",
        "LowGPUUtilization:patience=2,window=3",
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rule = &summary["rules"][0];
    assert_eq!(rule["kind"], "profiler");
    assert_eq!(rule["status"], "IssuesFound");
    // The third sample is the first past patience.
    assert_eq!(rule["first_fired_time_us"], 1_700_000_000_200_000u64);
    assert!(rule["message"].as_str().unwrap().contains("underused"));

    // Without --rule: the profiler rules join the default set on a run with profiler data.
    let out = smdebug(&["rules", &run]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("LowGPUUtilization"), "{text}");
    assert!(text.contains("OverallSystemUsage"), "{text}");
    assert!(text.contains("none past patience (1000)"), "{text}");
    let out = smdebug(&[
        "rules",
        &run,
        "--rule",
        "LowGPUUtilization:patience=2,window=3",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("IssuesFound first at 2023-11-14 22:13:20.200 UTC (1 times)"),
        "{text}"
    );
}

/// Every default rule on the runs Python smdebug wrote (its `FileWriter` golden runs and the real
/// hooks' corpus) ends without `Error`: a tensor saved only as reductions (`fc2.weight` in
/// `pysmdebug_multi`, the gradients of `pt_two_workers`) is skipped where a rule needs its raw
/// value, as Python's rule invoker skips `TensorUnavailableForStep`; it used to put
/// ExplodingTensor, WeightUpdateRatio, AllZero and UnchangedTensor in `Error` and exit 2.
#[test]
fn default_rules_end_without_error_on_every_python_written_run() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../smdebug-io/tests/data");
    let mut runs = Vec::new();
    for corpus in ["golden", "hooks"] {
        for entry in std::fs::read_dir(data.join(corpus)).unwrap() {
            let path = entry.unwrap().path();
            if path.join("index").is_dir() {
                runs.push(path);
            }
        }
    }
    runs.sort();
    assert!(runs.len() >= 10, "{runs:?}");
    for run in &runs {
        let out = smdebug(&["rules", run.to_str().unwrap(), "--json"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let summary: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{}: {e}: {stderr}", run.display()));
        let failed: Vec<_> = summary["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["status"] == "Error")
            .map(|r| format!("{}: {}", r["rule"], r["message"]))
            .collect();
        assert!(failed.is_empty(), "{}: {failed:#?}", run.display());
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{}: exit {:?}: {stderr}",
            run.display(),
            out.status.code()
        );
    }
}
