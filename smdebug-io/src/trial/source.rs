//! The trial's only contact with storage and the format: list, fetch and decode.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use smdebug_core::{Collection, CollectionsFile, EndReason, Mode, Tensor};

use crate::error::{Error, Result};
use crate::format::index::IndexFile;
use crate::format::layout;
use crate::format::record::PayloadCrcPolicy;
use crate::storage::{Storage, open_storage};

pub(crate) fn open(location: &str) -> Result<Arc<dyn Storage>> {
    open_storage(location)
}

/// The end marker: `None` while the run goes on; `Some(reason)` once it ended, with the reason
/// our writer stores in it (`None` inside for Python smdebug's empty marker).
pub(crate) fn end_marker(storage: &dyn Storage) -> Result<Option<Option<EndReason>>> {
    match storage.get(layout::END_MARKER) {
        Ok(bytes) => Ok(Some(crate::format::parse_end_marker(&bytes))),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// One worker's collections file.
pub(crate) struct WorkerCollections {
    pub worker: Option<String>,
    pub num_workers: usize,
    pub collections: Vec<Collection>,
}

/// Collections files not read yet.
pub(crate) fn new_collection_files(
    storage: &dyn Storage,
    seen: &BTreeSet<String>,
) -> Result<Vec<(String, WorkerCollections)>> {
    let mut out = Vec::new();
    for path in storage.list(layout::COLLECTIONS_DIR)? {
        let Some(worker) = layout::parse_collections_file(&path) else {
            continue;
        };
        if seen.contains(&path) {
            continue;
        }
        let bytes = storage.get(&path)?;
        let bad = |reason: String| Error::BadCollections {
            path: path.clone(),
            reason,
        };
        let json: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        let file = CollectionsFile::from_json(&json).map_err(|e| bad(e.to_string()))?;
        out.push((
            path.clone(),
            WorkerCollections {
                worker: Some(worker),
                num_workers: file.num_workers,
                collections: file.collections,
            },
        ));
    }
    Ok(out)
}

/// One index file, decoded.
pub(crate) struct IndexEntry {
    /// The index file's path: conflicting entries are reported by it.
    pub path: String,
    pub step: u64,
    pub worker: String,
    pub mode: Mode,
    pub mode_step: u64,
    pub event_file: String,
    /// Later entries win, as in Python smdebug's reader.
    pub tensors: HashMap<String, (u64, u64)>,
    /// One line per name listed twice, naming both entries.
    pub repeated: Vec<String>,
}

/// Index files of steps `>= from` (every index file when `from` is `None`), in key order.
pub(crate) fn index_files_from(
    storage: &dyn Storage,
    from: Option<u64>,
) -> Result<Vec<IndexEntry>> {
    let paths = match from {
        Some(step) => storage.list_after(layout::INDEX_DIR, &layout::index_list_offset(step))?,
        None => storage.list(layout::INDEX_DIR)?,
    };
    // Fetching and parsing is most of the cost of opening a long run (one small file a step), so
    // a long listing is split over a few threads; the entries keep key order.
    let paths: Vec<(String, u64, String)> = paths
        .into_iter()
        .filter_map(|path| layout::parse_index_file(&path).map(|(s, w)| (path, s, w)))
        .collect();
    let parse_all = |chunk: &[(String, u64, String)]| -> Result<Vec<IndexEntry>> {
        chunk
            .iter()
            .map(|(path, step, worker)| read_index_file(storage, path, *step, worker))
            .collect()
    };
    let threads = reader_threads(paths.len());
    if threads <= 1 {
        return parse_all(&paths);
    }
    let parts = std::thread::scope(|scope| {
        let handles: Vec<_> = paths
            .chunks(paths.len().div_ceil(threads))
            .map(|chunk| scope.spawn(move || parse_all(chunk)))
            .collect();
        handles
            .into_iter()
            // A panic in a reader thread is a bug: re-raise it here rather than hide it.
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect::<Vec<_>>()
    });
    let mut out = Vec::with_capacity(paths.len());
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}

/// How many threads read `items` small files: one per 256 files, at most one per core (and 8).
pub(crate) fn reader_threads(items: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8)
        .min(items / 256 + 1)
}

/// One index file, fetched, parsed and checked against its path.
fn read_index_file(
    storage: &dyn Storage,
    path: &str,
    step: u64,
    worker: &str,
) -> Result<IndexEntry> {
    let path = path.to_string();
    let worker = worker.to_string();
    let bytes = storage.get(&path)?;
    let index = IndexFile::parse(&bytes, &path)?;
    let event_file = index
        .meta
        .event_file_name
        .clone()
        .unwrap_or_else(|| layout::event_file(step, &worker));
    // smdebug names both files after the same step and worker: an index pointing into
    // another worker's or another step's event file would hand out that worker's values.
    if layout::parse_event_file(&event_file).as_ref() != Some(&(step, worker.clone())) {
        return Err(Error::BadIndex {
            path,
            offset: 0,
            reason: format!(
                "event_file_name `{event_file}` is not the event file of step {step} of \
                 worker `{worker}` ({})",
                layout::event_file(step, &worker)
            ),
        });
    }
    let repeated = index
        .repeated_names()
        .into_iter()
        .map(|(first, later)| {
            format!(
                "{path}: tensor `{}` is listed twice, {first} and {later}; the later entry is \
                 read, as Python smdebug does",
                later.tensorname
            )
        })
        .collect();
    let tensors = index
        .tensor_payload
        .into_iter()
        .map(|t| (t.tensorname, (t.start_idx, t.length)))
        .collect();
    Ok(IndexEntry {
        path,
        step,
        worker,
        mode: index.meta.mode,
        mode_step: index.meta.mode_step,
        event_file,
        tensors,
        repeated,
    })
}

/// Where one tensor of one step of one worker lives.
#[derive(Clone, Debug)]
pub(crate) struct Location {
    /// Size of the whole event file as the index describes it (the end of its last record).
    pub file_len: u64,
    pub step: u64,
    pub mode: Mode,
    pub mode_step: u64,
    pub worker: std::sync::Arc<str>,
    pub event_file: std::sync::Arc<str>,
    pub start: u64,
    pub length: u64,
}

/// Event files up to this size are fetched whole and kept while the cache has room, so reading
/// the other tensors of the same step (the usual access pattern: several tensors over many steps)
/// costs no I/O.
const WHOLE_FILE_MAX: u64 = 1 << 20;

/// Whole event files kept in memory up to a byte budget.
///
/// Nothing is evicted: once the budget is spent, records of files not kept are read by range,
/// exactly their bytes. Readers usually sweep a run tensor by tensor, each sweep visiting every
/// step's file in the same order; evicting the oldest file would then evict each file just before
/// the next sweep needs it, and every read would fetch a whole file for one record.
#[derive(Debug)]
pub(crate) struct FileCache {
    files: HashMap<String, bytes::Bytes>,
    bytes: usize,
    budget: usize,
}

impl FileCache {
    pub(crate) fn new(budget: usize) -> Self {
        FileCache {
            files: HashMap::new(),
            bytes: 0,
            budget,
        }
    }

    fn get(&self, path: &str) -> Option<bytes::Bytes> {
        self.files.get(path).cloned()
    }

    fn has_room_for(&self, len: u64) -> bool {
        (self.bytes as u64).saturating_add(len) <= self.budget as u64
    }

    fn insert(&mut self, path: &str, data: bytes::Bytes) {
        if !self.has_room_for(data.len() as u64) || self.files.contains_key(path) {
            return;
        }
        self.bytes += data.len();
        self.files.insert(path.to_string(), data);
    }
}

/// Reads tensor `name`'s record where the index says it is, checking its framing and checksums,
/// that the record's tag is `name` and its step the index's step, and that nothing larger than
/// `max_tensor_bytes` is read or decoded.
pub(crate) fn read_tensor(
    storage: &dyn Storage,
    cache: &std::sync::Mutex<FileCache>,
    loc: &Location,
    name: &str,
    max_tensor_bytes: u64,
) -> Result<Tensor> {
    let end = loc
        .start
        .checked_add(loc.length)
        .ok_or_else(|| Error::CorruptRecord {
            path: loc.event_file.to_string(),
            offset: loc.start,
            reason: format!(
                "the index's offset {} + length {} overflows",
                loc.start, loc.length
            ),
        })?;
    if loc.length > max_tensor_bytes {
        return Err(Error::TensorTooLarge {
            path: loc.event_file.to_string(),
            offset: loc.start,
            tensor: name.to_string(),
            detail: "the length of its record in the index".to_string(),
            claimed: loc.length.into(),
            limit: max_tensor_bytes,
        });
    }
    let (cached, room) = match cache.lock() {
        Ok(c) => (c.get(&loc.event_file), c.has_room_for(loc.file_len)),
        Err(_) => (None, false),
    };
    let bytes = match cached.filter(|file| file.len() as u64 >= end) {
        Some(file) => slice_record(file, loc, end)?,
        None if loc.file_len <= WHOLE_FILE_MAX && room => {
            // Only as much as the index says the file holds: a file larger than its index (or
            // one that is not an event file at all) is never read whole.
            let file = get_range(storage, loc, 0..loc.file_len)?;
            if let Ok(mut c) = cache.lock() {
                c.insert(&loc.event_file, file.clone());
            }
            slice_record(file, loc, end)?
        }
        None => {
            let bytes = get_range(storage, loc, loc.start..end)?;
            if (bytes.len() as u64) < loc.length {
                return Err(short_file(loc, bytes.len() as u64));
            }
            bytes
        }
    };
    let event = crate::format::read_tagged_tensor_record(
        &bytes,
        &loc.event_file,
        loc.start,
        name,
        PayloadCrcPolicy::AcceptBoth,
        max_tensor_bytes,
    )?;
    if event.step != loc.step {
        return Err(Error::WrongTensor {
            path: loc.event_file.to_string(),
            offset: loc.start,
            expected: format!("`{name}` at step {}", loc.step),
            found: format!("`{name}` at step {}", event.step),
        });
    }
    Ok(event.tensor)
}

/// Bytes `range` of the location's event file. Storage refuses a range that starts past the
/// file's end; that is a file shorter than its index says, reported as such.
fn get_range(
    storage: &dyn Storage,
    loc: &Location,
    range: std::ops::Range<u64>,
) -> Result<bytes::Bytes> {
    let start = range.start;
    storage
        .get_range(&loc.event_file, range)
        .map_err(|e| match storage.size(&loc.event_file) {
            Ok(Some(size)) if size <= start => short_file(loc, 0),
            _ => e,
        })
}

/// The record's bytes within a whole event file, checked against the file's real length first.
fn slice_record(file: bytes::Bytes, loc: &Location, end: u64) -> Result<bytes::Bytes> {
    if (file.len() as u64) < end {
        return Err(short_file(
            loc,
            (file.len() as u64).saturating_sub(loc.start),
        ));
    }
    Ok(file.slice(loc.start as usize..end as usize))
}

/// A file shorter than its index says, reported like a truncated record.
fn short_file(loc: &Location, available: u64) -> Error {
    Error::IncompleteRecord {
        path: loc.event_file.to_string(),
        offset: loc.start,
        needed: loc.length,
        available,
    }
}
