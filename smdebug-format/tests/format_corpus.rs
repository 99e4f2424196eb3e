//! The decoder against damaged and foreign input: records written by Python smdebug (golden
//! runs), records cut short or with flipped bytes, bad index JSON, and TensorFlow-style typed
//! values. Every damage is reported with the file and the byte offset, never returned as data.

use std::path::{Path, PathBuf};

use prost::Message;
use serde_json::Value;
use smdebug_core::{DType, Mode};
use smdebug_format::Error;
use smdebug_format::proto::{
    Event, Summary, TensorProto, TensorShapeProto, event, summary, tensor_shape_proto,
};
use smdebug_format::record::{self, ChecksumKind, Decoded, PayloadCrcPolicy};
use smdebug_format::tensor::{DEFAULT_MAX_TENSOR_BYTES, decode_tensor_event, mode_metadata};
use smdebug_format::{self as format, IndexFile, layout};

fn golden() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../smdebug-io/tests/data/golden")
}

/// A real event file written by Python smdebug (legacy checksum) and its index.
fn python_step() -> (Vec<u8>, IndexFile) {
    let run = golden().join("pysmdebug_multi");
    let idx_path = layout::index_file(0, "worker_0");
    let index = IndexFile::parse(&std::fs::read(run.join(&idx_path)).unwrap(), &idx_path).unwrap();
    let events = std::fs::read(run.join(index.meta.event_file_name.as_ref().unwrap())).unwrap();
    (events, index)
}

const EVENT_FILE: &str = "events/000000000000/000000000000_worker_0.tfevents";

fn expected_value(v: &Value) -> f64 {
    match v {
        Value::String(s) if s == "nan" => f64::NAN,
        Value::String(s) if s == "inf" => f64::INFINITY,
        Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        Value::Bool(b) => f64::from(u8::from(*b)),
        other => other.as_f64().unwrap(),
    }
}

/// Reads every tensor of a golden run through the index, the way a reader does, and compares
/// with the values Python wrote.
fn check_golden_run(name: &str, want_checksum: ChecksumKind) {
    let run = golden().join(name);
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(golden().join(format!("{name}.expected.json"))).unwrap(),
    )
    .unwrap();
    let mut seen = 0;
    for rec in expected["tensors"].as_array().unwrap() {
        let step = rec["step"].as_u64().unwrap();
        let worker = rec["worker"].as_str().unwrap();
        let idx_path = layout::index_file(step, worker);
        let index =
            IndexFile::parse(&std::fs::read(run.join(&idx_path)).unwrap(), &idx_path).unwrap();
        assert_eq!(index.meta.mode.name(), rec["mode"].as_str().unwrap());
        assert_eq!(index.meta.mode_step, rec["mode_step"].as_u64().unwrap());
        let ev_path = index.meta.event_file_name.clone().unwrap();
        assert_eq!(ev_path, layout::event_file(step, worker));
        let bytes = std::fs::read(run.join(&ev_path)).unwrap();
        let loc = index
            .tensor_payload
            .iter()
            .rev()
            .find(|l| l.tensorname == rec["name"].as_str().unwrap())
            .unwrap();
        let slice = &bytes[loc.start_idx as usize..(loc.start_idx + loc.length) as usize];
        match record::decode_record(slice, loc.start_idx, PayloadCrcPolicy::AcceptBoth).unwrap() {
            Decoded::Record(r) => assert_eq!(r.checksum, want_checksum),
            other => panic!("{other:?}"),
        }
        let ev = format::read_tensor_record(
            slice,
            &ev_path,
            loc.start_idx,
            PayloadCrcPolicy::AcceptBoth,
        )
        .unwrap();
        assert_eq!(ev.name, loc.tensorname);
        assert_eq!(ev.step, step);
        assert_eq!(ev.mode.name(), rec["mode"].as_str().unwrap());
        assert_eq!(ev.mode_step, rec["mode_step"].as_u64().unwrap());
        assert_eq!(
            ev.tensor.dtype().name(),
            rec["dtype"].as_str().unwrap(),
            "{}",
            ev.name
        );
        let shape: Vec<usize> = serde_json::from_value(rec["shape"].clone()).unwrap();
        assert_eq!(ev.tensor.shape(), shape.as_slice());
        let got = ev.tensor.to_f64_vec();
        let want: Vec<f64> = rec["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(expected_value)
            .collect();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g.is_nan() && w.is_nan()) || g == w,
                "{}: {g} != {w}",
                ev.name
            );
        }
        seen += 1;
    }
    assert!(seen > 10, "{name}: only {seen} tensors checked");
}

