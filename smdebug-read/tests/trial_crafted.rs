//! Property tests over crafted runs: any bytes in any file of a run give, for every tensor a
//! Trial lists, either that tensor's correct value or an error — never a panic, another tensor's
//! data, or memory beyond the read budget.
//!
//! The run is written with real payload CRCs (our writer's default), so a changed byte in a
//! record is caught by its checksum; what a checksum cannot vouch for — index files pointing
//! anywhere, records crafted with valid CRCs that claim huge tensors — is what the Trial's own
//! checks (offsets, tags, steps, the budget) must catch.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use prost::Message;
use serde_json::json;
use smdebug_core::{DType, Mode, Reduction, Tensor};
use smdebug_format::proto::{
    Event, Summary, TensorProto, TensorShapeProto, event, summary, tensor_shape_proto,
};
use smdebug_format::record::{PayloadChecksum, encode_record};
use smdebug_format::tensor::{EventStamp, mode_metadata};
use smdebug_format::{frame_tensor, layout};
use smdebug_read::trial::{Trial, TrialOptions};
use smdebug_testkit::alloc;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

/// The read budget of these tests, and what one read may hold on top of it: the record, the
/// decoded message and the tensor are each within the budget, `value()`'s `f64` copy is at most
/// 8 × (1-byte dtypes), plus bookkeeping.
const BUDGET: u64 = 4096;
const READ_ALLOWANCE: isize = 12 * BUDGET as isize + (64 << 10);

// ---- the base run ----

/// Every tensor of the base run, by (stored name, global step, worker).
type Values = BTreeMap<(String, u64, String), Tensor>;

/// Writes a run of 2 steps × 2 workers × 4 tensors (one a reduction), real CRCs, with Python
/// smdebug's collections file and the end marker, and returns every stored value.
fn write_base_run(run: &Path) -> Values {
    let collections = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../smdebug-io/tests/data/golden/pysmdebug_multi")
        .join(layout::collections_file("worker_0"));
    write(
        run,
        &layout::collections_file("worker_0"),
        &std::fs::read(collections).unwrap(),
    );
    write(run, layout::END_MARKER, b"");
    let mut values = Values::new();
    for step in 0..2u64 {
        for worker in ["worker_0", "worker_1"] {
            let seed = step as f32 * 10.0 + if worker == "worker_0" { 0.0 } else { 100.0 };
            let tensors = [
                (
                    "fc.weight".to_string(),
                    Tensor::from_vec(&[seed, seed + 1.0, seed + 2.0, seed + 3.0], vec![2, 2])
                        .unwrap(),
                ),
                (
                    "fc.bias".to_string(),
                    Tensor::from_vec(&[seed as i64, -7], vec![2]).unwrap(),
                ),
                (
                    "loss".to_string(),
                    Tensor::from_vec(&[seed * 0.5], vec![]).unwrap(),
                ),
                (
                    "smdebug/reductions/mean/fc.weight".to_string(),
                    Tensor::from_vec(&[seed + 1.5], vec![]).unwrap(),
                ),
            ];
            let stamp = EventStamp {
                wall_time: 1.0,
                step,
                mode: Mode::Train,
                mode_step: step,
            };
            let mut file = Vec::new();
            let mut payload = Vec::new();
            for (name, t) in &tensors {
                let rec = frame_tensor(name, t, stamp, PayloadChecksum::Crc32c);
                payload.push(json!({"tensorname": name, "start_idx": file.len(),
                                    "length": rec.len()}));
                file.extend_from_slice(&rec);
                values.insert((name.clone(), step, worker.to_string()), t.clone());
            }
            let event_file = layout::event_file(step, worker);
            write(run, &event_file, &file);
            let index = json!({"meta": {"mode": "TRAIN", "mode_step": step,
                                        "event_file_name": event_file},
                               "tensor_payload": payload, "shape_payload": []});
            write(
                run,
                &layout::index_file(step, worker),
                &serde_json::to_vec(&index).unwrap(),
            );
        }
    }
    values
}

fn write(run: &Path, rel: &str, bytes: &[u8]) {
    let path = run.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn run_files(run: &Path) -> Vec<String> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if e.file_type().unwrap().is_dir() {
                walk(&e.path(), &child, out);
            } else {
                out.push(child);
            }
        }
    }
    let mut out = Vec::new();
    walk(run, "", &mut out);
    out.sort();
    out
}

