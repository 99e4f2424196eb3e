//! The one incremental reader of a run's tensors, [`TensorFollower`] (documented on the type).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use smdebug_core::{EndReason, Mode, Reduction};

use super::columns::{BatchColumn, ScalarBatch};
use super::intake::{Admit, KnownStep, ReadFiles, admit, listed_name};
use super::progress::StepProgress;
use super::records;
use super::shared::TensorSubscription;
use super::source::{self, EventFile, IndexEntry, IndexListing, IndexPath, Location, Slot};
use crate::error::{Error, Result};
use smdebug_storage::{IntoLocation, Storage};

/// An event file up to this size is read whole when it holds a number to read; a larger one
/// record by record (its short records only).
const WHOLE_FILE_BYTES: u64 = 1 << 20;

/// The values of this many index files go out together (they are read on a few threads, ahead
/// of the one being taken in).
const BATCH: usize = 2048;

/// The listing is read a stretch (an index folder) at a time, when fewer than this many index
/// files listed are left to read: reading a long run holds this many paths, not its every one.
const LISTED_AHEAD: usize = 8192;

/// Problems kept per increment; the others are counted.
const MAX_PROBLEMS: usize = 100;

/// A problem with the run's tensor data that the follower worked around.
#[derive(Debug)]
pub enum TensorProblem {
    /// A listing failed (the run's index or collections folder, or the end marker); it is
    /// tried again at the next poll.
    Listing(Error),
    /// A collections file could not be read or parsed; it is left out.
    CollectionsFile(Error),
    /// An index file could not be read, parsed, or does not describe its step (it names
    /// another step's or another worker's event file): it is left out, and so is its step of
    /// its worker.
    IndexFile(Error),
    /// An index file conflicts with one taken in before it (both describe the same step and
    /// worker, or give the step different modes): it is left out.
    ConflictingIndex(Error),
    /// A tensor's record at a step could not be read (a bad checksum, a file shorter than its
    /// index, another tensor or another step's record at that place): its value there is left
    /// out.
    Value {
        /// The global step.
        step: u64,
        /// The tensor's stored name.
        tensor: String,
        /// What failed, naming the file.
        error: Error,
    },
    /// An index file lists a tensor twice (the later entry is read, as Python smdebug does);
    /// reported once per name.
    RepeatedName(String),
}

impl std::fmt::Display for TensorProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TensorProblem::Listing(e) => write!(f, "{e}"),
            TensorProblem::CollectionsFile(e) => write!(f, "{e}; the file is left out"),
            TensorProblem::IndexFile(e) => write!(f, "{e}; the index file is left out"),
            TensorProblem::ConflictingIndex(e) => {
                write!(f, "{e}; the second index file is left out")
            }
            TensorProblem::Value {
                step,
                tensor,
                error,
            } => write!(
                f,
                "{error}; the value of `{tensor}` at step {step} is left out"
            ),
            TensorProblem::RepeatedName(line) => f.write_str(line),
        }
    }
}

/// A step taken in for the first time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowedStep {
    /// The global step.
    pub step: u64,
    /// Its mode.
    pub mode: Mode,
    /// Its step within the mode.
    pub mode_step: u64,
}

/// What one [`poll`](TensorFollower::poll) found.
#[derive(Debug, Default)]
pub struct TensorIncrement {
    /// Steps handed out for the first time (with their values, see [`TensorFollower`] on when
    /// a step is handed out), in the order read (step order, but for a step a late worker adds
    /// to a later listing).
    pub steps: Vec<FollowedStep>,
    /// Tensor names seen for the first time (reductions listed under their tensor).
    pub names: Vec<String>,
    /// How many values were handed to the sink.
    pub values: usize,
    /// Index files of the listing being read that are not read yet (a backlog read over
    /// several polls): those listed, and about as many for each index folder not listed yet as
    /// the folders listed held on average (a long run is listed a folder at a time).
    pub pending: usize,
    /// Problems worked around (at most 100; `problems_left_out` counts the others).
    pub problems: Vec<TensorProblem>,
    /// Problems not kept in `problems`.
    pub problems_left_out: usize,
}

impl TensorIncrement {
    fn problem(&mut self, problem: TensorProblem) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(problem);
        } else {
            self.problems_left_out += 1;
        }
    }
}

/// What is known of a step past the last complete step: what [`admit`] checks a new index file
/// of it against.
struct OpenStep {
    mode: Mode,
    mode_step: u64,
    /// Worker -> its index file of the step.
    files: BTreeMap<String, String>,
}

