//! The trial's only contact with storage and the format: list, fetch and decode.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use smdebug_core::{Collection, CollectionsFile, DType, EndReason, Mode, StringTensor, Tensor};

use crate::error::{Error, Result};
use crate::format::budget::{Budget, Conversion};
use crate::format::index::IndexRef;
use crate::format::layout;
use crate::format::record::PayloadCrcPolicy;
use crate::storage::{LocalStorage, Storage, open_storage};

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

/// Where one tensor's record is in its step's event file, as an index entry says.
#[derive(Clone, Debug)]
pub(crate) enum Slot {
    /// The record's start and length.
    Record(u64, u64),
    /// The entry locates no record: reading the tensor there is this error.
    Unusable(Arc<UnusableSlot>),
}

/// An index entry that locates no record: the index file, the entry's position and why.
#[derive(Debug)]
pub(crate) struct UnusableSlot {
    index_file: Box<str>,
    position: usize,
    reason: String,
}

impl UnusableSlot {
    /// What reading tensor `name` from this entry is.
    pub(crate) fn error(&self, name: &str) -> Error {
        Error::BadIndexEntry {
            path: self.index_file.to_string(),
            position: self.position,
            tensor: name.to_string(),
            reason: self.reason.clone(),
        }
    }
}

/// Where each tensor of one step of one worker is: name -> its [`Slot`].
///
/// A step lists a few tensors, and the same names step after step: the names are shared with
/// the other steps of the trial ([`Interner`]), and a short table is searched in order, which
/// is faster than hashing the name. Long tables (more than [`TensorTable::SCAN_MAX`] names)
/// keep a hash index as well.
#[derive(Clone, Debug, Default)]
pub(crate) struct TensorTable {
    entries: Vec<(Arc<str>, Slot)>,
    index: Option<foldhash::HashMap<Arc<str>, usize>>,
}

impl TensorTable {
    /// Tables longer than this also keep a hash index.
    const SCAN_MAX: usize = 16;

    fn with_capacity(n: usize) -> Self {
        TensorTable {
            entries: Vec::with_capacity(n),
            index: None,
        }
    }

    fn position(&self, name: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(name).copied(),
            None => self.entries.iter().position(|(n, _)| &**n == name),
        }
    }

    /// Adds an entry; a name already there takes the new slot (later entries win, as in
    /// Python smdebug's reader), and the slot it had is returned.
    fn insert(&mut self, name: Arc<str>, slot: Slot) -> Option<Slot> {
        if let Some(i) = self.position(&name) {
            return Some(std::mem::replace(&mut self.entries[i].1, slot));
        }
        let i = self.entries.len();
        self.entries.push((name.clone(), slot));
        match &mut self.index {
            Some(index) => {
                index.insert(name, i);
            }
            None if self.entries.len() > Self::SCAN_MAX => {
                self.index = Some(
                    self.entries
                        .iter()
                        .enumerate()
                        .map(|(i, (n, _))| (n.clone(), i))
                        .collect(),
                );
            }
            None => {}
        }
        None
    }

    /// Where tensor `name`'s record is.
    pub fn get(&self, name: &str) -> Option<&Slot> {
        self.position(name).map(|i| &self.entries[i].1)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    /// The names, in index order.
    pub fn names(&self) -> impl Iterator<Item = &Arc<str>> {
        self.entries.iter().map(|(n, _)| n)
    }

    /// Every entry, in index order: name and slot.
    pub fn entries(&self) -> impl Iterator<Item = &(Arc<str>, Slot)> {
        self.entries.iter()
    }

    /// The end of the last record: the length the event file must have.
    pub fn end(&self) -> u64 {
        // `locate` checked that no usable entry's end overflows.
        self.entries
            .iter()
            .filter_map(|(_, slot)| match slot {
                Slot::Record(s, l) => Some(s.saturating_add(*l)),
                Slot::Unusable(_) => None,
            })
            .max()
            .unwrap_or(0)
    }
}

/// Tensor names seen so far, each kept once: index files repeat the same names step after
/// step, and every table shares them.
#[derive(Default)]
pub(crate) struct Interner(foldhash::HashSet<Arc<str>>);

impl Interner {
    fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(known) = self.0.get(name) {
            return known.clone();
        }
        let name: Arc<str> = name.into();
        self.0.insert(name.clone());
        name
    }
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
    pub tensors: TensorTable,
    /// Each name listed twice, with a line naming both entries.
    pub repeated: Vec<(String, String)>,
}

