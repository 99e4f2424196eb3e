//! One served run: what has been read of it so far, and the follower thread that reads what is
//! new.
//!
//! The data: system metrics and framework spans aggregated as read, in a size that does not
//! grow with the run (smdebug-analysis's `ProfileDigest`, the report's model too, and the
//! dashboard's index of the trace files, [`crate::profile_model`]: a window finer than the
//! aggregates is read again from the files), code-profile windows as `CodeProfileWindow`, read
//! by smdebug-read's
//! [`ProfilerFollower`] (the one incremental reader the rule runner and the report use too),
//! rule statuses as smdebug-rules' [`Summary`] (the file a rule runner writes into the run).
//! Steps, tensor names and scalar values are followed by smdebug-read's [`TensorFollower`] (the
//! `Trial`'s own listing, step completeness and checks; each new index file and its event file
//! read once, scalars kept as fixed-size summaries, `ScalarSummaries`); whole tensors are read through
//! smdebug-read's [`Trial`], opened when a view first asks for one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use smdebug_core::{EndReason, StopCause};
use smdebug_format::progress::Progress;
use smdebug_format::stop::StopRequest;
use smdebug_format::stop::sanitize_reason;
use smdebug_io::progress::read_run_progress;
use smdebug_io::stop::read_stop_request;
use smdebug_read::follow::{
    ITEMS_PER_READ, ProfilerFollower, ProfilerSource, ProfilerSubscription, merge_code_windows,
};
use smdebug_read::run::EndMarker;
use smdebug_read::trial::{
    TensorFollower, TensorIncrement, TensorSubscription, Trial, TrialOptions,
};
use smdebug_rules::Summary;
use smdebug_rules::read_summary_from;
use smdebug_rules::runner::SUMMARY_FILE;
use smdebug_storage::Location;
use smdebug_storage::{Storage, StorageOptions};

use crate::identity::{Change, Identity};
use crate::processes::{self, ProcessView};
use crate::run_data::RunData;
use crate::views::Changed;

/// Event-file bytes the dashboard's `Trial` keeps between views.
const DASHBOARD_FILE_CACHE_BYTES: usize = 16 << 20;

/// Time spent reading a backlog of index files per follower pass (the rest on the next
/// passes), so that a large backlog does not hold back new samples and the page sees progress.
const TENSOR_BUDGET_PER_PASS: Duration = Duration::from_millis(1500);

/// The same for profiler files.
const PROFILER_BUDGET_PER_PASS: Duration = Duration::from_millis(1000);

/// A run as the server holds it.
pub(crate) struct Run {
    /// Its index in the server's list.
    pub id: usize,
    /// A short name (the folder name).
    pub name: String,
    /// Where the run lives.
    pub location: Location,
    /// What is known so far.
    pub data: RwLock<RunData>,
    /// Its trial, opened when a view first reads a whole tensor.
    pub trial: RwLock<Option<Arc<Trial>>>,
    /// Its storage, once opened.
    pub storage: RwLock<Option<Arc<dyn Storage>>>,
    /// Whether stop requests may be written (`false` with `--read-only`).
    pub allow_write: bool,
    /// What the report being built is doing (shown by the page), `None` when none is.
    pub report_stage: std::sync::Mutex<Option<&'static str>>,
    /// Passes of the follower over the run so far, signalled as each ends.
    pub passes: Passes,
    /// The allocation budget of one value read through the `Trial` (distribution and 2-D
    /// views, the report's scalars), in bytes.
    pub max_tensor_bytes: u64,
    /// A subscription to the profiler source another consumer in the process reads too (a
    /// `Session`'s rules), until the follower takes it.
    pub shared_profiler: std::sync::Mutex<Option<ProfilerSubscription>>,
    /// A subscription to the tensor source another reader in the process reads too (a
    /// `Session`'s rules), until the tensor follower takes it.
    pub shared_tensors: std::sync::Mutex<Option<TensorSubscription>>,
}

impl Run {
    pub fn new(id: usize, name: String, location: Location, allow_write: bool) -> Run {
        Run {
            id,
            name,
            location,
            data: RwLock::new(RunData::default()),
            trial: RwLock::new(None),
            storage: RwLock::new(None),
            allow_write,
            report_stage: std::sync::Mutex::new(None),
            passes: Passes::default(),
            max_tensor_bytes: smdebug_read::trial::DEFAULT_MAX_TENSOR_BYTES,
            shared_profiler: std::sync::Mutex::new(None),
            shared_tensors: std::sync::Mutex::new(None),
        }
    }