/// What to do to one file of the run.
#[derive(Clone, Debug)]
enum Damage {
    /// Overwrite bytes from a position (taken modulo the file's length).
    Overwrite {
        at: usize,
        bytes: Vec<u8>,
    },
    Truncate {
        at: usize,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    Replace {
        bytes: Vec<u8>,
    },
    /// Replace a decimal number in the file (an index's offsets, lengths, steps) by another.
    Number {
        nth: usize,
        value: u64,
    },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Damage::Overwrite { at, bytes }),
        any::<usize>().prop_map(|at| Damage::Truncate { at }),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Damage::Insert { at, bytes }),
        prop::collection::vec(any::<u8>(), 0..200).prop_map(|bytes| Damage::Replace { bytes }),
        (
            any::<usize>(),
            prop_oneof![
                0..2000u64,
                Just(u64::MAX),
                Just(u64::MAX - 15),
                Just(1 << 40)
            ]
        )
            .prop_map(|(nth, value)| Damage::Number { nth, value }),
    ]
}

fn apply(bytes: &[u8], damage: &Damage) -> Vec<u8> {
    let pos = |at: usize| {
        if bytes.is_empty() {
            0
        } else {
            at % bytes.len()
        }
    };
    let mut out = bytes.to_vec();
    match damage {
        Damage::Overwrite { at, bytes: new } => {
            let p = pos(*at);
            for (i, b) in new.iter().enumerate() {
                if let Some(x) = out.get_mut(p + i) {
                    *x = *b;
                }
            }
        }
        Damage::Truncate { at } => out.truncate(pos(*at)),
        Damage::Insert { at, bytes: new } => {
            let p = pos(*at);
            out.splice(p..p, new.iter().copied());
        }
        Damage::Replace { bytes: new } => out = new.clone(),
        Damage::Number { nth, value } => {
            let numbers = digit_runs(bytes);
            if !numbers.is_empty() {
                let (s, e) = numbers[nth % numbers.len()];
                out.splice(s..e, value.to_string().into_bytes());
            }
        }
    }
    out
}

