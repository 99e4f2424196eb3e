//! Crafted runs for tests (feature `testing`): hostile records that tests in several crates
//! (the reader's, the CLI's, the Python package's through the CLI's) read.

use std::path::Path;

use prost::Message;
use smdebug_core::{DType, Mode};

use smdebug_format::layout;
use smdebug_format::proto::{
    Event, Summary, TensorProto, TensorShapeProto, event, summary, tensor_shape_proto,
};
use smdebug_format::record::{PayloadChecksum, encode_record};
use smdebug_format::tensor::mode_metadata;

/// Writes `<dir>/run`, a one-step run (TRAIN, worker_0) whose only record is `name`: `dtype`,
/// shape `dims`, and one typed fill value (TensorFlow's typed fields: `bool_val`, `half_val` 1.0,
/// `float_val` 1.0, `int_val` 7), which readers repeat over the shape. Returns the run's path and the record's
/// length (under 100 bytes, whatever the shape).
pub fn fill_record_run(dir: &Path, name: &str, dtype: DType, dims: &[i64]) -> (String, usize) {
    let record = fill_record(name, dtype, dims, 0, Mode::Train, 0);
    let run = dir.join("run");
    let event_file = layout::event_file(0, "worker_0");
    let path = run.join(&event_file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &record).unwrap();
    let index = run.join(layout::index_file(0, "worker_0"));
    std::fs::create_dir_all(index.parent().unwrap()).unwrap();
    let json = serde_json::json!({"meta": {"mode": "TRAIN", "mode_step": 0, "event_file_name": event_file},
            "tensor_payload": [{"tensorname": name, "start_idx": 0, "length": record.len()}],
            "shape_payload": []});
    std::fs::write(index, serde_json::to_vec(&json).unwrap()).unwrap();
    (run.to_str().unwrap().to_string(), record.len())
}

/// One record of a step written by [`write_step`].
pub enum CraftedRecord {
    /// A tensor, framed as the writer frames it.
    Tensor(String, smdebug_core::Tensor),
    /// A record of under 100 bytes claiming `dims` of `dtype`, with one typed fill value, as
    /// [`fill_record_run`] writes it.
    Fill {
        /// The tensor name.
        name: String,
        /// The claimed dtype.
        dtype: DType,
        /// The claimed shape.
        dims: Vec<i64>,
    },
}

/// A one-element `f32` tensor record named `name`.
pub fn scalar(name: &str, value: f32) -> CraftedRecord {
    CraftedRecord::Tensor(
        name.to_string(),
        smdebug_core::Tensor::from_bytes(DType::F32, vec![], value.to_le_bytes().to_vec())
            .expect("one f32"),
    )
}

/// The framed record of a fill value (see [`fill_record_run`]) at `step`: `bool_val` true,
/// `half_val` 1.0, `float_val` 1.0, else `int_val` 7.
fn fill_record(
    name: &str,
    dtype: DType,
    dims: &[i64],
    step: u64,
    mode: Mode,
    mode_step: u64,
) -> Vec<u8> {
    let mut proto = TensorProto {
        dtype: dtype.tf_datatype(),
        tensor_shape: Some(TensorShapeProto {
            dim: dims
                .iter()
                .map(|&size| tensor_shape_proto::Dim {
                    size,
                    name: String::new(),
                })
                .collect(),
            unknown_rank: false,
        }),
        ..Default::default()
    };
    match dtype {
        DType::Bool => proto.bool_val = vec![true],
        DType::F16 => proto.half_val = vec![0x3c00], // 1.0
        DType::F32 => proto.float_val = vec![1.0],
        _ => proto.int_val = vec![7],
    }
    let payload = Event {
        wall_time: 1.0,
        step: step as i64,
        what: Some(event::What::Summary(Summary {
            value: vec![summary::Value {
                tag: name.to_string(),
                metadata: Some(mode_metadata(mode, mode_step)),
                value: Some(summary::value::Value::Tensor(proto)),
                ..Default::default()
            }],
        })),
    }
    .encode_to_vec();
    encode_record(&payload, PayloadChecksum::Crc32c)
}

/// Writes step `step` of `worker` into the run at `run` (created when missing): its event file
/// holding `records` in order, and its index file (`mode`, `mode_step`) locating each.
pub fn write_step(
    run: &Path,
    step: u64,
    worker: &str,
    mode: Mode,
    mode_step: u64,
    records: &[CraftedRecord],
) {
    let mut file = Vec::new();
    let mut payload = Vec::new();
    for record in records {
        let (name, bytes) = match record {
            CraftedRecord::Tensor(name, tensor) => {
                let stamp = smdebug_format::tensor::EventStamp {
                    wall_time: 1.0,
                    step,
                    mode,
                    mode_step,
                };
                (
                    name,
                    smdebug_format::frame_tensor(name, tensor, stamp, PayloadChecksum::Crc32c),
                )
            }
            CraftedRecord::Fill { name, dtype, dims } => {
                (name, fill_record(name, *dtype, dims, step, mode, mode_step))
            }
        };
        payload.push(
            serde_json::json!({"tensorname": name, "start_idx": file.len(),
                                        "length": bytes.len()}),
        );
        file.extend_from_slice(&bytes);
    }
    let event_file = layout::event_file(step, worker);
    let path = run.join(&event_file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &file).unwrap();
    let json = serde_json::json!({"meta": {"mode": mode.name(), "mode_step": mode_step,
                                           "event_file_name": event_file},
                                  "tensor_payload": payload, "shape_payload": []});
    let index = run.join(layout::index_file(step, worker));
    std::fs::create_dir_all(index.parent().unwrap()).unwrap();
    std::fs::write(index, serde_json::to_vec(&json).unwrap()).unwrap();
}