#[test]
fn python_smdebug_records_with_the_legacy_checksum_are_accepted() {
    check_golden_run("pysmdebug_multi", ChecksumKind::SmdebugLegacy);
}

#[test]
fn python_smdebug_records_with_the_real_checksum_are_accepted() {
    check_golden_run("pysmdebug_checksum", ChecksumKind::Crc32c);
}

#[test]
fn python_smdebug_index_offsets_cover_the_event_file_exactly() {
    let (events, index) = python_step();
    let mut it = record::RecordIter::new(&events, 0, PayloadCrcPolicy::AcceptBoth);
    let recs: Vec<_> = it.by_ref().map(Result::unwrap).collect();
    assert_eq!(it.tail(), Some(&record::Tail::Clean));
    assert_eq!(recs.len(), index.tensor_payload.len());
    for (r, loc) in recs.iter().zip(&index.tensor_payload) {
        assert_eq!(
            (r.offset, r.framed_len() as u64),
            (loc.start_idx, loc.length)
        );
    }
}

#[test]
fn a_truncated_record_is_incomplete_with_file_and_offset() {
    let (events, index) = python_step();
    let loc = &index.tensor_payload[1];
    let start = loc.start_idx as usize;
    let cut = &events[start..start + loc.length as usize - 3];
    let err =
        format::read_tensor_record(cut, EVENT_FILE, loc.start_idx, PayloadCrcPolicy::AcceptBoth)
            .unwrap_err();
    match &err {
        Error::IncompleteRecord {
            path,
            offset,
            needed,
            available,
        } => {
            assert_eq!(path, EVENT_FILE);
            assert_eq!(*offset, loc.start_idx);
            assert_eq!(*needed, loc.length);
            assert_eq!(*available, loc.length - 3);
        }
        other => panic!("{other}"),
    }
    assert!(
        err.to_string().contains(EVENT_FILE) && err.to_string().contains(&format!("byte {start}"))
    );

    // The whole file cut inside its last record: the records before it still read; the cut one
    // is reported incomplete at its offset.
    let last = index.tensor_payload.last().unwrap();
    let file = &events[..events.len() - 5];
    let err = format::read_tensor_file(file, EVENT_FILE, PayloadCrcPolicy::AcceptBoth).unwrap_err();
    assert!(
        matches!(err, Error::IncompleteRecord { offset, .. } if offset == last.start_idx),
        "{err}"
    );
}

#[test]
fn a_flipped_payload_byte_is_corrupt_with_file_and_offset() {
    let (mut events, index) = python_step();
    let loc = &index.tensor_payload[2];
    let at = loc.start_idx as usize + 12 + 20;
    events[at] ^= 0x40;
    let slice = &events[loc.start_idx as usize..(loc.start_idx + loc.length) as usize];
    // The legacy constant does not cover the payload, so only a reader that checks the real
    // CRC can see the flip in a Python-written record... smdebug's own constant hides it. The
    // protobuf or the tensor may still break; either way no silent wrong value under
    // RequireCrc32c:
    let err = format::read_tensor_record(
        slice,
        EVENT_FILE,
        loc.start_idx,
        PayloadCrcPolicy::RequireCrc32c,
    )
    .unwrap_err();
    assert_corrupt_at(&err, loc.start_idx, "payload checksum");

    // Our records carry the real CRC, so the default policy catches a flipped byte.
    let t = smdebug_core::Tensor::from_vec(&[1.0f32, 2.0, 3.0, 4.0], vec![2, 2]).unwrap();
    let stamp = format::EventStamp {
        wall_time: 1.0,
        step: 0,
        mode: Mode::Train,
        mode_step: 0,
    };
    let mut file = format::frame_tensor("a", &t, stamp, record::PayloadChecksum::Crc32c);
    let second = file.len() as u64;
    file.extend(format::frame_tensor(
        "b",
        &t,
        stamp,
        record::PayloadChecksum::Crc32c,
    ));
    let last_data_byte = file.len() - 5;
    file[last_data_byte] ^= 1;
    let err =
        format::read_tensor_file(&file, EVENT_FILE, PayloadCrcPolicy::AcceptBoth).unwrap_err();
    assert_corrupt_at(&err, second, "payload checksum");
}