/// One index file and the numbers of its event file, read on a reader thread.
struct StepRead {
    entry: IndexEntry,
    /// `(the name's place in the index's table, value, wall time of its record)`.
    numbers: Vec<(usize, f64, f64)>,
    /// Stored names whose record is not one number.
    not_numbers: Vec<Arc<str>>,
    problems: Vec<(Arc<str>, Error)>,
}

/// The one incremental reader of a run's tensors.
///
/// It reads what the `Trial` reads, with the `Trial`'s own machinery: the collections files,
/// then the index files after the last complete step ([`StepProgress`]: Python smdebug's
/// workers, step completeness and incomplete-step window), each checked as the `Trial` checks it
/// (an index file naming another step's or another worker's event file is refused; a second
/// index file for a step and worker, or workers disagreeing on a step's mode, is a conflict; a
/// record whose tag or step is not the index's is refused), and the end marker. Offline,
/// [`read_to_end`](TensorFollower::read_to_end) reads the run once; live,
/// [`poll`](TensorFollower::poll) reads only the index files that are new. Unlike the `Trial`,
/// whose queries fail on such a file, the follower leaves a bad file out and reports it as a
/// typed [`TensorProblem`], and goes on.
///
/// It keeps no table of a step's tensors: of a step it hands out its mode, the names seen for
/// the first time (reductions listed under their tensor, as the `Trial` lists them), and the
/// value of every tensor saved as one number, as columns ([`ScalarBatch`], kept by
/// [`ScalarColumns`](super::ScalarColumns), 4 to 8 bytes a value, with wall times once per step). A record longer than a scalar's
/// can be is never read; a record whose header claims more than one element (or strings) is
/// never decoded (its header is checked against a one-number budget first), and the tensor is
/// not read again at later steps.
///
/// A step and its values are handed out once no earlier step of its worker can still come
/// (every step a value-drawing reader shows is then there with every step before it): when
/// the listing after the one that found the step has been read. A listing holds every file
/// that existed when it started, and each worker writes its steps in order, so that listing
/// holds every earlier file of the worker; the listing that found the step may have missed
/// some, created while it ran (a folder read while files are renamed into it, an object
/// store's pages). Those missed files, found by the next listing, go out with what they were
/// missed beside, in one hand-out. A poll reads two listings when it has steps to hand out,
/// so what a poll finds is handed out in that poll but for files written while it listed,
/// which wait for the next. A listing started after the run's end marker hands out as it
/// reads (nothing can come after it), once nothing is waiting from before; so does the first
/// listing that finds a step (holding what it finds would hold a long run's every value while
/// it is first read), and so the reading of chosen steps ([`read_steps`](Self::read_steps)),
/// which lists nothing before: a step it left out is handed out when the next listing, in the
/// same poll when the budget allows, finds it.
///
/// Why not the `Trial` itself: it keeps, for every step, a table of every tensor's name and
/// record location, and reading through it looks up and decodes one value at a time. On a
/// 100,000-step run of 50 scalars (BENCHMARKS.md) the dashboard's follower holding the `Trial`
/// took 194 s to read the 5 million values and held 1.7 GB; this one reads them in 10–14 s
/// with a peak of 117 MB (BENCHMARKS.md, "Following a run's tensors").
pub struct TensorFollower {
    storage: Arc<dyn Storage>,
    /// The run's directory when it is on local disk (its storage's local root): index and event
    /// files are read from it directly.
    local: Option<std::path::PathBuf>,
    progress: StepProgress,
    collection_files: BTreeSet<String>,
    read: ReadFiles,
    /// Index files listed and not read yet.
    backlog: VecDeque<IndexPath>,
    /// The rest of the listing being read, listed as the backlog runs low; `None` once all of
    /// it was listed.
    listing: Option<IndexListing>,
    /// The end marker, when it was there before the listing being read started.
    listing_end: Option<Option<EndReason>>,
    /// Every global step taken in, in order (8 bytes a step).
    steps: Vec<u64>,
    open: BTreeMap<u64, OpenStep>,
    names: BTreeSet<String>,
    /// Stored names already listed in `names` (a step's names are looked up here, not in the
    /// sorted set: 50 names a step, 100,000 steps).
    stored_names: foldhash::HashSet<Arc<str>>,
    /// Stored names whose record is not one number: not read again (the reader threads look
    /// here while this thread adds what they found).
    not_numbers: Arc<RwLock<foldhash::HashSet<Arc<str>>>>,
    repeated: BTreeSet<String>,
    found: bool,
    end: Option<Option<EndReason>>,
    /// The end marker's reason, once it was read: not read again.
    marker: Option<Option<EndReason>>,
    /// Index files and event files come through this source, shared with other readers.
    share: Option<TensorSubscription>,
    /// Steps and values taken in from the listing being read, handed out once the listing after
    /// it has been read.
    taking: Waiting,
    /// Steps and values taken in from the last listing read, and those the listing being read
    /// finds that the last one left out (a worker's step before its last step found then):
    /// handed out once the listing being read has been read.
    waiting: Waiting,
    /// Values left out by the last listing, not yet in `waiting`'s batches.
    missed_values: Values,
    /// Worker -> the last step taken in of it.
    last_of: BTreeMap<String, u64>,
    /// `last_of` when the listing being read started (empty before the first listing that
    /// found a step).
    last_at_listing: BTreeMap<String, u64>,
}