/// Writes `worker`'s collections file into the run at `run`, declaring `num_workers`.
pub fn write_collections(run: &Path, worker: &str, num_workers: usize) {
    let file = smdebug_core::CollectionsFile {
        collections: Vec::new(),
        num_workers,
    };
    let path = run.join(layout::collections_file(worker));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec(&file.to_json()).unwrap()).unwrap();
}

/// Makes `worker`'s index file of step `step` name step `other`'s event file, with that step's
/// entries (what makes a reader that skips the check show `other`'s values at `step`).
pub fn point_index_at(run: &Path, step: u64, worker: &str, other: u64) {
    let other_index = std::fs::read(run.join(layout::index_file(other, worker))).unwrap();
    std::fs::write(run.join(layout::index_file(step, worker)), other_index).unwrap();
}

/// `worker`'s index file of `step` in the run at `run`, parsed, and the position of `tensor`'s
/// entry in its `tensor_payload`.
fn index_of(run: &Path, step: u64, worker: &str, tensor: &str) -> (serde_json::Value, usize) {
    let path = run.join(layout::index_file(step, worker));
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let at = index["tensor_payload"]
        .as_array()
        .unwrap()
        .iter()
        .position(|e| e["tensorname"] == tensor)
        .unwrap_or_else(|| panic!("no `{tensor}` in {}", path.display()));
    (index, at)
}

/// Flips one bit in the middle of the payload of `tensor`'s record at `step` of `worker`, in
/// the run at `run`, after giving that record its real payload checksum (Python smdebug
/// stores a constant there, which no flipped bit could fail): what a bit flipped on disk does
/// to a record written with checksums. A reader then refuses that record for a checksum that
/// does not match. Returns the event file (relative to the run) and the record's offset.
pub fn flip_payload_bit(run: &Path, step: u64, worker: &str, tensor: &str) -> (String, u64) {
    use smdebug_format::record::{FOOTER_BYTES, HEADER_BYTES, MaskedCrc};
    let (index, at) = index_of(run, step, worker, tensor);
    let file = index["meta"]["event_file_name"]
        .as_str()
        .unwrap()
        .to_string();
    let entry = &index["tensor_payload"][at];
    let start = entry["start_idx"].as_u64().unwrap() as usize;
    let length = entry["length"].as_u64().unwrap() as usize;
    let path = run.join(&file);
    let mut bytes = std::fs::read(&path).unwrap();
    let payload = start + HEADER_BYTES..start + length - FOOTER_BYTES;
    let crc = MaskedCrc::of(&bytes[payload.clone()]).to_le_bytes();
    bytes[payload.end..payload.end + FOOTER_BYTES].copy_from_slice(&crc);
    bytes[(payload.start + payload.end) / 2] ^= 0x10;
    std::fs::write(&path, bytes).unwrap();
    (file, start as u64)
}

/// Points `tensor`'s index entry at `step` of `worker`, in the run at `run`, at a record
/// appended to its event file that claims `dims` of `f32` with one fill value (under 100
/// bytes, see [`fill_record_run`]): a record whose tensor is larger than a reader's budget,
/// as a bad writer or a hostile run may leave. Its tag, step and mode are the index's.
pub fn oversized_record(run: &Path, step: u64, worker: &str, tensor: &str, dims: &[i64]) {
    let (mut index, at) = index_of(run, step, worker, tensor);
    let file = index["meta"]["event_file_name"]
        .as_str()
        .unwrap()
        .to_string();
    let mode = index["meta"]["mode"]
        .as_str()
        .and_then(Mode::from_name)
        .unwrap_or(Mode::Global);
    let mode_step = index["meta"]["mode_step"].as_u64().unwrap_or(step);
    let record = fill_record(tensor, DType::F32, dims, step, mode, mode_step);
    let path = run.join(&file);
    let mut bytes = std::fs::read(&path).unwrap();
    let start = bytes.len();
    bytes.extend_from_slice(&record);
    std::fs::write(&path, bytes).unwrap();
    let entry = &mut index["tensor_payload"][at];
    entry["start_idx"] = start.into();
    entry["length"] = record.len().into();
    std::fs::write(
        run.join(layout::index_file(step, worker)),
        serde_json::to_vec(&index).unwrap(),
    )
    .unwrap();
}
