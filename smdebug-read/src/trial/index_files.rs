//! The run's index files: listed, fetched (on a few threads for a long listing), parsed and
//! checked against their path (an index naming another step's or another worker's event file
//! is refused; one naming none, an empty `event_file_name`, has only entries that locate no
//! record), each step's entries kept as a compact [`TensorTable`].

use std::path::Path;
use std::sync::Arc;

use smdebug_core::Mode;

use crate::error::{Error, Result};
use smdebug_format::index_fast;
use smdebug_format::layout;
use smdebug_storage::Storage;

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
/// A long run has a table per step and worker, and the same tables step after step, so a table
/// holds little of its own. Its names (in index order, each an interned [`Interner`] name) are
/// shared with the tables of the steps around it that list the same names in the same order.
/// Its records' places are shared the same way: an index lists a step's records one after
/// another, so a table keeps where the first starts (`base`) and, shared with every table whose
/// records have the same lengths, where each ends from there ([`Places::Consecutive`], 4 bytes
/// an entry, for all of them). Other layouts keep each entry's start and length
/// ([`Places::Scattered`], 16 bytes an entry). A short table is searched in order, which is
/// faster than hashing the name; the shared names of a long one (more than
/// [`TensorTable::SCAN_MAX`]) get a hash index at their first lookup by name, one for all the
/// tables sharing them (a table only read in order, as the tensor follower reads it, never
/// builds one).
#[derive(Clone, Debug, Default)]
pub(crate) struct TensorTable {
    names: Arc<TableNames>,
    places: Arc<Places>,
    /// Where the first record starts ([`Places::Consecutive`]; 0 for scattered places).
    base: u64,
    /// The entries that locate no record (nearly always none).
    unusable: Box<[Arc<UnusableSlot>]>,
}

/// The names of a table, shared by the tables that list the same ones in the same order.
#[derive(Debug, Default)]
struct TableNames {
    list: Box<[Arc<str>]>,
    index: std::sync::OnceLock<foldhash::HashMap<Arc<str>, u32>>,
}

impl TableNames {
    /// Whether `names` are these, in this order (names are interned: compared by pointer).
    fn same_as(&self, names: &[Arc<str>]) -> bool {
        self.list.len() == names.len()
            && self.list.iter().zip(names).all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

/// Where a table's records are, one per name in the same order; shared by the tables with the
/// same.
#[derive(Debug, PartialEq, Eq)]
enum Places {
    /// Each record starts where the one before ends (the first at the table's `base`): where
    /// each ends, counted from `base`.
    Consecutive(Box<[u32]>),
    /// Each entry's start and length ([`PackedSlot`]).
    Scattered(Box<[PackedSlot]>),
}

impl Default for Places {
    fn default() -> Places {
        Places::Consecutive(Box::default())
    }
}

/// A [`Slot`] in 16 bytes: a record's start and length, or, for an entry that locates no
/// record, [`PackedSlot::NO_RECORD`] and the entry's place in the table's `unusable`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PackedSlot {
    start: u64,
    length: u64,
}

impl PackedSlot {
    const NO_RECORD: u64 = u64::MAX;
}

impl TensorTable {
    /// Tables longer than this are looked up by name through a hash index.
    const SCAN_MAX: usize = 16;