/// Steps and values taken in, not handed out yet.
#[derive(Default)]
struct Waiting {
    steps: Vec<FollowedStep>,
    batches: Vec<ScalarBatch>,
    values: usize,
}

impl Waiting {
    fn is_empty(&self) -> bool {
        self.steps.is_empty() && self.batches.is_empty()
    }

    /// Adds the values taken in since the last call.
    fn add(&mut self, values: &mut Values) {
        let values = std::mem::take(values);
        if !values.columns.is_empty() {
            self.values += values.count;
            self.batches.push(values.columns);
        }
    }

    /// Adds all of `other`.
    fn join(&mut self, other: Waiting) {
        self.steps.extend(other.steps);
        self.batches.extend(other.batches);
        self.values += other.values;
    }

    /// Hands it all out: the steps to `inc`, the values to `sink` in one batch (a reader that
    /// shows what it is handed never shows a part of it).
    fn hand_out(
        self,
        inc: &mut TensorIncrement,
        sink: &mut dyn FnMut(ScalarBatch, usize),
        pending: usize,
    ) {
        inc.steps.extend(self.steps);
        inc.values += self.values;
        let batch: ScalarBatch = self.batches.into_iter().flatten().collect();
        if !batch.is_empty() {
            sink(batch, pending);
        }
    }
}

impl TensorFollower {
    /// A follower of the run rooted at `storage`, nothing read yet.
    pub fn new(storage: Arc<dyn Storage>) -> TensorFollower {
        TensorFollower {
            local: storage.local_root().map(std::path::Path::to_path_buf),
            storage,
            progress: StepProgress::default(),
            collection_files: BTreeSet::new(),
            read: ReadFiles::default(),
            backlog: VecDeque::new(),
            listing: None,
            listing_end: None,
            steps: Vec::new(),
            open: BTreeMap::new(),
            names: BTreeSet::new(),
            stored_names: foldhash::HashSet::default(),
            not_numbers: Arc::default(),
            repeated: BTreeSet::new(),
            found: false,
            end: None,
            marker: None,
            share: None,
            taking: Waiting::default(),
            waiting: Waiting::default(),
            missed_values: Values::default(),
            last_of: BTreeMap::new(),
            last_at_listing: BTreeMap::new(),
        }
    }

    /// Reads the run's index files and the event files it reads whole through `subscription`,
    /// to a [`TensorSource`](super::TensorSource) other readers in the process share (a
    /// `Session`'s rules): each file is read once for all of them. What is read and checked,
    /// and in which order, is unchanged. Set it before the first poll.
    pub fn share(mut self, subscription: TensorSubscription) -> TensorFollower {
        self.share = Some(subscription);
        self
    }

    /// A follower of the run at `location` (a directory or an object-store URL), as
    /// [`Trial::open`](super::Trial::open) opens it.
    pub fn open(location: impl IntoLocation) -> Result<TensorFollower> {
        let (storage, _) = source::open(location.into_location()?)?;
        Ok(TensorFollower::new(storage))
    }

    /// Python smdebug's incomplete-step window (see [`StepProgress::new`]); set it before the
    /// first poll.
    pub fn incomplete_step_window(mut self, window: u64) -> TensorFollower {
        self.progress = StepProgress::new(window);
        self
    }

    /// Reads the run to its end as it is now: every index file, however long it takes.
    pub fn read_to_end(&mut self, sink: &mut dyn FnMut(ScalarBatch, usize)) -> TensorIncrement {
        self.poll(Duration::MAX, sink)
    }

