//! The trial's only contact with storage and the format: list and fetch (the index files:
//! [`index_files`](super::index_files); reading and decoding a record:
//! [`records`](super::records)).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use smdebug_core::{Collection, CollectionsFile, EndReason, Mode};

use crate::error::{Error, Result};
use smdebug_format::layout;
use smdebug_storage::{LocalStorage, Storage, open_storage};

use super::progress::StepProgress;
use super::shared::TensorSubscription;

pub(crate) use super::index_files::{
    InOrder, IndexEntry, IndexListing, IndexPath, IndexShare, Slot, TensorTable,
    list_index_files_before, parse_index_files, read_whole, reader_threads,
};

/// The run's storage, and its directory when it is on local disk (where event files can be
/// mapped).
pub(crate) fn open(
    location: smdebug_storage::Location,
) -> Result<(Arc<dyn Storage>, Option<PathBuf>)> {
    match location {
        smdebug_storage::Location::Local(dir) => {
            let storage = LocalStorage::new(&dir)?;
            let root = storage.root().to_path_buf();
            Ok((Arc::new(storage), Some(root)))
        }
        store @ smdebug_storage::Location::Store { .. } => Ok((open_storage(store)?, None)),
    }
}

/// One worker's collections file.
pub(crate) struct WorkerCollections {
    pub worker: Option<String>,
    pub num_workers: usize,
    pub collections: Vec<Collection>,
    /// The file's size as read: a hook rewrites its file, larger, when a tensor joins one
    /// of its collections.
    pub bytes: u64,
}

/// The paths of the collections files `seen` does not hold, in key order; none, without a
/// listing, once `progress` has a file of each worker the run declares
/// ([`StepProgress::knows_every_worker`]: a new file could then name no worker that counts).
pub(crate) fn unread_collection_files(
    storage: &dyn Storage,
    progress: &StepProgress,
    seen: impl Fn(&str) -> bool,
) -> Result<Vec<String>> {
    if progress.knows_every_worker() {
        return Ok(Vec::new());
    }
    Ok(storage
        .list(layout::COLLECTIONS_DIR)?
        .into_iter()
        .filter(|path| layout::parse_collections_file(path).is_some() && !seen(path))
        .collect())
}

/// The run's end marker: `Some(reason)` once it is there, `None` while it is not. Read through
/// `share` when the reader shares a source (once for every reader of the run in the process),
/// else from storage.
pub(crate) fn read_end_marker(
    storage: &dyn Storage,
    share: Option<&TensorSubscription>,
) -> Result<Option<Option<EndReason>>> {
    match share {
        Some(share) => share.end_marker(),
        None => crate::run::EndMarker::read(storage),
    }
}

/// One worker's collections file, read (or taken from another reader of the run, through
/// `share`) and parsed.
pub(crate) fn read_collections_file(
    storage: &dyn Storage,
    share: Option<&TensorSubscription>,
    path: &str,
) -> Result<WorkerCollections> {
    let read = || Ok(storage.get(path)?);
    let bytes = match share {
        Some(share) => share.collections_file(path, read)?,
        None => read()?,
    };
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
        bytes: bytes.len() as u64,
    })
}

/// One step's event file of one worker. Every location in it shares it, and with it the file's
/// bytes once they were fetched or mapped: reading the other tensors of the step (the usual
/// pattern: several tensors over many steps) looks nothing up and costs no I/O.
#[derive(Debug)]
pub(crate) struct EventFile {
    /// The file's and its index file's paths, relative to the run, when either is not its
    /// step's and worker's usual path ([`layout::event_file`](smdebug_format::layout::event_file),
    /// [`layout::index_file`](smdebug_format::layout::index_file)): a long run keeps one of
    /// these a step, and the usual paths are made again when asked for.
    other_paths: Option<Box<OtherPaths>>,
    step: u64,
    pub worker: Arc<str>,
    /// Size of the file as the index describes it (the end of its last record).
    pub len: u64,
    /// What is kept of the file ([`Kept`]). Boxed: a long run has a file a step, and few are
    /// kept at a time.
    data: Mutex<Option<Box<Kept>>>,
    /// The whole file was fetched before (and let go as provisional, see [`Files`]): the next
    /// fetch keeps it.
    read_before: std::sync::atomic::AtomicBool,
    /// The file was read ahead of the caller ([`ahead`](super::ahead)) and the caller has not
    /// read it yet: kept for it, outside the provisional slot.
    ahead: std::sync::atomic::AtomicBool,
}

