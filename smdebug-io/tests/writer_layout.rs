//! Runs written through the background writer are laid out as smdebug lays them out, and read
//! back to the same values.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use half::{bf16, f16};
use smdebug_core::{
    DType, EndReason, Hook, Mode, Record, SaveConfig, Sink, StepKey, Tensor, TensorRecord,
    TensorView,
};
use smdebug_format::proto::{event, summary};
use smdebug_format::record::{
    ChecksumKind, Decoded, PayloadChecksum, PayloadCrcPolicy, RecordIter,
};
use smdebug_format::{self as format, IndexFile, layout};
use smdebug_io::writer::Writer;
use smdebug_storage::{Storage, open_storage};

fn tensor_record(name: &str, step: u64, mode: Mode, mode_step: u64, tensor: Tensor) -> Record {
    Record::Tensor(TensorRecord {
        name: name.to_string(),
        key: StepKey {
            step,
            mode,
            mode_step,
        },
        tensor,
        to_events: true,
        tb_histogram: false,
        tb_scalar: false,
    })
}

/// One tensor of every dtype, with values that depend on the step.
fn every_dtype(step: u64) -> Vec<(String, Tensor)> {
    let s = step as f64;
    vec![
        (
            "dtype/f32".into(),
            Tensor::from_vec(
                &[1.5f32 + s as f32, -2.0, f32::NAN, f32::INFINITY],
                vec![2, 2],
            )
            .unwrap(),
        ),
        (
            "dtype/f64".into(),
            Tensor::from_vec(&[s, -1e300, 0.125], vec![3]).unwrap(),
        ),
        (
            "dtype/f16".into(),
            Tensor::from_vec(&[f16::from_f64(s), f16::NEG_INFINITY], vec![2]).unwrap(),
        ),
        (
            "dtype/bf16".into(),
            Tensor::from_vec(&[bf16::from_f64(-s), bf16::ONE], vec![1, 2]).unwrap(),
        ),
        (
            "dtype/i8".into(),
            Tensor::from_vec(&[i8::MIN, i8::MAX, step as i8], vec![3]).unwrap(),
        ),
        (
            "dtype/i16".into(),
            Tensor::from_vec(&[i16::MIN, 7], vec![2]).unwrap(),
        ),
        (
            "dtype/i32".into(),
            Tensor::from_vec(&[i32::MIN, i32::MAX], vec![2, 1]).unwrap(),
        ),
        (
            "dtype/i64".into(),
            Tensor::from_vec(&[i64::MIN, step as i64], vec![2]).unwrap(),
        ),
        (
            "dtype/u8".into(),
            Tensor::from_vec(&[0u8, 255], vec![2]).unwrap(),
        ),
        (
            "dtype/u16".into(),
            Tensor::from_vec(&[u16::MAX], vec![1]).unwrap(),
        ),
        (
            "dtype/u32".into(),
            Tensor::from_vec(&[u32::MAX, 3], vec![2]).unwrap(),
        ),
        (
            "dtype/u64".into(),
            Tensor::from_vec(&[u64::MAX, step], vec![2]).unwrap(),
        ),
        (
            "dtype/bool".into(),
            Tensor::from_vec(&[true, false, true], vec![3]).unwrap(),
        ),
        (
            "empty/f32".into(),
            Tensor::from_vec::<f32>(&[], vec![0, 3]).unwrap(),
        ),
        (
            "loss".into(),
            Tensor::from_vec(&[0.5f32 / (1.0 + s as f32)], vec![]).unwrap(),
        ),
    ]
}

/// (step, mode, mode step) of a run with TRAIN and EVAL interleaved.
const SCHEDULE: [(u64, Mode, u64); 5] = [
    (0, Mode::Train, 0),
    (1, Mode::Train, 1),
    (2, Mode::Eval, 0),
    (3, Mode::Train, 2),
    (5, Mode::Global, 5),
];

