//! The `Trial`: reads a run (written by these crates or by Python smdebug), offline or while it
//! is still being written.
//!
//! Opening a trial lists the run's collections and index files once; after that every refresh
//! lists only what is new (index files after the last complete step), so following a live run
//! costs one or two small listings per query, not a full re-list: a listing is not a snapshot
//! (it can hold a worker's step 8 and not its step 7, written while it ran), so steps its files
//! make complete are confirmed by one more listing before listings start past them (see
//! [`StepProgress`]).
//!
//! Step numbers follow smdebug: with `Mode::Global` (or no mode) a step is a global step; with a
//! mode it is the step counted within that mode.
//!
//! # Python smdebug's semantics
//!
//! Workers, step completeness, `range_steps` and the states of [`Trial::has_passed_step`] and
//! [`Trial::wait_for_steps`] are Python smdebug 1.0.34's, kept in [`StepProgress`] (which the
//! [`TensorFollower`] uses too): [`steps`](Trial::steps) lists complete steps, as Python's
//! `steps()` does, and [`all_steps`](Trial::all_steps) adds the incomplete ones
//! (`show_incomplete_steps=True`).
//!
//! - **Workers.** The number of workers is the `num_workers` of the run's (first) collections
//!   file. A step is complete once that many workers wrote it. The names of the collections
//!   files are the run's workers (`workers()`); they never hold a step back: a run whose
//!   collections file is `worker_0_collections.json` with `num_workers: 1` and whose steps
//!   `algo-1` wrote has every step complete. A run without a collections file (Python cannot
//!   open one) counts the workers that wrote steps.
//! - **The last complete step** (`last_complete_step`) is the highest step that many workers
//!   wrote, as a listing read after their files confirms. Every step up to it counts as
//!   complete: a worker that skipped it never will write it. When more than `incomplete_step_window` steps (Python's
//!   `SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW`, 1000) are past it, it moves on by half the window
//!   (Python's formula, which counts steps against a step number), so a job that lost a worker
//!   still shows its steps, half a window late. Once the run's end marker is read, every step
//!   is complete and the last complete step is the last step (Python's `loaded_all_steps`).
//! - **`has_passed_step(s)`**: `Available` when `s` is a complete step; `NotYetAvailable` when
//!   it is known but not complete, or later than every known step while the run goes on;
//!   `Unavailable` when a later step is at or before the last complete step, or the run ended
//!   without it.
//! - **`range_steps`**: only index files of global steps in `[start, end)` are read.
//!
//! **When a trial looks for new files.** A query whose answer new files could change looks for
//! them at once, as Python's does: [`steps`](Trial::steps) and the other step listings,
//! [`tensor_names`](Trial::tensor_names), [`workers`](Trial::workers),
//! [`modes`](Trial::modes), [`wait_for_steps`](Trial::wait_for_steps) (at every poll),
//! [`has_passed_step`](Trial::has_passed_step) for a step not yet available,
//! [`tensor`](Trial::tensor) for a name not known yet, and a value lookup for a step not known
//! yet for that tensor. So a poller never sees a stale "not yet" for a step already on disk.
//! Other queries (a value at a known step, [`is_complete`](Trial::is_complete),
//! [`last_complete_step`](Trial::last_complete_step), ...) look at most once per
//! [`TrialOptions::refresh_interval`]. Once the run's end marker is read nothing is listed again.
//! [`Trial::set_auto_refresh`]`(false)` (Python's `dynamic_refresh = False`, which its
//! `no_refresh` sets) stops the queries looking until it is turned on again.
//!
//! **Where this API differs from Python's, on purpose:**
//! - A trial opens a run without collections files, or with fewer than it declares, and without
//!   waiting ([`TrialOptions::require_collections`] gives Python's refusal,
//!   [`Error::MissingCollectionFiles`]); Python waits for them.
//! - The end marker is read when the trial is opened: an ended run is complete at once (Python
//!   notices at its first query), and with no delay (Python waits
//!   `SMDEBUG_TRAINING_END_DELAY_REFRESH` seconds, 1 by default, before its final listing; here
//!   the marker is read before the listing, so the listing holds every step written before it).
//!   The collections files are read after the index listing, so every worker with a file listed
//!   has its collections file (written before its first index file) read, and the declared
//!   worker count is known before any step is counted complete.
//! - [`modes`](Trial::modes) looks for new files (Python's does not) and lists `Global` too
//!   when the run has global-mode steps (Python leaves it out).
//! - [`wait_for_steps`](Trial::wait_for_steps) takes a timeout (Python waits forever) and
//!   leaves the trial refreshing as before (Python's turns its automatic refresh off after).
//! - [`TrialTensor::steps`] of a mode keeps the steps whose *global* step is complete (Python
//!   compares the mode step with the last complete global step).
//! - The incomplete-step window moves the last complete step until it holds, once per
//!   refresh (Python moves it half a window per refresh).
//! - A value whose index file appears during the lookup is returned at once (Python, which then
//!   asks where the step stands, raises `StepNotYetAvailable` for a step still incomplete).
//! - Collections files are merged over workers (Python reads the first one only).
//! - An unknown collection is [`Error::CollectionNotFound`] (Python's `collection(name)` creates
//!   it, empty, so its `tensor_names(collection=name)` is empty).
//! - An index entry that locates no record (a 1-byte placeholder, a negative offset, an end past
//!   `u64::MAX`) is [`Error::BadIndexEntry`] for that tensor at that step, naming the index file
//!   and the entry (Python's reader fails inside its record reader, with `struct.error` or
//!   worse). Like Python, the run opens and the tensor is listed. So is every entry of an index
//!   file whose `event_file_name` is empty (it names no event file; Python reads the run's
//!   directory as one and fails with `IsADirectoryError`).
//! - String tensors read in any shape, in smdebug's form (dtype unset) and TensorFlow's
//!   (`DT_STRING`); Python reads smdebug's 1-D form only.

