//! Runs written by our hook and writer, read by the real peers: Python smdebug 1.0.34's
//! `create_trial` (names, steps, modes, workers, collections, values) and TensorBoard's own event
//! loading (CRC-checked records, scalars and histograms).
//!
//! The Python side runs the scripts in tests/interop with `$SMDEBUG_PYTHON` (set by `.ci/test`
//! to the interop venv; `python3` otherwise). A missing Python package is a test failure with
//! the pip line to fix it, not a skip.

use std::path::{Path, PathBuf};
use std::process::Command;

use half::f16;
use serde_json::{Value, json};
use smdebug_core::{
    Collection, Hook, MemorySink, Mode, Record, ReductionConfig, SaveConfig, Sink, TensorView,
};
use smdebug_format::record::PayloadChecksum;
use smdebug_io::writer::Writer;
use smdebug_read::trial::JsonNumber;
use smdebug_storage::open_storage;

/// Forwards to the writer and keeps a copy of what was sent: the expected side of the check.
struct Tee {
    writer: Writer,
    seen: MemorySink,
}

impl Sink for Tee {
    fn send(&mut self, record: Record) {
        self.seen.send(record.clone());
        self.writer.send(record);
    }
}

fn python() -> String {
    std::env::var("SMDEBUG_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop")
        .join(name)
}

fn run_python(args: &[&str]) {
    let out = Command::new(python())
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {}: {e} (set SMDEBUG_PYTHON or run bash .ci/test)",
                python()
            )
        });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} {args:?} failed.\nIf smdebug or tensorboard is missing: pip install smdebug==1.0.34 'numpy<2' \
         'protobuf==3.20.3' tensorboard (or bash .ci/setup-python)\nstdout:\n{stdout}\nstderr:\n{stderr}",
        python()
    );
}

/// Deterministic values of every dtype Python's numpy can hold (bf16 has no numpy dtype).
fn save_everything(hook: &mut Hook, worker: usize, step: u64) {
    let k = (step as f32 + 1.0) * (worker as f32 + 1.0);
    let f32s: Vec<f32> = (0..6).map(|i| (i as f32 - 2.5) * k / 7.0).collect();
    let f64s: Vec<f64> = f32s.iter().map(|v| f64::from(*v) / 3.0).collect();
    let f16s: Vec<f16> = f32s.iter().map(|v| f16::from_f32(*v)).collect();
    let ints: Vec<i64> = (0..6).map(|i| (i - 3) * (step as i64 + 1) * 1000).collect();
    let shape = [2usize, 3];
    hook.save_tensor(
        "fc1.weight",
        &TensorView::from_slice(&f32s, &shape).unwrap(),
        &["weights"],
    );
    hook.save_tensor(
        "gradient/fc1.weight",
        &TensorView::from_slice(&f64s, &shape).unwrap(),
        &["gradients"],
    );
    hook.save_tensor(
        "dtype/float16",
        &TensorView::from_slice(&f16s, &shape).unwrap(),
        &["dtypes"],
    );
    let i8s: Vec<i8> = ints.iter().map(|v| (*v % 120) as i8).collect();
    let i16s: Vec<i16> = ints.iter().map(|v| *v as i16).collect();
    let i32s: Vec<i32> = ints.iter().map(|v| *v as i32 * 1000).collect();
    let u8s: Vec<u8> = ints
        .iter()
        .map(|v| (v.unsigned_abs() % 250) as u8)
        .collect();
    let u16s: Vec<u16> = ints.iter().map(|v| v.unsigned_abs() as u16).collect();
    let u32s: Vec<u32> = ints.iter().map(|v| v.unsigned_abs() as u32 * 7).collect();
    let u64s: Vec<u64> = ints
        .iter()
        .map(|v| v.unsigned_abs() * 1_000_000_007)
        .collect();
    let bools: Vec<bool> = ints.iter().map(|v| *v > 0).collect();
    hook.save_tensor(
        "dtype/int8",
        &TensorView::from_slice(&i8s, &shape).unwrap(),
        &["dtypes"],
    );
    hook.save_tensor(
        "dtype/int16",
        &TensorView::from_slice(&i16s, &shape).unwrap(),
        &["dtypes"],
    );
    hook.save_tensor(
        "dtype/int32",
        &TensorView::from_slice(&i32s, &shape).unwrap(),
        &["dtypes"],
    );
    hook.save_tensor(
        "dtype/int64",
        &TensorView::from_slice(&ints, &shape).unwrap(),
        &["dtypes"],
    );
    hook.save_tensor(
        "dtype/uint8",
        &TensorView::from_slice(&u8s, &shape).unwrap(),
        &["dtypes"],
    );
    hook.save_tensor(
        "dtype/uint16",
        &TensorView::from_slice(&u16s, &shape).unwrap(),
        &["dtypes"],
    );
    hook.save_tensor(
        "dtype/uint32",
        &TensorView::from_slice(&u32s, &shape).unwrap(),
        &["dtypes"],
    );
    hook.save_tensor(
        "dtype/uint64",
        &TensorView::from_slice(&u64s, &shape).unwrap(),
        &["dtypes"],
    );
    hook.save_tensor(
        "dtype/bool",
        &TensorView::from_slice(&bools, &shape).unwrap(),
        &["dtypes"],
    );
    hook.save_tensor(
        "act/relu_out",
        &TensorView::from_slice(&f32s, &[6]).unwrap(),
        &[],
    );
    hook.save_scalar(
        "loss",
        2.0 / (step as f64 + 1.0) + worker as f64,
        &["losses"],
    );
}

