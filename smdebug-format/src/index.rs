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

use std::borrow::Cow;
use std::collections::HashMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use smdebug_core::Mode;

use crate::error::{Error, Result};

/// The content of one index file.
///
/// An entry of `tensor_payload` whose `start_idx` or `length` cannot locate a record (not a
/// non-negative integer, shorter than a record's framing, or an end past `u64::MAX`) does not
/// make the file unreadable: it is kept in [`unusable_entries`](IndexFile::unusable_entries),
/// and reading that tensor at that step is the error (a placeholder entry, or a writer that
/// failed mid-entry, costs one value, as in Python smdebug). The other entries are in
/// `tensor_payload`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "RawIndexFile")]
pub struct IndexFile {
    /// The step the file describes.
    pub meta: IndexMeta,
    /// Where each tensor's record is (the usable entries, in file order).
    #[serde(default)]
    pub tensor_payload: Vec<TensorLocation>,
    /// Shapes saved without values (smdebug's `save_shape`), kept as they are.
    #[serde(default)]
    pub shape_payload: Vec<serde_json::Value>,
    /// The entries of `tensor_payload` that locate no record, with why (never written).
    #[serde(skip_serializing)]
    pub unusable_entries: Vec<UnusableEntry>,
}

/// An entry of an index file's `tensor_payload` that locates no record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnusableEntry {
    /// Its position in `tensor_payload` (0 for the first entry).
    pub position: usize,
    /// The tensor it names.
    pub tensorname: String,
    /// Why it locates no record.
    pub reason: String,
}

impl std::fmt::Display for UnusableEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tensor_payload entry {} (`{}`): {}",
            self.position, self.tensorname, self.reason
        )
    }
}

/// [`IndexFile`] as the JSON holds it: entries whose numbers are checked one by one.
#[derive(Deserialize)]
struct RawIndexFile {
    meta: IndexMeta,
    #[serde(default)]
    tensor_payload: Vec<RawLocation>,
    #[serde(default)]
    shape_payload: Vec<serde_json::Value>,
}

/// One entry of `tensor_payload` as found: its numbers, or why they are not numbers.
#[derive(Deserialize)]
struct RawLocation {
    tensorname: String,
    #[serde(deserialize_with = "entry_number")]
    start_idx: EntryNumber,
    #[serde(deserialize_with = "entry_number")]
    length: EntryNumber,
}

impl From<RawIndexFile> for IndexFile {
    fn from(raw: RawIndexFile) -> IndexFile {
        let mut tensor_payload = Vec::with_capacity(raw.tensor_payload.len());
        let mut unusable_entries = Vec::new();
        for (position, entry) in raw.tensor_payload.into_iter().enumerate() {
            match locate(&entry.start_idx, &entry.length) {
                Ok((start_idx, length)) => tensor_payload.push(TensorLocation {
                    tensorname: entry.tensorname,
                    start_idx,
                    length,
                }),
                Err(reason) => unusable_entries.push(UnusableEntry {
                    position,
                    tensorname: entry.tensorname,
                    reason,
                }),
            }
        }
        IndexFile {
            meta: raw.meta,
            tensor_payload,
            shape_payload: raw.shape_payload,
            unusable_entries,
        }
    }
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

/// A mode by name, its text borrowed from the JSON where it can be (owned and borrowed
/// indexes alike).
fn mode_de<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Mode, D::Error> {
    let Text(text) = Text::deserialize(d)?;
    Mode::from_name(text.trim())
        .ok_or_else(|| serde::de::Error::custom(format!("unknown mode `{text}`")))
}

/// A non-negative integer, or a string holding one (Python smdebug writes numbers; other tools
/// have written strings). Read without building a `serde_json::Value` first: index files are
/// parsed once per step, and a long run has tens of thousands of them.
fn u64_lenient<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    d.deserialize_any(Lenient)?
        .map_err(serde::de::Error::custom)
}

/// Reads any JSON value as a non-negative integer (or a string holding one), or the reason it
/// is not one: `Ok(Err(reason))` for a well-formed value of another kind.
struct Lenient;

fn refuse(found: impl std::fmt::Display) -> EntryNumber {
    Err(format!("expected a non-negative integer, found {found}"))
}

