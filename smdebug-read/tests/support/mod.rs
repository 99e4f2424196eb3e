//! Reading a run with our `Trial` and comparing everything with its `<run>.expected.json` (the
//! schema DEVELOPERS.md describes): the golden runs (Python smdebug's FileWriter) and the hook
//! corpus (Python smdebug's real framework hooks) share this check.
#![allow(dead_code)] // each test binary uses part of this module

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use smdebug_core::{DType, Mode};
use smdebug_read::Error;
use smdebug_read::trial::{TensorValue, Trial};

/// `tests/data/<corpus>/<name>` and its parsed expected.json.
pub fn expected_run(corpus: &str, name: &str) -> (PathBuf, Value) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../smdebug-io/tests/data")
        .join(corpus);
    let path = dir.join(format!("{name}.expected.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (dir.join(name), serde_json::from_str(&text).unwrap())
}

/// A value of an `expected.json`: a number, `true`/`false`, or `"nan"`, `"inf"`, `"-inf"`.
pub fn expected_value(v: &Value) -> f64 {
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

/// What [`check_run`] compared, for tests that want more than "no difference".
#[derive(Debug, Default)]
pub struct Checked {
    /// Every numeric dtype whose values were compared.
    pub dtypes: BTreeSet<DType>,
    /// String tensors (XGBoost's `trees/ID`, `trees/Feature`, ...): every string compared.
    pub string_tensors: usize,
}

/// Opens `name` of `corpus` with our Trial and checks workers, `num_workers`, completeness,
/// modes, steps per mode, collections, tensor names, and every value (by global step and by
/// mode step) against its expected.json.
pub fn check_run(corpus: &str, name: &str) -> Checked {
    let (path, expected) = expected_run(corpus, name);
    let trial =
        Trial::open(path.to_str().unwrap()).unwrap_or_else(|e| panic!("{name}: Trial::open: {e}"));
    let run = &expected["run"];

    let workers: Vec<String> = serde_json::from_value(run["workers"].clone()).unwrap();
    assert_eq!(trial.workers().unwrap(), workers, "{name}: workers");
    assert_eq!(
        trial.num_workers().unwrap() as u64,
        run["num_workers"].as_u64().unwrap(),
        "{name}: num_workers"
    );
    assert_eq!(
        trial.is_complete().unwrap(),
        run["complete"].as_bool().unwrap(),
        "{name}: complete"
    );
    let mut want_modes: Vec<Mode> = run["modes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().parse().unwrap())
        .collect();
    want_modes.sort();
    let mut got_modes = trial.modes().unwrap();
    got_modes.sort();
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
            let listed = trial
                .tensor_names_filtered(Some(cname), None)
                .unwrap_or_else(|e| panic!("{name}: tensors of collection {cname}: {e}"));
            for n in &names {
                assert!(listed.contains(n), "{name}: tensors of {cname} lack {n}");
            }
        }
    }

    let tensors = expected["tensors"].as_array().unwrap();
    assert!(!tensors.is_empty(), "{name}: no tensors expected");
    // The names Python's Trial lists: a reduction `smdebug/reductions/<red>/<tensor>` is
    // listed as its tensor.
    let want_names: BTreeSet<&str> = tensors
        .iter()
        .map(|t| {
            let n = t["name"].as_str().unwrap();
            n.strip_prefix("smdebug/reductions/")
                .and_then(|r| r.split_once('/'))
                .map_or(n, |(_, base)| base)
        })
        .collect();
    let got_names = trial.tensor_names().unwrap();
    assert_eq!(
        got_names
            .iter()
            .map(String::as_str)
            .collect::<BTreeSet<_>>(),
        want_names,
        "{name}: tensor names"
    );
    let mut checked = Checked::default();
    for t in tensors {
        let tname = t["name"].as_str().unwrap();
        let step = t["step"].as_u64().unwrap();
        let worker = t["worker"].as_str().unwrap();
        let mode: Mode = t["mode"].as_str().unwrap().parse().unwrap();
        let mode_step = t["mode_step"].as_u64().unwrap();
        let tensor = trial.tensor(tname).unwrap();
        assert!(
            tensor
                .workers(step, None)
                .unwrap()
                .iter()
                .any(|w| w == worker),
            "{name}: {tname}@{step}: worker {worker} not listed"
        );
        if t["dtype"] == "str" {
            // Read as numbers, a string tensor is an error of its own kind.
            let err = tensor
                .raw(step, None, Some(worker))
                .expect_err("string tensors have no numeric dtype");
            assert!(
                matches!(
                    err,
                    Error::Format(smdebug_format::Error::StringTensor { .. })
                ),
                "{err}"
            );
            let Ok(TensorValue::Strings(strings)) = tensor.read(step, None, Some(worker)) else {
                panic!("{name}: {tname}@{step}/{worker}: not read as strings");
            };
            let shape: Vec<usize> = serde_json::from_value(t["shape"].clone()).unwrap();
            assert_eq!(strings.shape(), &shape[..], "{name}: shape of {tname}");
            let want: Vec<String> = serde_json::from_value(t["values"].clone()).unwrap();
            assert_eq!(
                strings.to_strings().unwrap(),
                want,
                "{name}: {tname}@{step}"
            );
            let by_mode = tensor.read(mode_step, Some(mode), Some(worker)).unwrap();
            assert_eq!(
                by_mode,
                TensorValue::Strings(strings),
                "{name}: {tname} by mode step"
            );
            checked.string_tensors += 1;
            continue;
        }
        let raw = tensor
            .raw(step, None, Some(worker))
            .unwrap_or_else(|e| panic!("{name}: {tname}@{step}/{worker}: {e}"));
        let dtype = DType::from_name(t["dtype"].as_str().unwrap()).unwrap();
        checked.dtypes.insert(dtype);
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
        let by_mode = tensor.raw(mode_step, Some(mode), Some(worker)).unwrap();
        assert_eq!(by_mode, raw, "{name}: {tname} by mode step");
    }
    checked
}