    /// [`read_to_end`](Self::read_to_end) beside the other readers of the follower's
    /// [shared source](Self::share), going no further ahead of them than the source holds for
    /// them: while what it read is still held for them ([`TensorSubscription::is_ahead`]) it
    /// starts no new file and waits for them to take it
    /// ([`TensorSubscription::wait_while_ahead`]), so that each file of a run of any length is
    /// read once for all of them. For a reader with nothing else to do (the report's scalar
    /// curves read while the rules step over the run); the others must go on reading, or be
    /// dropped, or the subscription be told to [stop waiting](TensorSubscription::stop_waiting).
    /// What is read, and in which order, is [`read_to_end`](Self::read_to_end)'s. Without a
    /// shared source it is `read_to_end`.
    pub fn read_to_end_paced(
        &mut self,
        sink: &mut dyn FnMut(ScalarBatch, usize),
    ) -> TensorIncrement {
        let Some(share) = self.share.clone() else {
            return self.read_to_end(sink);
        };
        let mut all = TensorIncrement::default();
        loop {
            share.wait_while_ahead();
            let stopped = std::cell::Cell::new(false);
            let inc = self.poll_while(
                &|| {
                    let ahead = share.is_ahead();
                    stopped.set(stopped.get() | ahead);
                    !ahead
                },
                sink,
            );
            all.steps.extend(inc.steps);
            all.names.extend(inc.names);
            all.values += inc.values;
            all.pending = inc.pending;
            all.problems_left_out += inc.problems_left_out;
            for problem in inc.problems {
                all.problem(problem);
            }
            if !stopped.get() {
                return all;
            }
        }
    }

    /// Reads what is new, spending about `budget` on index files (a longer backlog is read over
    /// the next polls). The numbers of each batch of index files go to `sink` as soon as the
    /// batch is read, with about how many index files are still to read.
    pub fn poll(
        &mut self,
        budget: Duration,
        sink: &mut dyn FnMut(ScalarBatch, usize),
    ) -> TensorIncrement {
        let started = Instant::now();
        self.poll_while(&|| started.elapsed() < budget, sink)
    }

    /// [`poll`](Self::poll), starting files (a chunk at a time) and a second listing while
    /// `more` says yes.
    fn poll_while(
        &mut self,
        more: &dyn Fn() -> bool,
        sink: &mut dyn FnMut(ScalarBatch, usize),
    ) -> TensorIncrement {
        let mut inc = TensorIncrement::default();
        // At most two listings a poll: a listing after which steps are seen complete, or that
        // found steps to hand out, is followed by one that confirms them (see `StepProgress`,
        // and the type's docs on when a step is handed out).
        for _ in 0..2 {
            if self.backlog.is_empty() && self.listing.is_none() && self.end.is_none() {
                self.list(&mut inc);
            }
            // The collections files after the listing starts (and after each stretch of it):
            // a worker writes its collections file before its first index file, so every
            // worker with a file listed is counted.
            self.read_collections(&mut inc);
            if !self.read_listing(&mut inc, more, sink) {
                break; // The budget is spent, or a listing failed: on at the next poll.
            }
            // The backlog's room goes back.
            self.backlog = VecDeque::new();
            self.progress.listed();
            // The listing is read: what the one before it found has every earlier step there,
            // those it left out included.
            self.waiting.add(&mut self.missed_values);
            let mut out = std::mem::take(&mut self.waiting);
            let taken = std::mem::take(&mut self.taking);
            let ended = self.listing_end.take();
            match ended {
                // Started after the end marker: nothing can come after what it found.
                Some(_) => out.join(taken),
                None => self.waiting = taken,
            }
            out.hand_out(&mut inc, sink, 0);
            if let Some(reason) = ended {
                self.end = Some(reason);
                self.progress.ended(self.steps.last().copied());
                if let Some(share) = &self.share {
                    share.release_all();
                }
            }
            self.forget_complete();
            // The listing that hands out what waits is started even when the budget is spent
            // (it reads only files that are new; those it lists when the budget is spent are
            // read at the next poll, and what waits with them).
            let due = self.progress.relisting_due() || !self.waiting.is_empty();
            if !due || (!more() && self.waiting.is_empty()) {
                break;
            }
        }
        inc.pending =
            self.backlog.len() + self.listing.as_ref().map_or(0, IndexListing::left_estimate);
        inc
    }

    /// Starts a listing of the index files from the last complete step on, listed into the
    /// backlog (those not read yet) a stretch at a time by [`read_listing`](Self::read_listing).
    /// The end marker is read first: when it is there, the run has ended once this listing is
    /// read, as it holds every step written before the marker. (A marker found while an
    /// earlier listing is still being read says nothing of that listing: steps may have been
    /// written after it.)
    fn list(&mut self, inc: &mut TensorIncrement) {
        self.listing_end = self.end_marker().unwrap_or_else(|e| {
            inc.problem(TensorProblem::Listing(e));
            None
        });
        let from = self.progress.start_listing();
        self.last_at_listing.clone_from(&self.last_of);
        if let Some(share) = &self.share {
            // Files of steps before the listing's start are never read from now on.
            share.release_index_before(from);
            share.release_events_before(from);
        }
        self.listing = Some(IndexListing::start(self.local.as_deref(), from));
    }