impl<'de> serde::de::Visitor<'de> for Lenient {
    type Value = EntryNumber;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a non-negative integer")
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<EntryNumber, E> {
        Ok(Ok(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<EntryNumber, E> {
        Ok(u64::try_from(v).or_else(|_| refuse(v)))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<EntryNumber, E> {
        Ok(refuse(serde_json::Value::from(v)))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<EntryNumber, E> {
        Ok(v.trim()
            .parse()
            .or_else(|_| refuse(serde_json::Value::from(v))))
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> std::result::Result<EntryNumber, E> {
        Ok(refuse(v))
    }

    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<EntryNumber, E> {
        Ok(refuse("null"))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<EntryNumber, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element::<serde_json::Value>()? {
            items.push(v);
        }
        Ok(refuse(serde_json::Value::Array(items)))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<EntryNumber, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some((k, v)) = map.next_entry::<String, serde_json::Value>()? {
            object.insert(k, v);
        }
        Ok(refuse(serde_json::Value::Object(object)))
    }
}

/// A number of an index entry: a non-negative integer (or a string holding one), or why it is
/// not one. Anything JSON holds is accepted here: the entry is judged when it is read.
pub type EntryNumber = std::result::Result<u64, String>;

/// [`u64_lenient`] for an entry's number: what does not parse is kept as the reason, so that one
/// bad entry does not make its index file unreadable.
fn entry_number<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<EntryNumber, D::Error> {
    d.deserialize_any(Lenient)
}

/// Where an entry's record is, `(start_idx, length)`; or why the entry locates none: a number
/// that is not one, a length shorter than a record's framing, an end past `u64::MAX`.
pub fn locate(
    start: &EntryNumber,
    length: &EntryNumber,
) -> std::result::Result<(u64, u64), String> {
    let start = start.clone().map_err(|e| format!("start_idx: {e}"))?;
    let length = length.clone().map_err(|e| format!("length: {e}"))?;
    if length < super::record::FRAMING_BYTES as u64 {
        return Err(format!(
            "length {length} is less than a record's framing ({} bytes)",
            super::record::FRAMING_BYTES
        ));
    }
    if start.checked_add(length).is_none() {
        return Err(format!("start_idx {start} + length {length} overflows"));
    }
    Ok((start, length))
}

/// A string borrowed from the JSON when it holds no escapes.
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

/// An index file read in place: what a reader needs of it, its strings borrowed from the
/// file's bytes where JSON allows (a string with escapes is unescaped into its own). The same
/// checks as [`IndexFile::parse`]; `shape_payload` must be a list there too, and its items are
/// skipped (readers do not use them; a list of nothing-sized items allocates nothing).
#[derive(Debug, Deserialize)]
pub struct IndexRef<'a> {
    /// The step this file indexes.
    #[serde(borrow)]
    pub meta: IndexMetaRef<'a>,
    /// Where each tensor record of the step is.
    #[serde(default, borrow)]
    pub tensor_payload: Vec<TensorLocationRef<'a>>,
    #[serde(default, rename = "shape_payload")]
    _shape_payload: Vec<serde::de::IgnoredAny>,
}

/// [`IndexMeta`], borrowed.
#[derive(Debug, Deserialize)]
pub struct IndexMetaRef<'a> {
    /// The step's mode.
    #[serde(deserialize_with = "mode_de")]
    pub mode: Mode,
    /// The step's number within its mode.
    #[serde(deserialize_with = "u64_lenient")]
    pub mode_step: u64,
    /// The event file holding the records, relative to the run.
    #[serde(default, borrow)]
    pub event_file_name: Option<Cow<'a, str>>,
}

/// [`TensorLocation`], borrowed.
#[derive(Debug, Deserialize)]
pub struct TensorLocationRef<'a> {
    /// The tensor's name.
    #[serde(borrow)]
    pub tensorname: Cow<'a, str>,
    /// The record's byte offset in the event file.
    #[serde(deserialize_with = "entry_number")]
    pub start_idx: EntryNumber,
    /// The record's length in bytes, framing included.
    #[serde(deserialize_with = "entry_number")]
    pub length: EntryNumber,
}

impl TensorLocationRef<'_> {
    /// Where the entry's record is, `(start_idx, length)`, or why it locates none.
    pub fn location(&self) -> std::result::Result<(u64, u64), String> {
        locate(&self.start_idx, &self.length)
    }
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

/// Deserializes an index file's JSON, an error carrying the byte offset where it went wrong.
fn from_json<'a, T: Deserialize<'a>>(bytes: &'a [u8], path: &str) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| {
        let offset = if e.is_eof() {
            bytes.len() as u64
        } else {
            byte_offset(bytes, e.line(), e.column())
        };
        Error::BadIndex {
            path: path.to_string(),
            offset,
            reason: e.to_string(),
        }
    })
}

/// The check every parsed index passes: entries need an event file. Each entry's numbers are
/// judged on their own ([`locate`]): an entry that locates no record is an error for that tensor
/// at that step only.
fn check_entries(path: &str, has_event_file: bool, has_entries: bool) -> Result<()> {
    if has_entries && !has_event_file {
        return Err(Error::BadIndex {
            path: path.to_string(),
            offset: 0,
            reason: "tensor_payload without meta.event_file_name".to_string(),
        });
    }
    Ok(())
}

/// What [`check_entries`] reads of a parsed index, owned ([`IndexFile`]) or borrowed
/// ([`IndexRef`]).
trait Entries {
    /// Whether `meta.event_file_name` is given.
    fn names_event_file(&self) -> bool;
    /// Whether `tensor_payload` lists anything, usable or not.
    fn has_entries(&self) -> bool;
}

impl Entries for IndexRef<'_> {
    fn names_event_file(&self) -> bool {
        self.meta.event_file_name.is_some()
    }
    fn has_entries(&self) -> bool {
        !self.tensor_payload.is_empty()
    }
}