mod ahead;
mod arena;
mod columns;
mod decoded;
mod follow;
mod handle;
mod index_files;
mod intake;
mod listing;
mod lookup;
mod progress;
mod queries;
mod reads;
mod records;
mod report;
mod shared;
mod source;
mod state;
mod step_map;
mod step_runs;
mod steps;
mod tracks;
mod value;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{Error, Result};
pub use columns::{BatchColumn, Column, ScalarBatch, ScalarColumns, ScalarTrack, WALL_TOLERANCE_S};
pub use follow::{FollowedStep, TensorFollower, TensorIncrement, TensorProblem};
pub use progress::{DEFAULT_INCOMPLETE_STEP_WINDOW, StepProgress, StepRange, StepState};
pub use report::{JsonElement, JsonNumber, TensorRecordJson, TrialInfo};
pub use shared::{
    HELD_EVENT_BYTES, HELD_INDEX_FILES, LEAD_EVENT_BYTES, LEAD_INDEX_FILES, TensorSource,
    TensorSubscription,
};
pub use smdebug_format::budget::{Budget, Conversion};
pub use smdebug_format::tensor::DEFAULT_MAX_TENSOR_BYTES;
use smdebug_storage::{IntoLocation, Storage};
use state::State;
pub use state::{RepeatedName, StepSelector};
pub use steps::{StepStream, StepValue, StepValues};
pub use tracks::{ScalarTracks, Taken};
pub use value::{TensorBytes, TensorValue};