    /// Reads the listing being read (its backlog, and its stretches not listed yet) while
    /// `more` says yes. True when all of it was read; false when the budget was spent first or
    /// a stretch could not be listed (it is tried again at the next poll; a listing whose
    /// first stretch failed is dropped, and the next poll starts a new one).
    fn read_listing(
        &mut self,
        inc: &mut TensorIncrement,
        more: impl Fn() -> bool,
        sink: &mut dyn FnMut(ScalarBatch, usize),
    ) -> bool {
        loop {
            if !self.list_more(inc) {
                return false;
            }
            if self.backlog.is_empty() {
                return true; // Nothing is left to list.
            }
            self.read_backlog(inc, &more, sink);
            if !self.backlog.is_empty() || (self.listing.is_some() && !more()) {
                return false;
            }
        }
    }

    /// Lists the listing's next stretches into the backlog while fewer than [`LISTED_AHEAD`]
    /// files are left in it; each stretch's files not read yet join the backlog, and the
    /// collections files are read again after it. False when a stretch could not be listed.
    fn list_more(&mut self, inc: &mut TensorIncrement) -> bool {
        while self.backlog.len() < LISTED_AHEAD {
            let Some(listing) = self.listing.as_mut() else {
                return true;
            };
            match listing.next(self.storage.as_ref()) {
                None => self.listing = None,
                Some(Ok(paths)) => {
                    if listing.ended() {
                        self.listing = None;
                    }
                    let new = paths
                        .into_iter()
                        .filter(|(path, step, _)| !self.read.contains(*step, path));
                    self.backlog.extend(new);
                    self.read_collections(inc);
                }
                Some(Err(e)) => {
                    if !listing.started() {
                        self.listing = None;
                        self.listing_end = None;
                    }
                    inc.problem(TensorProblem::Listing(e));
                    return false;
                }
            }
        }
        true
    }

    /// Index files and steps at or before the last complete step are never listed again: what
    /// is kept of them to check new files against goes. (While a listing is read, a live
    /// run's files are kept until the next listing confirms their steps: about 300 bytes a
    /// step, only for a first listing that reads much of a long run.)
    fn forget_complete(&mut self) {
        // After a listing started once the run had ended, nothing is listed again: what the
        // files read make complete goes at once (reading a finished run holds no more than a
        // batch's worth).
        let last = match self.listing_end {
            Some(_) => self.progress.seen_complete(),
            None => self.progress.last_complete(),
        };
        self.read.forget_through(last);
        if let Some(last) = last {
            self.open = self.open.split_off(&last.saturating_add(1));
        }
    }

    fn read_collections(&mut self, inc: &mut TensorIncrement) {
        if self.end.is_some() {
            return;
        }
        let storage = self.storage.as_ref();
        let paths = match source::unread_collection_files(storage, &self.progress, |p| {
            self.collection_files.contains(p)
        }) {
            Ok(paths) => paths,
            Err(e) => return inc.problem(TensorProblem::Listing(e)),
        };
        for path in paths {
            match source::read_collections_file(storage, self.share.as_ref(), &path) {
                Ok(file) => {
                    self.progress
                        .collections_file(file.worker.as_deref(), file.num_workers);
                    self.found = true;
                }
                Err(e) => inc.problem(TensorProblem::CollectionsFile(e)),
            }
            self.collection_files.insert(path);
        }
    }

    /// Reads the backlog's index files and their numbers on a few threads, and takes them in in
    /// key order on this one while the readers go on; the numbers go to `sink` every [`BATCH`]
    /// files. Files are started while `more` says yes; those read leave the backlog.
    fn read_backlog(
        &mut self,
        inc: &mut TensorIncrement,
        more: impl Fn() -> bool,
        sink: &mut dyn FnMut(ScalarBatch, usize),
    ) {
        let storage = Arc::clone(&self.storage);
        let local = self.local.clone();
        let not_numbers = Arc::clone(&self.not_numbers);
        let share = self.share.clone();
        let mut backlog = std::mem::take(&mut self.backlog);
        let paths = backlog.make_contiguous();
        let mut values = Values::default();
        let mut at = 0;
        let read = source::parse_index_files(
            storage.as_ref(),
            local.as_deref(),
            share.as_ref().map(|s| s as &dyn source::IndexShare),
            paths,
            more,
            |entry| {
                entry.map(|e| {
                    let share = share.as_ref();
                    read_numbers(storage.as_ref(), local.as_deref(), share, e, &not_numbers)
                })
            },
            |read| {
                let (path, step, _) = &paths[at];
                at += 1;
                match read {
                    Ok(read) => self.take_in(read, inc, &mut values),
                    Err(e) => {
                        inc.problem(TensorProblem::IndexFile(e));
                        self.read.insert(*step, path.clone());
                    }
                }
                if at % BATCH == 0 {
                    self.hand_out(&mut values, inc, sink, paths.len() - at);
                }
                Ok::<(), std::convert::Infallible>(())
            },
        );
        let Ok(done) = read;
        self.hand_out(&mut values, inc, sink, paths.len() - done);
        backlog.drain(..done);
        self.backlog = backlog;
    }

