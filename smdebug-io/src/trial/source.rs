//! The trial's only contact with storage and the format: list, fetch and decode (the index
//! files: [`index_files`](super::index_files)).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use smdebug_core::{Collection, CollectionsFile, DType, EndReason, Mode, StringTensor, Tensor};

use crate::error::{Error, Result};
use crate::format::budget::{Budget, Conversion};
use crate::format::layout;
use crate::format::record::PayloadCrcPolicy;
use crate::storage::{LocalStorage, Storage, open_storage};

pub(crate) use super::index_files::{
    InOrder, IndexEntry, IndexPath, Slot, TensorTable, index_files_from, list_index_files,
    parse_index_files, read_whole, reader_threads,
};

/// The run's storage, and its directory when it is on local disk (where event files can be
/// mapped).
pub(crate) fn open(location: &str) -> Result<(Arc<dyn Storage>, Option<PathBuf>)> {
    let local = if !location.contains("://") {
        Some(PathBuf::from(location))
    } else {
        url::Url::parse(location)
            .ok()
            .filter(|u| u.scheme() == "file")
            .and_then(|u| u.to_file_path().ok())
    };
    match local {
        Some(dir) => {
            let storage = LocalStorage::new(&dir)?;
            let root = storage.root().to_path_buf();
            Ok((Arc::new(storage), Some(root)))
        }
        None => Ok((open_storage(location)?, None)),
    }
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

/// Collections files not read yet; the first one that cannot be read is the error.
pub(crate) fn new_collection_files(
    storage: &dyn Storage,
    seen: &BTreeSet<String>,
) -> Result<Vec<(String, WorkerCollections)>> {
    let mut out = Vec::new();
    for path in unread_collection_files(storage, seen)? {
        let file = read_collections_file(storage, &path)?;
        out.push((path, file));
    }
    Ok(out)
}

/// The paths of the collections files that `seen` does not hold, in key order.
pub(crate) fn unread_collection_files(
    storage: &dyn Storage,
    seen: &BTreeSet<String>,
) -> Result<Vec<String>> {
    Ok(storage
        .list(layout::COLLECTIONS_DIR)?
        .into_iter()
        .filter(|path| layout::parse_collections_file(path).is_some() && !seen.contains(path))
        .collect())
}

/// One worker's collections file, read and parsed.
pub(crate) fn read_collections_file(
    storage: &dyn Storage,
    path: &str,
) -> Result<WorkerCollections> {
    let bytes = storage.get(path)?;
    let bad = |reason: String| Error::BadCollections {
        path: path.to_string(),
        reason,
    };
    let json: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
    let file = CollectionsFile::from_json(&json).map_err(|e| bad(e.to_string()))?;
    Ok(WorkerCollections {
        worker: layout::parse_collections_file(path),
        num_workers: file.num_workers,
        collections: file.collections,
    })
}

/// One step's event file of one worker. Every location in it shares it, and with it the file's
/// bytes once they were fetched or mapped: reading the other tensors of the step (the usual
/// pattern: several tensors over many steps) looks nothing up and costs no I/O.
#[derive(Debug)]
pub(crate) struct EventFile {
    /// The file, relative to the run.
    pub path: Box<str>,
    pub worker: Arc<str>,
    /// Size of the file as the index describes it (the end of its last record).
    pub len: u64,
    /// The whole file (up to `len`) while kept: mapped, or fetched within the heap budget
    /// (then `true`: its length counts against the budget until it is let go).
    data: Mutex<Option<(Bytes, bool)>>,
}

impl EventFile {
    pub(crate) fn new(path: String, worker: Arc<str>, len: u64) -> EventFile {
        EventFile {
            path: path.into(),
            worker,
            len,
            data: Mutex::new(None),
        }
    }

    fn data(&self) -> MutexGuard<'_, Option<(Bytes, bool)>> {
        // Nothing can be left half-done under this lock: recover the guard.
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The whole file, when a reader has kept it (mapped or fetched).
    pub(crate) fn kept(&self) -> Option<Bytes> {
        self.data().as_ref().map(|(bytes, _)| bytes.clone())
    }

    /// Keeps `bytes` as the whole file, unless another reader kept it first: then its bytes
    /// (the same) are returned and `bytes` is dropped, its budget (when `heap`) given back.
    fn keep(&self, bytes: Bytes, heap: bool, files: &Files) -> Bytes {
        let mut data = self.data();
        if let Some((kept, _)) = data.as_ref() {
            if heap {
                files.release(self.len);
            }
            return kept.clone();
        }
        *data = Some((bytes.clone(), heap));
        bytes
    }

    /// Lets go of the kept file, if any: a fetched file's length goes back to the budget, a
    /// mapped file is unmapped once the values read from it are dropped too.
    pub(crate) fn forget(&self, files: &Files) {
        if let Some((_, heap)) = self.data().take()
            && heap
        {
            files.release(self.len);
        }
    }
}

/// Where one tensor of one step of one worker lives.
#[derive(Clone, Debug)]
pub(crate) struct Location {
    pub file: Arc<EventFile>,
    pub step: u64,
    pub mode: Mode,
    pub mode_step: u64,
    pub start: u64,
    pub length: u64,
}

/// Event files up to this size are fetched whole into memory and kept while the heap budget
/// lasts (when they cannot be mapped), so reading the other tensors of the same step costs no
/// I/O.
const WHOLE_FILE_MAX: u64 = 1 << 20;

/// Mappings every trial of the process may hold together. Linux allows a process 65,530 maps
/// by default (`vm.max_map_count`), and its allocator needs some of them: trials keep to half.
/// Past this, files are read into memory as when mapping is off.
const MAX_MAPPED_FILES: usize = 32 << 10;

/// Mappings left for the process's trials (see [`MAX_MAPPED_FILES`]).
static MAPS_LEFT: AtomicUsize = AtomicUsize::new(MAX_MAPPED_FILES);

/// A mapped event file; gives its slot back to [`MAPS_LEFT`] when unmapped.
struct MappedFile(memmap2::Mmap);

impl AsRef<[u8]> for MappedFile {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        MAPS_LEFT.fetch_add(1, Ordering::Relaxed);
    }
}