/// How a trial reads.
#[derive(Clone, Debug)]
pub struct TrialOptions {
    /// Look for new data before answering a query (see the [module docs](self) for which
    /// queries look at once and which at most once per `refresh_interval`). Off: only
    /// [`Trial::refresh`] and [`Trial::wait_for_steps`] look. Default: true. The trial's
    /// setting at opening; [`Trial::set_auto_refresh`] turns it on and off later (Python
    /// smdebug's `dynamic_refresh`).
    pub auto_refresh: bool,
    /// Minimum time between two automatic refreshes of the queries that do not look at once.
    /// Default: 100 ms.
    pub refresh_interval: Duration,
    /// Poll interval of [`Trial::wait_for_steps`]. Default: 100 ms.
    pub poll_interval: Duration,
    /// The global steps to read (Python smdebug's `range_steps`). Default: every step.
    pub range_steps: StepRange,
    /// Python smdebug's `SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW`: how many steps may be past the
    /// last complete step before it moves on by half this many (see the [module docs](self)).
    /// Default: [`DEFAULT_INCOMPLETE_STEP_WINDOW`] (1000).
    pub incomplete_step_window: u64,
    /// Refuse to open a run whose collections files are not all there (at least one, and as
    /// many as the first one's `num_workers`), as Python smdebug's `create_trial` does:
    /// [`Error::MissingCollectionFiles`]. Default: false (a run opens with what it holds).
    pub require_collections: bool,
    /// Memory-map the event files of a run on local disk: records are read straight from the
    /// page cache, with no copy into fresh memory, and each map is kept until the trial is
    /// dropped (at most 32,768 maps for all trials of a process; past that, files are read as
    /// when this is off). A file's length is checked when it is mapped, so a file cut short
    /// before that gives `Error::IncompleteRecord` for the records it lost. But a file cut
    /// short in place *while mapped* (`cp` over a run, a tool rewriting it) makes the process
    /// fault (SIGBUS) when the lost bytes are read, which no error handling can catch: a run's
    /// bytes could kill the host process (a notebook's interpreter, a dashboard). So this is
    /// opt-in: turn it on for runs nothing rewrites in place (smdebug's writers, ours and
    /// Python's, publish a file by renaming a finished temporary file and never change it
    /// after). Its gain is small (see BENCHMARKS.md, "Reading event files: read or map").
    /// Default: false.
    pub map_files: bool,
    /// Memory for whole event files kept after a read when they are not mapped (object stores,
    /// or [`map_files`](TrialOptions::map_files) off): files up to 1 MiB are fetched whole while this
    /// budget lasts, so the other tensors of a step cost no further I/O; a file fetched for the
    /// first time is let go when the next one is (one sweep over the run holds one file), a
    /// file fetched again (a second sweep, tensor by tensor) is kept. A caller reading value
    /// by value ([`Trial::raw_value_as`] with [`read_files_ahead`](TrialOptions::read_files_ahead),
    /// the Python binding's `value`) keeps the values taken out of the files read for it, for
    /// the tensors it reads next (each counted here until it is read), and every file it
    /// fetches itself: going tensor after tensor, it reads each file once. Those files (up to
    /// 512 KiB each) go into blocks of 2 MiB, each counted whole in this budget until the last
    /// file in it (or a value sliced from one) is dropped. Once the budget is spent,
    /// other files are read record by record. Nothing is evicted on its own: a reader going step
    /// by step gives old steps' files back with
    /// [`forget_files_before`](Trial::forget_files_before). Files read ahead
    /// ([`read_files_ahead`](TrialOptions::read_files_ahead)) take their room from this budget
    /// too. Default: 256 MiB (a 10,000-step PyTorch run of 7 small tensors a step is 236 MB).
    pub file_cache_bytes: usize,
    /// The most bytes one read may allocate for a tensor: its decoded value *and* what the
    /// reader makes of it ([`Conversion`]: [`TrialTensor::value`] converts to `f64`, 8 bytes an
    /// element whatever the stored dtype; the CLI's JSON and `smdebug_rs`'s numpy copy count
    /// theirs). A read whose tensor claims more (or whose record is longer) is
    /// `Error::TensorTooLarge`, naming the file, the offset, the tensor and the size, and is
    /// refused from the record's header, before anything is decoded. Runs come from other
    /// machines and other tools: a record of a few bytes can claim a tensor of any size
    /// (TensorFlow's fill rule), and a `uint8` value within 1 GiB as stored is 9 GiB as `f64`.
    /// Default: [`DEFAULT_MAX_TENSOR_BYTES`] (1 GiB).
    pub max_tensor_bytes: u64,
    /// For a reader that goes step by step and lets go of the steps it is past
    /// ([`Trial::release_steps_before`]): read the index only this many global steps past the
    /// reader's position (the largest step it released before), so that the trial holds a
    /// bounded index however long the run, where it would otherwise read the whole run's index
    /// when it is opened. Each refresh reads on as the reader moves; when no step has an index
    /// file between where the listing starts and that horizon (a run saving steps further apart,
    /// or a reader caught up with its writer), the next stretch past it is read. The trial is
    /// [complete](Trial::is_complete) once the run has ended *and* every step has been read;
    /// until then a step not read yet is `NotYetAvailable`, and listings ([`Trial::steps`],
    /// ...) hold the steps read and not released. Default: `None` (the whole index is read).
    pub index_read_ahead: Option<u64>,
    /// Read ahead of a caller that reads one value at a time. [`TrialTensor::value`],
    /// [`TrialTensor::read`], ...: once a value is read, the files of the tensor's next steps
    /// (up to 256 files or 16 MiB, within half of
    /// [`file_cache_bytes`](TrialOptions::file_cache_bytes)) are read on a few threads and kept
    /// until the caller reads them, so that the caller finds them in memory.
    /// [`Trial::raw_value`] and [`Trial::raw_value_as`] (the Python binding's `value`): once
    /// two reads of a tensor go in step order, the values of its next steps (up to 512, their
    /// files and values within 16 MiB) are looked up and decoded together on rayon's threads,
    /// the next 512 while the caller takes these (two batches at most), and the next reads
    /// take them without a lookup ([`Trial::decoded_value`]). Each event file such a batch
    /// reads is read once, and every value its index entries list is copied out of it: the
    /// batch's own, and the others' (those of the tensors a caller going tensor after tensor
    /// reads next), kept with the file within [`file_cache_bytes`](TrialOptions::file_cache_bytes)
    /// until a read of theirs (in the same [`Conversion`]) takes them. Each such value's bytes
    /// are its own ([`TensorBytes`]), never a slice of a kept file. What a read gives is
    /// the same either way: a file or value that could not be read ahead is read by the
    /// caller, who gets what is wrong with it. Default: true.
    pub read_files_ahead: bool,
    /// Read the run's index files, and the event files read whole, through a
    /// [`TensorSource`] other readers in the process share (a `Session`'s dashboard): each
    /// file is read once for all of them. The listings, step completeness and checks stay the
    /// trial's own. Default: `None` (the trial reads every file itself).
    pub tensor_source: Option<TensorSubscription>,
}