/// Byte ranges of the runs of ASCII digits in `bytes`.
fn digit_runs(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, b) in bytes
        .iter()
        .copied()
        .enumerate()
        .chain([(bytes.len(), b' ')])
    {
        match (b.is_ascii_digit(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    out
}

fn options() -> TrialOptions {
    TrialOptions {
        auto_refresh: false,
        max_tensor_bytes: BUDGET,
        ..TrialOptions::default()
    }
}

/// Reads everything the trial lists; every value must be the base run's, under its own name,
/// step and worker.
fn check_every_value(trial: &Trial, values: &Values) {
    let Ok(names) = trial.tensor_names() else {
        return;
    };
    let steps = trial.steps(None).unwrap_or_default();
    let workers = trial.workers().unwrap_or_default();
    let mean: Reduction = "mean".parse().unwrap();
    for name in &names {
        let Ok(t) = trial.tensor(name) else { continue };
        for &step in &steps {
            for worker in &workers {
                let (got, peak) = alloc::thread_peak_during(|| t.raw(step, None, Some(worker)));
                assert!(
                    peak <= READ_ALLOWANCE,
                    "{name}@{step}/{worker}: {peak} bytes"
                );
                if let Ok(v) = got {
                    let want = values
                        .get(&(name.clone(), step, worker.clone()))
                        .unwrap_or_else(|| panic!("{name}@{step}/{worker}: a value never saved"));
                    assert_eq!(&v, want, "{name}@{step}/{worker}");
                }
                let (got, peak) =
                    alloc::thread_peak_during(|| t.reduction_value(step, mean, None, Some(worker)));
                assert!(
                    peak <= READ_ALLOWANCE,
                    "{name}@{step}/{worker}: {peak} bytes"
                );
                if let Ok(v) = got {
                    let want = &values[&(mean.tensor_name(name), step, worker.clone())];
                    assert_eq!(v.to_bits(), want.to_f64_vec()[0].to_bits());
                }
            }
        }
    }
}

/// Every step and worker's values read in one go (`Trial::values_at_step`) from one trial and
/// name by name (`TrialTensor::value`) from another on the same files: the same value (shape
/// and bits) or the same error for every name, the names the trial lists and one it does not.
fn check_step_reads_match_value(run: &Path) {
    let (Ok(batched), Ok(single)) = (
        Trial::open_with(run.to_str().unwrap(), options()),
        Trial::open_with(run.to_str().unwrap(), options()),
    ) else {
        return;
    };
    let Ok(mut names) = single.tensor_names() else {
        return;
    };
    names.push("never.saved".to_string());
    let steps = single.steps(None).unwrap_or_default();
    let mut workers: Vec<Option<String>> = vec![None];
    workers.extend(single.workers().unwrap_or_default().into_iter().map(Some));
    for step in steps.iter().copied().chain([7]) {
        for worker in &workers {
            let worker = worker.as_deref();
            let got = batched.values_at_step(&names, step, None, worker);
            assert_eq!(got.len(), names.len());
            for (name, got) in names.iter().zip(got) {
                let want = single
                    .tensor(name)
                    .and_then(|t| t.value(step, None, worker));
                match (&got, &want) {
                    (Ok(a), Ok(b)) => {
                        assert_eq!(a.shape(), b.shape(), "{name}@{step}/{worker:?}");
                        let bits = |v: &ndarray::ArrayD<f64>| -> Vec<u64> {
                            v.iter().map(|x| x.to_bits()).collect()
                        };
                        assert_eq!(bits(a), bits(b), "{name}@{step}/{worker:?}");
                    }
                    (Err(a), Err(b)) => {
                        assert_eq!(a.to_string(), b.to_string(), "{name}@{step}/{worker:?}")
                    }
                    _ => panic!("{name}@{step}/{worker:?}: one go {got:?}, by name {want:?}"),
                }
            }
        }
    }
}

/// A step with a damaged record (worker_0's `loss` at step 1, one byte of its payload changed)
/// and one without a record (worker_1's `fc.bias` at step 0, its index entry removed): read in
/// one go, the damaged record is its checksum error and the missing one the worker's, the
/// other values are the saved ones, and every answer is what reading each value on its own
/// gives.
#[test]
fn a_damaged_and_a_missing_record_read_in_one_go_as_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let values = write_base_run(&run);
    let entry = |step: u64, worker: &str, name: &str| {
        let index: serde_json::Value = serde_json::from_slice(
            &std::fs::read(run.join(layout::index_file(step, worker))).unwrap(),
        )
        .unwrap();
        let entry = index["tensor_payload"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["tensorname"] == name)
            .unwrap()
            .clone();
        (index, entry)
    };
    let (_, loss) = entry(1, "worker_0", "loss");
    let at = loss["start_idx"].as_u64().unwrap() as usize + 20;
    let event_file = run.join(layout::event_file(1, "worker_0"));
    let mut bytes = std::fs::read(&event_file).unwrap();
    bytes[at] ^= 0x01;
    std::fs::write(&event_file, bytes).unwrap();
    let (mut index, _) = entry(0, "worker_1", "fc.bias");
    index["tensor_payload"]
        .as_array_mut()
        .unwrap()
        .retain(|e| e["tensorname"] != "fc.bias");
    write(
        &run,
        &layout::index_file(0, "worker_1"),
        &serde_json::to_vec(&index).unwrap(),
    );

    let trial = Trial::open_with(run.to_str().unwrap(), options()).unwrap();
    let names = ["fc.bias", "fc.weight", "loss"];
    for step in 0..2u64 {
        for worker in ["worker_0", "worker_1"] {
            let got = trial.values_at_step(&names, step, None, Some(worker));
            for (name, got) in names.iter().zip(got) {
                match (*name, step, worker) {
                    ("loss", 1, "worker_0") => {
                        let e = got.unwrap_err();
                        assert!(e.is_unreadable_record(), "{e}");
                    }
                    ("fc.bias", 0, "worker_1") => {
                        let e = got.unwrap_err();
                        assert!(!e.is_unreadable_record(), "{e}");
                        // The step is there, from a worker that did not save this tensor.
                        assert!(
                            matches!(e, smdebug_read::Error::WorkerNotFound { .. }),
                            "{e}"
                        );
                    }
                    _ => {
                        let want = &values[&(name.to_string(), step, worker.to_string())];
                        assert_eq!(got.unwrap(), want.to_array_f64(), "{name}@{step}/{worker}");
                    }
                }
            }
        }
    }
    check_step_reads_match_value(&run);
}

/// The base run at `run` with one of its files (`file_pick`, wrapped around its files) damaged by
/// `damages` in turn; the values written.
fn write_damaged_run(run: &Path, file_pick: usize, damages: &[Damage]) -> Values {
    let values = write_base_run(run);
    let files = run_files(run);
    let rel = &files[file_pick % files.len()];
    let mut bytes = std::fs::read(run.join(rel)).unwrap();
    for d in damages {
        bytes = apply(&bytes, d);
    }
    std::fs::write(run.join(rel), &bytes).unwrap();
    values
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// One damaged file (any of the run's files, any damage): every read gives the right value
    /// or an error.
    #[test]
    fn any_damage_to_any_file_gives_the_right_value_or_an_error(
        file_pick in any::<usize>(),
        damages in prop::collection::vec(damage(), 1..4),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let values = write_damaged_run(&run, file_pick, &damages);
        if let Ok(trial) = Trial::open_with(run.to_str().unwrap(), options()) {
            check_every_value(&trial, &values);
        }
    }

    /// One damaged file: a step's values read in one go are, name by name, what reading each
    /// value on its own gives (the value, or the same error).
    #[test]
    fn a_steps_values_read_in_one_go_are_those_read_one_by_one(
        file_pick in any::<usize>(),
        damages in prop::collection::vec(damage(), 1..4),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        write_damaged_run(&run, file_pick, &damages);
        check_step_reads_match_value(&run);
    }

    /// An index file that moves entries onto each other's records (never another tensor's
    /// data), or names another step's event file (refused when the run is opened).
    #[test]
    fn shuffled_index_entries_never_give_another_tensors_data(
        perm in Just((0..4usize).collect::<Vec<_>>()).prop_shuffle(),
        other_step in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let values = write_base_run(&run);
        let rel = layout::index_file(1, "worker_0");
        let mut index: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run.join(&rel)).unwrap()).unwrap();
        let entries = index["tensor_payload"].as_array().unwrap().clone();
        for (i, j) in perm.iter().enumerate() {
            index["tensor_payload"][i]["start_idx"] = entries[*j]["start_idx"].clone();
            index["tensor_payload"][i]["length"] = entries[*j]["length"].clone();
        }
        if other_step {
            index["meta"]["event_file_name"] = json!(layout::event_file(0, "worker_0"));
        }
        write(&run, &rel, &serde_json::to_vec(&index).unwrap());
        match Trial::open_with(run.to_str().unwrap(), options()) {
            Ok(trial) => {
                prop_assert!(!other_step, "an index naming another step's event file opened");
                check_every_value(&trial, &values);
            }
            Err(e) => prop_assert!(other_step, "{e}"),
        }
    }

    /// Records with valid CRCs that claim any shape with any typed values: the read stays
    /// within the budget, and a value comes back only when it fits.
    #[test]
    fn crafted_records_never_take_memory_beyond_the_budget(
        dtype in prop::sample::select(DType::ALL.to_vec()),
        dims in prop::collection::vec(
            prop_oneof![0..4i64, 1..100_000i64, Just(1i64 << 33), Just(i64::MAX)], 0..4),
        floats in prop::collection::vec(any::<f32>(), 0..3),
        ints in prop::collection::vec(any::<i64>(), 0..3),
        content in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let proto = TensorProto {
            dtype: dtype.tf_datatype(),
            tensor_shape: Some(TensorShapeProto {
                dim: dims.iter().map(|&size| tensor_shape_proto::Dim {
                    size, name: String::new(),
                }).collect(),
                unknown_rank: false,
            }),
            tensor_content: content,
            float_val: floats.clone(),
            double_val: floats.iter().map(|&f| f64::from(f)).collect(),
            half_val: ints.iter().map(|&i| i as i32).collect(),
            int_val: ints.iter().map(|&i| i as i32).collect(),
            int64_val: ints.clone(),
            bool_val: ints.iter().map(|&i| i % 2 == 0).collect(),
            uint32_val: ints.iter().map(|&i| i as u32).collect(),
            uint64_val: ints.iter().map(|&i| i as u64).collect(),
            ..Default::default()
        };
        let payload = Event {
            wall_time: 0.0,
            step: 0,
            what: Some(event::What::Summary(Summary {
                value: vec![summary::Value {
                    tag: "t".to_string(),
                    metadata: Some(mode_metadata(Mode::Train, 0)),
                    value: Some(summary::value::Value::Tensor(proto)),
                    ..Default::default()
                }],
            })),
        }
        .encode_to_vec();
        let record = encode_record(&payload, PayloadChecksum::Crc32c);
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let event_file = layout::event_file(0, "worker_0");
        write(&run, &event_file, &record);
        let index = json!({"meta": {"mode": "TRAIN", "mode_step": 0, "event_file_name": event_file},
                           "tensor_payload": [{"tensorname": "t", "start_idx": 0,
                                               "length": record.len()}]});
        write(&run, &layout::index_file(0, "worker_0"), &serde_json::to_vec(&index).unwrap());
        let trial = Trial::open_with(run.to_str().unwrap(), options()).unwrap();
        let t = trial.tensor("t").unwrap();
        let (got, peak) = alloc::thread_peak_during(|| t.value(0, None, None));
        prop_assert!(peak <= READ_ALLOWANCE, "{peak} bytes for {dtype} {dims:?}");
        if let Ok(v) = got {
            prop_assert!((v.len() * dtype.size()) as u64 <= BUDGET);
            let want: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
            prop_assert_eq!(v.shape(), want.as_slice());
        }
    }
}