    /// The run's trial, opened now if it is not yet (blocking I/O: call it off the async
    /// runtime). An error when the run has no tensors (yet).
    pub fn open_trial(&self) -> Result<Arc<Trial>, String> {
        if let Some(t) = self.trial.read().ok().and_then(|t| t.clone()) {
            return Ok(t);
        }
        let storage = self
            .storage()
            .ok_or_else(|| "the run cannot be opened (yet)".to_owned())?;
        let mut slot = self.trial.write().map_err(|e| e.to_string())?;
        if let Some(t) = slot.as_ref() {
            return Ok(Arc::clone(t));
        }
        let options = TrialOptions {
            auto_refresh: true,
            max_tensor_bytes: self.max_tensor_bytes,
            // A view reads a tensor at a few hundred steps once; keeping what it read (256 MiB
            // by default) only held memory: +40 MB a distribution view on the demo run.
            file_cache_bytes: DASHBOARD_FILE_CACHE_BYTES,
            ..TrialOptions::default()
        };
        match Trial::from_storage(&self.location.to_string(), storage, options) {
            Ok(t) => {
                let t = Arc::new(t);
                *slot = Some(Arc::clone(&t));
                Ok(t)
            }
            Err(smdebug_read::Error::NoSuchRun { .. }) => {
                Err("the run has no tensors (yet)".into())
            }
            Err(e) => Err(format!("cannot open the run's tensors: {e}")),
        }
    }

    /// Whether the trial was opened.
    pub fn trial_open(&self) -> bool {
        self.trial.read().is_ok_and(|t| t.is_some())
    }

    /// The report build's stage now.
    pub fn report_stage(&self) -> Option<&'static str> {
        self.report_stage.lock().ok().and_then(|s| *s)
    }

    pub fn storage(&self) -> Option<Arc<dyn Storage>> {
        self.storage.read().ok().and_then(|s| s.clone())
    }
}

/// The follower's passes over a run, counted, with a signal for those waiting for what a pass
/// brings (a report written at the run's end waits for the scalars to reach it).
#[derive(Default)]
pub(crate) struct Passes {
    /// Passes finished so far, and whether the follower stopped for good.
    state: std::sync::Mutex<(u64, bool)>,
    signal: std::sync::Condvar,
}

impl Passes {
    /// Passes finished so far.
    pub fn count(&self) -> u64 {
        self.lock().0
    }

    /// A pass ended, what it read merged into the run's data: the waiters look again.
    pub fn finished(&self) {
        self.lock().0 += 1;
        self.signal.notify_all();
    }

    /// The follower stopped (the server is stopping): no pass will bring anything more.
    pub fn stopped(&self) {
        self.lock().1 = true;
        self.signal.notify_all();
    }