fn write_run(
    storage: Arc<dyn Storage>,
    checksum: PayloadChecksum,
    worker: usize,
) -> BTreeMap<(u64, String), Tensor> {
    let mut writer = Writer::builder(storage)
        .worker_rank(worker)
        .checksum(checksum)
        .build()
        .unwrap();
    let status = writer.status();
    let mut sent = BTreeMap::new();
    writer.send(Record::Collections(serde_json::json!({
        "collections": {"losses": {"name": "losses", "include_regex": [], "tensor_names": ["loss"],
                                   "reduction_config": {}, "save_config": {}}},
        "_meta": {"num_workers": 1}
    })));
    for (step, mode, mode_step) in SCHEDULE {
        for (name, t) in every_dtype(step) {
            sent.insert((step, name.clone()), t.clone());
            writer.send(tensor_record(&name, step, mode, mode_step, t));
        }
        writer.send(Record::EndStep { step });
    }
    writer.send(Record::Close(EndReason::Stopped("rule fired".into())));
    writer.flush(Duration::from_secs(30)).unwrap();
    assert_eq!(status.steps_written(), SCHEDULE.len() as u64);
    assert_eq!(
        status.records_written(),
        (SCHEDULE.len() * every_dtype(0).len()) as u64
    );
    assert_eq!(status.dropped(), 0);
    assert_eq!(status.error(), None);
    drop(writer);
    sent
}

/// Checks the layout and every value of a run written by [`write_run`].
fn check_run(
    store: &dyn Storage,
    sent: &BTreeMap<(u64, String), Tensor>,
    checksum: ChecksumKind,
    worker: &str,
) {
    let mut expected_files: Vec<String> = vec![
        layout::collections_file(worker),
        layout::END_MARKER.to_string(),
    ];
    for (step, _, _) in SCHEDULE {
        expected_files.push(layout::event_file(step, worker));
        expected_files.push(layout::index_file(step, worker));
    }
    expected_files.sort();
    assert_eq!(store.list("").unwrap(), expected_files);

    let marker = store.get(layout::END_MARKER).unwrap();
    assert_eq!(
        format::parse_end_marker(&marker),
        Some(EndReason::Stopped("rule fired".into()))
    );
    let colls: serde_json::Value =
        serde_json::from_slice(&store.get(&layout::collections_file(worker)).unwrap()).unwrap();
    assert_eq!(colls["_meta"]["num_workers"], 1);

    for (step, mode, mode_step) in SCHEDULE {
        let idx_path = layout::index_file(step, worker);
        let index = IndexFile::parse(&store.get(&idx_path).unwrap(), &idx_path).unwrap();
        assert_eq!((index.meta.mode, index.meta.mode_step), (mode, mode_step));
        let ev_path = layout::event_file(step, worker);
        assert_eq!(
            index.meta.event_file_name.as_deref(),
            Some(ev_path.as_str())
        );
        // The index JSON has smdebug's keys, with an (empty) shape_payload.
        let raw: serde_json::Value =
            serde_json::from_slice(&store.get(&idx_path).unwrap()).unwrap();
        assert_eq!(raw["meta"]["mode"], mode.name());
        assert_eq!(raw["shape_payload"], serde_json::json!([]));

        let file = store.get(&ev_path).unwrap();
        // The index covers the event file exactly, record by record.
        let mut it = RecordIter::new(&file, 0, PayloadCrcPolicy::AcceptBoth);
        let recs: Vec<_> = it.by_ref().map(Result::unwrap).collect();
        assert_eq!(it.tail(), Some(&format::record::Tail::Clean));
        assert_eq!(recs.len(), index.tensor_payload.len());
        for (r, loc) in recs.iter().zip(&index.tensor_payload) {
            assert_eq!(
                (r.offset, r.framed_len() as u64),
                (loc.start_idx, loc.length)
            );
            assert_eq!(r.checksum, checksum);
        }
        for loc in &index.tensor_payload {
            // Read each tensor the way a reader does: a range read of exactly the record.
            let bytes = store
                .get_range(&ev_path, loc.start_idx..loc.start_idx + loc.length)
                .unwrap();
            let ev = format::read_tensor_record(
                &bytes,
                &ev_path,
                loc.start_idx,
                PayloadCrcPolicy::AcceptBoth,
            )
            .unwrap();
            assert_eq!((ev.step, ev.mode, ev.mode_step), (step, mode, mode_step));
            assert_eq!(ev.name, loc.tensorname);
            assert_eq!(
                &ev.tensor,
                &sent[&(step, ev.name.clone())],
                "{} at {step}",
                ev.name
            );
        }
    }
}