impl Default for TrialOptions {
    fn default() -> Self {
        TrialOptions {
            auto_refresh: true,
            refresh_interval: Duration::from_millis(100),
            poll_interval: Duration::from_millis(100),
            range_steps: StepRange::ALL,
            incomplete_step_window: DEFAULT_INCOMPLETE_STEP_WINDOW,
            require_collections: false,
            map_files: false,
            file_cache_bytes: 256 << 20,
            max_tensor_bytes: DEFAULT_MAX_TENSOR_BYTES,
            index_read_ahead: None,
            read_files_ahead: true,
            tensor_source: None,
        }
    }
}

/// One tensor of a trial (Python smdebug's `Tensor`): [`Trial::tensor`] gives it; its methods
/// read its steps, workers and values.
pub struct TrialTensor<'t> {
    trial: &'t Trial,
    name: String,
}

/// Steps read together by [`ValueChunks`]: enough for the reader threads to share
/// (one per 256 files), few enough that a stretch's values and record places stay small
/// (small values are copied out of their event files, so a stretch keeps no file alive).
pub const VALUE_CHUNK_STEPS: usize = 1024;

/// A tensor's values at its complete steps, a stretch of at most [`VALUE_CHUNK_STEPS`] steps at
/// a time in step order ([`TrialTensor::value_chunks`]).
pub struct ValueChunks<'t> {
    trial: &'t Trial,
    name: String,
    steps: Vec<u64>,
    next: usize,
    mode: Option<smdebug_core::Mode>,
    worker: Option<String>,
    conversion: Conversion,
}

/// How many workers the run declares, or (no collections file) wrote steps.
fn num_workers(progress: &StepProgress) -> usize {
    progress
        .declared_workers()
        .unwrap_or(progress.step_workers().len())
}

/// A run, opened for reading. Cheap to share across threads (`Arc<Trial>`); queries lock briefly.
pub struct Trial {
    location: String,
    storage: Arc<dyn Storage>,
    options: TrialOptions,
    state: Mutex<State>,
    files: Arc<source::Files>,
    /// Event files read ahead of single reads ([`TrialOptions::read_files_ahead`]).
    ahead: ahead::ReadAhead,
    /// Values decoded ahead of [`Trial::raw_value_as`]'s callers
    /// ([`TrialOptions::read_files_ahead`]).
    decoded: decoded::DecodedAhead,
    /// Whether queries look for new files ([`TrialOptions::auto_refresh`] at opening).
    auto_refresh: AtomicBool,
    /// This trial among the process's trials (in its [`NamesKey`]s).
    id: u64,
}

/// Where a [`Trial`]'s tensor names and collections stand ([`Trial::names_key`]). Names are
/// only ever added, and collections files only added or read again (a hook rewrites its file
/// when a tensor joins a collection), so two equal keys of the same trial mean the same
/// [`Trial::tensor_names`] and the same members of every collection; keys of two trials never
/// compare equal. A caller that matches names against patterns at every step (a rule's
/// selection) keeps its result under this key and matches again only when it moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamesKey {
    trial: u64,
    collection_reads: usize,
    names: usize,
}

impl Trial {
    /// Opens a run directory or object-store URL (`s3://bucket/run`, `memory://run`, …): text,
    /// a `Path` or a parsed [`Location`](smdebug_storage::Location). Fails when nothing of a run
    /// is there yet.
    pub fn open(location: impl IntoLocation) -> Result<Trial> {
        Trial::open_with(location, TrialOptions::default())
    }