    /// Waits until `ready` says yes (asked at once and after each pass), the follower stopped,
    /// or `until` came. Whether `ready` said yes.
    pub fn wait_for(&self, until: Instant, mut ready: impl FnMut() -> bool) -> bool {
        let mut state = self.lock();
        loop {
            // Asked under the lock: a pass that makes it true ends after this, and wakes us.
            if ready() {
                return true;
            }
            let now = Instant::now();
            if state.1 || now >= until {
                return false;
            }
            let seen = state.0;
            while state.0 == seen && !state.1 && Instant::now() < until {
                let left = until.saturating_duration_since(Instant::now());
                state = self
                    .signal
                    .wait_timeout(state, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, bool)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The follower's memory of what it has read.
#[derive(Default)]
pub(crate) struct Cursor {
    /// What identifies the run (to see it deleted or replaced).
    identity: Identity,
    /// The profiler files' reader, once the storage is open: a subscription to the source
    /// shared with the process's other consumers, or to one of its own.
    profiler: Option<ProfilerSubscription>,
    /// Size of the rule summary at the last read.
    summary_size: Option<u64>,
    /// The tensor reader, once the storage is open.
    tensors: Option<TensorFollower>,
    /// The end marker was read.
    marker_read: bool,
    /// Writability checked.
    write_checked: bool,
    /// Every progress file said `finished` after the end marker was seen: none is read again.
    progress_final: bool,
    /// The profiler's reader stopped at its budget with files left.
    profile_more: bool,
    /// Passes in a row that found nothing new since the end marker was read.
    quiet_after_end: u32,
    /// When the progress files were last read.
    progress_read: Option<Instant>,
    /// The last pass read the progress files (or they are final).
    progress_checked: bool,
}

/// The progress files are read at most this often: a worker rewrites its own at most once a
/// second, and a run may have thousands.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Once the end marker was read and this many passes in a row found nothing new, each reading
/// the progress files (a second apart: a worker's last one is written after the marker), the
/// run is settled: its passes no longer list or read its data folders (profiler files, progress
/// files, index files), only look at what says it changed: the folder's and a read file's
/// identity, the end marker, the rule summary's size and the stop request. A run written again
/// is seen by those ([`crate::identity`]) and read anew from its start.
const SETTLE_PASSES: u32 = 4;

impl Cursor {
    /// The run ended and nothing came since (see [`SETTLE_PASSES`]).
    fn settled(&self) -> bool {
        self.marker_read && self.quiet_after_end >= SETTLE_PASSES
    }
}

/// Clears what is known of `run` after its folder was deleted or replaced, saying why.
fn reset(run: &Run, cursor: &mut Cursor, change: Change) {
    let (gone, why) = match change {
        Change::Deleted(why) => (true, why),
        Change::Replaced(why) => (false, why),
    };
    *cursor = Cursor::default();
    if let Ok(mut trial) = run.trial.write() {
        *trial = None;
    }
    let mut data = run.data.write().expect("run data lock");
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let clock = format!(
        "{:02}:{:02}:{:02} UTC",
        at / 3600 % 24,
        at / 60 % 60,
        at % 60
    );
    log::warn!("smdebug serve: {}: {why}; its view was cleared", run.name);
    *data = RunData {
        version: data.version + 1,
        writable: data.writable,
        gone,
        identity: Some(format!(
            "{why} (seen at {clock}); what was shown of it was cleared"
        )),
        resets: data.resets + 1,
        // Every panel is drawn again from nothing.
        changed: Changed {
            profile: data.changed.profile + 1,
            tensors: data.changed.tensors + 1,
            rules: data.changed.rules + 1,
        },
        ..RunData::default()
    };
}

/// What one pass read of the profiler's files.
#[derive(Default)]
struct ProfileRead {
    samples: usize,
    spans: usize,
    warnings: Vec<String>,
    changed: bool,
    /// It stopped at its budget with files left to read.
    more: bool,
}

/// What one pass over a run did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pass {
    /// Anything changed.
    pub changed: bool,
    /// Files are left to read: the next pass is due at once.
    pub backlog: bool,
}

/// System metrics, spans and code-profile windows: what is new, in pieces of a bounded size
/// (each added as soon as it is read, its batches sorted outside the lock), a backlog over
/// several passes. It reads on past its budget while `tensors_busy` (the tensors' reader of the
/// same pass is still at work), so that neither side waits for the other with files to read.
fn follow_profile(
    run: &Run,
    profiler: &mut ProfilerSubscription,
    tensors_busy: &AtomicBool,
) -> ProfileRead {
    let started = Instant::now();
    let mut read = ProfileRead::default();
    loop {
        let increments = profiler.poll();
        let more = increments.last().is_some_and(|i| i.more);
        for increment in &increments {
            read.samples += increment.samples.len();
            read.spans += increment.spans.len();
            read.warnings
                .extend(increment.problems.iter().map(ToString::to_string));
            if increment.is_empty() && increment.problems.is_empty() {
                continue;
            }
            let problems = (!increment.problems.is_empty()).then(|| profiler.problems());
            let mut data = run.data.write().expect("run data lock");
            if let Some(problems) = problems {
                data.problems = problems;
            }
            data.journal.add_samples(&increment.samples);
            data.journal.add_spans(&increment.spans);
            let digest = Arc::make_mut(&mut data.digest.0);
            digest.add_system_samples(&increment.samples);
            digest.add_spans(&increment.spans);
            data.traces.add(increment);
            data.step_spans.add(&increment.spans);
            merge_code_windows(&mut data.code_windows, increment.code_windows.clone());
            data.exists |= !data.digest.is_empty();
            read.changed = true;
        }
        if !more {
            return read;
        }
        if started.elapsed() >= PROFILER_BUDGET_PER_PASS && !tensors_busy.load(Ordering::Acquire) {
            read.changed = true;
            read.more = true;
            return read;
        }
    }
}

/// What one pass found.
#[derive(Clone, Copy, Debug, Default)]
struct Found {
    /// Anything changed.
    changed: bool,
    /// New steps: tensor steps or values, spans, progress files that advanced.
    steps: bool,
    /// New system samples.
    samples: bool,
}

/// One pass over the run.
pub(crate) fn pass(run: &Run, options: &StorageOptions, cursor: &mut Cursor) -> Pass {
    let found = pass_changed(run, options, cursor);
    let changed = found.changed;
    let backlog = cursor.profile_more || run.data.read().is_ok_and(|d| d.index_pending > 0);
    if let Ok(mut d) = run.data.write()
        && d.exists
    {
        d.arrivals.note(
            found.steps,
            found.samples,
            backlog,
            smdebug_io::jobs::now_s(),
        );
    }
    if !cursor.marker_read || changed || backlog {
        cursor.quiet_after_end = 0;
    } else if cursor.progress_checked {
        cursor.quiet_after_end = cursor.quiet_after_end.saturating_add(1);
    }
    run.passes.finished();
    Pass { changed, backlog }
}

/// One pass over the run: what changed. Its steps: the storage opened, the run's identity
/// checked, the small files read (rule summary, progress and identity files, stop request, end
/// marker), the followers run, writability probed once, and all of it merged under the lock.
fn pass_changed(run: &Run, options: &StorageOptions, cursor: &mut Cursor) -> Found {
    note_missing(run);
    let storage = match open_storage(run, options) {
        Ok(storage) => storage,
        Err(changed) => {
            return Found {
                changed,
                ..Found::default()
            };
        }
    };
    // A run deleted, replaced or written again from the start: its view starts over.
    let had_data = run.data.read().is_ok_and(|d| d.exists);
    if let Some(change) = cursor
        .identity
        .check(&run.location, storage.as_ref(), had_data)
    {
        reset(run, cursor, change);
        return Found {
            changed: true,
            ..Found::default()
        };
    }
    // An ended run that stopped changing: its data folders are not listed again.
    let settled = cursor.settled();
    let side = read_side_files(run, &storage, cursor, settled);
    let followed = follow(run, Arc::clone(&storage), cursor, settled);
    let writable = if !cursor.write_checked
        && (side.marker || followed.profile.samples > 0 || followed.has_tensors)
    {
        cursor.write_checked = true;
        Some(run.allow_write && can_write(storage.as_ref()))
    } else {
        None
    };
    let marker = side.marker;
    let mut data = run.data.write().expect("run data lock");
    let found = data.merge_pass(cursor, side, followed, writable);
    let known = data
        .exists
        .then(|| (data.steps.first().copied(), !data.digest.is_empty()));
    drop(data);
    if let Some((first_step, profiled)) = known {
        cursor.identity.learn(
            &run.location,
            storage.as_ref(),
            first_step,
            profiled,
            marker,
        );
    }
    found
}

/// A local location that does not exist (a mistyped path, or a run not started yet) is said
/// to be missing, since when; an object-store URL is not looked up here (its prefix exists
/// once anything is written under it).
fn note_missing(run: &Run) {
    let Some(dir) = run.location.local_path() else {
        return;
    };
    let missing = !dir.exists();
    let Ok(mut data) = run.data.write() else {
        return;
    };
    if missing != data.missing_since.is_some() {
        data.missing_since = missing.then(smdebug_io::jobs::now_s);
        data.version += 1;
    }
}

/// The run's storage, opened on the first pass that can. `Err(changed)` when it cannot be
/// opened; `changed` when the reason is new (the run's data keep it for the page).
fn open_storage(run: &Run, options: &StorageOptions) -> Result<Arc<dyn Storage>, bool> {
    if let Some(storage) = run.storage() {
        return Ok(storage);
    }
    match smdebug_storage::open_storage_with(&run.location, options) {
        Ok(s) => {
            if let Ok(mut slot) = run.storage.write() {
                *slot = Some(Arc::clone(&s));
            }
            Ok(s)
        }
        Err(e) => {
            let mut data = run.data.write().expect("run data lock");
            let message = e.to_string();
            if data.open_error.as_deref() == Some(&message) {
                return Err(false);
            }
            data.open_error = Some(message);
            data.version += 1;
            Err(true)
        }
    }
}

/// What one pass read of the run's small files, each looked at once.
#[derive(Default)]
struct SideFiles {
    /// The rule summary, when its size changed and it was read.
    summary: Option<Summary>,
    /// The progress files, when they were due and could be listed.
    progress: Option<Vec<Progress>>,
    /// The identity files' processes, read with the progress files.
    processes: Option<Vec<ProcessView>>,
    /// The stop request in the run.
    stop_request: Option<StopRequest>,
    /// Why the stop request cannot be read.
    stop_request_error: Option<String>,
    /// The end marker is there.
    marker: bool,
    /// Its reason, on the pass that first read it.
    end_reason: Option<EndReason>,
    /// Problems with any of them.
    warnings: Vec<String>,
}

/// The rule summary (when its size changed), the progress and identity files (at most every
/// [`PROGRESS_EVERY`], until each progress file says it finished, not once `settled`), the
/// stop request and the end marker (its bytes read once, its presence looked at after that).
fn read_side_files(
    run: &Run,
    shared: &Arc<dyn Storage>,
    cursor: &mut Cursor,
    settled: bool,
) -> SideFiles {
    let storage = shared.as_ref();
    let mut side = SideFiles::default();
    // Rule statuses, re-read when the summary file changes.
    if let Ok(Some(size)) = storage.size(SUMMARY_FILE)
        && cursor.summary_size != Some(size)
    {
        match read_summary_from(storage) {
            Ok(summary) => {
                cursor.summary_size = Some(size);
                side.summary = summary;
            }
            // A summary being rewritten is atomic; a bad one is reported and read again later.
            Err(e) => side.warnings.push(e.to_string()),
        }
    }
    let progress_due = cursor
        .progress_read
        .is_none_or(|at| at.elapsed() >= PROGRESS_EVERY);
    cursor.progress_checked = cursor.progress_final || progress_due;
    if progress_due && !cursor.progress_final && !settled {
        cursor.progress_read = Some(Instant::now());
        side.progress = read_progress(storage, &mut side.warnings);
        side.processes = read_processes(run, storage, &mut side.warnings);
    }
    match read_stop_request(storage) {
        Ok(request) => side.stop_request = request,
        Err(e) => side.stop_request_error = Some(sanitize_reason(&e.to_string())),
    }
    if cursor.marker_read {
        side.marker = matches!(EndMarker::present(storage), Ok(true));
    } else if let Ok(Some(reason)) = tensor_follower(run, shared, &mut cursor.tensors).end_marker()
    {
        // Read by the tensor follower, which reads it once (for every reader of a shared
        // source) and needs it too.
        cursor.marker_read = true;
        side.marker = true;
        // Fit to show: the reason and rule are written by whoever asked for the stop.
        side.end_reason = reason.map(|reason| match reason {
            EndReason::Stopped(cause) => EndReason::Stopped(StopCause {
                reason: sanitize_reason(&cause.reason),
                rule: cause.rule.as_deref().map(sanitize_reason),
                step: cause.step,
            }),
            completed => completed,
        });
    }
    side
}

/// The job's progress files (small; one listing).
fn read_progress(storage: &dyn Storage, warnings: &mut Vec<String>) -> Option<Vec<Progress>> {
    match read_run_progress(storage) {
        Ok(read) => {
            warnings.extend(read.problems.iter().map(ToString::to_string));
            Some(read.progress)
        }
        Err(e) => {
            warnings.push(format!("the progress files cannot be listed: {e}"));
            None
        }
    }
}

/// The processes' identity files, read with the progress files: a run holding two jobs' files,
/// or a worker written by two processes, is flagged among the warnings, which a run keeps; each
/// process is looked up (a process of this host gone without marking its file finished: the
/// run crashed).
fn read_processes(
    run: &Run,
    storage: &dyn Storage,
    warnings: &mut Vec<String>,
) -> Option<Vec<ProcessView>> {
    match smdebug_read::run::read_jobs(storage) {
        Ok((jobs, problems)) => {
            warnings.extend(smdebug_format::jobs::job_problems(&jobs));
            warnings.extend(problems);
            let before = run
                .data
                .read()
                .map(|d| d.processes.clone())
                .unwrap_or_default();
            Some(processes::look_up(storage, &jobs, &before))
        }
        Err(e) => {
            warnings.push(format!("the run's identity files cannot be listed: {e}"));
            None
        }
    }
}

/// The run's tensor follower, made on the first pass. Shared with the process's rules: read
/// through the source's storage, each file once.
fn tensor_follower<'c>(
    run: &Run,
    storage: &Arc<dyn Storage>,
    slot: &'c mut Option<TensorFollower>,
) -> &'c mut TensorFollower {
    slot.get_or_insert_with(
        || match run.shared_tensors.lock().ok().and_then(|mut s| s.take()) {
            Some(shared) => {
                TensorFollower::new(Arc::clone(shared.source().storage())).share(shared)
            }
            None => TensorFollower::new(Arc::clone(storage)),
        },
    )
}

/// What one pass's followers read.
struct Followed {
    /// The profiler's files.
    profile: ProfileRead,
    /// The index files.
    tensors: TensorIncrement,
    /// The tensor follower found tensor data in the run.
    has_tensors: bool,
    /// The tensor follower read the run to its end marker.
    tensors_ended: bool,
}

/// Runs both followers over what is new (not once the run is `settled`).
fn follow(run: &Run, storage: Arc<dyn Storage>, cursor: &mut Cursor, settled: bool) -> Followed {
    // The profiler's files on rayon's pool while this thread reads the tensors' (each reader's
    // backlog has a time budget a pass, and a long run's backlog of both is read in about the
    // time of the longer one rather than of both). The pool's threads outlive the pass: what
    // the profile data allocate stays in heaps in use (see smdebug-io's `parse_index_files`).
    let profiler = cursor.profiler.get_or_insert_with(|| {
        let shared = run.shared_profiler.lock().ok().and_then(|mut s| s.take());
        shared.unwrap_or_else(|| {
            // Alone, the dashboard's follower drops spans' `args` (it keeps none).
            ProfilerSource::with_follower(
                ProfilerFollower::new(Arc::clone(&storage))
                    .items_per_poll(ITEMS_PER_READ)
                    .span_args(false),
            )
            .subscribe()
        })
    });
    // Steps, tensor names and scalars from the index files.
    let tensors = tensor_follower(run, &storage, &mut cursor.tensors);
    let tensors_busy = AtomicBool::new(true);
    let mut profile = ProfileRead::default();
    let tensor_update = if settled {
        TensorIncrement::default()
    } else {
        rayon_core::in_place_scope(|scope| {
            let (profile, tensors_busy) = (&mut profile, &tensors_busy);
            scope.spawn(move |_| *profile = follow_profile(run, profiler, tensors_busy));
            let update = tensors.poll(TENSOR_BUDGET_PER_PASS, &mut |values, _| {
                let mut data = run.data.write().expect("run data lock");
                data.scalars.add(values);
            });
            tensors_busy.store(false, Ordering::Release);
            update
        })
    };
    cursor.profile_more = profile.more;
    let has_tensors = tensors.found();
    Followed {
        profile,
        tensors: tensor_update,
        has_tensors,
        tensors_ended: tensors.end().is_some(),
    }
}

impl RunData {
    /// Global steps done: the most any worker's progress file counts, or the last saved
    /// step's number plus one (steps count from 0), whichever is more.
    pub(crate) fn steps_done(&self) -> Option<u64> {
        self.progress
            .iter()
            .map(|p| p.steps)
            .chain(self.steps.last().map(|s| s.saturating_add(1)))
            .max()
    }

