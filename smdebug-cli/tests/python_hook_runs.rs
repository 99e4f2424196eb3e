//! The CLI on runs whose collections files Python smdebug's own hooks wrote (Python `re`
//! patterns with look-around): `info`, `tensors` and `rules` read them, and a pattern no engine
//! accepts is a warning on stderr (once, from every command that reads the run) and in
//! `info`, not an error.

mod support;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use smdebug_storage::testing::python;
use support::{smdebug, smdebug_command, stdout_ok};

/// Writes a run the way FRAMEWORK's Python hook would (its default collections), holding
/// `names`, with `smdebug-io/tests/interop/python_regex.py`.
fn python_hook_run(dir: &Path, framework: &str, names: &[&str]) -> String {
    let run = dir.join(framework).to_str().unwrap().to_string();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../smdebug-io/tests/interop/python_regex.py");
    let out = Command::new(python())
        .arg(script)
        .args(["hook-run", &run, framework])
        .args(names)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e} (set SMDEBUG_PYTHON)", python()));
    assert!(
        out.status.success(),
        "python_regex.py failed (bash .ci/setup-python):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    run
}

#[test]
fn info_tensors_and_rules_read_python_hook_runs() {
    let dir = tempfile::tempdir().unwrap();
    let torch = python_hook_run(
        dir.path(),
        "pytorch",
        &[
            "fc1.weight",
            "fc1.bias",
            "gradient/fc1.bias",
            "CrossEntropyLoss_output_0",
        ],
    );
    let info: Value = serde_json::from_str(&stdout_ok(&["info", &torch])).unwrap();
    assert_eq!(info["num_tensors"], 4);
    assert!(info.get("warnings").is_none(), "{info}");
    assert_eq!(
        stdout_ok(&["tensors", &torch, "--collection", "biases"]),
        "fc1.bias\n"
    );
    assert_eq!(
        stdout_ok(&["tensors", &torch, "--regex", "^(?!gradient).*bias"]),
        "fc1.bias\n"
    );
    let out = smdebug(&[
        "rules",
        &torch,
        "--rule",
        "ExplodingTensor:collection_names=biases",
        "--rule",
        "AllZero:tensor_regex=^(?!gradient).*weight",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let xgb = python_hook_run(dir.path(), "xgboost", &["train-rmse", "validation-auc"]);
    assert_eq!(
        stdout_ok(&["tensors", &xgb, "--collection", "losses"]),
        "train-rmse\n"
    );
}

#[test]
fn an_unusable_pattern_in_a_run_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let run = python_hook_run(dir.path(), "pytorch", &["fc1.weight", "fc1.bias"]);
    let file = Path::new(&run).join("collections/000000000/worker_0_collections.json");
    let mut json: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    // Python accepts the ASCII flag; the Rust engines do not.
    json["collections"]["weights"]["include_regex"] = serde_json::json!(["(?a)weight"]);
    std::fs::write(&file, json.to_string()).unwrap();

    let out = smdebug(&["info", &run]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Once, on a line of its own.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("(?a)weight"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("smdebug: warning: "), "{stderr}");
    let info: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["warnings"].as_array().map(Vec::len), Some(1), "{info}");
    assert_eq!(info["num_tensors"], 2);

    // Every command that reads the run says so, the rules too (they read it on their own).
    let out = smdebug(&["rules", &run, "--rule", "AllZero"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("(?a)weight").count(),
        1,
        "{stderr}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // SMDEBUG_LOG=off silences what the libraries log; the run is read all the same.
    let out = smdebug_command()
        .args(["info", &run])
        .env("SMDEBUG_LOG", "off")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn a_bad_rule_regex_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = python_hook_run(dir.path(), "pytorch", &["fc1.weight"]);
    let out = smdebug(&["rules", &run, "--rule", "AllZero:tensor_regex=(?<!fc"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("(?<!fc") && stderr.contains("AllZero"),
        "{stderr}"
    );
}
