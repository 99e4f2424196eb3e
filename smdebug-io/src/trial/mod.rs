//! The `Trial`: reads a run (written by these crates or by Python smdebug), offline or while it
//! is still being written.
//!
//! Opening a trial lists the run's collections and index files once; after that every refresh
//! lists only what is new (index files after the last complete step), so following a live run
//! costs one small listing per query, not a full re-list.
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
//!   wrote. Every step up to it counts as complete: a worker that skipped it never will write
//!   it. When more than `incomplete_step_window` steps (Python's
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
//!
//! **Where this API differs from Python's, on purpose:**
//! - A trial opens a run without collections files, or with fewer than it declares, and without
//!   waiting ([`TrialOptions::require_collections`] gives Python's refusal,
//!   [`Error::MissingCollectionFiles`]); Python waits for them.
//! - The end marker is read when the trial is opened: an ended run is complete at once (Python
//!   notices at its first query), and with no delay (Python waits
//!   `SMDEBUG_TRAINING_END_DELAY_REFRESH` seconds, 1 by default, before its final listing; here
//!   the marker is read before the listing, so the listing holds every step written before it).
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
//!   worse). Like Python, the run opens and the tensor is listed.
//! - String tensors read in any shape, in smdebug's form (dtype unset) and TensorFlow's
//!   (`DT_STRING`); Python reads smdebug's 1-D form only.

mod columns;
mod follow;
mod handle;
mod index_files;
mod intake;
mod listing;
mod lookup;
mod progress;
mod report;
mod source;
mod state;
mod steps;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use smdebug_core::{Collection, EndReason, Mode, PyRegex};

use crate::error::{Error, Result};
pub use crate::format::budget::{Budget, Conversion};
pub use crate::format::tensor::DEFAULT_MAX_TENSOR_BYTES;
use crate::storage::Storage;
pub use columns::{Column, ScalarBatch, ScalarColumns, ScalarTrack};
pub use follow::{FollowedStep, TensorFollower, TensorIncrement, TensorProblem};
pub use progress::{DEFAULT_INCOMPLETE_STEP_WINDOW, StepProgress, StepRange, StepState};
pub use report::{JsonElement, JsonNumber, TensorRecordJson, TrialInfo};
use source::Location;
pub use source::{TensorBytes, TensorValue};
use state::State;
pub use state::{RepeatedName, StepSelector};
pub use steps::{StepStream, StepValue, StepValues};

/// How a trial reads.
#[derive(Clone, Debug)]
pub struct TrialOptions {
    /// Look for new data before answering a query (see the [module docs](self) for which
    /// queries look at once and which at most once per `refresh_interval`). Off: only
    /// [`Trial::refresh`] and [`Trial::wait_for_steps`] look. Default: true.
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
    /// before that gives [`Error::IncompleteRecord`] for the records it lost. But a file cut
    /// short in place *while mapped* (`cp` over a run, a tool rewriting it) makes the process
    /// fault (SIGBUS) when the lost bytes are read, which no error handling can catch: a run's
    /// bytes could kill the host process (a notebook's interpreter, a dashboard). So this is
    /// opt-in: turn it on for runs nothing rewrites in place (smdebug's writers, ours and
    /// Python's, publish a file by renaming a finished temporary file and never change it
    /// after). Its gain is small (see BENCHMARKS.md, "Reading event files: read or map").
    /// Default: false.
    pub map_files: bool,
    /// Memory for whole event files kept after a read when they are not mapped (object stores,
    /// or [`map_files`](TrialOptions::map_files) off): files up to 1 MiB are fetched whole while
    /// this budget lasts, so the other tensors of a step cost no further I/O; once it is spent,
    /// other files are read record by record. Nothing is evicted on its own: a reader going step
    /// by step gives old steps' files back with
    /// [`forget_files_before`](Trial::forget_files_before). Default: 256 MiB (a 10,000-step
    /// PyTorch run of 7 small tensors a step is 236 MB).
    pub file_cache_bytes: usize,
    /// The most bytes one read may allocate for a tensor: its decoded value *and* what the
    /// reader makes of it ([`Conversion`]: [`TrialTensor::value`] converts to `f64`, 8 bytes an
    /// element whatever the stored dtype; the CLI's JSON and `smdebug_rs`'s numpy copy count
    /// theirs). A read whose tensor claims more (or whose record is longer) is
    /// [`Error::TensorTooLarge`], naming the file, the offset, the tensor and the size, and is
    /// refused from the record's header, before anything is decoded. Runs come from other
    /// machines and other tools: a record of a few bytes can claim a tensor of any size
    /// (TensorFlow's fill rule), and a `uint8` value within 1 GiB as stored is 9 GiB as `f64`.
    /// Default: [`DEFAULT_MAX_TENSOR_BYTES`] (1 GiB).
    pub max_tensor_bytes: u64,
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
        }
    }
}