    /// The numbers taken in since the last call join the listing's steps waiting to be handed
    /// out; what is kept of complete steps goes. They go to `sink` at once, with about how many
    /// index files are still to read, in a listing started after the end marker with nothing
    /// waiting from before it, and in the first listing that finds a step or a reading of
    /// chosen steps (see the type's docs).
    fn hand_out(
        &mut self,
        values: &mut Values,
        inc: &mut TensorIncrement,
        sink: &mut dyn FnMut(ScalarBatch, usize),
        pending: usize,
    ) {
        self.forget_complete();
        self.taking.add(values);
        self.waiting.add(&mut self.missed_values);
        let final_listing = self.listing_end.is_some() && self.waiting.is_empty();
        let first_listing = self.last_at_listing.is_empty();
        if final_listing || first_listing {
            std::mem::take(&mut self.taking).hand_out(inc, sink, pending);
        }
    }

    /// Takes in one index file and its numbers, unless it conflicts with what is known.
    fn take_in(&mut self, read: StepRead, inc: &mut TensorIncrement, values: &mut Values) {
        let idx = read.entry;
        self.found = true;
        // Python smdebug learns steps from tensors: an index file listing none is no step.
        if idx.tensors.names().next().is_none() {
            self.read.insert(idx.step, idx.path);
            return;
        }
        let known = self.open.get(&idx.step).map(|o| KnownStep {
            mode: o.mode,
            mode_step: o.mode_step,
            worker_file: o.files.get(&idx.worker).map(String::as_str),
            first_file: o.files.values().next().map_or("", String::as_str),
        });
        match admit(known, &idx) {
            Ok(Admit::New) => {}
            Ok(Admit::Again) => return self.read.insert(idx.step, idx.path),
            Err(e) => {
                inc.problem(TensorProblem::ConflictingIndex(e));
                return self.read.insert(idx.step, idx.path);
            }
        }
        for (name, line) in idx.repeated {
            if self.repeated.insert(name) {
                inc.problem(TensorProblem::RepeatedName(line));
            }
        }
        // A step of its worker's before the last one taken in of it when this listing started:
        // the last listing left it out.
        let missed = self
            .last_at_listing
            .get(&idx.worker)
            .is_some_and(|&last| idx.step < last);
        let last = self.last_of.entry(idx.worker.clone()).or_insert(idx.step);
        *last = (*last).max(idx.step);
        if let Err(at) = self.steps.binary_search(&idx.step) {
            self.steps.insert(at, idx.step);
            let step = FollowedStep {
                step: idx.step,
                mode: idx.mode,
                mode_step: idx.mode_step,
            };
            match missed {
                true => self.waiting.steps.push(step),
                false => self.taking.steps.push(step),
            }
        }
        for name in idx.tensors.names() {
            if self.stored_names.contains(name) {
                continue;
            }
            self.stored_names.insert(name.clone());
            let listed = listed_name(name);
            if !self.names.contains(listed) {
                self.names.insert(listed.to_string());
                inc.names.push(listed.to_string());
            }
        }
        self.progress.step_written(idx.step, &idx.worker);
        if !read.not_numbers.is_empty() {
            let mut known = self
                .not_numbers
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            known.extend(read.not_numbers);
        }
        let values = match missed {
            true => &mut self.missed_values,
            false => values,
        };
        for (at, value, wall_time) in read.numbers {
            values.push(idx.tensors.name(at), idx.mode, idx.step, value, wall_time);
        }
        for (tensor, error) in read.problems {
            inc.problem(TensorProblem::Value {
                step: idx.step,
                tensor: tensor.to_string(),
                error,
            });
        }
        self.open
            .entry(idx.step)
            .or_insert_with(|| OpenStep {
                mode: idx.mode,
                mode_step: idx.mode_step,
                files: BTreeMap::new(),
            })
            .files
            .insert(idx.worker, idx.path.clone());
        self.read.insert(idx.step, idx.path);
    }