struct Written {
    expected: Value,
}

/// The workers of one job write one run: TRAIN steps, EVAL steps, TRAIN again.
fn write_run(dir: &Path, checksum: PayloadChecksum, workers: usize) -> Written {
    let mut tensors = Vec::new();
    let mut collections = Value::Null;
    let mut steps_global = std::collections::BTreeSet::new();
    let mut mode_steps: std::collections::BTreeMap<&str, std::collections::BTreeSet<u64>> =
        Default::default();
    for worker in 0..workers {
        let storage = open_storage(dir.to_str().unwrap()).unwrap();
        let writer = Writer::builder(storage)
            .worker_rank(worker)
            .checksum(checksum)
            .queue_capacity(1 << 14)
            .build()
            .unwrap();
        let seen = MemorySink::default();
        let mut hook = Hook::builder()
            .save_config(SaveConfig::every(1))
            .worker(worker, workers)
            .collection(
                Collection::new("gradients").with_reductions(ReductionConfig {
                    save_raw_tensor: true,
                    // zero_fraction is ours: the collections file must still load in Python.
                    reductions: ReductionConfig::parse_list("mean,abs_max,l2_norm,zero_fraction")
                        .unwrap(),
                    save_shape: false,
                }),
            )
            .collection(Collection::new("relus").with_regex("^act/relu").unwrap())
            .export_tensorboard(true)
            .build(Tee {
                writer,
                seen: seen.clone(),
            })
            .unwrap();
        for (mode, n) in [(Mode::Train, 3), (Mode::Eval, 2), (Mode::Train, 2)] {
            hook.set_mode(mode);
            for _ in 0..n {
                let step = hook.global_step();
                save_everything(&mut hook, worker, step);
                hook.step();
            }
        }
        collections = hook.collections_file().to_json()["collections"].clone();
        drop(hook); // closes the run and the writer
        for t in seen.tensors() {
            steps_global.insert(t.key.step);
            mode_steps
                .entry(t.key.mode.name())
                .or_default()
                .insert(t.key.mode_step);
            tensors.push(json!({
                "name": t.name,
                "step": t.key.step,
                "mode": t.key.mode.name(),
                "mode_step": t.key.mode_step,
                "worker": format!("worker_{worker}"),
                "dtype": t.tensor.dtype().name(),
                "shape": t.tensor.shape(),
                "values": t.tensor.to_f64_vec().into_iter().map(JsonNumber).collect::<Vec<_>>(),
            }));
        }
    }
    let colls: serde_json::Map<String, Value> = collections
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, c)| {
            (
                k.clone(),
                json!({"tensor_names": c["tensor_names"], "include_regex": c["include_regex"]}),
            )
        })
        .collect();
    let mut steps = serde_json::Map::new();
    steps.insert("GLOBAL".into(), json!(steps_global));
    for (m, s) in mode_steps {
        steps.insert(m.into(), json!(s));
    }
    Written {
        expected: json!({
            "run": {
                "workers": (0..workers).map(|w| format!("worker_{w}")).collect::<Vec<_>>(),
                "num_workers": workers,
                "complete": true,
                "write_checksum": checksum == PayloadChecksum::Crc32c,
                "modes": ["TRAIN", "EVAL"],
                "steps": steps,
                "collections": colls,
            },
            "tensors": tensors,
        }),
    }
}

