//! Runs from other machines, other tools and object stores other people can write to: the
//! Trial returns a tensor's correct value or a clear error, never a panic, an abort, another
//! tensor's data, or an allocation a record merely claims.
//!
//! Most cases are Python smdebug's golden run with one file tampered with; the rest are one-record
//! runs built here (with real payload CRCs, so only what the test means to change differs).

use std::path::{Path, PathBuf};

use prost::Message;
use serde_json::{Value, json};
use smdebug_core::{DType, Mode, Reduction};
use smdebug_format::proto::{
    Event, Summary, TensorProto, TensorShapeProto, event, summary, tensor_shape_proto,
};
use smdebug_format::record::{PayloadChecksum, encode_record};
use smdebug_format::tensor::mode_metadata;
use smdebug_format::{layout, tensor::DEFAULT_MAX_TENSOR_BYTES};
use smdebug_read::Error;
use smdebug_read::trial::{Trial, TrialOptions};
use smdebug_testkit::files::copy_tree;

/// A copy of one of Python smdebug's golden runs, to tamper with.
fn golden_copy(name: &str) -> tempfile::TempDir {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../smdebug-io/tests/data/golden")
        .join(name);
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&src, &dir.path().join("run"));
    dir
}

fn run_of(dir: &tempfile::TempDir) -> String {
    dir.path().join("run").to_str().unwrap().to_string()
}

fn read_json(run: &str, rel: &str) -> Value {
    serde_json::from_slice(&std::fs::read(Path::new(run).join(rel)).unwrap()).unwrap()
}

fn write_json(run: &str, rel: &str, v: &Value) {
    let path = Path::new(run).join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec(v).unwrap()).unwrap();
}

/// The index entry of `name` in an index file's JSON.
fn entry_mut<'a>(index: &'a mut Value, name: &str) -> &'a mut Value {
    index["tensor_payload"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|e| e["tensorname"] == name)
        .unwrap_or_else(|| panic!("no index entry `{name}`"))
}

fn shape(dims: &[i64]) -> Option<TensorShapeProto> {
    Some(TensorShapeProto {
        dim: dims
            .iter()
            .map(|&size| tensor_shape_proto::Dim {
                size,
                name: String::new(),
            })
            .collect(),
        unknown_rank: false,
    })
}

fn tensor_value(tag: &str, proto: TensorProto) -> summary::Value {
    summary::Value {
        tag: tag.to_string(),
        metadata: Some(mode_metadata(Mode::Train, 0)),
        value: Some(summary::value::Value::Tensor(proto)),
        ..Default::default()
    }
}