    fn position(&self, name: &str) -> Option<usize> {
        let list = &self.names.list;
        if list.len() <= Self::SCAN_MAX {
            return list.iter().position(|n| &**n == name);
        }
        let index = self.names.index.get_or_init(|| {
            list.iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), i as u32))
                .collect()
        });
        index.get(name).map(|&i| i as usize)
    }

    fn slot(&self, i: usize) -> Slot {
        match &*self.places {
            Places::Consecutive(ends) => {
                let from = if i == 0 { 0 } else { ends[i - 1] };
                Slot::Record(self.base + u64::from(from), u64::from(ends[i] - from))
            }
            Places::Scattered(slots) => {
                let packed = slots[i];
                if packed.start == PackedSlot::NO_RECORD {
                    Slot::Unusable(self.unusable[packed.length as usize].clone())
                } else {
                    Slot::Record(packed.start, packed.length)
                }
            }
        }
    }

    /// Where tensor `name`'s record is.
    pub fn get(&self, name: &str) -> Option<Slot> {
        self.position(name).map(|i| self.slot(i))
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    /// How many entries (names) the table has.
    pub fn len(&self) -> usize {
        self.names.list.len()
    }

    /// The name at place `i` in index order (as [`TensorTable::entries`] counts them).
    pub fn name(&self, i: usize) -> &Arc<str> {
        &self.names.list[i]
    }

    /// The names, in index order.
    pub fn names(&self) -> impl Iterator<Item = &Arc<str>> {
        self.names.list.iter()
    }

    /// Every entry, in index order: name and slot.
    pub fn entries(&self) -> impl Iterator<Item = (&Arc<str>, Slot)> {
        self.names
            .list
            .iter()
            .enumerate()
            .map(|(i, name)| (name, self.slot(i)))
    }

    /// The end of the last record: the length the event file must have.
    pub fn end(&self) -> u64 {
        match &*self.places {
            Places::Consecutive(ends) => ends.last().map_or(0, |&e| self.base + u64::from(e)),
            // `locate` checked that no usable entry's end overflows.
            Places::Scattered(slots) => slots
                .iter()
                .filter(|s| s.start != PackedSlot::NO_RECORD)
                .map(|s| s.start.saturating_add(s.length))
                .max()
                .unwrap_or(0),
        }
    }
}

/// The names and places of the last table read: the next shares them when it has the same.
#[derive(Default)]
pub(crate) struct LastTable {
    names: Option<Arc<TableNames>>,
    places: Option<Arc<Places>>,
}

/// A [`TensorTable`] being read from an index file.
#[derive(Default)]
pub(crate) struct TableBuilder {
    names: Vec<Arc<str>>,
    slots: Vec<Slot>,
}

impl TableBuilder {
    fn with_capacity(n: usize) -> Self {
        TableBuilder {
            names: Vec::with_capacity(n),
            slots: Vec::with_capacity(n),
        }
    }

    /// Appends an entry for a name not in the table.
    fn push_new(&mut self, name: Arc<str>, slot: Slot) {
        self.names.push(name);
        self.slots.push(slot);
    }

    /// Adds an entry; a name already there takes the new slot (later entries win, as in
    /// Python smdebug's reader), and its place and the slot it had are returned.
    fn insert(&mut self, name: Arc<str>, slot: Slot) -> Option<(usize, Slot)> {
        if let Some(i) = self.names.iter().position(|n| *n == name) {
            return Some((i, std::mem::replace(&mut self.slots[i], slot)));
        }
        self.push_new(name, slot);
        None
    }

    /// The table, sharing `last`'s names and places when they are the same (and becoming
    /// `last` when not).
    fn finish(self, last: &mut LastTable) -> TensorTable {
        let names = match &last.names {
            Some(shared) if shared.same_as(&self.names) => shared.clone(),
            _ => {
                let fresh = Arc::new(TableNames {
                    list: self.names.into_boxed_slice(),
                    index: std::sync::OnceLock::new(),
                });
                last.names = Some(fresh.clone());
                fresh
            }
        };
        let (places, base, unusable) = Self::places(self.slots);
        let places = match &last.places {
            Some(shared) if **shared == places => shared.clone(),
            _ => {
                let fresh = Arc::new(places);
                last.places = Some(fresh.clone());
                fresh
            }
        };
        TensorTable {
            names,
            places,
            base,
            unusable: unusable.into_boxed_slice(),
        }
    }

    /// `slots` as places: consecutive when each record starts where the one before ends (and
    /// the last ends within 4 GiB of the first's start), else scattered.
    fn places(slots: Vec<Slot>) -> (Places, u64, Vec<Arc<UnusableSlot>>) {
        let base = match slots.first() {
            Some(Slot::Record(start, _)) => *start,
            _ => 0,
        };
        let mut ends = Vec::with_capacity(slots.len());
        let mut next = base;
        for slot in &slots {
            let Slot::Record(start, length) = slot else {
                break;
            };
            // `start == next` (at or past `base`) before the end is counted from `base`.
            let rel = (*start == next)
                .then(|| start.checked_add(*length))
                .flatten()
                .and_then(|end| u32::try_from(end - base).ok());
            let Some(rel) = rel else {
                break;
            };
            ends.push(rel);
            next = start + length;
        }
        if ends.len() == slots.len() {
            return (
                Places::Consecutive(ends.into_boxed_slice()),
                base,
                Vec::new(),
            );
        }
        let mut unusable = Vec::new();
        let packed = slots
            .into_iter()
            .map(|slot| match slot {
                Slot::Record(start, length) if start != PackedSlot::NO_RECORD => {
                    PackedSlot { start, length }
                }
                Slot::Record(..) => {
                    unreachable!("read_index_file makes a record at byte 2^64-1 unusable")
                }
                Slot::Unusable(entry) => {
                    unusable.push(entry);
                    PackedSlot {
                        start: PackedSlot::NO_RECORD,
                        length: (unusable.len() - 1) as u64,
                    }
                }
            })
            .collect();
        (Places::Scattered(packed), 0, unusable)
    }
}