/// The paths of an event file and its index file that are not the usual ones (`None`: usual).
#[derive(Debug)]
struct OtherPaths {
    event: Option<Box<str>>,
    index: Option<Box<str>>,
}

/// What a trial keeps of an event file.
#[derive(Debug)]
enum Kept {
    /// The whole file (up to its length in the index): mapped, or fetched within the heap
    /// budget (then `true`: its length counts against the budget until it is let go).
    Whole(Bytes, bool),
    /// The values of the records a value-by-value reader did not ask for yet, taken out of the
    /// file when it read one of them ([`records::read_taking_values_out`](super::records)),
    /// each in memory of its own and counted in the heap budget until it is taken or let go.
    Values(Vec<TakenValue>),
}

/// A value taken out of its event file ahead of the read that asks for it: which record it
/// is, under which budget it was decoded, and the value.
#[derive(Debug)]
pub(crate) struct TakenValue {
    pub name: Arc<str>,
    pub start: u64,
    pub length: u64,
    pub budget: smdebug_format::budget::Budget,
    pub value: super::value::TensorValue,
}

impl Kept {
    /// Gives back to the heap budget what this counts in it: a fetched file's length, the
    /// values' bytes (a mapped file, or one in a block, counts nothing of its own).
    fn let_go(self, len: u64, files: &Files) {
        match self {
            Kept::Whole(_, true) => files.release(len),
            Kept::Whole(_, false) => {}
            Kept::Values(values) => values
                .iter()
                .for_each(|v| files.release(v.value.held_bytes())),
        }
    }
}