#[test]
fn a_run_on_local_disk_is_laid_out_like_smdebugs() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_storage(dir.path().to_str().unwrap()).unwrap();
    let sent = write_run(store.clone(), PayloadChecksum::Crc32c, 0);
    check_run(store.as_ref(), &sent, ChecksumKind::Crc32c, "worker_0");
    // No temporary files anywhere on disk.
    let mut stack = vec![dir.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            assert!(
                !p.file_name().unwrap().to_str().unwrap().ends_with(".tmp"),
                "{p:?}"
            );
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
}

#[test]
fn a_run_in_an_object_store_is_laid_out_the_same() {
    let store = open_storage("memory://writer-layout/run").unwrap();
    let sent = write_run(store.clone(), PayloadChecksum::Crc32c, 3);
    check_run(store.as_ref(), &sent, ChecksumKind::Crc32c, "worker_3");
}

#[test]
fn the_legacy_checksum_option_writes_smdebugs_constant() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_storage(dir.path().to_str().unwrap()).unwrap();
    let sent = write_run(store.clone(), PayloadChecksum::SmdebugLegacy, 1);
    check_run(
        store.as_ref(),
        &sent,
        ChecksumKind::SmdebugLegacy,
        "worker_1",
    );
    let file = store.get(&layout::event_file(0, "worker_1")).unwrap();
    match format::decode_record(&file, 0, PayloadCrcPolicy::RequireLegacy).unwrap() {
        Decoded::Record(r) => assert_eq!(r.checksum, ChecksumKind::SmdebugLegacy),
        other => panic!("{other:?}"),
    }
}

#[test]
fn dropping_the_writer_publishes_a_step_that_was_not_ended() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_storage(dir.path().to_str().unwrap()).unwrap();
    let mut writer = Writer::builder(store.clone()).build().unwrap();
    let t = Tensor::from_vec(&[1.0f32, 2.0], vec![2]).unwrap();
    writer.send(tensor_record("w", 0, Mode::Train, 0, t.clone()));
    writer.send(Record::EndStep { step: 0 });
    writer.send(tensor_record("w", 1, Mode::Train, 1, t.clone()));
    drop(writer);
    assert!(
        store
            .size(&layout::index_file(1, "worker_0"))
            .unwrap()
            .is_some()
    );
    let events = format::read_tensor_file(
        &store.get(&layout::event_file(1, "worker_0")).unwrap(),
        "e",
        PayloadCrcPolicy::RequireCrc32c,
    )
    .unwrap();
    assert_eq!(events[0].tensor, t);
    // No end marker: the run did not close.
    assert_eq!(store.size(layout::END_MARKER).unwrap(), None);
}

#[test]
fn a_tensor_of_a_new_step_publishes_the_previous_step() {
    let store = open_storage("memory://writer-layout/unended").unwrap();
    let mut writer = Writer::builder(store.clone()).build().unwrap();
    let t = Tensor::scalar_f64(1.0);
    writer.send(tensor_record("a", 4, Mode::Eval, 0, t.clone()));
    writer.send(tensor_record("a", 5, Mode::Eval, 1, t.clone()));
    writer.flush(Duration::from_secs(10)).unwrap();
    assert!(
        store
            .size(&layout::index_file(4, "worker_0"))
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .size(&layout::index_file(5, "worker_0"))
            .unwrap()
            .is_none(),
        "step 5 is still open"
    );
}