/// Tensor names seen so far, each kept once: index files repeat the same names step after
/// step, and every table shares them. Each name has a number, with which a file's repeated
/// names are found without searching its table.
#[derive(Default)]
pub(crate) struct Interner {
    ids: foldhash::HashMap<Arc<str>, u32>,
    /// The last table read: the next shares its names and places when it has the same.
    last: LastTable,
    /// Per name number, the last file it was listed in ([`Interner::start_file`]).
    listed_in: Vec<u64>,
    file: u64,
    /// The last index file read in full that can stand for the next ones ([`IndexTemplate`]).
    template: Option<IndexTemplate>,
}

/// An index file read in full, as a template for the files after it (a writer's next steps'
/// files differ from it only in their `mode_step` and event file name: see
/// [`index_fast::Template`]), with what it read as: its mode and its table. Only a file that
/// names its step's usual event file, with no name listed twice and every entry locating a
/// record, is kept: what such a file reads as does not depend on its path.
struct IndexTemplate {
    file: index_fast::Template,
    mode: Mode,
    tensors: TensorTable,
}

impl Interner {
    fn get(&mut self, name: &str) -> (Arc<str>, u32) {
        if let Some((known, &id)) = self.ids.get_key_value(name) {
            return (known.clone(), id);
        }
        let id = u32::try_from(self.listed_in.len()).expect("fewer than 2^32 tensor names");
        let name: Arc<str> = name.into();
        self.ids.insert(name.clone(), id);
        self.listed_in.push(0);
        (name, id)
    }

    /// The next file's names follow.
    fn start_file(&mut self) {
        self.file += 1;
    }

    /// Whether name `id` was listed before in this file; it is now.
    fn listed_again(&mut self, id: u32) -> bool {
        let last = std::mem::replace(&mut self.listed_in[id as usize], self.file);
        last == self.file
    }
}

/// One index file, decoded. A clone shares its tables.
#[derive(Clone)]
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

/// Where a reader gets index files another reader of the run may have read
/// ([`TensorSubscription`](super::TensorSubscription)).
pub(crate) trait IndexShare: Sync {
    /// Index file `path` of `step`, parsed: taken from what another reader read, else by
    /// `read`.
    fn index_file(
        &self,
        step: u64,
        path: &str,
        read: &mut dyn FnMut() -> Result<IndexEntry>,
    ) -> Result<IndexEntry>;
}

/// An index file's path, with the step and worker its name gives.
pub(crate) type IndexPath = (String, u64, String);

/// The index files of steps from `from` (every step for `None`) and before `before` (to the
/// last for `None`), with their steps and workers.
pub(crate) fn list_index_files_before(
    storage: &dyn Storage,
    from: Option<u64>,
    before: Option<u64>,
) -> Result<Vec<IndexPath>> {
    let offset = from.map(layout::index_list_offset);
    let paths = match (before, &offset) {
        (Some(end), _) => storage.list_between(
            layout::INDEX_DIR,
            offset.as_deref(),
            &layout::index_list_offset(end),
        )?,
        (None, Some(offset)) => storage.list_after(layout::INDEX_DIR, offset)?,
        (None, None) => storage.list(layout::INDEX_DIR)?,
    };
    Ok(paths
        .into_iter()
        .filter_map(|path| layout::parse_index_file(&path).map(|(s, w)| (path, s, w)))
        .collect())
}

