//! `smdebug rules` on real runs: exit 0 when no rule found issues, 1 when one did, 2 on errors;
//! `--json` statuses; `--list`.

use std::process::{Command, Output};

use serde_json::Value;
use smdebug_core::{Hook, Mode, SaveConfig, TensorView};
use smdebug_io::writer::Writer;

fn write_run(dir: &std::path::Path, nan_at: Option<u64>) -> String {
    let run = dir.join("run");
    let run = run.to_str().unwrap().to_string();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(Writer::open(&run).unwrap())
        .unwrap();
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
    run
}

fn smdebug(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_smdebug"))
        .args(args)
        .output()
        .unwrap()
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
