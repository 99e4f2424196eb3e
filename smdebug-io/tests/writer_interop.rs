//! Runs written by our writer, checked by Python smdebug 1.0.34's reader and TensorBoard's event
//! loader, through the scripts in tests/interop (the same checks the golden runs pass).
//!
//! Python comes from `$SMDEBUG_PYTHON` (what `bash .ci/setup-python` prints) or `python3`; if
//! smdebug or TensorBoard is not importable the test fails and says how to install them.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use smdebug_core::{
    Collection, CollectionsFile, EndReason, Hook, Mode, Record, SaveConfig, Sink, StepKey,
    StringTensor, Tensor, TensorRecord,
};
use smdebug_format::progress::Progress;
use smdebug_format::record::PayloadChecksum;
use smdebug_io::jobs::{JobClaim, identity_here};
use smdebug_io::progress::write_progress;
use smdebug_io::writer::Writer;
use smdebug_storage::open_storage;

fn python() -> String {
    std::env::var("SMDEBUG_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

fn interop_script(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

fn require_python_modules() {
    let py = python();
    let out = Command::new(&py)
        .args(["-c", "import smdebug, tensorboard, numpy"])
        .env("SMDEBUG_LOG_LEVEL", "error")
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "`{py}` cannot import smdebug/tensorboard ({}): run `bash .ci/setup-python` and set \
             SMDEBUG_PYTHON to the python it prints",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => {
            panic!("cannot run `{py}` ({e}): run `bash .ci/setup-python` and set SMDEBUG_PYTHON")
        }
    }
}

fn run_check(args: &[&str]) {
    let out = Command::new(python())
        .args(args)
        .env("SMDEBUG_LOG_LEVEL", "error")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} failed:\n{}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{}", String::from_utf8_lossy(&out.stdout).trim());
}

fn json_number(v: f64, dtype: &str) -> Value {
    if dtype == "bool" {
        return json!(v != 0.0);
    }
    if v.is_nan() {
        json!("nan")
    } else if v.is_infinite() {
        json!(if v > 0.0 { "inf" } else { "-inf" })
    } else {
        json!(v)
    }
}

/// Tensors of every dtype Python smdebug can map (bfloat16 has no numpy dtype there).
fn tensors(step: u64, worker: usize) -> Vec<(String, Tensor)> {
    let s = step as f32 + worker as f32 * 0.5;
    vec![
        (
            "fc1.weight".into(),
            Tensor::from_vec(&[s, -1.5, 2.25, 0.0, 1e-3, -7.0], vec![2, 3]).unwrap(),
        ),
        (
            "fc1.bias".into(),
            Tensor::from_vec(&[0.5f32 * s, -0.25], vec![2]).unwrap(),
        ),
        (
            "loss".into(),
            Tensor::from_vec(&[1.0f32 / (1.0 + s)], vec![]).unwrap(),
        ),
        (
            "dtype/float16".into(),
            Tensor::from_vec(&[half::f16::from_f32(s), half::f16::NAN], vec![2]).unwrap(),
        ),
        (
            "dtype/float64".into(),
            Tensor::from_vec(&[f64::from(s), f64::NEG_INFINITY], vec![1, 2]).unwrap(),
        ),
        (
            "dtype/int8".into(),
            Tensor::from_vec(&[-128i8, 127, step as i8], vec![3]).unwrap(),
        ),
        (
            "dtype/int16".into(),
            Tensor::from_vec(&[-300i16, 300], vec![2]).unwrap(),
        ),
        (
            "dtype/int32".into(),
            Tensor::from_vec(&[i32::MIN, i32::MAX, step as i32], vec![3]).unwrap(),
        ),
        (
            "dtype/int64".into(),
            Tensor::from_vec(&[-(1i64 << 40), step as i64], vec![2]).unwrap(),
        ),
        (
            "dtype/uint8".into(),
            Tensor::from_vec(&[0u8, 200, 255], vec![3]).unwrap(),
        ),
        (
            "dtype/uint16".into(),
            Tensor::from_vec(&[65535u16], vec![1]).unwrap(),
        ),
        (
            "dtype/uint32".into(),
            Tensor::from_vec(&[4_000_000_000u32], vec![1]).unwrap(),
        ),
        (
            "dtype/uint64".into(),
            Tensor::from_vec(&[1u64 << 40], vec![1]).unwrap(),
        ),
        (
            "dtype/bool".into(),
            Tensor::from_vec(&[true, false], vec![2]).unwrap(),
        ),
        (
            "empty/float32".into(),
            Tensor::from_vec::<f32>(&[], vec![0]).unwrap(),
        ),
        (
            "smdebug/reductions/mean/fc1.weight".into(),
            Tensor::from_vec(&[0.25f32 * s], vec![]).unwrap(),
        ),
        (
            "smdebug/reductions/abs_max/fc1.weight".into(),
            Tensor::from_vec(&[7.0f32], vec![]).unwrap(),
        ),
    ]
}

const SCHEDULE: [(u64, Mode, u64); 6] = [
    (0, Mode::Train, 0),
    (1, Mode::Train, 1),
    (2, Mode::Eval, 0),
    (3, Mode::Train, 2),
    (4, Mode::Eval, 1),
    (6, Mode::Train, 4),
];

fn collections(names: &[String]) -> CollectionsFile {
    let mut weights = Collection::new("weights");
    weights.add_tensor_name("fc1.weight");
    weights.add_tensor_name("fc1.bias");
    let mut losses = Collection::new("losses");
    losses.add_tensor_name("loss");
    let mut dtypes = Collection::new("dtypes").with_regex("^dtype/").unwrap();
    for n in names.iter().filter(|n| n.starts_with("dtype/")) {
        dtypes.add_tensor_name(n);
    }
    CollectionsFile {
        collections: vec![weights, losses, dtypes],
        num_workers: 2,
    }
}

/// Writes a two-worker run and returns its expected.json (make_golden.py's schema).
fn write_run(dir: &Path, checksum: PayloadChecksum) -> Value {
    let names: Vec<String> = tensors(0, 0).into_iter().map(|(n, _)| n).collect();
    let coll_file = collections(&names);
    let mut expected_tensors = Vec::new();
    for worker in 0..2 {
        let store = open_storage(dir.to_str().unwrap()).unwrap();
        let mut writer = Writer::builder(store)
            .worker_rank(worker)
            .checksum(checksum)
            .build()
            .unwrap();
        writer.send(Record::Collections(coll_file.to_json()));
        for (step, mode, mode_step) in SCHEDULE {
            for (name, t) in tensors(step, worker) {
                let dtype = t.dtype().name();
                expected_tensors.push(json!({
                    "name": name, "step": step, "mode": mode.name(), "mode_step": mode_step,
                    "worker": format!("worker_{worker}"), "dtype": dtype, "shape": t.shape(),
                    "values": t.to_f64_vec().into_iter().map(|v| json_number(v, dtype)).collect::<Vec<_>>(),
                }));
                writer.send(Record::Tensor(TensorRecord {
                    name,
                    key: StepKey {
                        step,
                        mode,
                        mode_step,
                    },
                    tensor: t,
                    to_events: true,
                    tb_histogram: false,
                    tb_scalar: false,
                }));
            }
            writer.send(Record::EndStep { step });
        }
        if worker == 1 {
            writer.send(Record::Close(EndReason::Completed));
        }
        drop(writer);
        assert!(writer_ok(dir));
        // Each worker's progress file, as smdebug's Session writes it beside the run: Python
        // smdebug's reader and TensorBoard's must not trip on it.
        let mut progress = Progress::new(format!("worker_{worker}"));
        progress.planned_steps = Some(SCHEDULE.len() as u64 * 2);
        progress.last_step = SCHEDULE.last().map(|s| s.0);
        progress.steps = SCHEDULE.len() as u64;
        progress.records_written = (SCHEDULE.len() * names.len()) as u64;
        progress.finished = true;
        let store = open_storage(dir.to_str().unwrap()).unwrap();
        write_progress(store.as_ref(), &progress).unwrap();
        // And its identity file (`jobs/<worker>/<process>.json`), as every session writes one:
        // neither reader may trip on it either.
        let identity = identity_here("interop-job".into(), format!("worker_{worker}"), worker, 2);
        JobClaim::start(store, identity).unwrap().finish().unwrap();
    }
    assert!(dir.join("progress/worker_1.json").is_file());
    assert_eq!(
        std::fs::read_dir(dir.join("jobs")).unwrap().count(),
        2,
        "an identity file per worker"
    );
    let steps = |m: Option<Mode>| -> Vec<u64> {
        SCHEDULE
            .iter()
            .filter(|(_, mode, _)| m.is_none_or(|m| m == *mode))
            .map(|(g, _, ms)| if m.is_some() { *ms } else { *g })
            .collect()
    };
    let colls: serde_json::Map<String, Value> = coll_file
        .collections
        .iter()
        .map(|c| {
            (
                c.name().to_string(),
                json!({"tensor_names": c.tensor_names(), "include_regex": c.include_regex()}),
            )
        })
        .collect();
    json!({
        "run": {
            "workers": ["worker_0", "worker_1"],
            "num_workers": 2,
            "complete": true,
            "write_checksum": checksum == PayloadChecksum::Crc32c,
            "modes": ["TRAIN", "EVAL"],
            "steps": {"GLOBAL": steps(None), "TRAIN": steps(Some(Mode::Train)), "EVAL": steps(Some(Mode::Eval))},
            "collections": colls,
        },
        "tensors": expected_tensors,
    })
}

fn writer_ok(dir: &Path) -> bool {
    dir.join("index").is_dir()
}

fn check_with_smdebug(checksum: PayloadChecksum) {
    require_python_modules();
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let expected = write_run(&run, checksum);
    let expected_path = dir.path().join("run.expected.json");
    std::fs::write(&expected_path, serde_json::to_vec(&expected).unwrap()).unwrap();
    run_check(&[
        &interop_script("check_with_smdebug.py"),
        run.to_str().unwrap(),
        expected_path.to_str().unwrap(),
    ]);
    if checksum == PayloadChecksum::Crc32c {
        // With the real CRC, TensorBoard's record reader accepts every record, and the values
        // decode with TensorBoard's own tensor_util.
        run_check(&[
            &interop_script("check_with_tensorboard.py"),
            "--raw",
            run.to_str().unwrap(),
            expected_path.to_str().unwrap(),
        ]);
    }
}

#[test]
fn python_smdebug_reads_a_run_written_with_the_legacy_checksum() {
    check_with_smdebug(PayloadChecksum::SmdebugLegacy);
}

#[test]
fn python_smdebug_and_tensorboard_read_a_run_written_with_the_real_checksum() {
    check_with_smdebug(PayloadChecksum::Crc32c);
}

#[test]
fn tensorboard_loads_our_scalars_and_histograms() {
    require_python_modules();
    let dir = tempfile::tempdir().unwrap();
    let store = open_storage(dir.path().to_str().unwrap()).unwrap();
    let mut writer = Writer::builder(store)
        .tensorboard_file_bytes(2000)
        .build()
        .unwrap();
    let mut scalars = Vec::new();
    let mut histograms = Vec::new();
    for (step, mode, mode_step) in SCHEDULE {
        let loss = 1.0f32 / (1.0 + step as f32);
        let values: Vec<f32> = (0..50)
            .map(|i| (i as f32 - 20.0) * 0.1 * (step as f32 + 1.0))
            .collect();
        let vals64: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
        let key = StepKey {
            step,
            mode,
            mode_step,
        };
        writer.send(Record::Tensor(TensorRecord {
            name: "loss".into(),
            key,
            tensor: Tensor::from_vec(&[loss], vec![]).unwrap(),
            to_events: false,
            tb_histogram: false,
            tb_scalar: true,
        }));
        writer.send(Record::Tensor(TensorRecord {
            name: "fc1.weight".into(),
            key,
            tensor: Tensor::from_vec(&values, vec![5, 10]).unwrap(),
            to_events: true,
            tb_histogram: true,
            tb_scalar: false,
        }));
        writer.send(Record::EndStep { step });
        scalars.push(json!({"run": mode.name(), "tag": "loss", "step": step, "value": loss}));
        histograms.push(json!({
            "run": mode.name(), "tag": "fc1.weight", "step": step, "num": 50,
            "min": vals64.iter().copied().fold(f64::INFINITY, f64::min),
            "max": vals64.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            "sum": vals64.iter().sum::<f64>(),
        }));
    }
    drop(writer);
    let expected_path = dir.path().join("tb.expected.json");
    std::fs::write(
        &expected_path,
        serde_json::to_vec(&json!({"scalars": scalars, "histograms": histograms, "tensors": []}))
            .unwrap(),
    )
    .unwrap();
    let tb = dir.path().join("tensorboard");
    let files = std::fs::read_dir(tb.join("TRAIN")).unwrap().count();
    assert!(files >= 2, "the TRAIN file rolled over ({files} files)");
    run_check(&[
        &interop_script("check_with_tensorboard.py"),
        tb.to_str().unwrap(),
        expected_path.to_str().unwrap(),
    ]);
}

/// String tensors saved through the hook (`Hook::save_strings`): Python smdebug's Trial reads
/// them from the event files (as numpy unicode arrays), TensorBoard's record reader and
/// `make_ndarray` read the same records, and TensorBoard's text dashboard gets them from the
/// TensorBoard files.
#[test]
fn python_smdebug_and_tensorboard_read_our_string_tensors() {
    require_python_modules();
    let column = |step: u64| -> Vec<String> {
        vec![
            format!("{step}-0"),
            "Leaf".into(),
            String::new(),
            "é∑".into(),
        ]
    };
    for checksum in [PayloadChecksum::SmdebugLegacy, PayloadChecksum::Crc32c] {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let writer = Writer::builder(open_storage(run.to_str().unwrap()).unwrap())
            .checksum(checksum)
            .tensorboard(true)
            .build()
            .unwrap();
        let mut hook = Hook::builder()
            .save_config(SaveConfig::every(1))
            .export_tensorboard(true)
            .build(writer)
            .unwrap();
        hook.set_mode(Mode::Train);
        let mut expected = Vec::new();
        let mut tb = Vec::new();
        for step in 0..3u64 {
            let strings = StringTensor::from_strs(&column(step));
            assert!(hook.save_strings("trees/ID", &strings, &["trees"]));
            hook.save_scalar("loss", 1.0 / (step as f64 + 1.0), &["losses"]);
            for (name, dtype, values) in [
                ("trees/ID", "str", json!(column(step))),
                ("loss", "float64", json!([1.0 / (step as f64 + 1.0)])),
            ] {
                expected.push(json!({
                    "name": name, "step": step, "mode": "TRAIN", "mode_step": step,
                    "worker": "worker_0", "dtype": dtype,
                    "shape": if dtype == "str" { json!([4]) } else { json!([]) },
                    "values": values,
                }));
            }
            tb.push(json!({
                "run": "TRAIN", "tag": "trees/ID", "step": step, "dtype": "str", "shape": [4],
                "values": column(step), "plugin": "text",
            }));
            hook.step();
        }
        hook.close();
        drop(hook);
        // The hook's own collections (its defaults, `trees` and `losses`), as it wrote them.
        let written: Value = serde_json::from_slice(
            &std::fs::read(run.join("collections/000000000/worker_0_collections.json")).unwrap(),
        )
        .unwrap();
        let collections: serde_json::Map<String, Value> = written["collections"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(name, c)| {
                let fields =
                    json!({"tensor_names": c["tensor_names"], "include_regex": c["include_regex"]});
                (name.clone(), fields)
            })
            .collect();
        assert_eq!(collections["trees"]["tensor_names"], json!(["trees/ID"]));
        let expected = json!({
            "run": {
                "workers": ["worker_0"], "num_workers": 1, "complete": true,
                "write_checksum": checksum == PayloadChecksum::Crc32c, "modes": ["TRAIN"],
                "steps": {"GLOBAL": [0, 1, 2], "TRAIN": [0, 1, 2]},
                "collections": collections,
            },
            "tensors": expected,
        });
        let expected_path = dir.path().join("run.expected.json");
        std::fs::write(&expected_path, serde_json::to_vec(&expected).unwrap()).unwrap();
        if checksum == PayloadChecksum::SmdebugLegacy {
            // smdebug's Trial reads only its legacy checksum.
            run_check(&[
                &interop_script("check_with_smdebug.py"),
                run.to_str().unwrap(),
                expected_path.to_str().unwrap(),
            ]);
            continue;
        }
        // The event files alone (the text summaries in tensorboard/ are other tensor records).
        let raw = dir.path().join("raw");
        std::fs::create_dir(&raw).unwrap();
        std::fs::rename(run.join("events"), raw.join("events")).unwrap();
        run_check(&[
            &interop_script("check_with_tensorboard.py"),
            "--raw",
            raw.to_str().unwrap(),
            expected_path.to_str().unwrap(),
        ]);
        let tb_path = dir.path().join("tb.expected.json");
        std::fs::write(
            &tb_path,
            serde_json::to_vec(&json!({"scalars": [], "histograms": [], "tensors": tb})).unwrap(),
        )
        .unwrap();
        run_check(&[
            &interop_script("check_with_tensorboard.py"),
            run.join("tensorboard").to_str().unwrap(),
            tb_path.to_str().unwrap(),
        ]);
    }
}
