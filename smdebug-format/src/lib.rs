//! # smdebug-format
//!
//! smdebug's on-disk format, shared by the writers and the readers, without I/O: bytes in,
//! typed values or a typed [`Error`] out (naming the file and the byte offset).
//!
//! - [`record`]: TFRecord framing with masked CRC-32C; a sans-I/O decoder that tells a whole
//!   record from "need more bytes" from "corrupt at offset X".
//! - [`proto`]: the `Event` / `Summary` / `TensorProto` messages (prost, no build script).
//! - [`tensor`]: tensor events as smdebug writes them, and decoding back to a [`Tensor`].
//! - [`index`]: index files (where each tensor record of a step is).
//! - [`layout`]: the run directory's paths.
//! - [`tensorboard`]: scalar and histogram summaries for TensorBoard.
//! - [`system`]: system-metric records (one JSON line each) and their files' names.
//! - [`trace`]: framework trace files' names (Chrome traces under `framework/pevents`).
//! - [`stop`], [`progress`]: the stop request and the workers' progress files.
//! - [`code_profile`]: code-profile files' names and the window summary's JSON.
//!
//! A round trip through the format, without storage:
//!
//! ```
//! use smdebug_core::{Mode, Tensor};
//! use smdebug_format::{self as format, record, tensor::EventStamp};
//!
//! let t = Tensor::from_vec(&[1.0f32, 2.0, 3.0], vec![3]).unwrap();
//! let stamp = EventStamp { wall_time: 0.0, step: 5, mode: Mode::Train, mode_step: 5 };
//! let file = format::frame_tensor("fc.weight", &t, stamp, record::PayloadChecksum::Crc32c);
//!
//! let ev = format::read_tensor_record(&file, "events/000000000005/000000000005_worker_0.tfevents", 0,
//!                                     record::PayloadCrcPolicy::AcceptBoth).unwrap();
//! assert_eq!((ev.name.as_str(), ev.step, ev.mode), ("fc.weight", 5, Mode::Train));
//! assert_eq!(ev.tensor, t);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod budget;
pub mod code_profile;
pub mod error;
pub mod index;
pub mod index_fast;
pub mod jobs;
pub mod layout;
pub mod number;
pub mod progress;
pub mod proto;
pub mod record;
pub mod stop;
pub mod strings;
pub mod system;
pub mod tensor;
pub mod tensorboard;
#[cfg(test)]
mod test_data;
#[cfg(feature = "testing")]
pub mod testing;
pub mod trace;
mod wire;

use smdebug_core::{EndReason, StopCause, Tensor};

pub use crate::error::{Error, Result};
pub use index::{IndexFile, IndexMeta, TensorLocation, UnusableEntry};
pub use record::{
    ChecksumKind, Corruption, Decoded, MaskedCrc, PayloadChecksum, PayloadCrcPolicy, RecordIter,
    RecordRef, decode_record,
};
pub use tensor::{EventStamp, TensorEvent, TensorEventRef};

/// One framed record holding tensor `name` (copies the tensor's bytes once; the writer avoids
/// even that by keeping the parts apart).
pub fn frame_tensor(
    name: &str,
    tensor: &Tensor,
    stamp: EventStamp,
    checksum: PayloadChecksum,
) -> Vec<u8> {
    let enc = tensor::encode_tensor(name, tensor, stamp);
    let mut out = Vec::with_capacity(enc.len() + record::FRAMING_BYTES);
    out.extend_from_slice(&record::header(enc.len() as u64));
    out.extend_from_slice(&enc.prefix);
    out.extend_from_slice(enc.data);
    out.extend_from_slice(&checksum.footer([enc.prefix.as_slice(), enc.data]));
    out
}

/// Decodes the bytes an index entry points at (exactly one record) as a tensor event holding one
/// tensor value, decoding no tensor over [`tensor::DEFAULT_MAX_TENSOR_BYTES`]. `path` and
/// `offset` (the record's offset in the file) name it in errors.
pub fn read_tensor_record(
    bytes: &[u8],
    path: &str,
    offset: u64,
    policy: PayloadCrcPolicy,
) -> Result<TensorEvent> {
    let rec = record::decode_exact_record(bytes, path, offset, policy)?;
    tensor::decode_tensor_event(rec.payload, tensor::DEFAULT_MAX_TENSOR_BYTES)
        .map_err(|e| e.at(path, offset))
}