impl EventFile {
    /// Event file `path` of `step` of `worker`, `len` bytes long, described by index file
    /// `index_path`.
    pub(crate) fn new(
        path: String,
        index_path: &str,
        step: u64,
        worker: Arc<str>,
        len: u64,
    ) -> EventFile {
        let event =
            (!smdebug_format::layout::is_event_file(&path, step, &worker)).then(|| path.into());
        let index = (!smdebug_format::layout::is_index_file(index_path, step, &worker))
            .then(|| index_path.into());
        EventFile {
            other_paths: (event.is_some() || index.is_some())
                .then(|| Box::new(OtherPaths { event, index })),
            step,
            worker,
            len,
            data: Mutex::new(None),
            read_before: std::sync::atomic::AtomicBool::new(false),
            ahead: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The index file that described this file, when it is not the usual one.
    pub(crate) fn other_index_file(&self) -> Option<&str> {
        self.other_paths.as_ref()?.index.as_deref()
    }

    /// The global step the file belongs to.
    pub(crate) fn step(&self) -> u64 {
        self.step
    }

    /// The file, relative to the run.
    pub(crate) fn path(&self) -> std::borrow::Cow<'_, str> {
        match self.other_paths.as_ref().and_then(|o| o.event.as_ref()) {
            Some(path) => std::borrow::Cow::Borrowed(path),
            None => {
                std::borrow::Cow::Owned(smdebug_format::layout::event_file(self.step, &self.worker))
            }
        }
    }

    fn data(&self) -> MutexGuard<'_, Option<Box<Kept>>> {
        // Nothing can be left half-done under this lock: recover the guard.
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The whole file, when a reader has kept it (mapped or fetched).
    pub(crate) fn kept(&self) -> Option<Bytes> {
        match self.data().as_deref() {
            Some(Kept::Whole(bytes, _)) => Some(bytes.clone()),
            _ => None,
        }
    }

    /// Keeps `bytes` as the whole file, unless another reader kept it first: then its bytes
    /// (the same) are returned and `bytes` is dropped, its budget (when `heap`) given back.
    /// Values taken out of the file before are let go: every read finds them in the file now.
    pub(super) fn keep(&self, bytes: Bytes, heap: bool, files: &Files) -> Bytes {
        let mut data = self.data();
        if let Some(Kept::Whole(kept, _)) = data.as_deref() {
            if heap {
                files.release(self.len);
            }
            return kept.clone();
        }
        // Anything else kept is values taken out of the file.
        if let Some(taken) = data.take() {
            taken.let_go(self.len, files);
        }
        *data = Some(Box::new(Kept::Whole(bytes.clone(), heap)));
        bytes
    }

    /// Keeps the values taken out of the file for the reads that will ask for them, each
    /// while the heap budget has room for it (the others are dropped: their reads read the
    /// file again). Nothing is kept when the file (or values taken out of it) is kept already.
    pub(super) fn keep_values(&self, values: Vec<TakenValue>, files: &Files) {
        let mut data = self.data();
        if data.is_some() {
            return;
        }
        let kept: Vec<TakenValue> = values
            .into_iter()
            .filter(|v| files.reserve(v.value.held_bytes()))
            .collect();
        if !kept.is_empty() {
            *data = Some(Box::new(Kept::Values(kept)));
        }
    }

    /// The value taken out of the file for the record at `loc`, when it is tensor `name`'s
    /// and was decoded under `budget`; it leaves the file (and the budget). A value of this
    /// record taken out under another budget is let go: the read decodes it under its own.
    pub(super) fn take_value(
        &self,
        loc: &Location,
        name: &str,
        budget: smdebug_format::budget::Budget,
        files: &Files,
    ) -> Option<super::value::TensorValue> {
        let mut data = self.data();
        let Some(Kept::Values(values)) = data.as_deref_mut() else {
            return None;
        };
        let i = values
            .iter()
            .position(|v| v.start == loc.start && v.length == loc.length && &*v.name == name)?;
        let taken = values.swap_remove(i);
        if values.is_empty() {
            *data = None;
        }
        files.release(taken.value.held_bytes());
        (taken.budget == budget).then_some(taken.value)
    }

    /// Whether the whole file was fetched before; marks it fetched.
    pub(super) fn fetched_before(&self) -> bool {
        self.read_before.swap(true, Ordering::Relaxed)
    }

    /// Reads the whole file ahead of the caller and keeps it, flagged as read ahead (mapped
    /// instead when mapping is on: then it is kept as the caller would keep it). Nothing is
    /// kept when the file is kept already, cannot be read (the caller reads it and reports
    /// what is wrong) or is larger than [`WHOLE_FILE_MAX`]. False when the heap budget has no
    /// room for it: reading ahead stops there.
    pub(super) fn read_ahead(&self, storage: &dyn Storage, files: &Files) -> bool {
        if self.len > WHOLE_FILE_MAX || self.kept().is_some() {
            return true;
        }
        if let Some(map) = files.map(self) {
            self.keep(map, false, files);
            return true;
        }
        if let Some(read) = files.read_into_block(storage, self, true) {
            if let Ok(whole) = read {
                let mut data = self.data();
                // Unless the caller read it meanwhile (its part of the block stays unused).
                if data.is_none() {
                    *data = Some(Box::new(Kept::Whole(whole, false)));
                    self.ahead.store(true, Ordering::Relaxed);
                }
            }
            return true;
        }
        if !files.reserve_ahead(self.len) {
            return false;
        }
        let read = || Ok(storage.get_range(&self.path(), 0..self.len)?);
        match files.whole(self, read) {
            Ok(whole) => {
                let mut data = self.data();
                if data.is_some() {
                    // The caller read it meanwhile.
                    files.release(self.len);
                } else {
                    *data = Some(Box::new(Kept::Whole(whole, true)));
                    self.ahead.store(true, Ordering::Relaxed);
                }
            }
            Err(_) => files.release(self.len),
        }
        true
    }

    /// Whether the file was kept by reading ahead and is read by the caller for the first
    /// time now (clears the flag).
    pub(super) fn take_ahead(&self) -> bool {
        self.ahead.load(Ordering::Relaxed) && self.ahead.swap(false, Ordering::Relaxed)
    }

    /// Lets go of the file when it was read ahead and the caller never read it.
    pub(super) fn let_go_ahead(&self, files: &Files) {
        if self.take_ahead() {
            self.forget(files);
        }
    }

    /// Lets go of the kept file, if any: a fetched file's length goes back to the budget, a
    /// mapped file is unmapped once the values read from it are dropped too; values taken out
    /// of the file are dropped, their bytes given back to the budget.
    pub(crate) fn forget(&self, files: &Files) {
        if let Some(kept) = self.data().take() {
            kept.let_go(self.len, files);
        }
    }
}

/// How an event file fetched whole for the first time is kept (see [`Files`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FirstFetch {
    /// Until the next first fetch of another file: a reader visiting each file once holds one.
    Provisional,
    /// For good, as a file fetched again is: the reads of a caller reading value by value
    /// (`Trial::raw_value_as` with reading ahead, smdebug_rs's `value`, where the values
    /// decoded ahead of it take the values out of the files they read instead:
    /// [`decoded`](super::decoded)), whose next tensor is likely to be read from the same
    /// files. A value-by-value reader that never comes back to a file (one
    /// tensor over a long run, random steps) holds up to the budget of them. These files (and
    /// those read ahead of such a reader) are read into the trial's blocks of memory
    /// ([`arena`](super::arena)) while the budget has room for them.
    ForGood,
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
pub(super) const WHOLE_FILE_MAX: u64 = 1 << 20;

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
/// records are read by range, exactly their bytes. A file fetched for the first time is kept
/// provisionally: the next first fetch of another file lets it go. So the other tensors of a
/// step read it from memory, while a reader visiting each file once (one tensor over the whole
/// run, `values()`, or the rules going step by step) holds one file, where it used to fill the
/// budget with files it would not read again (256 MiB of a 400,000-step run's). A file fetched
/// again (a second sweep, tensor by tensor) stays kept, as does one fetched by a caller
/// reading value by value ([`FirstFetch::ForGood`]). Nothing is evicted on its own: readers usually sweep a run tensor by
/// tensor, each sweep visiting every step's file in the same order, and evicting the oldest
/// file would evict each file just before the next sweep needs it. A reader that goes step by
/// step says when it is done with old steps (`Trial::forget_files_before`).
#[derive(Debug)]
pub(crate) struct Files {
    /// The run's directory when it is on local disk and files may be mapped.
    map_root: Option<PathBuf>,
    budget: usize,
    /// Bytes of the budget taken: files fetched whole, and the blocks of `arena`.
    kept: Arc<AtomicUsize>,
    /// Where the files a value-by-value reader keeps are read ([`arena`](super::arena)).
    arena: super::arena::Arena,
    /// The file fetched whole for the first time last, kept until another one is.
    provisional: Mutex<Option<Arc<EventFile>>>,
    /// Whole files come through this source, shared with other readers.
    share: Option<TensorSubscription>,
}

impl Files {
    pub(crate) fn new(
        map_root: Option<PathBuf>,
        budget: usize,
        share: Option<TensorSubscription>,
    ) -> Self {
        Files {
            map_root,
            budget,
            kept: Arc::new(AtomicUsize::new(0)),
            arena: super::arena::Arena::default(),
            provisional: Mutex::new(None),
            share,
        }
    }