    /// The numbers of the steps `from..=to` alone, read anew from their index files and event
    /// files with the follower's own reading and checks (an index file conflicting with another
    /// of its step is left out as [`poll`](TensorFollower::poll) leaves it out), as one batch:
    /// the exact values a follower of the whole run hands out for those steps. Only the index
    /// folders holding those steps are listed (one per 1,000 steps); nothing is kept after.
    /// For a reader that keeps a summary of a run's values and reads a narrow window again
    /// when it needs every value of it (the dashboard's zoomed charts).
    pub fn read_steps(
        storage: Arc<dyn Storage>,
        from: u64,
        to: u64,
    ) -> Result<(ScalarBatch, TensorIncrement)> {
        let mut follower = TensorFollower::new(storage);
        for folder in from / 1000..=to / 1000 {
            let listed = follower.storage.list(&format!(
                "{}/{folder:09}",
                smdebug_format::layout::INDEX_DIR
            ))?;
            let mut paths: Vec<IndexPath> = listed
                .into_iter()
                .filter_map(|path| {
                    smdebug_format::layout::parse_index_file(&path).map(|(s, w)| (path, s, w))
                })
                .filter(|(_, step, _)| (from..=to).contains(step))
                .collect();
            paths.sort();
            follower.backlog.extend(paths);
        }
        let mut inc = TensorIncrement::default();
        let mut batch: ScalarBatch = Vec::new();
        follower.read_backlog(&mut inc, || true, &mut |values, _| batch.extend(values));
        // Batches of 2,048 files each hold their own columns: one per name and mode.
        let mut merged: BTreeMap<(String, Mode), BatchColumn> = BTreeMap::new();
        for (name, mode, column) in batch {
            merged.entry((name, mode)).or_default().extend(column);
        }
        let batch = merged
            .into_iter()
            .map(|((name, mode), mut column)| {
                column.sort_by_key(|p| p.0);
                (name, mode, column)
            })
            .collect();
        Ok((batch, inc))
    }

    /// Which steps are complete and which workers count (Python smdebug's rules).
    pub fn progress(&self) -> &StepProgress {
        &self.progress
    }

    /// Every global step taken in, in order.
    pub fn steps(&self) -> &[u64] {
        &self.steps
    }

    /// Every tensor name seen (reductions listed under their tensor), sorted.
    pub fn names(&self) -> &BTreeSet<String> {
        &self.names
    }

    /// Whether anything of a tensor run was found: a collections or an index file.
    pub fn found(&self) -> bool {
        self.found
    }

    /// The run's end marker: `Some(reason)` once it is there, `None` while it is not. Read
    /// through the follower's source when it shares one (once for every reader in the
    /// process), else from storage; once found it is not read again (a run's writers never
    /// remove it; a run written again from the start is a new follower's).
    pub fn end_marker(&mut self) -> crate::Result<Option<Option<EndReason>>> {
        if let Some(found) = &self.marker {
            return Ok(Some(found.clone()));
        }
        let read = source::read_end_marker(self.storage.as_ref(), self.share.as_ref());
        if let Ok(Some(found)) = &read {
            self.marker = Some(found.clone());
        }
        read
    }

    /// `Some(reason)` once the run's end marker was read and every index file before it: then
    /// nothing is listed again (the reason is `None` for Python smdebug's empty marker).
    pub fn end(&self) -> Option<Option<&EndReason>> {
        self.end.as_ref().map(Option::as_ref)
    }
}

/// The values of one batch, as columns per stored name and mode.
#[derive(Default)]
struct Values {
    columns: ScalarBatch,
    /// Mode -> stored name -> its column (looked up by the name's text: a name is kept once
    /// per batch, not cloned a value).
    at: foldhash::HashMap<Mode, foldhash::HashMap<Arc<str>, usize>>,
    count: usize,
}

impl Values {
    fn push(&mut self, name: &Arc<str>, mode: Mode, step: u64, value: f64, wall_time: f64) {
        self.count += 1;
        let by_name = self.at.entry(mode).or_default();
        let i = match by_name.get(&**name) {
            Some(&i) => i,
            None => {
                self.columns
                    .push((name.to_string(), mode, BatchColumn::new()));
                by_name.insert(Arc::clone(name), self.columns.len() - 1);
                self.columns.len() - 1
            }
        };
        self.columns[i].2.push((step, value, wall_time));
    }
}