    /// The global steps the job plans, when its progress files say.
    pub(crate) fn planned_steps(&self) -> Option<u64> {
        self.progress.iter().filter_map(|p| p.planned_steps).max()
    }
}

impl RunData {
    /// Merges what a pass read (under the run's lock): what changed, and whether new steps or
    /// samples came.
    fn merge_pass(
        &mut self,
        cursor: &mut Cursor,
        side: SideFiles,
        followed: Followed,
        writable: Option<bool>,
    ) -> Found {
        let Followed {
            profile,
            tensors,
            has_tensors,
            tensors_ended,
        } = followed;
        // After the values the pass read were added: a report waiting for the end takes them.
        self.tensors_ended = tensors_ended;
        let mut changed = self.open_error.take().is_some() | profile.changed;
        let mut found = Found {
            samples: profile.samples > 0,
            steps: profile.spans > 0,
            ..Found::default()
        };
        if profile.samples > 0 || profile.spans > 0 {
            self.changed.profile += 1;
            changed = true;
        }
        let mut warnings = side.warnings;
        warnings.extend(profile.warnings);
        if let Some(processes) = side.processes
            && self.processes != processes
        {
            self.processes = processes;
            changed = true;
        }
        if let Some(summary) = side.summary {
            self.merge_rules(summary);
            changed = true;
        }
        if let Some(progress) = side.progress {
            changed |= self.merge_progress(cursor, progress, &mut found);
        }
        if self.stop_request != side.stop_request {
            self.stop_request = side.stop_request;
            changed = true;
        }
        if self.stop_request_error != side.stop_request_error {
            self.stop_request_error = side.stop_request_error;
            changed = true;
        }
        if let Some(w) = writable {
            self.writable = w;
            changed = true;
        }
        changed |= self.merge_tensors(tensors, &mut found, &mut warnings);
        if side.end_reason.is_some() && self.end_reason != side.end_reason {
            self.end_reason = side.end_reason;
            changed = true;
        }
        changed |= self.merge_presence(side.marker, has_tensors);
        for w in warnings {
            self.warn(w);
        }
        if changed {
            self.version += 1;
        }
        found.changed = changed;
        found
    }