fn f32_proto(values: &[f32]) -> TensorProto {
    TensorProto {
        dtype: DType::F32.tf_datatype(),
        tensor_shape: shape(&[values.len() as i64]),
        tensor_content: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

/// A run of one step holding one event record (real payload CRC) with these summary values,
/// listed in the index under `name`.
fn one_record_run(name: &str, values: Vec<summary::Value>) -> (tempfile::TempDir, String) {
    let payload = Event {
        wall_time: 1.0,
        step: 0,
        what: Some(event::What::Summary(Summary { value: values })),
    }
    .encode_to_vec();
    let record = encode_record(&payload, PayloadChecksum::Crc32c);
    let dir = tempfile::tempdir().unwrap();
    let run = run_of(&dir);
    let event_file = layout::event_file(0, "worker_0");
    let path = Path::new(&run).join(&event_file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &record).unwrap();
    write_json(
        &run,
        &layout::index_file(0, "worker_0"),
        &json!({"meta": {"mode": "TRAIN", "mode_step": 0, "event_file_name": event_file},
                "tensor_payload": [{"tensorname": name, "start_idx": 0, "length": record.len()}],
                "shape_payload": []}),
    );
    (dir, run)
}

fn value_err(run: &str, name: &str, options: TrialOptions) -> Error {
    let trial = Trial::open_with(run, options).unwrap();
    trial
        .tensor(name)
        .unwrap()
        .value(0, None, None)
        .expect_err("a value from a record that is not the tensor asked for")
}

// ---- 1. a record that claims a huge tensor ----

/// The 53-byte record of the issue: shape [2^33] and no values, which TensorFlow's fill rule
/// would expand to 32 GiB of zeros. Also one `float_val`, and the 8-byte dtypes (64 GiB).
#[test]
fn a_record_claiming_a_huge_tensor_is_refused_before_anything_is_allocated() {
    let huge = 1i64 << 33;
    let cases = [
        (DType::F32, TensorProto::default(), 4u128),
        (
            DType::F32,
            TensorProto {
                float_val: vec![1.0],
                ..Default::default()
            },
            4,
        ),
        (
            DType::F64,
            TensorProto {
                double_val: vec![1.0],
                ..Default::default()
            },
            8,
        ),
        (
            DType::I64,
            TensorProto {
                int64_val: vec![7],
                ..Default::default()
            },
            8,
        ),
    ];
    for (dtype, proto, width) in cases {
        let proto = TensorProto {
            dtype: dtype.tf_datatype(),
            tensor_shape: shape(&[huge]),
            ..proto
        };
        let (_dir, run) = one_record_run("loss", vec![tensor_value("loss", proto)]);
        let err = value_err(&run, "loss", TrialOptions::default());
        let Error::Format(smdebug_format::Error::TensorTooLarge {
            path,
            offset,
            tensor,
            claimed,
            limit,
            ..
        }) = &err
        else {
            panic!("{dtype}: {err}")
        };
        assert_eq!(path, &layout::event_file(0, "worker_0"));
        assert_eq!((*offset, tensor.as_str()), (0, "loss"));
        // The read converts to f64: 8 more bytes an element, counted before decoding.
        assert_eq!(*claimed, (width + 8) << 33, "{dtype}");
        assert_eq!(*limit, DEFAULT_MAX_TENSOR_BYTES);
        let text = err.to_string();
        for part in [
            path.as_str(),
            "byte 0",
            &claimed.to_string(),
            "max_tensor_bytes",
        ] {
            assert!(text.contains(part), "`{part}` missing from: {text}");
        }
    }
}

/// The budget is the reader's: a tensor one byte over it is refused, and raising it reads the
/// same record (TensorFlow's fill rule: the last value repeats). `value` converts to f64, so
/// 1000 float32 values cost 12,000 bytes: 4,000 decoded and 8,000 as f64.
#[test]
fn the_tensor_budget_can_be_raised() {
    let proto = TensorProto {
        dtype: DType::F32.tf_datatype(),
        tensor_shape: shape(&[1000]),
        float_val: vec![1.5],
        ..Default::default()
    };
    let (_dir, run) = one_record_run("w", vec![tensor_value("w", proto)]);
    let tight = TrialOptions {
        max_tensor_bytes: 11_999,
        ..TrialOptions::default()
    };
    let err = value_err(&run, "w", tight);
    assert!(
        matches!(
            err,
            Error::Format(smdebug_format::Error::TensorTooLarge {
                claimed: 12_000,
                limit: 11_999,
                ..
            })
        ),
        "{err}"
    );
    let enough = TrialOptions {
        max_tensor_bytes: 12_000,
        ..TrialOptions::default()
    };
    let v = Trial::open_with(&run, enough)
        .unwrap()
        .tensor("w")
        .unwrap()
        .value(0, None, None)
        .unwrap();
    assert_eq!(v.len(), 1000);
    assert!(v.iter().all(|&x| x == 1.5));
}

/// An index entry whose record is longer than the budget is not even fetched.
#[test]
fn a_record_longer_than_the_budget_is_not_read() {
    let (_dir, run) = one_record_run("w", vec![tensor_value("w", f32_proto(&[1.0; 64]))]);
    let options = TrialOptions {
        max_tensor_bytes: 100,
        ..TrialOptions::default()
    };
    let err = value_err(&run, "w", options);
    let Error::Format(smdebug_format::Error::TensorTooLarge {
        detail, claimed, ..
    }) = &err
    else {
        panic!("{err}")
    };
    assert!(detail.contains("record"), "{err}");
    assert!(*claimed > 256, "{err}");
}

// ---- 2. offsets ----

/// `start_idx + length` beyond u64, a 1-byte placeholder, a negative offset: each is an error
/// for that tensor at that step, raised when it is read and naming the index file and the entry
/// (it used to panic in `Bytes::slice`, then to make the whole run unreadable). The run opens;
/// the other tensors of the step, and the tensor at its other steps, read as before.
#[test]
fn an_index_entry_that_locates_no_record_fails_only_that_read() {
    for (name, field, bad, reason) in [
        ("loss", "start_idx", json!(u64::MAX - 10), "overflows"),
        ("loss", "length", json!(1), "less than a record's framing"),
        ("fc1.bias", "start_idx", json!(-3), "non-negative integer"),
    ] {
        let dir = golden_copy("pysmdebug_multi");
        let run = run_of(&dir);
        let rel = layout::index_file(0, "worker_0");
        let mut index = read_json(&run, &rel);
        let position = index["tensor_payload"]
            .as_array()
            .unwrap()
            .iter()
            .position(|e| e["tensorname"] == name)
            .unwrap();
        entry_mut(&mut index, name)[field] = bad;
        write_json(&run, &rel, &index);
        let trial = Trial::open(&run).unwrap_or_else(|e| panic!("{name} {field}: {e}"));
        assert!(trial.tensor_names().unwrap().contains(&name.to_string()));
        let err = trial
            .tensor(name)
            .unwrap()
            .value(0, None, Some("worker_0"))
            .unwrap_err();
        let Error::BadIndexEntry {
            path,
            position: at,
            tensor,
            reason: why,
        } = &err
        else {
            panic!("{name} {field}: {err}")
        };
        assert_eq!((path, *at, tensor.as_str()), (&rel, position, name));
        assert!(why.contains(reason) && why.contains(field), "{err}");
        let msg = err.to_string();
        assert!(msg.contains(&rel) && msg.contains(name), "{msg}");
        // The same step from the other worker, the next step, and the other tensors of the
        // step read as before.
        trial
            .tensor(name)
            .unwrap()
            .value(0, None, Some("worker_1"))
            .unwrap();
        trial.tensor(name).unwrap().value(1, None, None).unwrap();
        trial
            .tensor("fc1.weight")
            .unwrap()
            .value(0, None, Some("worker_0"))
            .unwrap();
        // Read step by step, the entry is an error of its own value.
        let step0 = trial
            .read_steps(None, None)
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        let bad: Vec<_> = step0
            .values
            .iter()
            .filter(|v| v.value.is_err())
            .map(|v| (v.name.to_string(), v.worker.to_string()))
            .collect();
        assert_eq!(bad, [(name.to_string(), "worker_0".to_string())]);
    }
}

/// An index entry past the end of its event file, and an empty event file: incomplete records
/// with the file and offset, before any slicing.
#[test]
fn an_index_entry_past_the_end_of_its_event_file_is_an_incomplete_record() {
    let dir = golden_copy("pysmdebug_multi");
    let run = run_of(&dir);
    let rel = layout::index_file(0, "worker_0");
    let mut index = read_json(&run, &rel);
    let event_file = index["meta"]["event_file_name"]
        .as_str()
        .unwrap()
        .to_string();
    let file_len = std::fs::metadata(Path::new(&run).join(&event_file))
        .unwrap()
        .len();
    entry_mut(&mut index, "loss")["start_idx"] = json!(file_len - 10);
    write_json(&run, &rel, &index);
    let trial = Trial::open(&run).unwrap();
    let err = trial
        .tensor("loss")
        .unwrap()
        .value(0, None, Some("worker_0"))
        .unwrap_err();
    assert!(
        matches!(&err, Error::Format(smdebug_format::Error::IncompleteRecord { path, offset, .. })
                 if *path == event_file && *offset == file_len - 10),
        "{err}"
    );

    std::fs::write(Path::new(&run).join(&event_file), b"").unwrap();
    let trial = Trial::open(&run).unwrap();
    let err = trial
        .tensor("fc1.bias")
        .unwrap()
        .value(0, None, Some("worker_0"))
        .unwrap_err();
    assert!(
        matches!(&err, Error::Format(smdebug_format::Error::IncompleteRecord { path, available: 0, .. }) if *path == event_file),
        "{err}"
    );
}

// ---- 3. another tensor's data under the asked name ----

/// The case: `loss` pointing at `fc1.bias`'s record used to print fc1.bias's value.
#[test]
fn an_index_entry_pointing_at_another_tensors_record_is_refused() {
    let dir = golden_copy("pysmdebug_multi");
    let run = run_of(&dir);
    let rel = layout::index_file(0, "worker_0");
    let mut index = read_json(&run, &rel);
    let bias = entry_mut(&mut index, "fc1.bias").clone();
    let loss = entry_mut(&mut index, "loss");
    loss["start_idx"] = bias["start_idx"].clone();
    loss["length"] = bias["length"].clone();
    write_json(&run, &rel, &index);
    let trial = Trial::open(&run).unwrap();
    let err = trial
        .tensor("loss")
        .unwrap()
        .value(0, None, Some("worker_0"))
        .unwrap_err();
    let Error::Format(smdebug_format::Error::WrongTensor {
        expected, found, ..
    }) = &err
    else {
        panic!("{err}")
    };
    assert_eq!(
        (expected.as_str(), found.as_str()),
        ("`loss`", "`fc1.bias`")
    );
    // The same through the CLI's JSON path.
    let err = trial
        .tensor_records(
            "loss",
            smdebug_read::trial::StepSelector::One(0),
            None,
            Some("worker_0"),
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Format(smdebug_format::Error::WrongTensor { .. })
        ),
        "{err}"
    );
    // The other worker's untouched index still reads.
    let v = trial
        .tensor("loss")
        .unwrap()
        .value(0, None, Some("worker_1"))
        .unwrap();
    assert_eq!(v.len(), 1);
}

/// Reductions are stored (and tagged) as `smdebug/reductions/<red>/<tensor>`, which is the name
/// the tag is checked against: `mean` pointing at `max`'s record is refused.
#[test]
fn a_reduction_is_read_only_under_its_own_tag() {
    let dir = golden_copy("pysmdebug_multi");
    let run = run_of(&dir);
    let trial = Trial::open(&run).unwrap();
    let mean: Reduction = "mean".parse().unwrap();
    let w = trial.tensor("fc2.weight").unwrap();
    let good = w.reduction_value(0, mean, None, Some("worker_0")).unwrap();
    assert!(good.is_finite());

    let rel = layout::index_file(0, "worker_0");
    let mut index = read_json(&run, &rel);
    let max = entry_mut(&mut index, "smdebug/reductions/max/fc2.weight").clone();
    let e = entry_mut(&mut index, "smdebug/reductions/mean/fc2.weight");
    e["start_idx"] = max["start_idx"].clone();
    e["length"] = max["length"].clone();
    write_json(&run, &rel, &index);
    let trial = Trial::open(&run).unwrap();
    let err = trial
        .tensor("fc2.weight")
        .unwrap()
        .reduction_value(0, mean, None, Some("worker_0"))
        .unwrap_err();
    let Error::Format(smdebug_format::Error::WrongTensor {
        expected, found, ..
    }) = &err
    else {
        panic!("{err}")
    };
    assert_eq!(expected, "`smdebug/reductions/mean/fc2.weight`");
    assert_eq!(found, "`smdebug/reductions/max/fc2.weight`");
}

/// An event file whose records are another step's (step 0's file copied over step 1's, with
/// step 0's index entries): the tags match, the step does not.
#[test]
fn a_record_of_another_step_is_refused() {
    let dir = golden_copy("pysmdebug_multi");
    let run = run_of(&dir);
    let step0 = read_json(&run, &layout::index_file(0, "worker_0"));
    let rel = layout::index_file(1, "worker_0");
    let mut index = read_json(&run, &rel);
    index["tensor_payload"] = step0["tensor_payload"].clone();
    write_json(&run, &rel, &index);
    std::fs::copy(
        Path::new(&run).join(layout::event_file(0, "worker_0")),
        Path::new(&run).join(layout::event_file(1, "worker_0")),
    )
    .unwrap();
    let trial = Trial::open(&run).unwrap();
    let err = trial
        .tensor("fc1.weight")
        .unwrap()
        .value(1, None, Some("worker_0"))
        .unwrap_err();
    let Error::Format(smdebug_format::Error::WrongTensor {
        expected, found, ..
    }) = &err
    else {
        panic!("{err}")
    };
    assert_eq!(expected, "`fc1.weight` at step 1");
    assert_eq!(found, "`fc1.weight` at step 0");
}

/// An index that names another step's event file is refused when the run is opened.
#[test]
fn an_index_naming_another_steps_event_file_is_a_bad_index() {
    let dir = golden_copy("pysmdebug_multi");
    let run = run_of(&dir);
    let rel = layout::index_file(1, "worker_0");
    let mut index = read_json(&run, &rel);
    index["meta"]["event_file_name"] = json!(layout::event_file(0, "worker_0"));
    write_json(&run, &rel, &index);
    let err = Trial::open(&run).err().expect("another step's event file");
    assert!(
        matches!(&err, Error::Format(smdebug_format::Error::BadIndex { path, reason, .. })
                 if *path == rel && reason.contains("step 1")),
        "{err}"
    );
}

/// An index file whose `event_file_name` is empty (hand-made and placeholder runs write one)
/// names no event file: the run opens (it used to fail as a whole, "event_file_name `` is not
/// the event file of step 1"), the step and its tensors are listed, and reading any of them at
/// that step of that worker is `BadIndexEntry` naming the file and the entry. Nothing is read
/// from the step's usual event file on the index's behalf, even when it holds records at the
/// offsets the entries give; the other worker's step and the other steps read as before.
#[test]
fn an_index_naming_no_event_file_fails_only_the_reads_of_that_step() {
    let dir = golden_copy("pysmdebug_multi");
    let run = run_of(&dir);
    let rel = layout::index_file(1, "worker_0");
    let mut index = read_json(&run, &rel);
    index["meta"]["event_file_name"] = json!("");
    write_json(&run, &rel, &index);
    assert!(
        Path::new(&run)
            .join(layout::event_file(1, "worker_0"))
            .exists(),
        "the usual event file is there, with the records the entries locate"
    );
    let names: Vec<String> = index["tensor_payload"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["tensorname"].as_str().unwrap().to_string())
        .collect();
    let trial = Trial::open(&run).unwrap_or_else(|e| panic!("the run opens: {e}"));
    assert!(trial.steps(None).unwrap().contains(&1));
    let listed = trial.tensor_names().unwrap();
    for (position, name) in names.iter().enumerate() {
        // Saved reductions are listed under their tensor's name.
        assert!(
            listed.contains(name) || name.starts_with("smdebug/reductions/"),
            "{name}"
        );
        let tensor = trial.tensor(name).unwrap();
        assert!(tensor.steps(None).unwrap().contains(&1), "{name}");
        let err = tensor.value(1, None, Some("worker_0")).unwrap_err();
        let Error::BadIndexEntry {
            path,
            position: at,
            tensor: which,
            reason,
        } = &err
        else {
            panic!("{name}: {err}")
        };
        assert_eq!((path, *at, which), (&rel, position, name));
        assert!(reason.contains("event_file_name"), "{err}");
        // The other worker's step 1 and worker_0's other steps read as before.
        tensor.value(1, None, Some("worker_1")).unwrap();
        tensor.value(0, None, Some("worker_0")).unwrap();
        tensor.value(2, None, Some("worker_0")).unwrap();
    }
    // Read step by step, each of worker_0's entries is an error of its own value.
    let step1 = trial
        .read_steps(None, None)
        .unwrap()
        .map(Result::unwrap)
        .find(|s| s.step == 1)
        .unwrap();
    let mut bad: Vec<_> = step1
        .values
        .iter()
        .filter(|v| v.value.is_err())
        .map(|v| (v.name.to_string(), v.worker.to_string()))
        .collect();
    bad.sort();
    let mut want: Vec<_> = names
        .iter()
        .map(|n| (n.clone(), "worker_0".to_string()))
        .collect();
    want.sort();
    assert_eq!(bad, want);
    assert!(step1.values.iter().any(|v| v.value.is_ok()));
}

/// One name listed twice in an index file used to mean "the last one wins", silently. The
/// later entry is still the one read (Python smdebug's reader does the same, and smdebug's Keras
/// hook writes metrics twice a step: see the `tf_keras` hook run), but the pair is a warning
/// naming both entries, and the later entry's record must carry the asked tag: here it is
/// `fc1.bias`'s record, so reading `loss` is an error, never `fc1.bias`'s data.
#[test]
fn a_tensor_listed_twice_in_an_index_file_is_a_warning_naming_both_and_never_another_tensors_data()
{
    let dir = golden_copy("pysmdebug_multi");
    let run = run_of(&dir);
    let rel = layout::index_file(0, "worker_0");
    let mut index = read_json(&run, &rel);
    let mut twin = entry_mut(&mut index, "fc1.bias").clone();
    twin["tensorname"] = json!("loss");
    index["tensor_payload"].as_array_mut().unwrap().push(twin);
    write_json(&run, &rel, &index);
    let trial = Trial::open(&run).expect("a repeated name does not make the run unreadable");
    let warnings = trial.warnings().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let w = &warnings[0];
    assert!(
        w.contains(&rel)
            && w.contains("`loss`")
            && w.contains("byte 1114")
            && w.contains("byte 164"),
        "{w}"
    );
    assert_eq!(trial.info().unwrap().warnings, warnings);
    let err = trial
        .tensor("loss")
        .unwrap()
        .value(0, Some(Mode::Train), Some("worker_0"))
        .expect_err("the later entry points at another tensor's record");
    assert!(
        matches!(
            err,
            Error::Format(smdebug_format::Error::WrongTensor { .. })
        ),
        "{err}"
    );
}

/// Two index files that both describe step 0 of worker_0 (`0_worker_0.json` parses as step 0
/// too): the second was skipped silently.
#[test]
fn two_index_files_for_one_step_of_one_worker_conflict() {
    let dir = golden_copy("pysmdebug_multi");
    let run = run_of(&dir);
    let rel = layout::index_file(0, "worker_0");
    let other = "index/000000000/0_worker_0.json";
    write_json(&run, other, &read_json(&run, &rel));
    let err = Trial::open(&run)
        .err()
        .expect("two index files for one step");
    let Error::ConflictingIndex {
        first,
        second,
        reason,
    } = &err
    else {
        panic!("{err}")
    };
    let mut both = [first.as_str(), second.as_str()];
    both.sort();
    assert_eq!(both, [rel.as_str(), other]);
    assert!(
        reason.contains("step 0") && reason.contains("worker_0"),
        "{err}"
    );
}

/// Workers that disagree on what a global step is.
#[test]
fn workers_that_disagree_on_a_steps_mode_conflict() {
    let dir = golden_copy("pysmdebug_multi");
    let run = run_of(&dir);
    let rel = layout::index_file(2, "worker_1");
    let mut index = read_json(&run, &rel);
    index["meta"]["mode"] = json!("EVAL");
    write_json(&run, &rel, &index);
    let err = Trial::open(&run).err().expect("a mode conflict");
    let Error::ConflictingIndex { second, reason, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(second, &rel);
    assert!(reason.contains("TRAIN") && reason.contains("EVAL"), "{err}");
}

/// A summary with several values: the one under the asked tag, wherever it is (it used to be the
/// first one); two under the asked tag are an error, and none is another tensor's record.
#[test]
fn a_summary_with_several_values_gives_the_value_under_the_asked_tag() {
    let (_dir, run) = one_record_run(
        "loss",
        vec![
            tensor_value("accuracy", f32_proto(&[0.9])),
            tensor_value("loss", f32_proto(&[2.5])),
        ],
    );
    let v = Trial::open(&run)
        .unwrap()
        .tensor("loss")
        .unwrap()
        .value(0, None, None)
        .unwrap();
    assert_eq!(v.iter().copied().collect::<Vec<_>>(), vec![2.5]);

    let (_dir, run) = one_record_run(
        "loss",
        vec![
            tensor_value("loss", f32_proto(&[2.5])),
            tensor_value("loss", f32_proto(&[3.5])),
        ],
    );
    let err = value_err(&run, "loss", TrialOptions::default());
    assert!(
        matches!(&err, Error::Format(smdebug_format::Error::CorruptRecord { reason, .. }) if reason.contains("several")),
        "{err}"
    );

    let (_dir, run) = one_record_run(
        "loss",
        vec![
            tensor_value("accuracy", f32_proto(&[0.9])),
            tensor_value("lr", f32_proto(&[0.1])),
        ],
    );
    let err = value_err(&run, "loss", TrialOptions::default());
    assert!(
        matches!(&err, Error::Format(smdebug_format::Error::WrongTensor { found, .. }) if found == "`accuracy`, `lr`"),
        "{err}"
    );
}

/// A reduction is one number: a record of several values under a reduction's name is an error,
/// not its first value.
#[test]
fn a_reduction_holding_several_values_is_an_error() {
    let name = "smdebug/reductions/mean/w";
    let (_dir, run) = one_record_run(name, vec![tensor_value(name, f32_proto(&[1.0, 2.0]))]);
    let trial = Trial::open(&run).unwrap();
    let err = trial
        .tensor("w")
        .unwrap()
        .reduction_value(0, "mean".parse().unwrap(), None, None)
        .unwrap_err();
    assert!(
        matches!(&err, Error::Format(smdebug_format::Error::CorruptRecord { reason, .. }) if reason.contains("2 values")),
        "{err}"
    );
}

/// An index that names another worker's event file of the same step: tags and steps match
/// there, so only the file name tells the values apart.
#[test]
fn an_index_naming_another_workers_event_file_is_a_bad_index() {
    let dir = golden_copy("pysmdebug_multi");
    let run = run_of(&dir);
    let rel = layout::index_file(0, "worker_0");
    let mut index = read_json(&run, &rel);
    index["meta"]["event_file_name"] = json!(layout::event_file(0, "worker_1"));
    write_json(&run, &rel, &index);
    let err = Trial::open(&run)
        .err()
        .expect("another worker's event file");
    let Error::Format(smdebug_format::Error::BadIndex { path, reason, .. }) = &err else {
        panic!("{err}")
    };
    assert_eq!(path, &rel);
    assert!(
        reason.contains("worker_1") && reason.contains("worker_0"),
        "{err}"
    );
}

// ---- 4. event files that change under a reader ----

/// An event file cut short after the trial listed the run, before it was read: with event files
/// mapped (the default) and read into memory alike, the records past the cut are incomplete
/// records naming the file, the records before it still read, and nothing faults.
#[test]
fn an_event_file_cut_short_after_listing_is_an_incomplete_record_not_a_crash() {
    for map_files in [true, false] {
        let dir = golden_copy("pysmdebug_multi");
        let run = run_of(&dir);
        let index = read_json(&run, &layout::index_file(0, "worker_0"));
        let event_file = index["meta"]["event_file_name"]
            .as_str()
            .unwrap()
            .to_string();
        let entries = index["tensor_payload"].as_array().unwrap();
        let at = |e: &Value| e["start_idx"].as_u64().unwrap();
        let first = entries.iter().min_by_key(|e| at(e)).unwrap();
        let last = entries.iter().max_by_key(|e| at(e)).unwrap();
        let (first_name, last_name) = (
            first["tensorname"].as_str().unwrap(),
            last["tensorname"].as_str().unwrap(),
        );
        let cut = at(last) + 5;

        let options = TrialOptions {
            map_files,
            ..TrialOptions::default()
        };
        let trial = Trial::open_with(&run, options).unwrap();
        let want_first = Trial::open(&run)
            .unwrap()
            .tensor(first_name)
            .unwrap()
            .raw(0, None, Some("worker_0"))
            .unwrap();
        let path = Path::new(&run).join(&event_file);
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(cut).unwrap();
        drop(file);

        let err = trial
            .tensor(last_name)
            .unwrap()
            .raw(0, None, Some("worker_0"))
            .unwrap_err();
        assert!(
            matches!(&err, Error::Format(smdebug_format::Error::IncompleteRecord { path, offset, available: 5, .. })
                     if *path == event_file && *offset == at(last)),
            "map_files {map_files}: {err}"
        );
        let got = trial
            .tensor(first_name)
            .unwrap()
            .raw(0, None, Some("worker_0"))
            .unwrap();
        assert_eq!(got, want_first, "map_files {map_files}");
        // The whole tensor at once reports the same error.
        let err = trial
            .tensor(last_name)
            .unwrap()
            .raw_values(None, Some("worker_0"))
            .unwrap_err();
        assert!(
            matches!(
                &err,
                Error::Format(smdebug_format::Error::IncompleteRecord { .. })
            ),
            "map_files {map_files}: {err}"
        );
    }
}

/// An event file replaced (as smdebug's writers publish files: a new file renamed over the old)
/// after the trial mapped it: the trial keeps reading the file it mapped.
#[test]
fn an_event_file_replaced_after_it_was_read_keeps_its_values() {
    let dir = golden_copy("pysmdebug_multi");
    let run = run_of(&dir);
    let trial = Trial::open(&run).unwrap();
    let t = trial.tensor("loss").unwrap();
    let before = t.raw(0, None, Some("worker_0")).unwrap();
    let index = read_json(&run, &layout::index_file(0, "worker_0"));
    let event_file = Path::new(&run).join(index["meta"]["event_file_name"].as_str().unwrap());
    let replacement = event_file.with_extension("new");
    std::fs::write(&replacement, b"not an event file").unwrap();
    std::fs::rename(&replacement, &event_file).unwrap();
    assert_eq!(t.raw(0, None, Some("worker_0")).unwrap(), before);
    assert_eq!(
        t.raw_bytes(0, None, Some("worker_0")).unwrap().to_tensor(),
        before
    );
}