/// The records of `entry` that may be one number, `(place in the index's table, name, start,
/// length)`: not reductions, not names known to be other than one number, and short enough;
/// the longer ones go to `not_numbers`, unusable index slots to `problems`.
fn numbers_wanted<'e>(
    entry: &'e IndexEntry,
    not_numbers: &RwLock<foldhash::HashSet<Arc<str>>>,
    longer: &mut Vec<Arc<str>>,
    problems: &mut Vec<(Arc<str>, Error)>,
) -> Vec<(usize, &'e Arc<str>, u64, u64)> {
    let mut wanted = Vec::with_capacity(entry.tensors.len());
    let not_numbers = not_numbers.read().unwrap_or_else(PoisonError::into_inner);
    for (i, (name, slot)) in entry.tensors.entries().enumerate() {
        if Reduction::parse_tensor_name(name).is_some() || not_numbers.contains(name) {
            continue; // A reduction, or known not to be one number.
        }
        match slot {
            Slot::Record(start, length) if length <= records::MAX_NUMBER_RECORD => {
                wanted.push((i, name, start, length));
            }
            Slot::Record(..) => longer.push(name.clone()),
            Slot::Unusable(unusable) => problems.push((name.clone(), unusable.error(name))),
        }
    }
    wanted
}

/// The numbers of `entry`'s event file: every tensor (not a reduction, not known to be other
/// than one number) whose record is short enough to be one, read from the whole file (when it
/// is small) or by range, each record's header checked before anything is decoded.
fn read_numbers(
    storage: &dyn Storage,
    local: Option<&std::path::Path>,
    share: Option<&TensorSubscription>,
    entry: IndexEntry,
    not_numbers: &RwLock<foldhash::HashSet<Arc<str>>>,
) -> StepRead {
    let mut read = StepRead {
        numbers: Vec::new(),
        not_numbers: Vec::new(),
        problems: Vec::new(),
        entry,
    };
    let entry = &read.entry;
    let wanted = numbers_wanted(
        entry,
        not_numbers,
        &mut read.not_numbers,
        &mut read.problems,
    );
    if wanted.is_empty() {
        return read;
    }
    read.numbers.reserve_exact(wanted.len());
    let file_len = entry.tensors.end();
    let file = Arc::new(EventFile::new(
        entry.event_file.clone(),
        &entry.path,
        entry.step,
        entry.worker.as_str().into(),
        file_len,
    ));
    // One location for the file, moved from record to record.
    let mut at = Location {
        file,
        step: entry.step,
        mode: entry.mode,
        mode_step: entry.mode_step,
        start: 0,
        length: file_len,
    };
    EVENT_FILE.with_borrow_mut(|buf| {
        // On local disk a small file is read into this thread's buffer (open, read, close: no
        // seek, no new buffer a step); elsewhere, or when that fails or finds nothing, storage
        // reads it (and reports a failure as it does for every file). Shared with other
        // readers, it is read the same way into a buffer of its own, which they take, or
        // taken from them.
        let shared_bytes;
        let whole: Option<&[u8]> = if file_len > WHOLE_FILE_BYTES {
            None
        } else if let Some(share) = share {
            let fetch = || {
                let mut own = Vec::new();
                if let Some(root) = local
                    && smdebug_storage::check_relative("", &entry.event_file).is_ok()
                    && let Ok(n @ 1..) =
                        source::read_whole(root, &entry.event_file, &mut own, file_len as usize)
                {
                    own.truncate(n);
                    return Ok(bytes::Bytes::from(own));
                }
                records::get_range(storage, &at, 0..file_len)
            };
            match share.event_file(entry.step, &entry.event_file, fetch) {
                Ok(bytes) => {
                    shared_bytes = bytes;
                    Some(&shared_bytes[..])
                }
                Err(e) => {
                    // The file is not there (or not readable): one problem for the step.
                    read.problems.push((wanted[0].1.clone(), e));
                    return;
                }
            }
        } else if let Some(root) = local
            // The index names the file: only a plain path inside the run is opened here.
            && smdebug_storage::check_relative("", &entry.event_file).is_ok()
            && let Ok(n @ 1..) = source::read_whole(root, &entry.event_file, buf, file_len as usize)
        {
            Some(&buf[..n])
        } else {
            match records::get_range(storage, &at, 0..file_len) {
                Ok(bytes) => {
                    buf.clear();
                    buf.extend_from_slice(&bytes);
                    Some(&buf[..])
                }
                Err(e) => {
                    // The file is not there (or not readable): one problem for the step.
                    read.problems.push((wanted[0].1.clone(), e));
                    return;
                }
            }
        };
        let mut seen = smdebug_format::number::SeenMetadata::default();
        for (i, name, start, length) in wanted {
            (at.start, at.length) = (start, length);
            match records::number_at(storage, whole, &at, name, &mut seen) {
                Ok(Some((value, wall_time))) => read.numbers.push((i, value, wall_time)),
                Ok(None) => read.not_numbers.push(name.clone()),
                Err(e) => read.problems.push((name.clone(), e)),
            }
        }
    });
    read
}

thread_local! {
    /// The event file being read on this thread ([`read_numbers`]): at most [`WHOLE_FILE_BYTES`],
    /// kept between files.
    static EVENT_FILE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}