    /// The whole of `file` by `read`, or taken from the shared source when another reader of
    /// the run read it (see [`TensorSource`](super::TensorSource)).
    pub(super) fn whole(
        &self,
        file: &EventFile,
        read: impl FnOnce() -> Result<Bytes>,
    ) -> Result<Bytes> {
        match &self.share {
            Some(share) => share.event_file(file.step(), &file.path(), read),
            None => read(),
        }
    }

    /// The whole of `file` (up to its length in the index, fewer bytes where it ends first)
    /// read into a block of the trial's [`arena`](super::arena), for a reader that keeps it
    /// ([`FirstFetch::ForGood`], and reading ahead of one: `ahead`, a new block then within
    /// half the budget, as [`reserve_ahead`](Files::reserve_ahead)). The same bytes and errors
    /// as `storage.get_range(path, 0..len)`. `None` when the file is not read there (it comes
    /// through a shared source, is empty or larger than [`arena::FILE_MAX`](super::arena::FILE_MAX),
    /// or the budget has no room for another block): nothing was read. Kept with `heap` false
    /// ([`EventFile::keep`]): its block is counted in the budget, not the file.
    pub(super) fn read_into_block(
        &self,
        storage: &dyn Storage,
        file: &EventFile,
        ahead: bool,
    ) -> Option<smdebug_storage::Result<Bytes>> {
        if self.share.is_some() {
            return None;
        }
        let reserve = |len| {
            if ahead {
                self.reserve_ahead(len)
            } else {
                self.reserve(len)
            }
        };
        let path = file.path();
        self.arena.read_into(file.len, &self.kept, reserve, |buf| {
            storage.get_range_into(&path, 0, buf)
        })
    }

