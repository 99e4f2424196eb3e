//! Index files: `index/<step/1000:09>/<step:012>_<worker>.json`, one per step and worker, which
//! say where each tensor record of the step's event file starts and how long it is.
//!
//! ```json
//! {"meta": {"mode": "TRAIN", "mode_step": 3,
//!           "event_file_name": "events/000000000003/000000000003_worker_0.tfevents"},
//!  "tensor_payload": [{"tensorname": "loss", "start_idx": 0, "length": 143}],
//!  "shape_payload": []}
//! ```
//!
//! `start_idx` is the byte offset of the record's first byte in the event file and `length` the
//! record's whole length, framing included (what smdebug's `TSAccessFile.write` returns).

use std::collections::HashMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use smdebug_core::Mode;

use crate::error::{Error, Result};

/// The content of one index file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexFile {
    /// The step the file describes.
    pub meta: IndexMeta,
    /// Where each tensor's record is.
    #[serde(default)]
    pub tensor_payload: Vec<TensorLocation>,
    /// Shapes saved without values (smdebug's `save_shape`), kept as they are.
    #[serde(default)]
    pub shape_payload: Vec<serde_json::Value>,
}

/// The step an index file describes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexMeta {
    /// The step's mode (written as its upper-case name).
    #[serde(serialize_with = "mode_ser", deserialize_with = "mode_de")]
    pub mode: Mode,
    /// The step within the mode.
    #[serde(deserialize_with = "u64_lenient")]
    pub mode_step: u64,
    /// The event file, relative to the run root; absent when only shapes were saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_file_name: Option<String>,
}

/// One tensor record in an event file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorLocation {
    /// The tensor's name.
    pub tensorname: String,
    /// Byte offset of the record's first byte.
    #[serde(deserialize_with = "u64_lenient")]
    pub start_idx: u64,
    /// The record's length including its 16 framing bytes.
    #[serde(deserialize_with = "u64_lenient")]
    pub length: u64,
}

impl TensorLocation {
    /// The offset of the byte after the record; `None` when `start_idx + length` overflows
    /// (never for an index that [`IndexFile::parse`] accepted).
    pub fn end(&self) -> Option<u64> {
        self.start_idx.checked_add(self.length)
    }
}

impl std::fmt::Display for TensorLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` at byte {} ({} bytes)",
            self.tensorname, self.start_idx, self.length
        )
    }
}

fn mode_ser<S: Serializer>(mode: &Mode, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(mode.name())
}

fn mode_de<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Mode, D::Error> {
    let text = String::deserialize(d)?;
    Mode::from_name(text.trim())
        .ok_or_else(|| serde::de::Error::custom(format!("unknown mode `{text}`")))
}

fn u64_lenient<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    let n = match &v {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    n.ok_or_else(|| serde::de::Error::custom(format!("expected a non-negative integer, found {v}")))
}

/// The byte offset of serde_json's (line, column) position in `text`.
fn byte_offset(text: &[u8], line: usize, column: usize) -> u64 {
    if line == 0 {
        return text.len() as u64;
    }
    let mut offset = 0usize;
    for (i, l) in text.split(|&b| b == b'\n').enumerate() {
        if i + 1 == line {
            return (offset + column.saturating_sub(1)).min(text.len()) as u64;
        }
        offset += l.len() + 1;
    }
    text.len() as u64
}

impl IndexFile {
    /// Parses an index file; `path` names it in errors, which carry the byte offset. Every entry
    /// is checked: at least a record's framing long and `start_idx + length` within `u64`. A
    /// name listed twice is not an error here: see [`IndexFile::repeated_names`].
    pub fn parse(bytes: &[u8], path: &str) -> Result<IndexFile> {
        let bad = |offset: u64, reason: String| Error::BadIndex {
            path: path.to_string(),
            offset,
            reason,
        };
        let index: IndexFile = serde_json::from_slice(bytes).map_err(|e| {
            let offset = if e.is_eof() {
                bytes.len() as u64
            } else {
                byte_offset(bytes, e.line(), e.column())
            };
            bad(offset, e.to_string())
        })?;
        if !index.tensor_payload.is_empty() && index.meta.event_file_name.is_none() {
            return Err(bad(
                0,
                "tensor_payload without meta.event_file_name".to_string(),
            ));
        }
        for loc in &index.tensor_payload {
            if loc.length < super::record::FRAMING_BYTES as u64 {
                return Err(bad(
                    0,
                    format!(
                        "tensor `{}` has length {}, less than a record's framing",
                        loc.tensorname, loc.length
                    ),
                ));
            }
            if loc.end().is_none() {
                return Err(bad(
                    0,
                    format!(
                        "tensor `{}`: start_idx {} + length {} overflows",
                        loc.tensorname, loc.start_idx, loc.length
                    ),
                ));
            }
        }
        Ok(index)
    }

    /// Entries that repeat an earlier entry's name, each with the entry it repeats (earlier
    /// first). smdebug's Keras hook writes a metric twice in one step (`accuracy` as a float32
    /// batch value, then as the float64 value of the epoch), and Python smdebug's reader keeps the
    /// later entry; so does the `Trial`, which reports every pair in [`crate::Trial::warnings`].
    pub fn repeated_names(&self) -> Vec<(&TensorLocation, &TensorLocation)> {
        let mut seen: HashMap<&str, &TensorLocation> =
            HashMap::with_capacity(self.tensor_payload.len());
        let mut out = Vec::new();
        for loc in &self.tensor_payload {
            if let Some(first) = seen.insert(&loc.tensorname, loc) {
                out.push((first, loc));
            }
        }
        out
    }

    /// The JSON smdebug writes (compact, one line).
    pub fn to_json_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("index files serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_python_smdebug_writes() {
        let text = br#"{"meta": {"mode": "TRAIN", "mode_step": 3, "event_file_name": "events/000000000003/000000000003_worker_0.tfevents"}, "tensor_payload": [{"tensorname": "loss", "start_idx": 0, "length": 143}], "shape_payload": []}"#;
        let idx = IndexFile::parse(text, "index/000000000/000000000003_worker_0.json").unwrap();
        assert_eq!(idx.meta.mode, Mode::Train);
        assert_eq!(idx.meta.mode_step, 3);
        assert_eq!(idx.tensor_payload[0].length, 143);
        let again = IndexFile::parse(&idx.to_json_bytes(), "x").unwrap();
        assert_eq!(again, idx);
    }

    #[test]
    fn error_offset_points_into_the_text() {
        let text = b"{\"meta\": {\"mode\": \"TRAIN\",\n \"mode_step\": oops}}";
        let err = IndexFile::parse(text, "i.json").unwrap_err();
        let Error::BadIndex { offset, .. } = err else {
            panic!("{err}")
        };
        assert_eq!(&text[offset as usize..offset as usize + 1], b"o");
    }
}