#[test]
fn a_flipped_length_byte_is_corrupt_with_file_and_offset() {
    let (mut events, index) = python_step();
    let loc = &index.tensor_payload[3];
    events[loc.start_idx as usize + 1] ^= 0x01;
    let err =
        format::read_tensor_file(&events, EVENT_FILE, PayloadCrcPolicy::AcceptBoth).unwrap_err();
    assert_corrupt_at(&err, loc.start_idx, "length checksum");
    // A flipped byte in the length's own checksum is the same error.
    let (mut events, _) = python_step();
    events[loc.start_idx as usize + 9] ^= 0x80;
    let slice = &events[loc.start_idx as usize..(loc.start_idx + loc.length) as usize];
    let err = format::read_tensor_record(
        slice,
        EVENT_FILE,
        loc.start_idx,
        PayloadCrcPolicy::AcceptBoth,
    )
    .unwrap_err();
    assert_corrupt_at(&err, loc.start_idx, "length checksum");
}

#[test]
fn an_index_entry_pointing_at_the_wrong_length_is_corrupt() {
    let (events, index) = python_step();
    let loc = &index.tensor_payload[0];
    let slice = &events[..loc.length as usize + 4];
    let err =
        format::read_tensor_record(slice, EVENT_FILE, 0, PayloadCrcPolicy::AcceptBoth).unwrap_err();
    assert_corrupt_at(&err, 0, "index says");
}

#[test]
fn a_record_that_is_not_an_event_is_corrupt() {
    let file = record::encode_record(
        b"\xff\xff\xff not protobuf",
        record::PayloadChecksum::Crc32c,
    );
    let err = format::read_tensor_record(&file, EVENT_FILE, 40, PayloadCrcPolicy::AcceptBoth)
        .unwrap_err();
    assert_corrupt_at(&err, 40, "Event");
}

