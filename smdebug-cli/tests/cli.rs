//! The `smdebug` binary on runs written by Python smdebug (its FileWriter and its real framework
//! hooks): output shapes that scripts rely on, and errors on stderr with a non-zero exit.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::{Value, json};
use support::{golden, smdebug, stdout_ok};

fn expected() -> Value {
    let p = golden("pysmdebug_multi.expected.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn info_is_json_with_workers_modes_steps_and_completeness() {
    let run = golden("pysmdebug_multi");
    let info: Value = serde_json::from_str(&stdout_ok(&["info", run.to_str().unwrap()])).unwrap();
    let exp = expected();
    assert_eq!(info["workers"], exp["run"]["workers"]);
    assert_eq!(info["num_workers"], exp["run"]["num_workers"]);
    assert_eq!(info["complete"], Value::Bool(true));
    assert_eq!(
        info["num_steps"].as_u64().unwrap() as usize,
        exp["run"]["steps"]["GLOBAL"].as_array().unwrap().len()
    );
    let modes: Vec<String> = serde_json::from_value(info["modes"].clone()).unwrap();
    assert!(modes.contains(&"TRAIN".to_string()) && modes.contains(&"EVAL".to_string()));
    let colls: Vec<String> = serde_json::from_value(info["collections"].clone()).unwrap();
    assert!(colls.contains(&"weights".to_string()));
}

#[test]
fn value_keeps_the_sign_of_zero_and_names_nan_and_inf() {
    // Python smdebug wrote −0.0, NaN, ±Inf, the largest and the smallest normal f32 and +0.0.
    let run = golden("pysmdebug_multi");
    let exp = expected();
    let t = exp["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "special/nan_inf_f32" && t["worker"] == "worker_0")
        .unwrap();
    let step = t["step"].as_u64().unwrap().to_string();
    let out = stdout_ok(&[
        "value",
        run.to_str().unwrap(),
        "special/nan_inf_f32",
        "--step",
        &step,
        "--worker",
        "worker_0",
    ]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let got = v["values"].as_array().unwrap();
    let want = t["values"].as_array().unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        match (g.as_f64(), w.as_f64()) {
            (Some(g), Some(w)) => assert_eq!(g.to_bits(), w.to_bits(), "{out}"),
            _ => assert_eq!(g, w, "{out}"),
        }
    }
    assert!(out.contains("-0.0"), "{out}");
}

#[test]
fn tensors_filter_by_collection_and_regex() {
    let run = golden("pysmdebug_multi");
    let run = run.to_str().unwrap();
    let weights = stdout_ok(&["tensors", run, "--collection", "weights"]);
    let lines: Vec<&str> = weights.lines().collect();
    assert_eq!(lines, vec!["fc1.bias", "fc1.weight", "fc2.weight"]);
    let grads = stdout_ok(&["tensors", run, "--regex", "^gradient/"]);
    assert_eq!(
        grads.lines().collect::<Vec<_>>(),
        vec!["gradient/fc1.bias", "gradient/fc1.weight"]
    );
}

#[test]
fn steps_are_global_steps_one_per_line() {
    let run = golden("pysmdebug_multi");
    let run = run.to_str().unwrap();
    let exp = expected();
    let all: Vec<u64> = stdout_ok(&["steps", run])
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let want: Vec<u64> = serde_json::from_value(exp["run"]["steps"]["GLOBAL"].clone()).unwrap();
    assert_eq!(all, want);
    let eval: Vec<u64> = stdout_ok(&["steps", run, "--mode", "EVAL"])
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let eval_count = exp["run"]["steps"]["EVAL"].as_array().unwrap().len();
    assert_eq!(eval.len(), eval_count);
    assert!(eval.iter().all(|s| want.contains(s)));
}

#[test]
fn value_prints_the_saved_values() {
    let run = golden("pysmdebug_multi");
    let run = run.to_str().unwrap();
    let exp = expected();
    let t = exp["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "fc1.weight" && t["worker"] == "worker_1")
        .unwrap();
    let step = t["step"].as_u64().unwrap().to_string();
    let out = stdout_ok(&[
        "value",
        run,
        "fc1.weight",
        "--step",
        &step,
        "--worker",
        "worker_1",
    ]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    for key in ["name", "step", "mode", "worker", "dtype", "shape", "values"] {
        assert_eq!(v[key], t[key], "field {key}");
    }

    let all = stdout_ok(&["value", run, "loss", "--all-steps", "--worker", "worker_0"]);
    let steps: Vec<u64> = all
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["step"]
                .as_u64()
                .unwrap()
        })
        .collect();
    let mut want: Vec<u64> = exp["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == "loss" && t["worker"] == "worker_0")
        .map(|t| t["step"].as_u64().unwrap())
        .collect();
    want.sort();
    assert_eq!(steps, want, "one object per line, in step order");
}

#[test]
fn errors_go_to_stderr_with_nonzero_exit() {
    let run = golden("pysmdebug_multi");
    let run = run.to_str().unwrap();
    for args in [
        vec!["info", "/no/such/run"],
        vec!["value", run, "no.such.tensor", "--step", "0"],
        vec!["value", run, "fc1.weight", "--step", "12345"],
        vec!["tensors", run, "--regex", "fc1("],
        vec!["steps", run, "--mode", "TRAINING"],
    ] {
        let out = smdebug(&args);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
        assert!(!out.stderr.is_empty(), "{args:?} said nothing on stderr");
    }
}

// Runs written by Python smdebug 1.0.34's real PyTorch, Keras and XGBoost hooks
// (smdebug-io/tests/data/hooks): `info`, `tensors`, `steps` and `value` print the workers,
// names, steps, modes and every value Python's `create_trial` reads (`<run>.expected.json`).

const HOOK_RUNS: [&str; 8] = [
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

fn hook_expected(name: &str) -> Value {
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
fn hook_runs_info_tensors_and_steps_match_python() {
    for name in HOOK_RUNS {
        let run = hooks(name);
        let run = run.to_str().unwrap();
        let exp = hook_expected(name);
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
fn hook_runs_value_prints_every_value_python_reads() {
    for name in HOOK_RUNS {
        let run = hooks(name);
        let run = run.to_str().unwrap();
        let exp = hook_expected(name);
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
            let got: Vec<Value> = stdout_ok(&args)
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(got.len(), want.len(), "{name}: {tensor} on {worker}");
            for (g, w) in got.iter().zip(&want) {
                for key in ["name", "step", "mode", "mode_step", "worker", "shape"] {
                    assert_eq!(g[key], w[key], "{name}: {tensor} {key}");
                }
                // XGBoost's trees/ID, trees/Feature, ...: strings, whose numpy dtype the
                // corpus records as `str` and `value` prints as `string`.
                let dtype = if w["dtype"] == "str" {
                    json!("string")
                } else {
                    w["dtype"].clone()
                };
                assert_eq!(g["dtype"], dtype, "{name}: {tensor} dtype");
                // Python writes 0.0 where we write 0: compare numbers as numbers.
                let same = |a: &Value, b: &Value| match (a.as_f64(), b.as_f64()) {
                    (Some(x), Some(y)) => x == y,
                    _ => a == b,
                };
                let (gv, wv) = (
                    g["values"].as_array().unwrap(),
                    w["values"].as_array().unwrap(),
                );
                assert!(
                    gv.len() == wv.len() && gv.iter().zip(wv).all(|(a, b)| same(a, b)),
                    "{name}: {tensor} at step {}: {gv:?} != {wv:?}",
                    w["step"]
                );
            }
        }
    }
}