    /// A new rule summary: kept, its verdicts journalled for the pushes.
    fn merge_rules(&mut self, summary: Summary) {
        self.rules = Some(summary);
        let views: Vec<(String, String)> = crate::verdicts::rule_views(self)
            .iter()
            .map(|v| (v.name.clone(), serde_json::to_string(v).unwrap_or_default()))
            .collect();
        self.journal.note_rules(views);
        self.changed.rules += 1;
    }

    /// The progress files as read now: whether they changed; `found.steps` when the steps
    /// advanced. Final once the end marker was read and each says it finished.
    fn merge_progress(
        &mut self,
        cursor: &mut Cursor,
        progress: Vec<Progress>,
        found: &mut Found,
    ) -> bool {
        cursor.progress_final =
            cursor.marker_read && !progress.is_empty() && progress.iter().all(|p| p.finished);
        if self.progress == progress {
            return false;
        }
        let before = processes::progress_point(&self.progress).map(|p| p.0);
        let point = processes::progress_point(&progress);
        found.steps |= point.map(|p| p.0) > before;
        processes::note_progress(&mut self.progress_history, point);
        self.progress = progress;
        true
    }

    /// What the tensor follower read: steps, names, scalar values, the backlog and its
    /// problems. Whether anything changed; `found.steps` when the tensor data did.
    fn merge_tensors(
        &mut self,
        update: TensorIncrement,
        found: &mut Found,
        warnings: &mut Vec<String>,
    ) -> bool {
        let mut changed = false;
        if !update.steps.is_empty() {
            let sorted = self.steps.last().is_none_or(|&l| update.steps[0].step > l);
            self.steps.extend(update.steps.iter().map(|s| s.step));
            if !sorted {
                self.steps.sort_unstable();
                self.steps.dedup();
            }
            changed = true;
        }
        let names_added = !update.names.is_empty();
        if names_added {
            self.tensors.extend(update.names);
            self.tensors.sort();
            self.tensors.dedup();
            changed = true;
        }
        if update.values > 0 || !update.steps.is_empty() || names_added {
            self.changed.tensors += 1;
            found.steps = true;
            changed = true;
        }
        if self.index_pending != update.pending {
            self.index_pending = update.pending;
            // A backlog grows as it is listed and shrinks as it is read: its size is the most
            // it held at once (read files plus those left), until it is read through.
            self.index_backlog = if update.pending == 0 {
                0
            } else {
                self.index_backlog.max(update.pending)
            };
            changed = true;
        }
        warnings.extend(update.problems.iter().map(ToString::to_string));
        if update.problems_left_out > 0 {
            warnings.push(format!(
                "{} more problems with the tensor data were worked around",
                update.problems_left_out
            ));
        }
        changed
    }