impl Entries for IndexFile {
    fn names_event_file(&self) -> bool {
        self.meta.event_file_name.is_some()
    }
    fn has_entries(&self) -> bool {
        !self.tensor_payload.is_empty() || !self.unusable_entries.is_empty()
    }
}

/// Deserializes an index and runs [`check_entries`] on it.
fn parse_checked<'a, T: Deserialize<'a> + Entries>(bytes: &'a [u8], path: &str) -> Result<T> {
    let index: T = from_json(bytes, path)?;
    check_entries(path, index.names_event_file(), index.has_entries())?;
    Ok(index)
}

impl<'a> IndexRef<'a> {
    /// [`IndexFile::parse`] without copying the strings out of `bytes`, through serde_json
    /// (an index of the usual shape is read faster by `index_fast::read`).
    pub fn parse(bytes: &'a [u8], path: &str) -> Result<IndexRef<'a>> {
        parse_checked(bytes, path)
    }

    /// The index, after the check every parsed index passes (entries need an event file).
    pub fn checked(self, path: &str) -> Result<IndexRef<'a>> {
        check_entries(path, self.names_event_file(), self.has_entries())?;
        Ok(self)
    }

    /// An index of these parts and an empty `shape_payload`.
    pub fn from_parts(
        meta: IndexMetaRef<'a>,
        tensor_payload: Vec<TensorLocationRef<'a>>,
    ) -> IndexRef<'a> {
        IndexRef {
            meta,
            tensor_payload,
            _shape_payload: Vec::new(),
        }
    }
}

impl IndexFile {
    /// Parses an index file; `path` names it in errors, which carry the byte offset. Every entry
    /// is checked on its own: one that is not at least a record's framing long with
    /// `start_idx + length` within `u64` goes to
    /// [`unusable_entries`](IndexFile::unusable_entries). A name listed twice is not an error
    /// here: see [`IndexFile::repeated_names`].
    pub fn parse(bytes: &[u8], path: &str) -> Result<IndexFile> {
        parse_checked(bytes, path)
    }

    /// Entries that repeat an earlier entry's name, each with the entry it repeats (earlier
    /// first). smdebug's Keras hook writes a metric twice in one step (`accuracy` as a float32
    /// batch value, then as the float64 value of the epoch), and Python smdebug's reader keeps the
    /// later entry; so does the `Trial`, which reports every pair in smdebug-read's `Trial::warnings`.
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