/// How a trial gets at event files, and the memory it may keep for them.
///
/// Local event files are memory-mapped (when [`TrialOptions::map_files`](super::TrialOptions)
/// is on): a record is read straight from the page cache, with no copy into fresh memory, and
/// the map is kept with the file until the trial is dropped (or the file let go). Other files
/// up to 1 MiB are fetched whole and kept while the heap budget lasts; once it is spent,
/// records are read by range, exactly their bytes. Nothing is evicted on its own: readers usually sweep a run tensor by
/// tensor, each sweep visiting every step's file in the same order, and evicting the oldest
/// file would evict each file just before the next sweep needs it. A reader that goes step by
/// step says when it is done with old steps (`Trial::forget_files_before`).
#[derive(Debug)]
pub(crate) struct Files {
    /// The run's directory when it is on local disk and files may be mapped.
    map_root: Option<PathBuf>,
    budget: usize,
    kept: AtomicUsize,
}

impl Files {
    pub(crate) fn new(map_root: Option<PathBuf>, budget: usize) -> Self {
        Files {
            map_root,
            budget,
            kept: AtomicUsize::new(0),
        }
    }

    /// Gives `len` bytes back to the heap budget (taken by [`reserve`](Files::reserve)).
    fn release(&self, len: u64) {
        if let Ok(len) = usize::try_from(len) {
            self.kept.fetch_sub(len, Ordering::Relaxed);
        }
    }