fn assert_corrupt_at(err: &Error, at: u64, reason_part: &str) {
    match err {
        Error::CorruptRecord {
            path,
            offset,
            reason,
        } => {
            assert_eq!(path, EVENT_FILE);
            assert_eq!(*offset, at, "{err}");
            assert!(reason.contains(reason_part), "{reason}");
        }
        other => panic!("expected a corrupt record, got {other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains(EVENT_FILE) && msg.contains(&format!("byte {at}")),
        "{msg}"
    );
}

fn bad_index(text: &str) -> (u64, String) {
    match IndexFile::parse(
        text.as_bytes(),
        "index/000000000/000000000007_worker_0.json",
    ) {
        Err(e @ Error::BadIndex { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("index/000000000/000000000007_worker_0.json"),
                "{msg}"
            );
            let Error::BadIndex { offset, reason, .. } = e else {
                unreachable!()
            };
            assert!(msg.contains(&format!("byte {offset}")), "{msg}");
            (offset, reason)
        }
        other => panic!("expected BadIndex, got {other:?}"),
    }
}

#[test]
fn bad_index_json_names_file_and_offset() {
    // Cut short (a reader racing a writer that does not write atomically).
    let good = r#"{"meta": {"mode": "TRAIN", "mode_step": 7, "event_file_name": "events/000000000007/000000000007_worker_0.tfevents"}, "tensor_payload": [{"tensorname": "loss", "start_idx": 0, "length": 100}], "shape_payload": []}"#;
    let (offset, _) = bad_index(&good[..120]);
    assert_eq!(offset, 120);
    // Not JSON at all.
    let (offset, _) = bad_index("\n\n  garbage");
    assert_eq!(offset, 4);
    // Valid JSON, wrong content.
    let (_, reason) = bad_index(r#"{"meta": {"mode": "TRAINING", "mode_step": 1}}"#);
    assert!(reason.contains("TRAINING"), "{reason}");
    let (_, reason) = bad_index(r#"{"tensor_payload": []}"#);
    assert!(reason.contains("meta"), "{reason}");
    let (_, reason) = bad_index(
        r#"{"meta": {"mode": "EVAL", "mode_step": 1}, "tensor_payload": [{"tensorname": "x", "start_idx": 0, "length": 20}]}"#,
    );
    assert!(reason.contains("event_file_name"), "{reason}");
    // A bad number in one entry is that entry's problem, not the file's: it is kept aside
    // (reading that tensor at that step fails), and the file parses.
    let index = IndexFile::parse(
        br#"{"meta": {"mode": "EVAL", "mode_step": 1, "event_file_name": "e"}, "tensor_payload": [{"tensorname": "x", "start_idx": -4, "length": 20}]}"#,
        "i.json",
    )
    .unwrap();
    assert!(index.tensor_payload.is_empty());
    assert_eq!(index.unusable_entries.len(), 1);
    assert!(
        index.unusable_entries[0].reason.contains("start_idx")
            && index.unusable_entries[0].reason.contains("-4"),
        "{:?}",
        index.unusable_entries
    );
    // A mode step that is not a number still makes the file unreadable: it says which step
    // the file is.
    let (offset, reason) = bad_index(
        r#"{"meta": {"mode": "EVAL", "mode_step": -1, "event_file_name": "e"}, "tensor_payload": []}"#,
    );
    assert!(offset > 0 && reason.contains("-1"), "{offset} {reason}");
}

#[test]
fn every_python_index_file_parses() {
    for run in [
        "pysmdebug_multi",
        "pysmdebug_checksum",
        "pysmdebug_incomplete",
    ] {
        let dir = golden().join(run).join("index");
        let mut n = 0;
        for sub in std::fs::read_dir(&dir).unwrap() {
            for f in std::fs::read_dir(sub.unwrap().path()).unwrap() {
                let p = f.unwrap().path();
                let rel = rel_path(&golden().join(run), &p);
                let (step, _worker) = layout::parse_index_file(&rel).unwrap();
                let idx = IndexFile::parse(&std::fs::read(&p).unwrap(), &rel).unwrap();
                let (ev_step, _) =
                    layout::parse_event_file(idx.meta.event_file_name.as_ref().unwrap()).unwrap();
                assert_eq!(ev_step, step);
                n += 1;
            }
        }
        assert!(n > 0);
    }
}

fn rel_path(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap()
        .to_str()
        .unwrap()
        .replace('\\', "/")
}

/// TensorFlow writes small tensors in typed fields instead of `tensor_content`.
#[test]
fn tensorflow_typed_value_fields_are_read() {
    let shape = |dims: &[i64]| TensorShapeProto {
        dim: dims
            .iter()
            .map(|&size| tensor_shape_proto::Dim {
                size,
                name: String::new(),
            })
            .collect(),
        unknown_rank: false,
    };
    let cases: Vec<(TensorProto, DType, Vec<f64>)> = vec![
        (
            TensorProto {
                dtype: 1,
                tensor_shape: Some(shape(&[3])),
                float_val: vec![1.5, -2.0, 4.0],
                ..Default::default()
            },
            DType::F32,
            vec![1.5, -2.0, 4.0],
        ),
        (
            TensorProto {
                dtype: 2,
                tensor_shape: Some(shape(&[2, 2])),
                double_val: vec![7.0],
                ..Default::default()
            },
            DType::F64,
            vec![7.0; 4],
        ),
        (
            TensorProto {
                dtype: 3,
                tensor_shape: Some(shape(&[2])),
                int_val: vec![-3, 9],
                ..Default::default()
            },
            DType::I32,
            vec![-3.0, 9.0],
        ),
        (
            TensorProto {
                dtype: 6,
                tensor_shape: Some(shape(&[2])),
                int_val: vec![-128, 127],
                ..Default::default()
            },
            DType::I8,
            vec![-128.0, 127.0],
        ),
        (
            TensorProto {
                dtype: 4,
                tensor_shape: Some(shape(&[1])),
                int_val: vec![255],
                ..Default::default()
            },
            DType::U8,
            vec![255.0],
        ),
        (
            TensorProto {
                dtype: 9,
                tensor_shape: Some(shape(&[2])),
                int64_val: vec![i64::MIN, 5],
                ..Default::default()
            },
            DType::I64,
            vec![i64::MIN as f64, 5.0],
        ),
        (
            TensorProto {
                dtype: 10,
                tensor_shape: Some(shape(&[3])),
                bool_val: vec![true, false, true],
                ..Default::default()
            },
            DType::Bool,
            vec![1.0, 0.0, 1.0],
        ),
        (
            TensorProto {
                dtype: 19,
                tensor_shape: Some(shape(&[2])),
                half_val: vec![0x3C00, 0xC000],
                ..Default::default()
            },
            DType::F16,
            vec![1.0, -2.0],
        ),
        (
            TensorProto {
                dtype: 14,
                tensor_shape: Some(shape(&[1])),
                half_val: vec![0x3F80],
                ..Default::default()
            },
            DType::BF16,
            vec![1.0],
        ),
        (
            TensorProto {
                dtype: 22,
                tensor_shape: Some(shape(&[1])),
                uint32_val: vec![u32::MAX],
                ..Default::default()
            },
            DType::U32,
            vec![u32::MAX as f64],
        ),
        (
            TensorProto {
                dtype: 23,
                tensor_shape: Some(shape(&[1])),
                uint64_val: vec![1 << 40],
                ..Default::default()
            },
            DType::U64,
            vec![(1u64 << 40) as f64],
        ),
        (
            TensorProto {
                dtype: 1,
                tensor_shape: Some(shape(&[])),
                float_val: vec![0.25],
                ..Default::default()
            },
            DType::F32,
            vec![0.25],
        ),
    ];
    for (proto, dtype, want) in cases {
        let payload = Event {
            wall_time: 1.0,
            step: 4,
            what: Some(event::What::Summary(Summary {
                value: vec![summary::Value {
                    tag: "tf".into(),
                    metadata: Some(mode_metadata(Mode::Eval, 1)),
                    value: Some(summary::value::Value::Tensor(proto)),
                    ..Default::default()
                }],
            })),
        }
        .encode_to_vec();
        let ev = decode_tensor_event(&payload, DEFAULT_MAX_TENSOR_BYTES).unwrap();
        assert_eq!(ev.tensor.dtype(), dtype);
        assert_eq!(ev.tensor.to_f64_vec(), want, "{dtype}");
        assert_eq!((ev.mode, ev.mode_step), (Mode::Eval, 1));
    }
    // Too many values for the shape is corrupt, not truncated data.
    let bad = TensorProto {
        dtype: 1,
        tensor_shape: Some(shape(&[1])),
        float_val: vec![1.0, 2.0],
        ..Default::default()
    };
    let payload = Event {
        wall_time: 0.0,
        step: 0,
        what: Some(event::What::Summary(Summary {
            value: vec![summary::Value {
                tag: "x".into(),
                value: Some(summary::value::Value::Tensor(bad)),
                ..Default::default()
            }],
        })),
    }
    .encode_to_vec();
    assert!(
        decode_tensor_event(&payload, DEFAULT_MAX_TENSOR_BYTES)
            .unwrap_err()
            .to_string()
            .contains("2 values for 1 elements")
    );
}

#[test]
fn an_event_without_mode_metadata_reads_as_global() {
    let payload = Event {
        wall_time: 0.0,
        step: 12,
        what: Some(event::What::Summary(Summary {
            value: vec![summary::Value {
                tag: "x".into(),
                value: Some(summary::value::Value::Tensor(TensorProto {
                    dtype: 1,
                    tensor_content: 2.0f32.to_le_bytes().to_vec(),
                    ..Default::default()
                })),
                ..Default::default()
            }],
        })),
    }
    .encode_to_vec();
    let ev = decode_tensor_event(&payload, DEFAULT_MAX_TENSOR_BYTES).unwrap();
    assert_eq!((ev.mode, ev.mode_step, ev.step), (Mode::Global, 12, 12));
    assert_eq!(ev.tensor.to_f64_vec(), vec![2.0]);
}

#[test]
fn python_tensorboard_files_decode() {
    let dir = golden().join("pysmdebug_tensorboard/TRAIN");
    for f in std::fs::read_dir(dir).unwrap() {
        let bytes = std::fs::read(f.unwrap().path()).unwrap();
        let mut scalars = 0;
        let mut histos = 0;
        for r in record::RecordIter::new(&bytes, 0, PayloadCrcPolicy::RequireCrc32c) {
            let ev = format::tensor::decode_event(r.unwrap().payload).unwrap();
            if let Some(event::What::Summary(s)) = ev.what {
                for v in s.value {
                    match v.value {
                        Some(summary::value::Value::SimpleValue(_)) => scalars += 1,
                        Some(summary::value::Value::Histo(_)) => histos += 1,
                        _ => {}
                    }
                }
            }
        }
        assert_eq!((scalars, histos), (3, 3));
    }
}