    /// Opens with explicit options.
    pub fn open_with(location: impl IntoLocation, options: TrialOptions) -> Result<Trial> {
        let location = location.into_location()?;
        let text = location.to_string();
        let (storage, dir) = source::open(location)?;
        Trial::build(&text, storage, dir, options)
    }

    /// Opens a run on an already-built storage (rooted at the run).
    pub fn from_storage(
        location: &str,
        storage: Arc<dyn Storage>,
        options: TrialOptions,
    ) -> Result<Trial> {
        Trial::build(location, storage, None, options)
    }

    /// `dir`: the run's directory when it is on local disk (its event files may be mapped).
    fn build(
        location: &str,
        storage: Arc<dyn Storage>,
        dir: Option<std::path::PathBuf>,
        options: TrialOptions,
    ) -> Result<Trial> {
        options.range_steps.check()?;
        let map_root = dir.clone().filter(|_| options.map_files);
        let trial = Trial {
            location: location.to_string(),
            storage,
            files: Arc::new(source::Files::new(
                map_root,
                options.file_cache_bytes,
                options.tensor_source.clone(),
            )),
            ahead: ahead::ReadAhead::default(),
            decoded: decoded::DecodedAhead::default(),
            state: Mutex::new(State::new(
                dir,
                options.range_steps,
                options.incomplete_step_window,
                options.index_read_ahead,
                options.tensor_source.clone(),
            )),
            auto_refresh: AtomicBool::new(options.auto_refresh),
            id: {
                static TRIALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                TRIALS.fetch_add(1, Ordering::Relaxed)
            },
            options,
        };
        {
            let mut st = trial.lock();
            st.refresh(trial.storage.as_ref())?;
            if trial.options.require_collections {
                let found = st.collection_files();
                let declared = st.progress.declared_workers().unwrap_or(1);
                if found == 0 || found < declared {
                    return Err(Error::MissingCollectionFiles {
                        location: location.to_string(),
                        found,
                        declared,
                        ended: st.complete,
                    });
                }
            }
            if !st.has_anything() {
                return Err(Error::NoSuchRun {
                    location: location.to_string(),
                });
            }
        }
        Ok(trial)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the index half-updated in a way that
        // matters more than losing the trial, so recover the guard.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Looks for new steps, workers, collections and the end marker now.
    pub fn refresh(&self) -> Result<()> {
        self.lock().refresh(self.storage.as_ref())
    }

    /// Turns automatic refresh on or off from now on (Python smdebug's `dynamic_refresh`,
    /// which its `no_refresh` turns off): off, queries answer from the files already read, as
    /// if nothing had been written since; [`Trial::refresh`] and [`Trial::wait_for_steps`]
    /// still look.
    pub fn set_auto_refresh(&self, on: bool) {
        self.auto_refresh.store(on, Ordering::Relaxed);
    }

    /// Whether queries look for new files (see [`Trial::set_auto_refresh`]).
    pub fn auto_refresh(&self) -> bool {
        self.auto_refresh.load(Ordering::Relaxed)
    }

    /// Whether a query may look for new files: automatic refresh is on and the run has not
    /// ended.
    fn may_refresh(&self, st: &State) -> bool {
        self.auto_refresh() && !st.finished()
    }

    /// The state, new files looked for now (a query whose answer they could change).
    fn fresh(&self) -> Result<MutexGuard<'_, State>> {
        let mut st = self.lock();
        if self.may_refresh(&st) {
            st.refresh(self.storage.as_ref())?;
        }
        Ok(st)
    }

    /// The state, new files looked for at most once per `refresh_interval`.
    fn throttled(&self) -> Result<MutexGuard<'_, State>> {
        let mut st = self.lock();
        if self.may_refresh(&st)
            && st
                .last_refresh
                .is_none_or(|t| t.elapsed() >= self.options.refresh_interval)
        {
            st.refresh(self.storage.as_ref())?;
        }
        Ok(st)
    }

    /// Looks for new files now, unless the run has ended; whether it did.
    fn refresh_if_live(&self, st: &mut State) -> Result<bool> {
        if !self.may_refresh(st) {
            return Ok(false);
        }
        st.refresh(self.storage.as_ref())?;
        Ok(true)
    }

    /// The options the trial reads with.
    pub fn options(&self) -> &TrialOptions {
        &self.options
    }

    /// Where the run is.
    pub fn location(&self) -> &str {
        &self.location
    }
}