    /// Takes `len` bytes of the heap budget; false (and nothing taken) when they do not fit.
    fn reserve(&self, len: u64) -> bool {
        let Ok(len) = usize::try_from(len) else {
            return false;
        };
        self.kept
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |kept| {
                kept.checked_add(len).filter(|&k| k <= self.budget)
            })
            .is_ok()
    }

    /// Maps the location's event file (up to the length the index gives it) and keeps the map
    /// with the file. `None` when mapping is off, the process has no mapping left, or the file
    /// cannot be opened or mapped: the caller then reads through storage, which reports a
    /// missing file as such.
    ///
    /// The file's size is taken from the open file itself, so a file cut short before it is
    /// mapped maps only what it holds, and a record past its end is an
    /// [`Error::IncompleteRecord`] like a short read. A file cut short *after* it was mapped
    /// would fault (SIGBUS) when the cut pages are read: smdebug's writers (ours and Python's)
    /// never change a published event file (they write a temporary file and rename it), so only
    /// a file rewritten in place by something else can do that, and
    /// [`TrialOptions::map_files`](super::TrialOptions) turns mapping off for such runs.
    fn map(&self, file: &EventFile) -> Option<Bytes> {
        let root = self.map_root.as_ref()?;
        // The path comes from an index file: it must stay inside the run.
        crate::storage::check_relative("", &file.path).ok()?;
        if MAPS_LEFT
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_err()
        {
            return None;
        }
        let mapped = (|| {
            // Only a regular file inside the run (never a FIFO, which would block the open).
            let (f, size) = crate::storage::regular::open(root, &file.path).ok()?;
            let len = size.min(file.len);
            if len == 0 {
                return None;
            }
            // SAFETY: the map is read-only and private to this trial. Its bytes are only read;
            // the file is published and never changed by smdebug's writers, and its length was
            // taken from the open file just now (see above for a file cut short later).
            #[allow(unsafe_code)]
            let map = unsafe {
                memmap2::MmapOptions::new()
                    .len(usize::try_from(len).ok()?)
                    .populate()
                    .map(&f)
            }
            .ok()?;
            Some(map)
        })();
        match mapped {
            Some(map) => Some(Bytes::from_owner(MappedFile(map))),
            None => {
                MAPS_LEFT.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }
}

/// A saved value in the dtype it was saved in, its bytes not copied yet: when the record holds
/// them raw (smdebug always does), `data` is a slice of the event file as read or mapped.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorBytes {
    /// The element type the value was saved in.
    pub dtype: DType,
    /// The dimensions, outermost first (empty for a scalar).
    pub shape: Vec<usize>,
    /// Little-endian, row-major; exactly as many bytes as dtype and shape need (checked).
    pub data: Bytes,
}

impl TensorBytes {
    /// The value as a [`Tensor`] (one copy of the bytes).
    pub fn to_tensor(&self) -> Tensor {
        Tensor::from_bytes(self.dtype, self.shape.clone(), self.data.to_vec())
            .expect("dtype, shape and length were checked when the record was decoded")
    }
}

/// Reads tensor `name`'s record where the index says it is, checking its framing and checksums,
/// that the record's tag is `name` and its step the index's step, and that nothing larger than
/// `budget` is read or decoded.
pub(crate) fn read_tensor(
    storage: &dyn Storage,
    files: &Files,
    loc: &Location,
    name: &str,
    budget: Budget,
) -> Result<Tensor> {
    read_with(storage, files, loc, name, budget, |_, event| {
        Tensor::from_bytes(event.dtype, event.shape, event.data.into_owned())
            .expect("dtype, shape and length were checked when the record was decoded")
    })
}

/// A saved value: numbers (their bytes not copied, see [`TensorBytes`]), or strings
/// (`DT_STRING`: XGBoost's `trees/*` text columns, any numpy `str` array smdebug saved).
#[derive(Clone, Debug, PartialEq)]
pub enum TensorValue {
    /// A numeric tensor.
    Numbers(TensorBytes),
    /// A string tensor.
    Strings(StringTensor),
}

/// Tensor `name`'s record at `loc`, numbers or strings, checked as [`read_tensor`] checks it
/// (a string tensor's strings and their per-element overhead count against
/// `budget`).
pub(crate) fn read_value(
    storage: &dyn Storage,
    files: &Files,
    loc: &Location,
    name: &str,
    budget: Budget,
) -> Result<TensorValue> {
    let bytes = record_bytes(storage, files, loc, name, budget)?;
    match decode_with(&bytes, loc, name, budget, in_place) {
        Ok(numbers) => Ok(TensorValue::Numbers(numbers)),
        Err(Error::StringTensor { .. }) => {
            decode_strings(&bytes, loc, name, budget).map(TensorValue::Strings)
        }
        Err(e) => Err(e),
    }
}