    /// Whether a value-by-value reader may read event files into a buffer of its own and take
    /// their values out ([`records::read_taking_values_out`](super::records)): not when files
    /// are mapped (their values are read from the map) or come through a shared source.
    pub(super) fn may_take_values_out(&self) -> bool {
        self.map_root.is_none() && self.share.is_none()
    }

    /// This trial reads no event file of a step before `step` again: the shared source lets
    /// go of what it held of them for it.
    pub(super) fn release_before(&self, step: u64) {
        if let Some(share) = &self.share {
            share.release_events_before(step);
        }
    }

    /// `file` was just fetched whole: a first fetch is kept as `first` says (provisionally:
    /// the file kept provisionally before it is let go), a later one for good.
    pub(super) fn fetched(&self, file: &Arc<EventFile>, first: FirstFetch) {
        let mut slot = self.provisional.lock().unwrap_or_else(|p| p.into_inner());
        if file.fetched_before() || first == FirstFetch::ForGood {
            // Kept for good now: a file let go (`forget_files_before`) while it was still the
            // provisional one must not be let go again by the next first fetch.
            if slot.as_ref().is_some_and(|p| Arc::ptr_eq(p, file)) {
                *slot = None;
            }
            return;
        }
        let previous = slot.replace(file.clone());
        drop(slot);
        if let Some(previous) = previous
            && !Arc::ptr_eq(&previous, file)
        {
            previous.forget(self);
        }
    }

    /// Gives `len` bytes back to the heap budget (taken by [`reserve`](Files::reserve)).
    pub(super) fn release(&self, len: u64) {
        if let Ok(len) = usize::try_from(len) {
            self.kept.fetch_sub(len, Ordering::Relaxed);
        }
    }

    /// Takes `len` bytes of the heap budget; false (and nothing taken) when they do not fit.
    pub(super) fn reserve(&self, len: u64) -> bool {
        self.reserve_within(len, self.budget)
    }

    /// [`reserve`](Files::reserve) for a file read ahead: within half the budget, so that
    /// reading ahead never leaves the caller's own reads without room.
    pub(super) fn reserve_ahead(&self, len: u64) -> bool {
        self.reserve_within(len, self.budget / 2)
    }

    fn reserve_within(&self, len: u64, limit: usize) -> bool {
        let Ok(len) = usize::try_from(len) else {
            return false;
        };
        self.kept
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |kept| {
                kept.checked_add(len).filter(|&k| k <= limit)
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
    pub(super) fn map(&self, file: &EventFile) -> Option<Bytes> {
        let root = self.map_root.as_ref()?;
        // The path comes from an index file: it must stay inside the run.
        smdebug_storage::check_relative("", &file.path()).ok()?;
        if MAPS_LEFT
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_err()
        {
            return None;
        }
        let mapped = (|| {
            // Only a regular file inside the run (never a FIFO, which would block the open).
            let (f, size) = smdebug_storage::regular::open(root, &file.path()).ok()?;
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
