//! Runs written by Python smdebug 1.0.34 (committed under tests/data/golden, made by
//! tests/interop/make_golden.py) read back through our Trial with the same names, steps, modes,
//! workers, collections and values — for every dtype, several modes and two workers.

use std::path::PathBuf;

use serde_json::Value;
use smdebug_core::{DType, Mode};
use smdebug_io::trial::{StepState, Trial};

fn golden(name: &str) -> (PathBuf, Value) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden");
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("{name}.expected.json"))).unwrap(),
    )
    .unwrap();
    (dir.join(name), expected)
}

fn expected_value(v: &Value) -> f64 {
    match v {
        Value::String(s) if s == "nan" => f64::NAN,
        Value::String(s) if s == "inf" => f64::INFINITY,
        Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        Value::Bool(b) => f64::from(u8::from(*b)),
        other => other
            .as_f64()
            .unwrap_or_else(|| panic!("not a number: {other}")),
    }
}

fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b
}

fn check_run(name: &str) {
    let (path, expected) = golden(name);
    let trial = Trial::open(path.to_str().unwrap()).unwrap();
    let run = &expected["run"];

    let workers: Vec<String> = serde_json::from_value(run["workers"].clone()).unwrap();
    assert_eq!(trial.workers().unwrap(), workers, "{name}: workers");
    assert_eq!(
        trial.num_workers().unwrap() as u64,
        run["num_workers"].as_u64().unwrap()
    );
    assert_eq!(
        trial.is_complete().unwrap(),
        run["complete"].as_bool().unwrap(),
        "{name}: complete"
    );
    let modes: Vec<Mode> = run["modes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().parse().unwrap())
        .collect();
    let mut got_modes = trial.modes().unwrap();
    got_modes.sort();
    let mut want_modes = modes.clone();
    want_modes.sort();
    assert_eq!(got_modes, want_modes, "{name}: modes");
    for (mode, steps) in run["steps"].as_object().unwrap() {
        let mode: Mode = mode.parse().unwrap();
        let want: Vec<u64> = serde_json::from_value(steps.clone()).unwrap();
        assert_eq!(
            trial.steps(Some(mode)).unwrap(),
            want,
            "{name}: steps of {mode}"
        );
    }
    if let Some(colls) = run["collections"].as_object() {
        let got = trial.collections().unwrap();
        for (cname, c) in colls {
            let gc = got
                .iter()
                .find(|g| g.name() == cname)
                .unwrap_or_else(|| panic!("{name}: collection {cname} missing"));
            let names: Vec<String> = serde_json::from_value(c["tensor_names"].clone()).unwrap();
            for n in &names {
                assert!(gc.tensor_names().contains(n), "{name}: {cname} lacks {n}");
            }
            let listed = trial.tensor_names_filtered(Some(cname), None).unwrap();
            for n in &names {
                assert!(listed.contains(n), "{name}: tensors of {cname} lack {n}");
            }
        }
    }

    let tensors = expected["tensors"].as_array().unwrap();
    assert!(!tensors.is_empty());
    let mut dtypes_seen = std::collections::BTreeSet::new();
    for t in tensors {
        let tname = t["name"].as_str().unwrap();
        let step = t["step"].as_u64().unwrap();
        let worker = t["worker"].as_str().unwrap();
        let raw = trial
            .tensor(tname)
            .unwrap()
            .raw(step, None, Some(worker))
            .unwrap_or_else(|e| panic!("{name}: {tname}@{step}/{worker}: {e}"));
        let dtype = DType::from_name(t["dtype"].as_str().unwrap()).unwrap();
        dtypes_seen.insert(dtype);
        assert_eq!(raw.dtype(), dtype, "{name}: dtype of {tname}");
        let shape: Vec<usize> = serde_json::from_value(t["shape"].clone()).unwrap();
        assert_eq!(raw.shape(), &shape[..], "{name}: shape of {tname}");
        let want: Vec<f64> = t["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(expected_value)
            .collect();
        let got = raw.to_f64_vec();
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                same(*g, *w),
                "{name}: {tname}@{step}/{worker}[{i}]: {g} != {w}"
            );
        }
        // The mode and mode step agree with the index.
        let mode: Mode = t["mode"].as_str().unwrap().parse().unwrap();
        let mode_step = t["mode_step"].as_u64().unwrap();
        let by_mode = trial
            .tensor(tname)
            .unwrap()
            .raw(mode_step, Some(mode), Some(worker))
            .unwrap();
        assert_eq!(by_mode, raw, "{name}: {tname} by mode step");
    }
    if name == "pysmdebug_multi" {
        assert_eq!(
            dtypes_seen.len(),
            12,
            "every numpy dtype smdebug writes: {dtypes_seen:?}"
        );
    }
}

#[test]
fn reads_python_multi_worker_multi_mode_run_with_every_dtype() {
    check_run("pysmdebug_multi");
}

#[test]
fn reads_python_run_with_real_payload_checksums() {
    check_run("pysmdebug_checksum");
}

#[test]
fn reads_python_run_that_has_not_ended() {
    check_run("pysmdebug_incomplete");
    let (path, _) = golden("pysmdebug_incomplete");
    let trial = Trial::open(path.to_str().unwrap()).unwrap();
    assert_eq!(
        trial.has_passed_step(2, None).unwrap(),
        StepState::Available
    );
    assert_eq!(
        trial.has_passed_step(3, None).unwrap(),
        StepState::NotYetAvailable,
        "the run has not ended, step 3 may still come"
    );
}

#[test]
fn missing_tensor_step_and_run_are_clear_errors() {
    let (path, _) = golden("pysmdebug_multi");
    let trial = Trial::open(path.to_str().unwrap()).unwrap();
    let err = trial.tensor("no/such/tensor").err().unwrap().to_string();
    assert!(err.contains("no/such/tensor"), "{err}");
    let err = trial
        .tensor("fc1.weight")
        .unwrap()
        .value(999, None, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("999") && err.contains("fc1.weight"), "{err}");
    let err = trial
        .tensor("fc1.weight")
        .unwrap()
        .value(0, None, Some("worker_9"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("worker_9"), "{err}");
    let err = Trial::open("/nonexistent/run/dir")
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("/nonexistent/run/dir"), "{err}");
    assert_eq!(
        trial.has_passed_step(999, None).unwrap(),
        StepState::Unavailable
    );
}