    /// Whether the run is complete (its end marker), exists (anything of it found) and is no
    /// longer gone; whether any of those changed.
    fn merge_presence(&mut self, marker: bool, has_tensors: bool) -> bool {
        let mut changed = false;
        if marker && !self.complete {
            self.complete = true;
            changed = true;
        }
        let exists = self.complete || !self.digest.is_empty() || has_tensors;
        if exists != self.exists {
            self.exists = exists;
            changed = true;
        }
        if exists && self.gone {
            self.gone = false;
            changed = true;
        }
        changed
    }
}

/// Whether a probe object can be written into the run and removed again.
fn can_write(storage: &dyn Storage) -> bool {
    // Under a name the run owns: a probe left by a crash is still the run's.
    smdebug_io::run_folder::probe_write(storage, "dashboard").is_ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use smdebug_format::layout::END_MARKER;
    use smdebug_format::progress::Progress;
    use smdebug_io::progress::write_progress;
    use smdebug_storage::LocalStorage;
    use smdebug_storage::testing::CountingStorage;
    use smdebug_storage::{Storage, StorageOptions};

    use super::{Cursor, Found, Run, RunData, SETTLE_PASSES, pass};

    /// A first read of a big run: "indexing N of M files", M the backlog listed, N those read
    /// of it; none once it is read through.
    #[test]
    fn a_backlog_of_index_files_is_counted_as_it_is_read() {
        let mut d = RunData::default();
        let mut warnings = Vec::new();
        let mut seen = Vec::new();
        for pending in [3000, 2200, 900, 0] {
            let update = smdebug_read::trial::TensorIncrement {
                pending,
                ..Default::default()
            };
            d.merge_tensors(update, &mut Found::default(), &mut warnings);
            seen.push((d.index_backlog - d.index_pending, d.index_backlog));
        }
        assert_eq!(seen, [(0, 3000), (800, 3000), (2100, 3000), (0, 0)]);
    }

    #[test]
    fn an_unchanged_ended_run_is_not_listed_or_read_again() {
        let t0 = Instant::now();
        // In memory where the machine has it: 100,000 folders are slow to make and delete
        // on a busy disk.
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm).unwrap()
        } else {
            tempfile::tempdir().unwrap()
        };
        let local: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
        // 100,000 empty step folders under index/ and as many under framework/pevents/ (the
        // profiler's listing walked those every pass: 0.55 CPU-s every 20 s in a debug build),
        // 5,000 progress files of workers that never said they finished, a system file, and
        // the end marker.
        for (parent, width) in [("index", 9), ("framework/pevents", 10)] {
            std::fs::create_dir_all(dir.path().join(parent)).unwrap();
            for folder in 0..100_000 {
                std::fs::create_dir(dir.path().join(format!("{parent}/{folder:0width$}"))).unwrap();
            }
        }
        std::fs::create_dir_all(dir.path().join("progress")).unwrap();
        for w in 0..5_000 {
            let mut p = Progress::new(format!("worker_{w}"));
            p.steps = 7;
            let json = serde_json::to_vec(&p).unwrap();
            std::fs::write(dir.path().join(format!("progress/worker_{w}.json")), json).unwrap();
        }
        let line = r#"{"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 12.5, "Timestamp": 1764192000.5, "NodeId": "algo-1"}"#;
        local
            .put(
                "system/incremental/2026112621/1764192000.algo-1.json",
                format!("{line}\n").into(),
            )
            .unwrap();
        local.put(END_MARKER, "completed".into()).unwrap();