/// One tensor of a trial (Python smdebug's `Tensor`): [`Trial::tensor`] gives it; its methods
/// read its steps, workers and values.
pub struct TrialTensor<'t> {
    trial: &'t Trial,
    name: String,
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
    files: source::Files,
}

impl Trial {
    /// Opens a run directory or object-store URL (`s3://bucket/run`, `memory://run`, …).
    /// Fails when nothing of a run is there yet.
    pub fn open(location: &str) -> Result<Trial> {
        Trial::open_with(location, TrialOptions::default())
    }

    /// Opens with explicit options.
    pub fn open_with(location: &str, options: TrialOptions) -> Result<Trial> {
        let (storage, dir) = source::open(location)?;
        Trial::build(location, storage, dir, options)
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
            files: source::Files::new(map_root, options.file_cache_bytes),
            state: Mutex::new(State::new(
                dir,
                options.range_steps,
                options.incomplete_step_window,
            )),
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

    /// Whether a query may look for new files: automatic refresh is on and the run has not
    /// ended.
    fn may_refresh(&self, st: &State) -> bool {
        self.options.auto_refresh && !st.finished()
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

    /// Every tensor name seen so far (in complete and incomplete steps), sorted. Reductions are
    /// listed under their tensor's name, as Python smdebug does; read them with
    /// [`TrialTensor::reduction_value`].
    pub fn tensor_names(&self) -> Result<Vec<String>> {
        Ok(self.fresh()?.listed.keys().cloned().collect())
    }

    /// Tensor names saved in `mode` (`None` or `Global`: every name), or at one `step` of
    /// `mode`'s numbering, sorted: Python smdebug's `tensor_names(step=…, mode=…)`. A mode the
    /// run has no steps in, or a mode step it does not have, is [`Error::UnknownStep`]; a global
    /// step it does not have lists nothing.
    pub fn tensor_names_in(&self, step: Option<u64>, mode: Option<Mode>) -> Result<Vec<String>> {
        self.fresh()?
            .names_in(step, mode.unwrap_or(Mode::Global), &self.location)
    }

    /// Tensor names of a collection and/or matching a regex (Python `re` syntax, searched
    /// anywhere in the name as Python smdebug's `tensor_names(regex=…)` does).
    pub fn tensor_names_filtered(
        &self,
        collection: Option<&str>,
        regex: Option<&str>,
    ) -> Result<Vec<String>> {
        let re = regex
            .map(|r| {
                PyRegex::new(r).map_err(|e| Error::BadRegex {
                    pattern: r.to_string(),
                    reason: e.to_string(),
                })
            })
            .transpose()?;
        let mut st = self.fresh()?;
        let names = match collection {
            Some(c) => st.collection_members(c)?,
            None => st.listed.keys().cloned().collect(),
        };
        Ok(match re {
            Some(re) => names.into_iter().filter(|n| re.is_match(n)).collect(),
            None => names,
        })
    }

    /// The complete steps, in smdebug's numbering: global steps for `None`/`Global`, mode steps
    /// for a mode (Python's `steps(mode)`).
    pub fn steps(&self, mode: Option<Mode>) -> Result<Vec<u64>> {
        Ok(self.fresh()?.steps_of(mode.unwrap_or(Mode::Global), false))
    }

    /// Every known step, complete or not, numbered as [`steps`](Trial::steps) numbers them
    /// (Python's `steps(mode, show_incomplete_steps=True)`).
    pub fn all_steps(&self, mode: Option<Mode>) -> Result<Vec<u64>> {
        Ok(self.fresh()?.steps_of(mode.unwrap_or(Mode::Global), true))
    }

    /// The complete global steps, optionally only those recorded in `mode`.
    pub fn global_steps(&self, mode: Option<Mode>) -> Result<Vec<u64>> {
        Ok(self
            .fresh()?
            .global_steps_of(mode.unwrap_or(Mode::Global), false))
    }

    /// Every known global step, complete or not, optionally only those recorded in `mode`.
    pub fn all_global_steps(&self, mode: Option<Mode>) -> Result<Vec<u64>> {
        Ok(self
            .fresh()?
            .global_steps_of(mode.unwrap_or(Mode::Global), true))
    }

    /// The global step of step `step` of `mode` (the first, when a mode numbers two global
    /// steps alike), if the run has it (Python's `global_step(mode, mode_step)`). Looks for new
    /// files at once for a step not known yet.
    pub fn global_step(&self, mode: Mode, step: u64) -> Result<Option<u64>> {
        let mut st = self.throttled()?;
        if st.global_step(step, mode).is_none() {
            self.refresh_if_live(&mut st)?;
        }
        Ok(st.global_step(step, mode))
    }

    /// The mode global step `step` was recorded in and its step within that mode, as
    /// [`steps`](Trial::steps) numbers them (a `Global` step is its own global step), or `None`
    /// when the run has no such step: one lookup, for callers going step by step (where
    /// [`global_steps`](Trial::global_steps) would list the whole run at each step). Looks for
    /// new files at once for a step not known yet.
    pub fn step_mode(&self, step: u64) -> Result<Option<(Mode, u64)>> {
        let mut st = self.throttled()?;
        if !st.steps.contains_key(&step) {
            self.refresh_if_live(&mut st)?;
        }
        Ok(st.steps.get(&step).map(|e| match e.mode {
            Mode::Global => (Mode::Global, step),
            mode => (mode, e.mode_step),
        }))
    }

    /// Lets go of the event files of global steps before `step` that reads kept (mapped, or
    /// fetched within [`file_cache_bytes`](TrialOptions::file_cache_bytes)), so that the
    /// budget serves the steps to come: for readers that go step by step and do not come back,
    /// as the rule runner does. Without it, a small budget is spent on the first steps and
    /// every later value is a read of its own. Reading those steps again still works (it
    /// reads their files again); values already read keep their bytes.
    pub fn forget_files_before(&self, step: u64) {
        let mut st = self.lock();
        let from = st.files_forgotten_before;
        if step <= from {
            return;
        }
        for entry in st.steps.range(from..step).map(|(_, e)| e) {
            for w in entry.workers.values() {
                w.file.forget(&self.files);
            }
        }
        st.files_forgotten_before = step;
    }

    /// The modes the run recorded steps in, `Global` included when it has global-mode steps
    /// (Python's `modes()` leaves `Global` out).
    pub fn modes(&self) -> Result<Vec<Mode>> {
        let st = self.fresh()?;
        let mut modes: Vec<Mode> = st.steps.values().map(|e| e.mode).collect();
        modes.sort();
        modes.dedup();
        Ok(modes)
    }

    /// The run's workers as Python smdebug names them: the workers the collections files are
    /// named after (`worker_0`, …), or, for a run without a collections file, the workers that
    /// wrote steps. See [`step_workers`](Trial::step_workers) for the latter always.
    pub fn workers(&self) -> Result<Vec<String>> {
        Ok(self.fresh()?.progress.workers())
    }

    /// The workers whose index files were read: those that wrote steps (a collections file may
    /// name a worker that wrote none).
    pub fn step_workers(&self) -> Result<Vec<String>> {
        Ok(self
            .fresh()?
            .progress
            .step_workers()
            .iter()
            .cloned()
            .collect())
    }

    /// How many workers must write a step for it to be complete: the collections file's
    /// `num_workers`, or, for a run without one, how many workers wrote steps.
    pub fn num_workers(&self) -> Result<usize> {
        let st = self.throttled()?;
        Ok(num_workers(&st.progress))
    }

    /// The collections, merged over workers.
    pub fn collections(&self) -> Result<Vec<Collection>> {
        Ok(self.throttled()?.collections.values().cloned().collect())
    }

    /// Whether the run wrote its end marker, and every step written before it was read: every
    /// step is complete (Python's `loaded_all_steps`).
    pub fn is_complete(&self) -> Result<bool> {
        Ok(self.throttled()?.complete)
    }

    /// Why the run ended, when it ended and said so (our writer stores completion or the stop
    /// request's message; Python smdebug's marker is empty, which gives `None`).
    pub fn end_reason(&self) -> Result<Option<EndReason>> {
        Ok(self.throttled()?.end_reason.clone())
    }

    /// Where `step` (in `mode`'s numbering; global for `None`) stands (Python's
    /// `has_passed_step`; the rules are in the [module docs](self)). A step not available yet is
    /// looked for again at once.
    pub fn has_passed_step(&self, step: u64, mode: Option<Mode>) -> Result<StepState> {
        let mode = mode.unwrap_or(Mode::Global);
        let mut st = self.throttled()?;
        let state = st.step_state(step, mode);
        if state == StepState::NotYetAvailable && self.refresh_if_live(&mut st)? {
            return Ok(st.step_state(step, mode));
        }
        Ok(state)
    }

    /// Python's `last_complete_step`: the last global step every worker wrote, or (the run
    /// ended) the last step; `None` for none (Python's -1).
    pub fn last_complete_step(&self) -> Result<Option<u64>> {
        Ok(self.throttled()?.progress.last_complete())
    }

    /// Waits until every step in `steps` (in `mode`'s numbering) is available, looking for new
    /// files every [`poll_interval`](TrialOptions::poll_interval), as Python's `wait_for_steps`
    /// does: a step that will never come is [`Error::StepUnavailable`], or
    /// [`Error::NoMoreData`] when it is past the last step of a run that has ended. Fails with
    /// [`Error::Timeout`] after `timeout` (Python waits forever; `Duration::MAX` does too).
    pub fn wait_for_steps(
        &self,
        steps: &[u64],
        mode: Option<Mode>,
        timeout: Duration,
    ) -> Result<()> {
        let deadline = Instant::now().checked_add(timeout);
        let mode = mode.unwrap_or(Mode::Global);
        for &step in steps {
            loop {
                {
                    let mut st = self.lock();
                    if !st.finished() {
                        st.refresh(self.storage.as_ref())?;
                    }
                    match st.step_state(step, mode) {
                        StepState::Available => break,
                        StepState::Unavailable => {
                            return Err(st.unavailable_error(step, mode, &self.location));
                        }
                        StepState::NotYetAvailable => {}
                    }
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(Error::Timeout {
                        what: format!("step {step} ({mode})"),
                        waited: timeout,
                    });
                }
                std::thread::sleep(self.options.poll_interval);
            }
        }
        Ok(())
    }

    /// A handle on one tensor. A name not known yet is looked for in new files at once.
    pub fn tensor(&self, name: &str) -> Result<TrialTensor<'_>> {
        let mut st = self.throttled()?;
        if !st.knows_tensor(name) {
            self.refresh_if_live(&mut st)?;
        }
        if !st.knows_tensor(name) {
            return Err(Error::TensorNotFound {
                name: name.to_string(),
                location: self.location.clone(),
            });
        }
        Ok(TrialTensor {
            trial: self,
            name: name.to_string(),
        })
    }

    /// Every value of the run, step by step in step order: the way to read a whole run (or
    /// several tensors across it) when each step's values can be handled together.
    ///
    /// `mode` picks the steps (`None` or `Global`: all of them); `names` the tensors, by stored
    /// name (`None`: every record, saved reductions included). A few threads read the step
    /// files ahead of the caller, each file once, into reused buffers, and decode the records
    /// with the checks of [`TrialTensor::raw`]; the values are not copied out of the buffers.
    /// Steps listed when this is called are read, complete or not; steps written later need
    /// another call.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), smdebug_io::Error> {
    /// let trial = smdebug_io::trial::Trial::open("/tmp/run")?;
    /// for step in trial.read_steps(None, Some(&["loss"]))? {
    ///     let step = step?;
    ///     for v in &step.values {
    ///         match &v.value {
    ///             Ok(value) => println!("{} {}: {:?}", step.step, v.name, value.to_tensor()),
    ///             Err(e) => eprintln!("{} {}: {e}", step.step, v.name),
    ///         }
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn read_steps(&self, mode: Option<Mode>, names: Option<&[&str]>) -> Result<StepStream> {
        let (plan, local_root) = {
            let st = self.fresh()?;
            (st.plan_steps(mode, names), st.local_root.clone())
        };
        StepStream::start(
            self.storage.clone(),
            local_root,
            self.options.max_tensor_bytes,
            plan,
        )
    }

    /// Tensor `name`'s value at a step, its bytes not copied: what
    /// `trial.tensor(name)?.raw_bytes(step, mode, worker)` gives, looked up in one go (one lock,
    /// no handle), for callers that read one value per call (the Python binding's `value`).
    /// An unknown name is [`Error::TensorNotFound`], a tensor saved only as reductions
    /// [`Error::OnlyReductionsSaved`], a step without it the error its state says:
    /// [`Error::StepNotAvailable`] (a complete step without it), [`Error::StepUnavailable`] or
    /// [`Error::StepNotYetAvailable`], as Python's `Tensor.value` raises them.
    pub fn raw_bytes(
        &self,
        name: &str,
        step: u64,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<TensorBytes> {
        let loc = self.locate(name, step, mode.unwrap_or(Mode::Global), worker)?;
        self.read_bytes(name, &loc, Conversion::Stored)
    }

    /// Tensor `name`'s value at a step, numbers or strings (a string tensor is
    /// [`Error::StringTensor`] for [`raw_bytes`](Trial::raw_bytes)); otherwise as
    /// [`raw_bytes`](Trial::raw_bytes).
    pub fn raw_value(
        &self,
        name: &str,
        step: u64,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<TensorValue> {
        self.raw_value_as(name, step, mode, worker, Conversion::Stored)
    }

    /// [`raw_value`](Trial::raw_value) for a caller that converts the value as `conversion`
    /// says: the budget ([`TrialOptions::max_tensor_bytes`]) counts the conversion too, before
    /// the value is decoded (`smdebug_rs` copies every value into a numpy array:
    /// [`Conversion::Array`]).
    pub fn raw_value_as(
        &self,
        name: &str,
        step: u64,
        mode: Option<Mode>,
        worker: Option<&str>,
        conversion: Conversion,
    ) -> Result<TensorValue> {
        let loc = self.locate(name, step, mode.unwrap_or(Mode::Global), worker)?;
        self.read_value(name, &loc, conversion)
    }

    /// Tensor `name`'s record at `loc`, numbers or strings.
    fn read_value(
        &self,
        name: &str,
        loc: &Location,
        conversion: Conversion,
    ) -> Result<TensorValue> {
        source::read_value(
            self.storage.as_ref(),
            &self.files,
            loc,
            name,
            self.budget(conversion),
        )
    }

    /// The budget of one read whose value the reader converts as `conversion` says.
    fn budget(&self, conversion: Conversion) -> Budget {
        Budget::new(self.options.max_tensor_bytes, conversion)
    }

    /// Where `name`'s record at `step` is. A step not known for the tensor is looked for in new
    /// files at once; still missing, the error is the one the step's state says.
    fn locate(&self, name: &str, step: u64, mode: Mode, worker: Option<&str>) -> Result<Location> {
        let mut st = self.throttled()?;
        if let Some(loc) = st.find(name, step, mode, worker, &self.location)? {
            return Ok(loc);
        }
        if self.refresh_if_live(&mut st)?
            && let Some(loc) = st.find(name, step, mode, worker, &self.location)?
        {
            return Ok(loc);
        }
        Err(st.miss(name, step, mode, &self.location))
    }

    /// Tensor `name`'s record at `loc`: only a record tagged `name` gives a value.
    fn read(
        &self,
        name: &str,
        loc: &Location,
        conversion: Conversion,
    ) -> Result<smdebug_core::Tensor> {
        source::read_tensor(
            self.storage.as_ref(),
            &self.files,
            loc,
            name,
            self.budget(conversion),
        )
    }

    /// Tensor `name`'s record at `loc`, its values not copied.
    fn read_bytes(
        &self,
        name: &str,
        loc: &Location,
        conversion: Conversion,
    ) -> Result<TensorBytes> {
        source::read_tensor_bytes(
            self.storage.as_ref(),
            &self.files,
            loc,
            name,
            self.budget(conversion),
        )
    }

    /// What reading had to work around, one line each: a regex in the run's collections files
    /// that does not compile selects nothing (its collection keeps the tensor names the files
    /// list), where Python smdebug would have used it; a name listed twice in one index file is
    /// read from its later entry, as Python smdebug does (smdebug's Keras hook writes an
    /// epoch's metrics twice in its last step): one line per name, however many index files
    /// repeat it. Each is also logged (`log::warn!`) once, when first seen.
    pub fn warnings(&self) -> Result<Vec<String>> {
        let st = self.throttled()?;
        Ok(st.warnings())
    }

    /// The regexes in the run's collections files that neither engine here compiles (the
    /// first kind of [`warnings`](Trial::warnings)), each with its collection and the reason: a
    /// reader with another regex engine (Python's `re`, in `smdebug_rs`) may still use them.
    pub fn unusable_patterns(&self) -> Result<Vec<smdebug_core::UnusablePattern>> {
        let st = self.throttled()?;
        Ok(st.unusable_patterns.clone())
    }

    /// Names an index file lists twice, each once with the first file that does and how many
    /// do (the second kind of [`warnings`](Trial::warnings)).
    pub fn repeated_names(&self) -> Result<Vec<RepeatedName>> {
        let st = self.throttled()?;
        Ok(st.repeated_names.values().cloned().collect())
    }

    /// The steps at which `name` was saved (see [`TrialTensor::steps`]).
    fn tensor_steps(&self, name: &str, mode: Option<Mode>, incomplete: bool) -> Result<Vec<u64>> {
        Ok(self.fresh()?.tensor_steps(name, mode, incomplete))
    }

    /// The workers that saved `name` at a step (see [`TrialTensor::workers`]).
    fn tensor_workers(&self, name: &str, step: u64, mode: Mode) -> Result<Vec<String>> {
        Ok(self.throttled()?.tensor_workers(name, step, mode))
    }

    /// Where `name`'s records are at every complete step of `mode` (see
    /// [`TrialTensor::values`]).
    fn step_locations(
        &self,
        name: &str,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<Vec<(u64, Location)>> {
        let mode_or_global = mode.unwrap_or(Mode::Global);
        let st = self.fresh()?;
        st.tensor_steps(name, mode, false)
            .into_iter()
            .map(|s| {
                let loc = st
                    .find(name, s, mode_or_global, worker, &self.location)?
                    .ok_or_else(|| st.miss(name, s, mode_or_global, &self.location))?;
                Ok((s, loc))
            })
            .collect()
    }

    /// Values of `name` in the CLI's JSON shape: one global step, or every complete step (in
    /// order), optionally restricted to a mode and a worker.
    pub fn tensor_records(
        &self,
        name: &str,
        steps: StepSelector,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<Vec<TensorRecordJson>> {
        self.tensor_records_iter(name, steps, mode, worker)?
            .collect()
    }

    /// [`tensor_records`](Trial::tensor_records) one step at a time: each value is read when
    /// the iterator reaches it, so a caller that prints and drops each record holds one value
    /// at a time (each within [`TrialOptions::max_tensor_bytes`], counted as JSON numbers).
    pub fn tensor_records_iter<'t>(
        &'t self,
        name: &'t str,
        steps: StepSelector,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<impl Iterator<Item = Result<TensorRecordJson>> + 't> {
        let locations = {
            let st = self.fresh()?;
            st.locations_for(name, steps, mode, worker, self.location())?
        };
        Ok(locations
            .into_iter()
            .map(move |loc| self.record_json(name, &loc)))
    }

    /// The value of `name` at `loc` in the CLI's JSON shape.
    fn record_json(&self, name: &str, loc: &Location) -> Result<TensorRecordJson> {
        let (dtype, shape, values) = match self.read_value(name, loc, Conversion::Json)? {
            TensorValue::Numbers(bytes) => {
                let t = bytes.to_tensor();
                let values = t.to_f64_vec().into_iter().map(JsonElement::Number);
                (
                    t.dtype().name().to_string(),
                    t.shape().to_vec(),
                    values.collect(),
                )
            }
            TensorValue::Strings(strings) => {
                let values = strings
                    .values()
                    .iter()
                    .map(|v| JsonElement::Text(String::from_utf8_lossy(v).into_owned()));
                (
                    "string".to_string(),
                    strings.shape().to_vec(),
                    values.collect(),
                )
            }
        };
        Ok(TensorRecordJson {
            name: name.to_string(),
            step: loc.step,
            mode: loc.mode,
            mode_step: loc.mode_step,
            worker: loc.file.worker.to_string(),
            dtype,
            shape,
            values,
        })
    }

    fn info_of(&self, st: &State) -> TrialInfo {
        let mut steps_per_mode = BTreeMap::new();
        for e in st.steps.values() {
            *steps_per_mode.entry(e.mode.name().to_string()).or_insert(0) += 1;
        }
        let mut modes: Vec<Mode> = st.steps.values().map(|e| e.mode).collect();
        modes.sort();
        modes.dedup();
        TrialInfo {
            location: self.location.clone(),
            workers: st.progress.workers(),
            step_workers: st.progress.step_workers().iter().cloned().collect(),
            num_workers: num_workers(&st.progress),
            modes,
            num_steps: st.steps.len(),
            last_complete_step: st.progress.last_complete(),
            steps_per_mode,
            collections: st.collections.keys().cloned().collect(),
            num_tensors: st.listed.len(),
            complete: st.complete,
            end_reason: st.end_reason.as_ref().map(|r| r.to_string()),
            warnings: st.warnings(),
        }
    }

    /// The summary the CLI's `info` prints.
    pub fn info(&self) -> Result<TrialInfo> {
        let st = self.fresh()?;
        Ok(self.info_of(&st))
    }
}
