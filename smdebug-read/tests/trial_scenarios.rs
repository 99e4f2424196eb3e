//! The differential scenarios (`tests/interop/scenarios.py`), replayed through the Rust `Trial`.
//!
//! Each scenario in `tests/data/scenarios/` was written by Python smdebug 1.0.34's own
//! `FileWriter` and `CollectionManager` and read by `smdebug.trials.create_trial` and
//! `smdebug_rs`; `<name>.json` holds its ops: the stages (files the scenario wrote, kept in
//! `<name>/stage_<k>/`), opening the trial, and every query with Python smdebug's answer (and
//! smdebug_rs's, where it differs on purpose). Here the stages are copied into a run directory
//! one by one, the later ones while the trial is open (a live run), and every query is asked of
//! the Rust `Trial` and compared with the recorded answer.
//!
//! The trial never refreshes on a timer here (`refresh_interval` is `Duration::MAX`): a query
//! that must see new files looks for them itself, or the answer differs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use smdebug_core::{DType, Mode, PyRegex, Reduction, Tensor};
use smdebug_read::Error;
use smdebug_read::trial::{StepRange, StepState, TensorValue, Trial, TrialOptions};

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../smdebug-io/tests/data/scenarios")
}

fn mode_of(args: &Value) -> Option<Mode> {
    args.get("mode")
        .and_then(Value::as_str)
        .map(|m| Mode::from_name(m).unwrap_or_else(|| panic!("mode {m}")))
}

/// A number of a value as the recorded answers hold it: NaN and infinities as strings.
fn number(x: f64) -> Value {
    if x.is_nan() {
        json!("nan")
    } else if x.is_infinite() {
        json!(if x > 0.0 { "inf" } else { "-inf" })
    } else {
        json!(x)
    }
}

/// A numeric value as `scenarios.array_json` writes it: numpy's dtype, shape, values.
fn tensor_json(t: &Tensor) -> Value {
    let b = t.bytes();
    let values: Vec<Value> = match t.dtype() {
        DType::I8 => b.iter().map(|x| json!(*x as i8)).collect(),
        DType::U8 => b.iter().map(|x| json!(*x)).collect(),
        DType::Bool => b.iter().map(|x| json!(*x != 0)).collect(),
        DType::I16 => each::<2>(b, |c| json!(i16::from_le_bytes(c))),
        DType::U16 => each::<2>(b, |c| json!(u16::from_le_bytes(c))),
        DType::I32 => each::<4>(b, |c| json!(i32::from_le_bytes(c))),
        DType::U32 => each::<4>(b, |c| json!(u32::from_le_bytes(c))),
        DType::I64 => each::<8>(b, |c| json!(i64::from_le_bytes(c))),
        DType::U64 => each::<8>(b, |c| json!(u64::from_le_bytes(c))),
        _ => t.to_f64_vec().into_iter().map(number).collect(),
    };
    json!({"dtype": t.dtype().name(), "shape": t.shape(), "values": values})
}

/// Each `N`-byte element of `b` as a value.
fn each<const N: usize>(b: &[u8], f: impl Fn([u8; N]) -> Value) -> Vec<Value> {
    b.chunks_exact(N)
        .map(|c| f(c.try_into().expect("N bytes")))
        .collect()
}

/// Any value as the recorded answers hold it: numbers as [`tensor_json`], strings with
/// numpy's `<U{longest}` dtype, as numpy makes of a list of `str`.
fn value_json(v: &TensorValue) -> Value {
    match v {
        TensorValue::Numbers(bytes) => tensor_json(&bytes.to_tensor()),
        TensorValue::Strings(s) => {
            let texts: Vec<String> = s
                .values()
                .iter()
                .map(|b| String::from_utf8(b.clone()).expect("UTF-8 in the scenarios"))
                .collect();
            let longest = texts.iter().map(|t| t.chars().count()).max().unwrap_or(0);
            json!({"dtype": format!("<U{}", longest.max(1)), "shape": s.shape(), "values": texts})
        }
    }
}

fn error(e: Error) -> Value {
    json!({"error": e.smdebug_exception()})
}

fn answer(r: smdebug_read::Result<Value>) -> Value {
    r.unwrap_or_else(error)
}