        eprintln!("run written in {:?}", t0.elapsed());
        let counting = Arc::new(CountingStorage::new(Arc::clone(&local)));
        let run = Run::new(
            0,
            "run".into(),
            smdebug_storage::Location::Local(dir.path().into()),
            false,
        );
        *run.storage.write().unwrap() = Some(counting.clone());
        let options = StorageOptions::default();
        let mut cursor = Cursor::default();
        let started = Instant::now();
        let first = pass(&run, &options, &mut cursor);
        let first_took = started.elapsed();
        assert!(first.changed);
        let calls = counting.calls();
        let data = run.data.read().unwrap();
        assert!(data.complete);
        assert_eq!(data.progress.len(), 5_000);
        assert_eq!(data.digest.series_count(), 1);
        drop(data);
        assert!(calls.lists >= 1 && calls.gets >= 5_000, "{calls:?}");

        // Quiet passes that do not read the progress files (read a second apart) do not
        // settle it: a worker writes its last progress after the marker.
        for _ in 0..2 * SETTLE_PASSES {
            cursor.progress_read = Some(Instant::now());
            assert!(!pass(&run, &options, &mut cursor).changed);
        }
        assert_eq!(cursor.quiet_after_end, 0);
        // A few quiet passes, then the run is settled.
        let mut quiet_took = std::time::Duration::ZERO;
        for _ in 0..SETTLE_PASSES {
            // The progress files are read a second apart: the last read a second ago.
            cursor.progress_read = Instant::now().checked_sub(super::PROGRESS_EVERY);
            let started = Instant::now();
            assert!(!pass(&run, &options, &mut cursor).changed);
            quiet_took += started.elapsed();
        }
        let quiet_took = quiet_took / SETTLE_PASSES;
        assert!(cursor.settled());
        let before = counting.calls();
        let started = Instant::now();
        for _ in 0..10 {
            assert!(!pass(&run, &options, &mut cursor).changed);
        }
        let settled_took = started.elapsed() / 10;
        let after = counting.calls();
        // No listing, no byte read; a few cheap looks a pass (sizes of the marker, the summary,
        // the file that identifies the run, and the stop request's bounded read, which finds
        // no file).
        assert_eq!(after.lists, before.lists, "{before:?} {after:?}");
        assert_eq!(after.gets, before.gets, "{before:?} {after:?}");
        assert_eq!(after.bytes, before.bytes, "{before:?} {after:?}");
        let looks = (after.sizes + after.ranges) - (before.sizes + before.ranges);
        assert!(looks <= 10 * 5, "{before:?} {after:?}");
        eprintln!(
            "first pass {first_took:?}, a quiet pass before settling {quiet_took:?}, a settled \
             pass {settled_took:?}; calls {before:?} then {after:?}"
        );

        let t1 = Instant::now();
        // Written again (its end marker removed, then the job runs on): read anew.
        local.delete(END_MARKER).unwrap();
        assert!(pass(&run, &options, &mut cursor).changed);
        assert!(!cursor.settled());
        let mut p = Progress::new("worker_5000");
        p.steps = 9;
        write_progress(local.as_ref(), &p).unwrap();
        local.put(END_MARKER, "completed".into()).unwrap();
        for _ in 0..3 {
            pass(&run, &options, &mut cursor);
        }
        assert_eq!(run.data.read().unwrap().progress.len(), 5_001);
        eprintln!("read again in {:?}", t1.elapsed());
        assert!(!cursor.settled());
    }
}