/// Decodes the bytes an index entry points at (exactly one record) as the tensor tagged `tag`:
/// what a reader does with an index entry named `tag`. A record holding other tags only is
/// [`Error::WrongTensor`]; a tensor whose read costs more than `budget` (its decoded value and
/// the reader's conversion of it, see [`budget`]) is [`Error::TensorTooLarge`].
pub fn read_tagged_tensor_record(
    bytes: &[u8],
    path: &str,
    offset: u64,
    tag: &str,
    policy: PayloadCrcPolicy,
    budget: impl Into<budget::Budget>,
) -> Result<TensorEvent> {
    let rec = record::decode_exact_record(bytes, path, offset, policy)?;
    tensor::decode_tagged_tensor_event(rec.payload, tag, budget).map_err(|e| e.at(path, offset))
}

/// Decodes the bytes an index entry points at (exactly one record) as the string tensor tagged
/// `tag`, with the checks of [`read_tagged_tensor_record`]; its strings stay in `bytes`.
pub fn read_tagged_string_record_ref<'a>(
    bytes: &'a [u8],
    path: &str,
    offset: u64,
    tag: &str,
    policy: PayloadCrcPolicy,
    max_tensor_bytes: u64,
) -> Result<strings::StringEventRef<'a>> {
    let rec = record::decode_exact_record(bytes, path, offset, policy)?;
    strings::decode_string_event_ref(rec.payload, Some(tag), max_tensor_bytes)
        .map_err(|e| e.at(path, offset))
}

/// [`read_tagged_tensor_record`] without copying the values: they stay in `bytes` when the
/// record stores them raw (as smdebug always does).
pub fn read_tagged_tensor_record_ref<'a>(
    bytes: &'a [u8],
    path: &str,
    offset: u64,
    tag: &str,
    policy: PayloadCrcPolicy,
    budget: impl Into<budget::Budget>,
) -> Result<tensor::TensorEventRef<'a>> {
    let rec = record::decode_exact_record(bytes, path, offset, policy)?;
    tensor::decode_tensor_event_ref(rec.payload, Some(tag), budget).map_err(|e| e.at(path, offset))
}

/// Every tensor event of a whole event file, in order (no tensor over
/// [`tensor::DEFAULT_MAX_TENSOR_BYTES`]). A damaged record is an error; a file that ends inside a
/// record is [`Error::IncompleteRecord`].
pub fn read_tensor_file(
    bytes: &[u8],
    path: &str,
    policy: PayloadCrcPolicy,
) -> Result<Vec<TensorEvent>> {
    let mut it = RecordIter::new(bytes, 0, policy);
    let mut out = Vec::new();
    for rec in it.by_ref() {
        let rec = rec.map_err(|c| c.in_file(path))?;
        out.push(
            tensor::decode_tensor_event(rec.payload, tensor::DEFAULT_MAX_TENSOR_BYTES)
                .map_err(|e| e.at(path, rec.offset))?,
        );
    }
    if let Some(record::Tail::Incomplete {
        offset,
        needed,
        available,
    }) = it.tail()
    {
        return Err(Error::IncompleteRecord {
            path: path.to_string(),
            offset: *offset,
            needed: *needed,
            available: *available,
        });
    }
    Ok(out)
}

/// The body of the end-of-run marker: `{"reason": "completed"}` or `{"reason": "stopped",
/// "message": "...", "rule": "...", "step": N}` (rule and step when a rule asked), plus the
/// wall time.
pub fn end_marker_body(reason: &EndReason, wall_time: f64) -> Vec<u8> {
    let v = match reason {
        EndReason::Completed => serde_json::json!({"reason": "completed", "wall_time": wall_time}),
        EndReason::Stopped(cause) => {
            let mut v = serde_json::json!({
                "reason": "stopped",
                "message": cause.reason,
                "wall_time": wall_time,
            });
            if let Some(rule) = &cause.rule {
                v["rule"] = rule.as_str().into();
            }
            if let Some(step) = cause.step {
                v["step"] = step.into();
            }
            v
        }
    };
    serde_json::to_vec(&v).expect("marker serializes")
}

/// The reason in an end marker; `None` for an empty marker (Python smdebug writes an empty file)
/// or one that is not ours. A marker written before markers named the rule reads as a stop
/// without one.
pub fn parse_end_marker(bytes: &[u8]) -> Option<EndReason> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    match v.get("reason")?.as_str()? {
        "completed" => Some(EndReason::Completed),
        "stopped" => Some(EndReason::Stopped(StopCause {
            reason: v
                .get("message")
                .and_then(|m| m.as_str())
                .unwrap_or_default()
                .to_string(),
            rule: v.get("rule").and_then(|r| r.as_str()).map(str::to_string),
            step: v.get("step").and_then(serde_json::Value::as_u64),
        })),
        _ => None,
    }
}