/// A listing of the run's index files from one step on, read a stretch at a time ([`next`]):
/// on local disk one index folder (1,000 steps) a stretch, so that a long run's listing is
/// never held whole (a path, its step and worker take ~130 bytes: 52 MB at 400,000 steps,
/// twice that while the list was copied); elsewhere (an object store, whose listing pages
/// through the prefix anyway) one stretch to the end. The stretches together hold the paths
/// one listing from the same step holds, in the same order: each lists the paths after the
/// previous one's end and before its own (the next folder's `index/<folder>/`), the last one
/// everything after; a folder made after the listing started falls in the stretch whose range
/// holds it. Like any listing of a folder being written, it holds every file that existed
/// when it started (see [`StepProgress`](super::StepProgress)).
///
/// [`next`]: IndexListing::next
pub(crate) struct IndexListing {
    /// Paths sorting at or before this one were listed.
    after: String,
    /// The start of each folder after `after` not listed yet (`index/<folder>/`), in order:
    /// each ends a stretch.
    bounds: std::collections::VecDeque<String>,
    /// The last stretch (everything after `after`) was listed.
    ended: bool,
    /// Index files and stretches listed so far.
    files: usize,
    stretches: usize,
}

impl IndexListing {
    /// A listing of the index files of steps `>= from`, nothing listed yet. On local disk the
    /// index folder's own entries are read now (one folder, a few hundred names); when they
    /// cannot be, the listing is one stretch, whose listing reports the error.
    pub(crate) fn start(local: Option<&Path>, from: u64) -> IndexListing {
        let after = layout::index_list_offset(from);
        let mut bounds: Vec<String> = local
            .and_then(|root| std::fs::read_dir(root.join(layout::INDEX_DIR)).ok())
            .into_iter()
            .flatten()
            .filter_map(|entry| {
                let entry = entry.ok()?;
                if !entry.file_type().ok()?.is_dir() {
                    return None;
                }
                let name = entry.file_name().into_string().ok()?;
                Some(format!("{}/{name}/", layout::INDEX_DIR))
            })
            .filter(|bound| *bound > after)
            .collect();
        bounds.sort_unstable();
        IndexListing {
            after,
            bounds: bounds.into(),
            ended: false,
            files: 0,
            stretches: 0,
        }
    }

    /// The next stretch's index files, with their steps and workers, in key order; `None` once
    /// every stretch was listed. A stretch whose listing failed is listed again at the next
    /// call.
    pub(crate) fn next(&mut self, storage: &dyn Storage) -> Option<Result<Vec<IndexPath>>> {
        if self.ended {
            return None;
        }
        let listed = match self.bounds.front() {
            Some(end) => storage.list_between(layout::INDEX_DIR, Some(&self.after), end),
            None => storage.list_after(layout::INDEX_DIR, &self.after),
        };
        let paths = match listed {
            Ok(paths) => paths,
            Err(e) => return Some(Err(e.into())),
        };
        match self.bounds.pop_front() {
            Some(end) => self.after = end,
            None => self.ended = true,
        }
        let paths: Vec<IndexPath> = paths
            .into_iter()
            .filter_map(|path| layout::parse_index_file(&path).map(|(s, w)| (path, s, w)))
            .collect();
        self.files += paths.len();
        self.stretches += 1;
        Some(Ok(paths))
    }

    /// Whether a stretch was listed.
    pub(crate) fn started(&self) -> bool {
        self.stretches > 0
    }

    /// Whether every stretch was listed.
    pub(crate) fn ended(&self) -> bool {
        self.ended
    }

    /// About how many index files the stretches not listed yet hold: as many a stretch as
    /// those listed held on average (a folder holds 1,000 steps of each worker), nothing known
    /// before one was listed.
    pub(crate) fn left_estimate(&self) -> usize {
        if self.ended || self.stretches == 0 {
            return 0;
        }
        (self.bounds.len() + 1) * self.files.div_ceil(self.stretches)
    }
}