/// Writes a run into a fresh temporary folder, with its expected.json beside it.
fn run_with_expected(
    checksum: PayloadChecksum,
    workers: usize,
) -> (tempfile::TempDir, PathBuf, PathBuf, Written) {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let w = write_run(&run, checksum, workers);
    let expected = dir.path().join("expected.json");
    std::fs::write(&expected, serde_json::to_vec_pretty(&w.expected).unwrap()).unwrap();
    (dir, run, expected, w)
}

fn check_with_smdebug(checksum: PayloadChecksum) {
    let (_dir, run, expected, _) = run_with_expected(checksum, 2);
    run_python(&[
        script("check_with_smdebug.py").to_str().unwrap(),
        run.to_str().unwrap(),
        expected.to_str().unwrap(),
    ]);
}

#[test]
fn python_smdebug_create_trial_reads_our_run() {
    check_with_smdebug(PayloadChecksum::SmdebugLegacy);
}

#[test]
fn python_smdebug_reads_names_and_crc_checked_records_of_a_real_crc_run() {
    check_with_smdebug(PayloadChecksum::Crc32c);
}

#[test]
fn tensorboard_loads_our_event_files_and_summaries() {
    // One worker: TensorBoard shows one series per (run, tag), so two workers' values at the same
    // step would be ambiguous to compare.
    let (dir, run, expected, w) = run_with_expected(PayloadChecksum::Crc32c, 1);
    // Every record of every event file passes TensorBoard's CRC-checking record reader and
    // holds the values we wrote.
    run_python(&[
        script("check_with_tensorboard.py").to_str().unwrap(),
        "--raw",
        run.to_str().unwrap(),
        expected.to_str().unwrap(),
    ]);
    // The TensorBoard summaries: the loss as a scalar per step, a histogram of the weights.
    let mut scalars = Vec::new();
    let mut histograms = Vec::new();
    for t in w.expected["tensors"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let values: Vec<f64> = t["values"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_f64())
            .collect();
        if name == "loss" {
            scalars.push(json!({"tag": "loss", "step": t["step"], "value": values[0]}));
        } else if name == "fc1.weight" {
            let min = values.iter().copied().fold(f64::INFINITY, f64::min);
            let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            histograms.push(json!({"tag": name, "step": t["step"], "num": values.len(), "min": min, "max": max}));
        }
    }
    assert!(!scalars.is_empty() && !histograms.is_empty());
    let tb_expected = dir.path().join("tb_expected.json");
    std::fs::write(
        &tb_expected,
        serde_json::to_vec_pretty(&json!({"scalars": scalars, "histograms": histograms})).unwrap(),
    )
    .unwrap();
    run_python(&[
        script("check_with_tensorboard.py").to_str().unwrap(),
        run.join("tensorboard").to_str().unwrap(),
        tb_expected.to_str().unwrap(),
    ]);
}