/// The string tensor in record `bytes` (exactly the record at `loc`): its tag must be `name` and
/// its step the index's step.
fn decode_strings(
    bytes: &Bytes,
    loc: &Location,
    name: &str,
    budget: Budget,
) -> Result<StringTensor> {
    let event = crate::format::read_tagged_string_record_ref(
        bytes,
        &loc.file.path,
        loc.start,
        name,
        PayloadCrcPolicy::AcceptBoth,
        budget.limit,
    )?;
    if event.step != loc.step {
        return Err(Error::WrongTensor {
            path: loc.file.path.to_string(),
            offset: loc.start,
            expected: format!("`{name}` at step {}", loc.step),
            found: format!("`{name}` at step {}", event.step),
        });
    }
    Ok(event.to_tensor())
}

/// [`read_tensor`] without copying the values.
pub(crate) fn read_tensor_bytes(
    storage: &dyn Storage,
    files: &Files,
    loc: &Location,
    name: &str,
    budget: Budget,
) -> Result<TensorBytes> {
    read_with(storage, files, loc, name, budget, in_place)
}

/// Tensor `name`'s value at `loc` within `file`, the whole event file as read (or as much of it
/// as there was), its bytes not copied; checked as [`read_tensor`] checks it.
pub(crate) fn tensor_bytes_in(
    file: &Bytes,
    loc: &Location,
    name: &str,
    budget: Budget,
) -> Result<TensorBytes> {
    let end = record_end(loc, name, budget)?;
    let record = slice_record(file, loc, end)?;
    decode_with(&record, loc, name, budget, in_place)
}

/// Records longer than this cannot hold one number (a scalar's record is about 100 bytes:
/// framing, tag, step, mode metadata, dtype, shape and at most 8 bytes of value).
pub(crate) const MAX_NUMBER_RECORD: u64 = 4096;

/// The budget of reading one number: one element of any dtype (at most 8 bytes) and its `f64`
/// (8 more). A record whose header claims a second element, of any dtype, costs more and is
/// refused from the header, before anything is decoded.
const ONE_NUMBER: Budget = Budget {
    limit: 16,
    conversion: Conversion::F64,
};