#[test]
fn large_tensors_are_written_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_storage(dir.path().to_str().unwrap()).unwrap();
    let mut writer = Writer::builder(store.clone()).build().unwrap();
    let n = 8 << 20; // 32 MiB of f32
    let values: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let big = Tensor::from_vec(&values, vec![n / 1024, 1024]).unwrap();
    writer.send(tensor_record(
        "small",
        0,
        Mode::Train,
        0,
        Tensor::scalar_f64(2.0),
    ));
    writer.send(tensor_record("big", 0, Mode::Train, 0, big.clone()));
    writer.send(tensor_record(
        "after",
        0,
        Mode::Train,
        0,
        Tensor::scalar_f64(3.0),
    ));
    writer.send(Record::EndStep { step: 0 });
    drop(writer);
    let file = store.get(&layout::event_file(0, "worker_0")).unwrap();
    let events = format::read_tensor_file(&file, "e", PayloadCrcPolicy::RequireCrc32c).unwrap();
    assert_eq!(events.len(), 3);
    assert_eq!(events[1].tensor, big);
    assert_eq!(events[2].tensor.to_f64_vec(), vec![3.0]);
}

#[test]
fn tensorboard_scalars_and_histograms_are_written_per_mode_with_real_crcs() {
    for location in ["local", "memory://writer-layout/tb"] {
        let dir = tempfile::tempdir().unwrap();
        let store = if location == "local" {
            open_storage(dir.path().to_str().unwrap()).unwrap()
        } else {
            open_storage(location).unwrap()
        };
        // Small files, so that the writer rolls over to a second file.
        let mut writer = Writer::builder(store.clone())
            .checksum(PayloadChecksum::SmdebugLegacy)
            .tensorboard_file_bytes(600)
            .build()
            .unwrap();
        for (step, mode, ms) in [
            (0, Mode::Train, 0),
            (1, Mode::Train, 1),
            (2, Mode::Eval, 0),
            (3, Mode::Train, 2),
        ] {
            let mut r = TensorRecord {
                name: "loss".into(),
                key: StepKey {
                    step,
                    mode,
                    mode_step: ms,
                },
                tensor: Tensor::scalar_f64(1.0 / (step as f64 + 1.0)),
                to_events: false,
                tb_histogram: false,
                tb_scalar: true,
            };
            writer.send(Record::Tensor(r.clone()));
            r.name = "fc1/weight:0".into();
            r.tensor = Tensor::from_vec(&[-1.0f32, 0.0, 0.5, 2.0, step as f32], vec![5]).unwrap();
            r.tb_scalar = false;
            r.tb_histogram = true;
            r.to_events = true;
            writer.send(Record::Tensor(r));
            writer.send(Record::EndStep { step });
        }
        drop(writer);
        let tb = store.list(layout::TENSORBOARD_DIR).unwrap();
        assert!(tb.iter().all(|p| p.contains("tfevents")), "{tb:?}");
        assert!(
            tb.contains(&layout::tensorboard_file(Mode::Train, 0, "worker_0")),
            "{tb:?}"
        );
        assert!(
            tb.contains(&layout::tensorboard_file(Mode::Eval, 2, "worker_0")),
            "{tb:?}"
        );
        assert!(
            tb.len() >= 3,
            "{location}: the TRAIN file rolled over: {tb:?}"
        );
        let mut scalars = Vec::new();
        let mut histos = Vec::new();
        for path in &tb {
            let bytes = store.get(path).unwrap();
            let mut first = true;
            for rec in RecordIter::new(&bytes, 0, PayloadCrcPolicy::RequireCrc32c) {
                let ev = format::tensor::decode_event(rec.unwrap().payload).unwrap();
                if first {
                    assert_eq!(
                        ev.what,
                        Some(event::What::FileVersion("brain.Event:2".into()))
                    );
                    first = false;
                    continue;
                }
                let Some(event::What::Summary(s)) = ev.what else {
                    panic!("{ev:?}")
                };
                for v in s.value {
                    match v.value {
                        Some(summary::value::Value::SimpleValue(x)) => {
                            scalars.push((path.clone(), ev.step, v.tag, x))
                        }
                        Some(summary::value::Value::Histo(h)) => histos.push((ev.step, v.tag, h)),
                        other => panic!("{other:?}"),
                    }
                }
            }
        }
        scalars.sort_by_key(|s| s.1);
        assert_eq!(
            scalars.iter().map(|s| (s.1, s.3)).collect::<Vec<_>>(),
            vec![(0, 1.0), (1, 0.5), (2, 1.0 / 3.0), (3, 0.25)]
        );
        assert!(scalars[2].0.contains("/EVAL/"), "{location}: {scalars:?}");
        assert_eq!(histos.len(), 4);
        for (step, tag, h) in histos {
            assert_eq!(tag, "fc1/weight_0", "cleaned tag");
            assert_eq!((h.num, h.min), (5.0, -1.0));
            assert_eq!(h.max, 2.0f64.max(step as f64));
            assert_eq!(h.bucket.iter().sum::<f64>(), 5.0);
        }
        // The TensorBoard-only scalar is not in the event files; the histogrammed tensor is.
        let idx =
            IndexFile::parse(&store.get(&layout::index_file(0, "worker_0")).unwrap(), "i").unwrap();
        assert_eq!(
            idx.tensor_payload
                .iter()
                .map(|l| l.tensorname.as_str())
                .collect::<Vec<_>>(),
            vec!["fc1/weight:0"]
        );
    }
}