/// `tensor_names(step, mode, regex, collection)` as smdebug answers it.
fn tensor_names(trial: &Trial, args: &Value) -> smdebug_read::Result<Value> {
    let step = args.get("step").and_then(Value::as_u64);
    let mut names = trial.tensor_names_in(step, mode_of(args))?;
    if let Some(c) = args.get("collection").and_then(Value::as_str) {
        // Python's `collection(name)` creates an unknown collection, empty; the Rust Trial
        // says it is unknown (a documented difference of the API, not of the answer).
        let members = match trial.tensor_names_filtered(Some(c), None) {
            Err(Error::CollectionNotFound { .. }) => Vec::new(),
            other => other?,
        };
        names.retain(|n| members.contains(n));
    } else if let Some(r) = args.get("regex") {
        let patterns: Vec<PyRegex> = match r {
            Value::String(p) => vec![PyRegex::new(p).unwrap()],
            Value::Array(ps) => ps
                .iter()
                .map(|p| PyRegex::new(p.as_str().unwrap()).unwrap())
                .collect(),
            other => panic!("regex {other}"),
        };
        names.retain(|n| patterns.iter().any(|p| p.is_match(n)));
    }
    Ok(json!(names))
}

fn state_name(s: StepState) -> &'static str {
    match s {
        StepState::Available => "AVAILABLE",
        StepState::NotYetAvailable => "NOT_YET_AVAILABLE",
        StepState::Unavailable => "UNAVAILABLE",
    }
}

/// One query of the smdebug API, asked of the Rust `Trial`.
fn ask(trial: &Trial, q: &str, args: &Value) -> Value {
    let mode = mode_of(args);
    let step = || args["step"].as_u64().expect("step");
    let worker = args.get("worker").and_then(Value::as_str);
    let incomplete = args
        .get("incomplete")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let tensor = || trial.tensor(args["tensor"].as_str().expect("tensor"));
    let r: smdebug_read::Result<Value> = (|| match q {
        "steps" if incomplete => Ok(json!(trial.all_steps(mode)?)),
        "steps" => Ok(json!(trial.steps(mode)?)),
        "tensor_names" => tensor_names(trial, args),
        "workers" => Ok(json!(trial.workers()?)),
        "modes" => {
            let mut names: Vec<&str> = trial
                .modes()?
                .into_iter()
                .filter(|m| *m != Mode::Global)
                .map(Mode::name)
                .collect();
            names.sort_unstable();
            Ok(json!(names))
        }
        "num_workers" => Ok(json!(trial.num_workers()?)),
        "last_complete_step" => Ok(json!(trial.last_complete_step()?.map_or(-1, |s| s as i64))),
        "loaded_all_steps" => Ok(json!(trial.is_complete()?)),
        "has_passed_step" => Ok(json!(state_name(trial.has_passed_step(step(), mode)?))),
        "wait_for_steps" => {
            let steps: Vec<u64> = serde_json::from_value(args["steps"].clone()).unwrap();
            // The scenarios only wait where the answer is there already.
            trial.wait_for_steps(&steps, mode, Duration::from_secs(10))?;
            Ok(Value::Null)
        }
        "set_dynamic_refresh" => {
            trial.set_auto_refresh(args["on"].as_bool().expect("on"));
            Ok(Value::Null)
        }
        "global_step" => Ok(json!(
            trial.global_step(mode.unwrap_or(Mode::Global), step())?
        )),
        "mode_modestep" => Ok(match trial.step_mode(step())? {
            Some((m, s)) => json!([m.name(), s]),
            None => json!([null, null]),
        }),
        "has_tensor" => match tensor() {
            Ok(_) => Ok(json!(true)),
            Err(Error::TensorNotFound { .. }) => Ok(json!(false)),
            Err(e) => Err(e),
        },
        "tensor" => Ok(json!(tensor()?.name())),
        "tensor_steps" if incomplete => Ok(json!(tensor()?.all_steps(mode)?)),
        "tensor_steps" => Ok(json!(tensor()?.steps(mode)?)),
        "value" => Ok(value_json(&tensor()?.read(step(), mode, worker)?)),
        "values" => {
            let t = tensor()?;
            let mut out = BTreeMap::new();
            for s in t.steps(mode)? {
                out.insert(s.to_string(), value_json(&t.read(s, mode, worker)?));
            }
            Ok(json!(out))
        }
        "tensor_workers" => {
            let t = tensor()?;
            let workers = t.workers(step(), mode)?;
            if workers.is_empty() {
                // smdebug's Tensor.workers raises for a step the tensor was not saved at.
                return Ok(json!({"error": "TensorUnavailableForStep"}));
            }
            Ok(json!(workers))
        }
        "reduction_value" => {
            // The scenarios ask for saved reductions: read the stored tensor, with its dtype.
            let op = args["reduction"].as_str().unwrap();
            let abs = args.get("abs").and_then(Value::as_bool).unwrap_or(false);
            let name = tensor()?.name().to_string();
            let reduction: Reduction = format!("{}{op}", if abs { "abs_" } else { "" })
                .parse()
                .unwrap();
            let stored = trial.tensor(&reduction.tensor_name(&name))?;
            Ok(tensor_json(&stored.raw(step(), mode, worker)?))
        }
        other => panic!("unknown query {other}"),
    })();
    answer(r)
}