/// The one number tensor `name`'s record at `loc` holds, its framing, checksums, tag and step
/// checked as [`read_tensor`] checks them. `file`: the whole event file when it was read (else
/// the record is read by range). `Ok(None)` when the record is not one number (its header
/// claims another number of elements, or strings; or it is longer than [`MAX_NUMBER_RECORD`],
/// then it is not read at all): nothing of its values is decoded then.
pub(crate) fn number_at(
    storage: &dyn Storage,
    file: Option<&Bytes>,
    loc: &Location,
    name: &str,
) -> Result<Option<f64>> {
    if loc.length > MAX_NUMBER_RECORD {
        return Ok(None);
    }
    let end = record_end(loc, name, Budget::from(MAX_NUMBER_RECORD))?;
    let record = match file {
        Some(file) => slice_record(file, loc, end)?,
        None => {
            let bytes = get_range(storage, loc, loc.start..end)?;
            if (bytes.len() as u64) < loc.length {
                return Err(short_file(loc, bytes.len() as u64));
            }
            bytes
        }
    };
    let number = decode_with(&record, loc, name, ONE_NUMBER, |_, event| {
        smdebug_core::TensorView::from_bytes(event.dtype, &event.shape, &event.data)
            .ok()
            .filter(|v| v.len() == 1)
            .map(|v| v.get_f64(0))
    });
    match number {
        Ok(n) => Ok(n),
        Err(Error::TensorTooLarge { .. } | Error::StringTensor { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A decoded value as a [`TensorBytes`] over the record's own bytes (copied only when the record
/// held its values in typed fields rather than raw).
fn in_place(record: &Bytes, event: crate::format::TensorEventRef<'_>) -> TensorBytes {
    let data = match event.data {
        std::borrow::Cow::Borrowed(d) => record.slice_ref(d),
        std::borrow::Cow::Owned(v) => Bytes::from(v),
    };
    TensorBytes {
        dtype: event.dtype,
        shape: event.shape,
        data,
    }
}

fn read_with<T>(
    storage: &dyn Storage,
    files: &Files,
    loc: &Location,
    name: &str,
    budget: Budget,
    finish: impl FnOnce(&Bytes, crate::format::TensorEventRef<'_>) -> T,
) -> Result<T> {
    let bytes = record_bytes(storage, files, loc, name, budget)?;
    decode_with(&bytes, loc, name, budget, finish)
}

/// Decodes the record `bytes` (exactly the record at `loc`): its tag must be `name` and its
/// step the index's step.
fn decode_with<T>(
    bytes: &Bytes,
    loc: &Location,
    name: &str,
    budget: Budget,
    finish: impl FnOnce(&Bytes, crate::format::TensorEventRef<'_>) -> T,
) -> Result<T> {
    let event = crate::format::read_tagged_tensor_record_ref(
        bytes,
        &loc.file.path,
        loc.start,
        name,
        PayloadCrcPolicy::AcceptBoth,
        budget,
    )?;
    if event.step != loc.step {
        return Err(Error::WrongTensor {
            path: loc.file.path.to_string(),
            offset: loc.start,
            expected: format!("`{name}` at step {}", loc.step),
            found: format!("`{name}` at step {}", event.step),
        });
    }
    Ok(finish(bytes, event))
}

/// Where the record at `loc` ends; refuses an index entry whose end overflows or whose record
/// is longer than the budget's limit before anything is read.
fn record_end(loc: &Location, name: &str, budget: Budget) -> Result<u64> {
    let end = loc
        .start
        .checked_add(loc.length)
        .ok_or_else(|| Error::CorruptRecord {
            path: loc.file.path.to_string(),
            offset: loc.start,
            reason: format!(
                "the index's offset {} + length {} overflows",
                loc.start, loc.length
            ),
        })?;
    if loc.length > budget.limit {
        return Err(Error::TensorTooLarge {
            path: loc.file.path.to_string(),
            offset: loc.start,
            tensor: name.to_string(),
            detail: "the length of its record in the index".to_string(),
            claimed: loc.length.into(),
            limit: budget.limit,
        });
    }
    Ok(end)
}

/// The bytes of the record at `loc` (exactly `loc.length` of them), from the kept file, a new
/// map of it, the whole file fetched and kept, or a range read.
fn record_bytes(
    storage: &dyn Storage,
    files: &Files,
    loc: &Location,
    name: &str,
    budget: Budget,
) -> Result<Bytes> {
    let end = record_end(loc, name, budget)?;
    if let Some(file) = loc.file.kept() {
        return slice_record(&file, loc, end);
    }
    if let Some(map) = files.map(&loc.file) {
        // Another reader may have kept the file first; both hold the same bytes.
        return slice_record(&loc.file.keep(map, false, files), loc, end);
    }
    if loc.file.len <= WHOLE_FILE_MAX && files.reserve(loc.file.len) {
        // Only as much as the index says the file holds: a file larger than its index (or
        // one that is not an event file at all) is never read whole.
        let whole = get_range(storage, loc, 0..loc.file.len).inspect_err(|_| {
            files.release(loc.file.len);
        })?;
        return slice_record(&loc.file.keep(whole, true, files), loc, end);
    }
    let bytes = get_range(storage, loc, loc.start..end)?;
    if (bytes.len() as u64) < loc.length {
        return Err(short_file(loc, bytes.len() as u64));
    }
    Ok(bytes)
}

/// Bytes `range` of the location's event file. Storage refuses a range that starts past the
/// file's end; that is a file shorter than its index says, reported as such.
pub(crate) fn get_range(
    storage: &dyn Storage,
    loc: &Location,
    range: std::ops::Range<u64>,
) -> Result<bytes::Bytes> {
    let start = range.start;
    storage
        .get_range(&loc.file.path, range)
        .map_err(|e| match storage.size(&loc.file.path) {
            Ok(Some(size)) if size <= start => short_file(loc, 0),
            _ => e,
        })
}

/// The record's bytes within a whole event file, checked against the file's real length first.
fn slice_record(file: &Bytes, loc: &Location, end: u64) -> Result<Bytes> {
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
        path: loc.file.path.to_string(),
        offset: loc.start,
        needed: loc.length,
        available,
    }
}