#[test]
fn a_hook_writes_a_readable_run_through_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_storage(dir.path().to_str().unwrap()).unwrap();
    let writer = Writer::builder(store.clone())
        .worker_rank(1)
        .build()
        .unwrap();
    let status = writer.status();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(2))
        .worker(1, 2)
        .build(writer)
        .unwrap();
    let w: Vec<f32> = (0..12).map(|i| i as f32).collect();
    for _ in 0..6 {
        hook.save_tensor(
            "fc1.weight",
            &TensorView::from_slice(&w, &[3, 4]).unwrap(),
            &["weights"],
        );
        hook.save_scalar("loss", 0.5, &["losses"]);
        hook.step();
    }
    hook.close();
    drop(hook);
    assert_eq!(status.steps_written(), 3);
    let idx = store.list(layout::INDEX_DIR).unwrap();
    assert_eq!(
        idx,
        [0, 2, 4]
            .iter()
            .map(|s| layout::index_file(*s, "worker_1"))
            .collect::<Vec<_>>()
    );
    let colls: serde_json::Value =
        serde_json::from_slice(&store.get(&layout::collections_file("worker_1")).unwrap()).unwrap();
    assert_eq!(colls["_meta"]["num_workers"], 2);
    assert!(
        colls["collections"]["weights"]["tensor_names"]
            .to_string()
            .contains("fc1.weight"),
        "{colls}"
    );
    let events = format::read_tensor_file(
        &store.get(&layout::event_file(4, "worker_1")).unwrap(),
        "e",
        PayloadCrcPolicy::RequireCrc32c,
    )
    .unwrap();
    let weight = events.iter().find(|e| e.name == "fc1.weight").unwrap();
    assert_eq!(weight.tensor.dtype(), DType::F32);
    assert_eq!(weight.tensor.shape(), &[3, 4]);
    assert_eq!(
        weight.tensor.to_f64_vec(),
        (0..12).map(f64::from).collect::<Vec<_>>()
    );
    assert_eq!(
        format::parse_end_marker(&store.get(layout::END_MARKER).unwrap()),
        Some(EndReason::Completed)
    );
}

/// The writer tells `on_step_written` of each step it wrote, in order, once the step's event
/// and index files are both in storage (a reader woken then finds the step), and of no step
/// that saved nothing.
#[test]
fn on_step_written_is_told_each_written_step_once_its_files_are_there() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_storage(dir.path()).unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let told = {
        let (seen, storage) = (seen.clone(), storage.clone());
        move |step: u64| {
            let worker = layout::worker_name(0);
            let there = |path: String| storage.size(&path).unwrap().is_some();
            let both = there(layout::event_file(step, &worker))
                && there(layout::index_file(step, &worker));
            seen.lock().unwrap().push((step, both));
        }
    };
    let writer = Writer::builder(storage.clone())
        .on_step_written(told)
        .build()
        .unwrap();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(2))
        .build(writer)
        .unwrap();
    for step in 0..6u64 {
        hook.save_scalar("loss", step as f64, &["losses"]);
        hook.step();
    }
    hook.close();
    drop(hook);
    assert_eq!(
        *seen.lock().unwrap(),
        [(0, true), (2, true), (4, true)],
        "steps 1, 3 and 5 saved nothing"
    );
}
