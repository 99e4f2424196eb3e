//! The `smdebug` binary on runs written by Python smdebug 1.0.34's real PyTorch, Keras and
//! XGBoost hooks (smdebug-io/tests/data/hooks): `info`, `tensors`, `steps` and `value` print the
//! workers, names, steps, modes and every value Python's `create_trial` reads
//! (`<run>.expected.json`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

const RUNS: [&str; 8] = [
    "pt_healthy",
    "pt_bugs",
    "pt_exploding",
    "pt_overfit",
    "pt_two_workers",
    "tf_keras",
    "xgb_healthy",
    "xgb_bugs",
];

fn hooks(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../smdebug-io/tests/data/hooks")
        .join(name)
}

fn smdebug(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_smdebug"))
        .args(args)
        .output()
        .expect("the smdebug binary runs")
}

fn stdout_ok(args: &[&str]) -> String {
    let out = smdebug(args);
    assert!(
        out.status.success(),
        "smdebug {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn expected(name: &str) -> Value {
    let p = hooks(&format!("{name}.expected.json"));
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// A reduction `smdebug/reductions/<red>/<tensor>` is listed as `<tensor>`, as Python lists it.
fn listed_name(name: &str) -> &str {
    name.strip_prefix("smdebug/reductions/")
        .and_then(|r| r.split_once('/'))
        .map_or(name, |(_, base)| base)
}

#[test]
fn info_tensors_and_steps_match_python() {
    for name in RUNS {
        let run = hooks(name);
        let run = run.to_str().unwrap();
        let exp = expected(name);
        let info: Value = serde_json::from_str(&stdout_ok(&["info", run])).unwrap();
        assert_eq!(info["workers"], exp["run"]["workers"], "{name}");
        assert_eq!(info["num_workers"], exp["run"]["num_workers"], "{name}");
        assert_eq!(info["complete"], exp["run"]["complete"], "{name}");
        let mut modes: Vec<String> = serde_json::from_value(info["modes"].clone()).unwrap();
        modes.sort();
        assert_eq!(Value::from(modes), exp["run"]["modes"], "{name}");

        let names: BTreeSet<String> = stdout_ok(&["tensors", run])
            .lines()
            .map(String::from)
            .collect();
        let want: BTreeSet<String> = exp["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| listed_name(t["name"].as_str().unwrap()).to_string())
            .collect();
        assert_eq!(names, want, "{name}: tensors");

        for (mode, steps) in exp["run"]["steps"].as_object().unwrap() {
            let got: Vec<u64> = stdout_ok(&["steps", run, "--mode", mode])
                .lines()
                .map(|l| l.parse().unwrap())
                .collect();
            // `steps` prints global steps; the expected lists are mode steps for a mode.
            let want_global: Vec<u64> = exp["tensors"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| mode == "GLOBAL" || t["mode"] == mode.as_str())
                .map(|t| t["step"].as_u64().unwrap())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            assert_eq!(got, want_global, "{name}: steps --mode {mode}");
            assert_eq!(got.len(), steps.as_array().unwrap().len(), "{name}: {mode}");
        }
    }
}

#[test]
fn value_prints_every_value_python_reads() {
    for name in RUNS {
        let run = hooks(name);
        let run = run.to_str().unwrap();
        let exp = expected(name);
        // (tensor, worker) -> its records in step order
        let mut by_tensor: BTreeMap<(String, String), Vec<&Value>> = BTreeMap::new();
        for t in exp["tensors"].as_array().unwrap() {
            let key = (
                t["name"].as_str().unwrap().to_string(),
                t["worker"].as_str().unwrap().to_string(),
            );
            by_tensor.entry(key).or_default().push(t);
        }
        for ((tensor, worker), mut want) in by_tensor {
            want.sort_by_key(|t| t["step"].as_u64());
            let args = [
                "value",
                run,
                tensor.as_str(),
                "--all-steps",
                "--worker",
                worker.as_str(),
            ];
            if want[0]["dtype"] == "str" {
                // XGBoost's trees/ID, trees/Feature, ...: DT_STRING, which we do not read.
                let out = smdebug(&args);
                assert!(!out.status.success(), "{name}: {tensor}");
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(err.contains("string tensors are not supported"), "{err}");
                continue;
            }
            let got: Vec<Value> = stdout_ok(&args)
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(got.len(), want.len(), "{name}: {tensor} on {worker}");
            for (g, w) in got.iter().zip(&want) {
                for key in ["name", "step", "mode", "mode_step", "worker", "dtype", "shape"] {
                    assert_eq!(g[key], w[key], "{name}: {tensor} {key}");
                }
                assert_eq!(
                    g["values"], w["values"],
                    "{name}: {tensor} at step {}",
                    w["step"]
                );
            }
        }
    }
}