/// Index files of steps `>= from` (every index file when `from` is `None`) that `skip` does not
/// refuse (it is given the path and the step), handed to `apply` one by one in key order.
/// `local`: the run's directory when it is on local disk, where index files are read directly
/// (into one buffer, reused), not through storage. The first error (from a file or from
/// `apply`) ends the listing: the files before it were applied, none after.
pub(crate) fn index_files_from(
    storage: &dyn Storage,
    local: Option<&Path>,
    from: Option<u64>,
    skip: impl Fn(&str, u64) -> bool,
    mut apply: impl FnMut(IndexEntry) -> Result<()>,
) -> Result<()> {
    let paths: Vec<IndexPath> = list_index_files(storage, from)?
        .into_iter()
        .filter(|(path, step, _)| !skip(path, *step))
        .collect();
    parse_index_files(storage, local, &paths, |entry| entry, |entry| apply(entry?))
}

/// An index file's path, with the step and worker its name gives.
pub(crate) type IndexPath = (String, u64, String);

/// The index files of steps `>= from` (every one when `from` is `None`), in key order.
pub(crate) fn list_index_files(storage: &dyn Storage, from: Option<u64>) -> Result<Vec<IndexPath>> {
    let paths = match from {
        Some(step) => storage.list_after(layout::INDEX_DIR, &layout::index_list_offset(step))?,
        None => storage.list(layout::INDEX_DIR)?,
    };
    Ok(paths
        .into_iter()
        .filter_map(|path| layout::parse_index_file(&path).map(|(s, w)| (path, s, w)))
        .collect())
}

/// Reads and checks each index file of `paths` ([`read_index_file`]: an index naming another
/// step's or worker's event file is an error), hands the result to `work` on a reader thread
/// (a reader that also reads the step's event file does it there), and `work`'s results to
/// `apply` on the calling thread, in the order of `paths`. An error from `apply` ends the
/// reading: the results before it were applied, none after.
///
/// Fetching and parsing is most of the cost of opening a long run (one small file a step), so a
/// long list is read on a few threads, a chunk of files at a time, while `apply` takes in
/// the chunks already done.
pub(crate) fn parse_index_files<T: Send>(
    storage: &dyn Storage,
    local: Option<&Path>,
    paths: &[IndexPath],
    work: impl Fn(Result<IndexEntry>) -> T + Sync,
    mut apply: impl FnMut(T) -> Result<()>,
) -> Result<()> {
    /// Index files a thread reads and hands over together.
    const CHUNK: usize = 256;
    let parse = |chunk: &[IndexPath], names: &mut Interner, buf: &mut Vec<u8>| {
        chunk
            .iter()
            .map(|(path, step, worker)| {
                let entry = fetch_index_file(storage, local, path, buf)
                    .and_then(|bytes| read_index_file(bytes, path, *step, worker, names));
                work(entry)
            })
            .collect::<Vec<T>>()
    };
    let threads = reader_threads(paths.len());
    if threads <= 1 {
        let (mut names, mut buf) = (Interner::default(), Vec::new());
        return parse(paths, &mut names, &mut buf)
            .into_iter()
            .try_for_each(apply);
    }
    std::thread::scope(|scope| {
        let (senders, mut parsed) = InOrder::new(threads, 2);
        for (t, tx) in senders.into_iter().enumerate() {
            let parse = &parse;
            scope.spawn(move || {
                let (mut names, mut buf) = (Interner::default(), Vec::new());
                for chunk in paths.chunks(CHUNK).skip(t).step_by(threads) {
                    if tx.send(parse(chunk, &mut names, &mut buf)).is_err() {
                        return; // The reading ended (an error from `apply`).
                    }
                }
            });
        }
        for _ in 0..paths.len().div_ceil(CHUNK) {
            let Ok(chunk) = parsed.recv() else {
                // The thread panicked (a bug): the scope re-raises it when it joins the thread.
                break;
            };
            chunk.into_iter().try_for_each(&mut apply)?;
        }
        Ok(())
    })
}