/// Copies stage `k` of scenario `name` into `run`.
fn copy_stage(name: &str, k: u64, files: &[Value], run: &Path) {
    let from = scenarios_dir().join(name).join(format!("stage_{k}"));
    for rel in files {
        let rel = rel.as_str().unwrap();
        let to = run.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from.join(rel), &to).unwrap_or_else(|e| panic!("{name}: {rel}: {e}"));
    }
}

fn options(o: &Value) -> TrialOptions {
    let end = |i: usize| o["range_steps"].get(i).and_then(Value::as_u64);
    TrialOptions {
        range_steps: StepRange {
            start: end(0),
            end: end(1),
        },
        incomplete_step_window: o.get("window").and_then(Value::as_u64).unwrap_or(1000),
        require_collections: true,
        refresh_interval: Duration::MAX,
        ..TrialOptions::default()
    }
}

fn recorded(name: &str) -> Value {
    let path = scenarios_dir().join(format!("{name}.json"));
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

/// Replays scenario `name`; the differences from the recorded answers, one line each.
fn replay(name: &str) -> Vec<String> {
    replay_ops(name, &recorded(name))
}

/// Replays the ops of `doc` on the stages of scenario `name`.
fn replay_ops(name: &str, doc: &Value) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let mut trial: Option<Trial> = None;
    let mut differences = Vec::new();
    for op in doc["ops"].as_array().unwrap() {
        let expected = op.get("ours").unwrap_or(&op["answer"]);
        match op["op"].as_str().unwrap() {
            "stage" => copy_stage(
                name,
                op["stage"].as_u64().unwrap(),
                op["files"].as_array().unwrap(),
                &run,
            ),
            "open" => {
                let got = match Trial::open_with(run.to_str().unwrap(), options(&op["options"])) {
                    Ok(t) => {
                        trial = Some(t);
                        json!("ok")
                    }
                    Err(e) => error(e),
                };
                if &got != expected {
                    differences.push(format!("{name}: open: {got} != {expected}"));
                }
            }
            "ask" => {
                let t = trial.as_ref().expect("a query before the trial opened");
                let q = op["q"].as_str().unwrap();
                let got = ask(t, q, &op["args"]);
                if &got != expected {
                    differences.push(format!("{name}: {q}({}): {got} != {expected}", op["args"]));
                }
            }
            other => panic!("{name}: op {other}"),
        }
    }
    differences
}

fn scenario_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(scenarios_dir())
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension()? == "json").then(|| p.file_stem()?.to_str().map(str::to_string))?
        })
        .collect();
    names.sort();
    names
}

#[test]
fn every_scenario_reads_as_python_smdebug_reads_it() {
    let names = scenario_names();
    assert!(names.len() >= 40, "{} scenarios", names.len());
    let differences: Vec<String> = names.iter().flat_map(|n| replay(n)).collect();
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// The first five scenarios are the cases of issue 24, each replayed on its own.
#[test]
fn the_issue_cases_read_as_python_smdebug_reads_them() {
    for name in [
        "issue_workers_from_the_collections_file",
        "issue_trial_opened_before_the_data",
        "issue_range_steps",
        "issue_placeholder_index_entry",
        "issue_string_tensors",
    ] {
        let differences = replay(name);
        assert!(differences.is_empty(), "{}", differences.join("\n"));
    }
}

/// A replay that compared nothing would pass: every scenario asks something, and a wrong
/// recorded answer is caught.
#[test]
fn a_replay_notices_a_wrong_answer() {
    for name in scenario_names() {
        let asks = recorded(&name)["ops"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|op| op["op"] == "ask" || op["op"] == "open")
            .count();
        assert!(asks > 0, "{name} asks nothing");
    }
    let name = "issue_workers_from_the_collections_file";
    let mut wrong = recorded(name);
    for op in wrong["ops"].as_array_mut().unwrap() {
        if op["q"] == "steps" {
            op["answer"] = json!([0, 1]);
        }
    }
    let got = replay_ops(name, &wrong);
    assert!(
        got.iter().any(|d| d.contains("steps")),
        "a wrong answer went unnoticed: {got:?}"
    );
}