/// Reads and checks each index file of `paths` ([`read_index_file`]: an index naming another
/// step's or worker's event file is an error), hands the result to `work` on a reader thread
/// (a reader that also reads the step's event file does it there), and `work`'s results to
/// `apply` on the calling thread, in the order of `paths`. Returns how many of `paths` were
/// applied: all of them, unless `more` (asked on the calling thread before each further chunk
/// of files is started) said no; the chunks started by then are still read and applied. An
/// error from `apply` ends the reading: the results before it were applied, none after. With
/// `share`, a file another subscriber of the run's [`TensorSource`](super::TensorSource) read
/// is taken from it, and one read here is held for the others.
///
/// Fetching and parsing is most of the cost of opening a long run (one small file a step), so a
/// long list is read a chunk of files at a time on rayon's pool while `apply` takes in the
/// chunks already done: a few chunks are in flight at any time, and one more is started as
/// each is taken, so the readers never wait for the caller between batches and what is read
/// ahead stays bounded. The pool's threads live as long as the process: the memory a reader
/// allocates and frees goes back to an allocator heap that stays in use, where a thread spawned
/// per call leaves its heap's free pages to no one when it ends (mimalloc gives back an ended
/// thread's free pages only when another thread takes the heap over). Called on one of the
/// pool's own threads, it reads on that thread alone: waiting there for chunks that only the
/// pool's other threads could read would stall a pool of one.
pub(crate) fn parse_index_files<'p, T: Send, E>(
    storage: &dyn Storage,
    local: Option<&Path>,
    share: Option<&dyn IndexShare>,
    paths: &'p [IndexPath],
    more: impl Fn() -> bool,
    work: impl Fn(Result<IndexEntry>) -> T + Sync,
    mut apply: impl FnMut(T) -> std::result::Result<(), E>,
) -> std::result::Result<usize, E> {
    /// Index files a task reads and hands over together.
    const CHUNK: usize = 256;
    let parse = |chunk: &[IndexPath], names: &mut Interner, buf: &mut Vec<u8>| {
        // The chunk's index files (and the event files `work` reads) are looked up from the
        // run's folder, held for the chunk.
        let _held = local.map(smdebug_storage::regular::HeldRoot::hold);
        chunk
            .iter()
            .map(|(path, step, worker)| {
                let mut read = || {
                    fetch_index_file(storage, local, path, buf)
                        .and_then(|bytes| read_index_file(bytes, path, *step, worker, names))
                };
                let entry = match share {
                    Some(share) => share.index_file(*step, path, &mut read),
                    None => read(),
                };
                work(entry)
            })
            .collect::<Vec<T>>()
    };
    let mut chunks = paths.chunks(CHUNK);
    let threads = reader_threads(paths.len());
    if threads <= 1 || rayon_core::current_thread_index().is_some() {
        let (mut names, mut buf, mut done) = (Interner::default(), Vec::new(), 0);
        for chunk in chunks.by_ref() {
            if done > 0 && !more() {
                break;
            }
            parse(chunk, &mut names, &mut buf)
                .into_iter()
                .try_for_each(&mut apply)?;
            done += chunk.len();
        }
        return Ok(done);
    }
    // One task a chunk, each sending its results on a channel of its own (never blocking: room
    // for the one message), taken in chunk order. Tasks come from outside the pool, so the pool
    // starts them in the order they were spawned.
    let stop = std::sync::atomic::AtomicBool::new(false);
    rayon_core::in_place_scope(|scope| {
        let (parse, stop) = (&parse, &stop);
        let start = |chunk: &'p [IndexPath]| {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            scope.spawn(move |_| {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return; // The reading ended (an error from `apply`).
                }
                let (mut names, mut buf) = (Interner::default(), Vec::new());
                let _ = tx.send(parse(chunk, &mut names, &mut buf));
            });
            (chunk.len(), rx)
        };
        // Two chunks a reader thread in flight (four on two cores, 1,024 files): every reader
        // has the next chunk waiting while one is taken in. Eight on two cores was no faster
        // and held more memory (2026-11-27, the synthetic 1-hour run served: 2.51–3.12 s and
        // 113–141 MB against four's 2.50–2.73 s and 109–130 MB).
        let mut in_flight: std::collections::VecDeque<_> =
            chunks.by_ref().take(2 * threads).map(start).collect();
        let (mut done, mut starting) = (0, true);
        while let Some((len, rx)) = in_flight.pop_front() {
            let Ok(results) = rx.recv() else {
                // The task panicked (a bug): the scope re-raises it when it ends.
                break;
            };
            // The next chunk is started before this one is applied: the readers keep busy.
            starting = starting && more();
            if starting && let Some(chunk) = chunks.next() {
                in_flight.push_back(start(chunk));
            }
            if let Err(e) = results.into_iter().try_for_each(&mut apply) {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                return Err(e);
            }
            done += len;
        }
        Ok(done)
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
    let (mut file, size) = smdebug_storage::regular::open(root, rel)?;
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
    let wanted = items / 256 + 1;
    if wanted == 1 {
        // Asking for the cores reads the process's cgroup files (a dozen system calls): not
        // at every look of a follower that finds a few files or none.
        return 1;
    }
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8)
        .min(wanted)
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
    // A file that differs from the template only in its step's numbers, naming its step's
    // usual event file, reads as the template with those numbers.
    if let Some(template) = &names.template
        && let Some((mode_step, event_file)) = template.file.numbers_of(&bytes)
        && !worker.is_empty()
        && layout::is_event_file(event_file, step, worker)
    {
        return Ok(IndexEntry {
            path: path.to_string(),
            step,
            worker: worker.to_string(),
            mode: template.mode,
            mode_step,
            event_file: event_file.to_string(),
            tensors: template.tensors.clone(),
            repeated: Vec::new(),
        });
    }
    let (index, template) = index_fast::read_with_template(&bytes, path)?;
    // An empty `event_file_name` (hand-made and placeholder runs write one) names no event
    // file: every entry of the file locates no record, a problem for each tensor at this step
    // when it is read, never for the run. Nothing is read from the step's usual event file on
    // the index's behalf.
    let names_no_file = index.meta.event_file_name.as_deref() == Some("");
    let event_file = match index.meta.event_file_name {
        Some(name) if !name.is_empty() => name.into_owned(),
        _ => layout::event_file(step, worker),
    };
    // smdebug names both files after the same step and worker: an index pointing into
    // another worker's or another step's event file would hand out that worker's values.
    // The usual path (nearly always) is the file of its step and worker without parsing it.
    let usual = !worker.is_empty() && layout::is_event_file(&event_file, step, worker);
    if !usual && layout::parse_event_file(&event_file).is_none_or(|(s, w)| s != step || w != worker)
    {
        return Err(Error::Format(smdebug_format::Error::BadIndex {
            path: path.to_string(),
            offset: 0,
            reason: format!(
                "event_file_name `{event_file}` is not the event file of step {step} of \
                 worker `{worker}` ({})",
                layout::event_file(step, worker)
            ),
        }));
    }
    let mut tensors = TableBuilder::with_capacity(index.tensor_payload.len());
    let mut repeated = Vec::new();
    let place = |slot: &Slot, position: usize| match slot {
        Slot::Record(start, length) => format!("at byte {start} ({length} bytes)"),
        Slot::Unusable(_) => format!("in entry {position}, which locates no record"),
    };
    let mut positions: Vec<usize> = Vec::new();
    names.start_file();
    for (position, t) in index.tensor_payload.iter().enumerate() {
        let location = t.location().and_then(|(start, length)| {
            if names_no_file {
                Err("the index file's `event_file_name` is empty: it names no event file".into())
            } else if start == PackedSlot::NO_RECORD {
                Err(format!("the record starts at byte {start}, past any file"))
            } else {
                Ok((start, length))
            }
        });
        let slot = match location {
            Ok((start, length)) => Slot::Record(start, length),
            Err(reason) => Slot::Unusable(Arc::new(UnusableSlot {
                index_file: path.into(),
                position,
                reason,
            })),
        };
        let (name, id) = names.get(&t.tensorname);
        if !names.listed_again(id) {
            tensors.push_new(name, slot);
            positions.push(position);
            continue;
        }
        // Listed before in this file: the later entry wins.
        let (i, earlier) = tensors
            .insert(name.clone(), slot)
            .expect("a name listed before in the file is in its table");
        let new_place = place(&tensors.slots[i], position);
        let earlier_place = place(&earlier, positions[i]);
        positions[i] = position;
        let line = format!(
            "{path}: tensor `{name}` is listed twice, `{name}` {earlier_place} and \
             `{name}` {new_place}; the later entry is read, as Python smdebug does"
        );
        repeated.push((name.to_string(), line));
    }
    let tensors = tensors.finish(&mut names.last);
    if let Some(file) = template
        && repeated.is_empty()
        && tensors.unusable.is_empty()
        && !worker.is_empty()
        && layout::is_event_file(&event_file, step, worker)
    {
        names.template = Some(IndexTemplate {
            file,
            mode: index.meta.mode,
            tensors: tensors.clone(),
        });
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
            let mut table = TableBuilder::with_capacity(n);
            for i in 0..n as u64 {
                let (name, _) = names.get(&format!("t{i}"));
                assert!(
                    table.insert(name, Slot::Record(i * 100, 50)).is_none(),
                    "{n}"
                );
            }
            // `t1` again, later in the file: it wins, and the earlier place comes back.
            let (again, _) = names.get("t1");
            assert!(Arc::ptr_eq(&again, &names.get("t1").0), "one Arc per name");
            let at = |slot: Option<Slot>| match slot {
                Some(Slot::Record(start, length)) => Some((start, length)),
                _ => None,
            };
            let (place, earlier) = table
                .insert(again, Slot::Record(10_000, 20))
                .expect("t1 is held");
            assert_eq!((place, at(Some(earlier))), (1, Some((100, 50))), "{n}");
            let table = table.finish(&mut names.last);
            // A long table's (shared) hash index is built at its first lookup by name.
            assert!(table.get("t0").is_some());
            assert_eq!(
                table.names.index.get().is_some(),
                n > TensorTable::SCAN_MAX,
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

    /// Tables of consecutive steps listing the same names share them (and one hash index);
    /// a step listing other names, or the same in another order, has its own.
    #[test]
    fn tables_listing_the_same_names_share_them() {
        let mut names = Interner::default();
        let table = |names: &mut Interner, list: &[&str], base: u64| {
            let mut b = TableBuilder::default();
            for (i, n) in list.iter().enumerate() {
                let (name, _) = names.get(n);
                b.push_new(name, Slot::Record(base + i as u64 * 10, 10));
            }
            b.finish(&mut names.last)
        };
        let many: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let a = table(&mut names, &many, 0);
        let b = table(&mut names, &many, 1000);
        assert!(Arc::ptr_eq(&a.names, &b.names));
        assert!(matches!(a.get("t39"), Some(Slot::Record(390, 10))));
        assert!(matches!(b.get("t39"), Some(Slot::Record(1390, 10))));
        assert!(b.names.index.get().is_some(), "built once, for both");
        let mut reordered = many.clone();
        reordered.swap(0, 1);
        let c = table(&mut names, &reordered, 0);
        assert!(!Arc::ptr_eq(&b.names, &c.names));
        assert!(matches!(c.get("t0"), Some(Slot::Record(10, 10))));
        assert_eq!(std::mem::size_of::<PackedSlot>(), 16);
        // Records one after another with the same lengths: one list of ends for all three.
        assert!(matches!(*a.places, Places::Consecutive(_)));
        assert!(Arc::ptr_eq(&a.places, &b.places) && Arc::ptr_eq(&b.places, &c.places));
        assert_eq!((a.end(), b.end()), (400, 1400));
    }

    /// Records that do not follow each other, or span more than 4 GiB, keep each start and
    /// length, and read back the same; an entry that locates no record stays unusable.
    #[test]
    fn places_other_than_consecutive_are_kept_entry_by_entry() {
        let mut names = Interner::default();
        let unusable = || {
            Slot::Unusable(Arc::new(UnusableSlot {
                index_file: "index/x.json".into(),
                position: 1,
                reason: "no length".into(),
            }))
        };
        let cases: [(&str, Vec<Slot>); 4] = [
            ("a gap", vec![Slot::Record(0, 10), Slot::Record(20, 5)]),
            (
                "out of order",
                vec![Slot::Record(10, 10), Slot::Record(0, 10)],
            ),
            (
                "over 4 GiB",
                vec![
                    Slot::Record(100, 3 << 30),
                    Slot::Record(100 + (3 << 30), 3 << 30),
                ],
            ),
            ("unusable", vec![Slot::Record(0, 10), unusable()]),
        ];
        for (case, slots) in cases {
            let mut b = TableBuilder::default();
            for (i, slot) in slots.iter().enumerate() {
                let (name, _) = names.get(&format!("t{i}"));
                b.push_new(name, slot.clone());
            }
            let table = b.finish(&mut names.last);
            assert!(matches!(*table.places, Places::Scattered(_)), "{case}");
            for (i, want) in slots.iter().enumerate() {
                let got = table.get(&format!("t{i}")).unwrap();
                match (want, &got) {
                    (Slot::Record(s, l), Slot::Record(gs, gl)) => {
                        assert_eq!((s, l), (gs, gl), "{case}")
                    }
                    (Slot::Unusable(_), Slot::Unusable(u)) => {
                        assert!(u.error("t1").to_string().contains("no length"), "{case}")
                    }
                    _ => panic!("{case}: {got:?} for {want:?}"),
                }
            }
        }
    }

    #[test]
    fn names_repeated_within_a_file_are_found_and_names_of_earlier_files_are_not_repeats() {
        let mut names = Interner::default();
        let file = |step: u64, tensors: &[&str]| {
            let payload: Vec<String> = tensors
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    format!(
                        r#"{{"tensorname": "{t}", "start_idx": {}, "length": 20}}"#,
                        i * 20
                    )
                })
                .collect();
            format!(
                r#"{{"meta": {{"mode": "TRAIN", "mode_step": {step}, "event_file_name": "events/{step:012}/{step:012}_worker_0.tfevents"}}, "tensor_payload": [{}]}}"#,
                payload.join(", ")
            )
        };
        let long: Vec<String> = (0..20).map(|i| format!("t{i}")).collect();
        let long: Vec<&str> = long.iter().map(String::as_str).collect();
        for step in 0..3u64 {
            let mut tensors = long.clone();
            if step == 1 {
                tensors.push("t7"); // listed twice in this file only
            }
            let path = format!("index/000000000/{step:012}_worker_0.json");
            let text = file(step, &tensors);
            let entry = read_index_file(
                std::borrow::Cow::Borrowed(text.as_bytes()),
                &path,
                step,
                "worker_0",
                &mut names,
            )
            .unwrap();
            assert_eq!(entry.tensors.names().count(), 20, "step {step}");
            assert_eq!(entry.repeated.len(), usize::from(step == 1), "step {step}");
            let t7 = if step == 1 { 400 } else { 140 };
            let got = entry.tensors.get("t7");
            assert!(
                matches!(got, Some(Slot::Record(s, 20)) if s == t7),
                "step {step}: {got:?}"
            );
            assert!(matches!(
                entry.tensors.get("t19"),
                Some(Slot::Record(380, 20))
            ));
        }
    }

    /// Files read through the template of the file before read as they do in full (the same
    /// mode, step numbers, event file and table); a file with the template's bytes under
    /// another step's path is refused as in full.
    #[test]
    fn index_files_read_through_a_template_read_as_in_full() {
        let file = |step: u64, mode_step: u64| {
            format!(
                r#"{{"meta": {{"mode": "EVAL", "mode_step": {mode_step}, "event_file_name": "events/{step:012}/{step:012}_worker_3.tfevents"}}, "tensor_payload": [{{"tensorname": "loss", "start_idx": 0, "length": 88}}, {{"tensorname": "acc", "start_idx": 88, "length": 90}}], "shape_payload": []}}"#
            )
        };
        let path = |step: u64| layout::index_file(step, "worker_3");
        let read = |names: &mut Interner, text: &str, step: u64| {
            read_index_file(
                std::borrow::Cow::Borrowed(text.as_bytes()),
                &path(step),
                step,
                "worker_3",
                names,
            )
        };
        let mut names = Interner::default();
        let mut templated = 0;
        for step in 995..1012u64 {
            let text = file(step, step - 990);
            let had_template = names
                .template
                .as_ref()
                .is_some_and(|t| t.file.numbers_of(text.as_bytes()).is_some());
            templated += usize::from(had_template);
            let got = read(&mut names, &text, step).unwrap();
            let want = read(&mut Interner::default(), &text, step).unwrap();
            assert_eq!(
                (&got.path, got.step, &got.worker, got.mode, got.mode_step),
                (
                    &want.path,
                    want.step,
                    &want.worker,
                    want.mode,
                    want.mode_step
                )
            );
            assert_eq!(got.event_file, want.event_file);
            assert!(got.repeated.is_empty() && want.repeated.is_empty());
            let entries = |e: &IndexEntry| {
                e.tensors
                    .entries()
                    .map(|(n, s)| match s {
                        Slot::Record(a, b) => (n.to_string(), a, b),
                        Slot::Unusable(_) => unreachable!(),
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(entries(&got), entries(&want));
            assert_eq!(got.tensors.end(), 178);
        }
        // All but the first and the one whose mode step has a digit more (1,000 -> 10).
        assert_eq!(templated, 15);
        // Step 1,011's bytes under step 1,012's path: another step's event file, refused.
        let Err(err) = read(&mut names, &file(1011, 21), 1012) else {
            panic!("step 1,011's event file accepted for step 1,012");
        };
        assert!(
            err.to_string()
                .contains("is not the event file of step 1012"),
            "{err}"
        );
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