/// The bytes of index file `path`. On local disk it is read into `buf` (open, read, close:
/// no size query, no new buffer per file); when that fails, or the run is elsewhere, storage
/// fetches it (and reports a failure as it does for every file).
fn fetch_index_file<'b>(
    storage: &dyn Storage,
    local: Option<&Path>,
    path: &str,
    buf: &'b mut Vec<u8>,
) -> Result<std::borrow::Cow<'b, [u8]>> {
    if let Some(root) = local
        && let Ok(n) = read_whole(root, path, buf, usize::MAX)
    {
        return Ok(std::borrow::Cow::Borrowed(&buf[..n]));
    }
    Ok(std::borrow::Cow::Owned(storage.get(path)?.to_vec()))
}

/// Reads a whole file of the run at `root`, or its first `limit` bytes, into the start of `buf`
/// (grown as the data arrive, never shrunk: a reused buffer is not cleared); how many bytes it
/// read. Only a regular file inside the run is opened, and no more than it held when opened is
/// read (a FIFO, a device or a link out of the run is an error: the caller's storage read then
/// reports it, naming the file).
pub(crate) fn read_whole(
    root: &Path,
    rel: &str,
    buf: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<usize> {
    use std::io::Read;
    let (mut file, size) = crate::storage::regular::open(root, rel)?;
    let limit = limit.min(usize::try_from(size).unwrap_or(usize::MAX));
    let mut len = 0;
    while len < limit {
        if len == buf.len() {
            buf.resize((buf.len() * 2).max(16 << 10), 0);
        }
        let end = buf.len().min(limit);
        match file.read(&mut buf[len..end]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(len)
}

/// How many threads read `items` small files: one per 256 files, at most one per core (and 8).
pub(crate) fn reader_threads(items: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8)
        .min(items / 256 + 1)
}

/// Work split round-robin over reader threads, taken back in the order it was split: of `n`
/// threads, thread `t` does items `t`, `t + n`, `t + 2n`, ... and sends each result on a channel
/// of its own, so the receiver takes them in item order from the threads in turn.
pub(crate) struct InOrder<T> {
    receivers: Vec<std::sync::mpsc::Receiver<T>>,
    next: usize,
}

impl<T> InOrder<T> {
    /// The receiving end for `threads` threads, each allowed `ahead` results not yet taken;
    /// and the threads' senders, thread `t`'s at index `t`.
    pub(crate) fn new(threads: usize, ahead: usize) -> (Vec<std::sync::mpsc::SyncSender<T>>, Self) {
        let (senders, receivers) = (0..threads)
            .map(|_| std::sync::mpsc::sync_channel(ahead))
            .unzip();
        (senders, InOrder { receivers, next: 0 })
    }

    /// The next result in order; `Err(t)` when thread `t`, whose turn it is, ended without
    /// sending it (a thread that ends early has panicked: the caller re-raises that).
    pub(crate) fn recv(&mut self) -> std::result::Result<T, usize> {
        let t = self.next % self.receivers.len();
        let item = self.receivers[t].recv().map_err(|_| t)?;
        self.next += 1;
        Ok(item)
    }
}

/// One index file, parsed and checked against its path.
fn read_index_file(
    bytes: std::borrow::Cow<'_, [u8]>,
    path: &str,
    step: u64,
    worker: &str,
    names: &mut Interner,
) -> Result<IndexEntry> {
    let index = IndexRef::parse(&bytes, path)?;
    let event_file = match index.meta.event_file_name {
        Some(name) => name.into_owned(),
        None => layout::event_file(step, worker),
    };
    // smdebug names both files after the same step and worker: an index pointing into
    // another worker's or another step's event file would hand out that worker's values.
    if layout::parse_event_file(&event_file).is_none_or(|(s, w)| s != step || w != worker) {
        return Err(Error::BadIndex {
            path: path.to_string(),
            offset: 0,
            reason: format!(
                "event_file_name `{event_file}` is not the event file of step {step} of \
                 worker `{worker}` ({})",
                layout::event_file(step, worker)
            ),
        });
    }
    let mut tensors = TensorTable::with_capacity(index.tensor_payload.len());
    let mut repeated = Vec::new();
    let place = |slot: &Slot, position: usize| match slot {
        Slot::Record(start, length) => format!("at byte {start} ({length} bytes)"),
        Slot::Unusable(_) => format!("in entry {position}, which locates no record"),
    };
    let mut positions: Vec<usize> = Vec::new();
    for (position, t) in index.tensor_payload.iter().enumerate() {
        let slot = match t.location() {
            Ok((start, length)) => Slot::Record(start, length),
            Err(reason) => Slot::Unusable(Arc::new(UnusableSlot {
                index_file: path.into(),
                position,
                reason,
            })),
        };
        let new_place = place(&slot, position);
        let name = names.get(&t.tensorname);
        match tensors.insert(name.clone(), slot) {
            Some(earlier) => {
                let i = tensors.position(&name).expect("just inserted");
                let earlier_place = place(&earlier, positions[i]);
                positions[i] = position;
                let line = format!(
                    "{path}: tensor `{name}` is listed twice, `{name}` {earlier_place} and \
                     `{name}` {new_place}; the later entry is read, as Python smdebug does"
                );
                repeated.push((name.to_string(), line));
            }
            None => positions.push(position),
        }
    }
    Ok(IndexEntry {
        path: path.to_string(),
        step,
        worker: worker.to_string(),
        mode: index.meta.mode,
        mode_step: index.meta.mode_step,
        event_file,
        tensors,
        repeated,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Short tables (searched in order) and long ones (with a hash index) answer alike: every
    /// name found, a repeated name read from its later entry with the earlier one reported,
    /// and the file's end the end of the last record.
    #[test]
    fn tables_short_and_long_keep_the_later_entry_of_a_repeated_name() {
        for n in [3usize, TensorTable::SCAN_MAX, TensorTable::SCAN_MAX + 1, 40] {
            let mut names = Interner::default();
            let mut table = TensorTable::with_capacity(n);
            for i in 0..n as u64 {
                let name = names.get(&format!("t{i}"));
                assert!(
                    table.insert(name, Slot::Record(i * 100, 50)).is_none(),
                    "{n}"
                );
            }
            assert_eq!(table.index.is_some(), n > TensorTable::SCAN_MAX, "{n}");
            // `t1` again, later in the file: it wins, and the earlier place comes back.
            let again = names.get("t1");
            assert!(Arc::ptr_eq(&again, &names.get("t1")), "one Arc per name");
            let at = |slot: Option<&Slot>| match slot {
                Some(Slot::Record(start, length)) => Some((*start, *length)),
                _ => None,
            };
            assert_eq!(
                at(table.insert(again, Slot::Record(10_000, 20)).as_ref()),
                Some((100, 50)),
                "{n}"
            );
            assert_eq!(at(table.get("t1")), Some((10_000, 20)), "{n}");
            assert_eq!(table.names().count(), n, "{n}: no second entry");
            for i in (0..n as u64).filter(|&i| i != 1) {
                assert_eq!(at(table.get(&format!("t{i}"))), Some((i * 100, 50)), "{n}");
            }
            assert!(!table.contains_key("t"), "{n}");
            assert!(!table.contains_key(&format!("t{n}")), "{n}");
            assert_eq!(table.end(), 10_020, "{n}");
        }
    }

    #[test]
    fn a_repeated_name_in_an_index_file_is_reported_with_both_entries() {
        let json = br#"{"meta": {"mode": "TRAIN", "mode_step": "4", "event_file_name": "events/000000000004/000000000004_worker_0.tfevents"}, "tensor_payload": [{"tensorname": "acc", "start_idx": 0, "length": 100}, {"tensorname": "loss", "start_idx": 100, "length": 90}, {"tensorname": "acc", "start_idx": 190, "length": 110}], "shape_payload": []}"#;
        let path = "index/000000000/000000000004_worker_0.json";
        let entry = read_index_file(
            std::borrow::Cow::Borrowed(json),
            path,
            4,
            "worker_0",
            &mut Interner::default(),
        )
        .unwrap();
        assert_eq!((entry.mode, entry.mode_step), (Mode::Train, 4));
        assert!(matches!(
            entry.tensors.get("acc"),
            Some(Slot::Record(190, 110))
        ));
        assert!(matches!(
            entry.tensors.get("loss"),
            Some(Slot::Record(100, 90))
        ));
        assert_eq!(
            entry.repeated,
            [(
                "acc".to_string(),
                format!(
                    "{path}: tensor `acc` is listed twice, `acc` at byte 0 (100 bytes) and `acc` \
                     at byte 190 (110 bytes); the later entry is read, as Python smdebug does"
                )
            )]
        );
        // Another step's event file is refused, as before.
        let Err(err) = read_index_file(
            std::borrow::Cow::Borrowed(json),
            path,
            5,
            "worker_0",
            &mut Interner::default(),
        ) else {
            panic!("step 4's event file accepted for step 5");
        };
        assert!(
            err.to_string().contains("is not the event file of step 5"),
            "{err}"
        );
    }
}