    /// The in-place parse a reader uses accepts and refuses what `IndexFile::parse` does.
    #[test]
    fn the_in_place_parse_agrees_with_the_owned_one() {
        let with = |mode_step: &str, start: &str, shapes: &str| {
            format!(
                r#"{{"meta": {{"mode": " EVAL", "mode_step": {mode_step}, "event_file_name": "events/000000000003/000000000003_worker_0.tfevents"}}, "tensor_payload": [{{"tensorname": "a\u00e9", "start_idx": {start}, "length": 143}}], "shape_payload": {shapes}}}"#
            )
        };
        let shapes = r#"[{"x": 1}, 2, [3]]"#;
        for (mode_step, start, shapes, ok) in [
            ("3", "0", shapes, true),
            ("\" 3 \"", "\"12\"", shapes, true),
            ("-1", "0", shapes, false),
            ("3.0", "0", shapes, false),
            ("null", "0", shapes, false),
            ("[3]", "0", shapes, false),
            ("{\"n\": 3}", "0", shapes, false),
            ("true", "0", shapes, false),
            // An entry that locates no record is judged when it is read: the file parses.
            ("3", "18446744073709551615", shapes, true),
            ("3", "-4", shapes, true),
            ("3", "\"x\"", shapes, true),
            // Python smdebug iterates shape_payload: anything but a list is an error.
            ("3", "0", "[]", true),
            ("3", "0", "84", false),
            ("3", "0", "null", false),
            ("3", "0", "{}", false),
            ("3", "0", "\"x\"", false),
        ] {
            let text = with(mode_step, start, shapes);
            let owned = IndexFile::parse(text.as_bytes(), "i.json");
            let borrowed = IndexRef::parse(text.as_bytes(), "i.json");
            match (&owned, &borrowed) {
                (Ok(o), Ok(b)) => {
                    assert!(ok, "{text}");
                    assert_eq!(
                        (o.meta.mode, o.meta.mode_step),
                        (b.meta.mode, b.meta.mode_step)
                    );
                    assert_eq!(b.tensor_payload[0].tensorname, "aé");
                    match (b.tensor_payload[0].location(), &o.unusable_entries[..]) {
                        (Ok((start, _)), []) => assert_eq!(o.tensor_payload[0].start_idx, start),
                        (Err(reason), [entry]) => {
                            assert!(o.tensor_payload.is_empty(), "{text}");
                            assert_eq!((entry.position, &entry.reason), (0, &reason), "{text}");
                            assert_eq!(entry.tensorname, "aé");
                        }
                        other => panic!("{text}: {other:?}"),
                    }
                }
                (Err(o), Err(b)) => {
                    assert!(!ok, "{text}");
                    assert_eq!(o.to_string(), b.to_string(), "{text}");
                }
                _ => panic!("{text}: {owned:?} vs {borrowed:?}"),
            }
        }
    }

    /// One entry that locates no record (a 1-byte placeholder, a negative or fractional
    /// number, an end past u64::MAX) leaves the file and its other entries readable; the entry is
    /// kept with its position and the reason.
    #[test]
    fn an_entry_that_locates_no_record_leaves_the_other_entries_usable() {
        let entry = |name: &str, start: &str, length: &str| {
            format!(r#"{{"tensorname": "{name}", "start_idx": {start}, "length": {length}}}"#)
        };
        let text = format!(
            r#"{{"meta": {{"mode": "TRAIN", "mode_step": 0, "event_file_name": "events/000000000000/000000000000_worker_0.tfevents"}}, "tensor_payload": [{}, {}, {}, {}, {}, {}], "shape_payload": []}}"#,
            entry("loss", "0", "40"),
            entry("gradients/dummy:0", "40", "1"),
            entry("neg", "-3", "40"),
            entry("frac", "40", "40.5"),
            entry("far", "18446744073709551610", "40"),
            entry("w", "\"40\"", "40"),
        );
        let index = IndexFile::parse(text.as_bytes(), "i.json").unwrap();
        let usable: Vec<_> = index
            .tensor_payload
            .iter()
            .map(|t| (t.tensorname.as_str(), t.start_idx, t.length))
            .collect();
        assert_eq!(usable, [("loss", 0, 40), ("w", 40, 40)]);
        let unusable: Vec<_> = index
            .unusable_entries
            .iter()
            .map(|e| (e.position, e.tensorname.as_str(), e.reason.as_str()))
            .collect();
        assert_eq!(
            unusable,
            [
                (
                    1,
                    "gradients/dummy:0",
                    "length 1 is less than a record's framing (16 bytes)"
                ),
                (
                    2,
                    "neg",
                    "start_idx: expected a non-negative integer, found -3"
                ),
                (
                    3,
                    "frac",
                    "length: expected a non-negative integer, found 40.5"
                ),
                (
                    4,
                    "far",
                    "start_idx 18446744073709551610 + length 40 overflows"
                ),
            ]
        );
        assert_eq!(
            index.unusable_entries[0].to_string(),
            "tensor_payload entry 1 (`gradients/dummy:0`): length 1 is less than a record's \
             framing (16 bytes)"
        );
        // Never written back: the writer's own files have no such entries.
        let again = IndexFile::parse(&index.to_json_bytes(), "again").unwrap();
        assert!(again.unusable_entries.is_empty());
        assert_eq!(again.tensor_payload, index.tensor_payload);
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
