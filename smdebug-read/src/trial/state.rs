//! What a trial knows about its run, and how it learns more.
//!
//! Which steps are complete, where a step stands and which workers count are Python smdebug
//! 1.0.34's rules; they live in [`progress`](super::progress). Looking a value up (and what a
//! miss raises) lives in [`lookup`](super::lookup).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use smdebug_core::{Collection, EndReason, Mode, UnusablePattern};

use super::intake::{Admit, KnownStep, ReadFiles, admit, listed_name};
use super::progress::{StepProgress, StepRange};
use super::shared::TensorSubscription;
use super::source::{self, EventFile, Slot, TensorTable};
use super::step_map::{ModeSteps, StepMap};
use super::steps::PlannedStep;
use crate::error::{Error, Result};
use smdebug_format::jobs::{JobIdentity, job_problems};

use crate::run::read_jobs;
use smdebug_storage::Storage;

/// How often a live run's identity files are read again.
const JOBS_REREAD: std::time::Duration = std::time::Duration::from_secs(2);

/// What a step selection in [`Trial::tensor_records`](crate::trial::Trial::tensor_records) asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepSelector {
    /// One global step.
    One(u64),
    /// Every step the tensor was saved at.
    All,
}

#[derive(Clone, Debug)]
pub(crate) struct WorkerStep {
    /// Shared with every `Location` handed out for it, with the file's bytes once read; it
    /// names the worker, and the index file when that is not the usual one.
    pub file: Arc<EventFile>,
    pub tensors: TensorTable,
}

impl WorkerStep {
    /// The index file that described step `step` of this worker.
    pub fn index_file(&self, step: u64) -> std::borrow::Cow<'_, str> {
        match self.file.other_index_file() {
            Some(path) => std::borrow::Cow::Borrowed(path),
            None => {
                std::borrow::Cow::Owned(smdebug_format::layout::index_file(step, &self.file.worker))
            }
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct StepEntry {
    pub mode: Mode,
    pub mode_step: u64,
    pub workers: Workers,
}

/// The workers that wrote one step, in name order. A step has one worker or a few, so they are
/// a sorted slice of exactly their number (a `BTreeMap` allocated a whole node, ~1 KB, for the
/// first; a vector's first push reserves four).
#[derive(Clone, Debug, Default)]
pub(crate) struct Workers(Box<[WorkerStep]>);

impl Workers {
    fn position(&self, worker: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|w| (*w.file.worker).cmp(worker))
    }

    /// The step of `worker`.
    pub fn get(&self, worker: &str) -> Option<&WorkerStep> {
        self.position(worker).ok().map(|i| &self.0[i])
    }

    /// Sets the step of its file's worker, replacing the one it had.
    pub fn insert(&mut self, step: WorkerStep) {
        match self.position(&step.file.worker) {
            Ok(i) => self.0[i] = step,
            Err(i) => {
                let mut all = std::mem::take(&mut self.0).into_vec();
                all.reserve_exact(1);
                all.insert(i, step);
                self.0 = all.into_boxed_slice();
            }
        }
    }

    /// The workers' steps, in worker name order.
    pub fn values(&self) -> impl Iterator<Item = &WorkerStep> {
        self.0.iter()
    }

    /// `(worker, its step)`, in worker name order.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &WorkerStep)> {
        self.0.iter().map(|w| (&w.file.worker, w))
    }
}

/// The global steps a tensor was saved at, in order, as arithmetic runs: a tensor saved every
/// step (or every tenth) of a long run is one run, where a list took 8 bytes a step (two of
/// these per name, 100,000 steps: 105 MB of a 739 MB heap on the synthetic 100k-step run).
pub(crate) type StepSet = super::step_runs::StepRuns;

/// A tensor name that index files list twice (the later entry is read, as Python smdebug
/// does): one per name, however many index files repeat it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepeatedName {
    /// The name.
    pub name: String,
    /// The first index file's line, naming the file and both entries.
    pub first: String,
    /// How many index files list the name twice.
    pub index_files: usize,
}

impl std::fmt::Display for RepeatedName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.first)?;
        let name = &self.name;
        match self.index_files {
            0 | 1 => Ok(()),
            2 => write!(
                f,
                " (1 more index file lists `{name}` twice; its later entry is read too)"
            ),
            n => write!(
                f,
                " ({} more index files list `{name}` twice; their later entries are read too)",
                n - 1
            ),
        }
    }
}

#[derive(Default)]
pub(crate) struct State {
    pub collections: BTreeMap<String, Collection>,
    /// Each collections file read, with its size as read.
    collection_files: BTreeMap<String, u64>,
    /// Collections files read so far, each version counted: what the collections say can only
    /// have changed when this did.
    collection_reads: usize,
    /// How many names were listed when the collections files were last looked at: names listed
    /// after that may have come with a rewritten file (see [`State::read_collections`]).
    names_covered: usize,
    /// Patterns in the collections files that do not compile, each once however many workers'
    /// files carry it.
    pub unusable_patterns: Vec<UnusablePattern>,
    /// Names an index file lists twice (the later entry is read), each once however many
    /// index files do it: a Keras run repeats its metrics at every epoch's end.
    pub repeated_names: BTreeMap<String, RepeatedName>,
    /// Workers, and which steps are complete (Python smdebug's rules).
    pub progress: StepProgress,
    pub steps: StepMap<u64, StepEntry>,
    /// (mode, step within the mode) -> the first global step numbered so, for reads by mode
    /// (Python smdebug's `_mode_to_global`), in order for `has_passed_step`'s search.
    pub by_mode_step: ModeSteps,
    /// Stored tensor name (reductions included) -> global steps it was saved at.
    pub names: BTreeMap<String, StepSet>,
    /// Names a reader lists: like Python smdebug, a reduction `smdebug/reductions/mean/w` is
    /// listed as its tensor `w` (read it with `reduction_value`).
    pub listed: BTreeMap<String, StepSet>,
    /// Index files read for steps past the last complete step: listing resumes after it, and
    /// these are not read again (Python smdebug's read-files cache).
    pending: ReadFiles,
    /// The global steps the trial reads (Python smdebug's `range_steps`).
    pub range: StepRange,
    /// `Trial::forget_files_before` has let go of the files of every step before this one.
    pub files_forgotten_before: u64,
    /// `Trial::release_steps_before` has let go of the index of every global step before this
    /// one (0: of none).
    pub released_before: u64,
    /// Per mode, the last step in its numbering that was released with them.
    released_mode_steps: BTreeMap<Mode, u64>,
    /// `TrialOptions::index_read_ahead`: the index is read this many global steps past the
    /// reader's position (see [`State::horizon`]).
    read_ahead: Option<u64>,
    /// The reader's position: the largest step it asked `release_steps_before` for (what it
    /// is past, whether or not those steps could be let go yet).
    pub reader_at: u64,
    /// The end marker was read (its reason) while index files past the read-ahead may still
    /// be unread.
    end_pending: Option<Option<EndReason>>,
    /// With a read-ahead: the listings have read every index file of the steps before this one.
    listed_before: Option<u64>,
    /// With a read-ahead: the last listing found no index file past the steps read.
    read_to_end: bool,
    /// Per collection, the listed names it selects, worked out when the collections files
    /// read and the names listed numbered as the key says (both only grow): callers going step
    /// by step (the rules) ask at every step, and matching is a regex per name.
    members: HashMap<String, ((usize, usize), Vec<String>)>,
    /// The end marker was seen, and every index file written before it was read (Python
    /// smdebug's `loaded_all_steps`).
    pub complete: bool,
    pub end_reason: Option<EndReason>,
    pub last_refresh: Option<Instant>,
    /// Moves on at every refresh and release: what a lookup ([`State::find`]) gives can only
    /// change when this does, so values looked up at one generation are still the ones a
    /// lookup would give while it stands ([`decoded`](super::decoded)).
    pub generation: u64,
    /// The run's identity files (`jobs/`), read at the first refresh, at most every
    /// [`JOBS_REREAD`] while the run goes on, and once more when it ends.
    pub jobs: Vec<JobIdentity>,
    /// What they say is wrong (two jobs, a worker of two processes), and identity files that
    /// could not be read: the first lines of [`State::warnings`].
    job_problems: Vec<String>,
    jobs_read: Option<Instant>,
    /// The run's directory when it is on local disk: index files are read from it directly.
    pub local_root: Option<std::path::PathBuf>,
    /// The workers' names, each kept once for all their steps.
    worker_names: Vec<Arc<str>>,
    /// Index files come through this source, shared with other readers
    /// ([`TrialOptions::tensor_source`](super::TrialOptions::tensor_source)).
    share: Option<TensorSubscription>,
}

impl State {
    /// Nothing known yet; `local_root` is the run's directory when it is on local disk.
    pub fn new(
        local_root: Option<std::path::PathBuf>,
        range: StepRange,
        window: u64,
        read_ahead: Option<u64>,
        share: Option<TensorSubscription>,
    ) -> State {
        State {
            local_root,
            range,
            progress: StepProgress::new(window),
            read_ahead,
            share,
            ..State::default()
        }
    }

    /// With a read-ahead, the first global step whose index is not read yet: `read_ahead`
    /// steps past the reader's position. (A stretch past it is read when none of the steps
    /// before it has an index file: a run saving steps further apart than the read-ahead.)
    fn horizon(&self) -> Option<u64> {
        let at = self.reader_at.max(self.released_before);
        self.read_ahead.map(|ahead| at.saturating_add(ahead.max(1)))
    }

    /// What reading had to work around, one line each (see `Trial::warnings`).
    pub fn warnings(&self) -> Vec<String> {
        self.job_problems
            .iter()
            .cloned()
            .chain(self.unusable_patterns.iter().map(|p| p.to_string()))
            .chain(self.repeated_names.values().map(|r| r.to_string()))
            .collect()
    }

    /// The listed names collection `name` selects, sorted.
    pub fn collection_members(&mut self, name: &str) -> Result<Vec<String>> {
        let key = (self.collection_reads, self.listed.len());
        if let Some((k, names)) = self.members.get(name)
            && *k == key
        {
            return Ok(names.clone());
        }
        let Some(collection) = self.collections.get(name) else {
            return Err(Error::CollectionNotFound {
                name: name.to_string(),
                available: self.collections.keys().cloned().collect(),
            });
        };
        let names: Vec<String> = self
            .listed
            .keys()
            .filter(|n| collection.matches(n))
            .cloned()
            .collect();
        self.members.insert(name.to_string(), (key, names.clone()));
        Ok(names)
    }

    /// Whether anything of a run is there: a collections file (even one with no collection),
    /// a step or the end marker.
    pub fn has_anything(&self) -> bool {
        !self.collection_files.is_empty() || !self.steps.is_empty() || self.complete
    }

    /// Nothing can change any more: the end marker was seen and a final listing done after it.
    pub fn finished(&self) -> bool {
        self.complete
    }

    /// How many collections files were read.
    pub fn collection_files(&self) -> usize {
        self.collection_files.len()
    }

    /// Collections files read, each version of a rewritten one counted.
    pub fn collection_reads(&self) -> usize {
        self.collection_reads
    }

    /// Learns what is new: index files after the last complete step, collections files, the
    /// end marker. Reading the marker before the final listing means a run that ends during a
    /// refresh is never reported complete with steps missing. A listing after which steps are
    /// seen complete is followed by one that confirms them (see [`StepProgress`]).
    pub fn refresh(&mut self, storage: &dyn Storage) -> Result<()> {
        self.generation += 1;
        // `Some(reason)` once the run has ended; fetched once per refresh, and not at all after.
        let marker = if self.complete || self.end_pending.is_some() {
            None
        } else {
            super::source::read_end_marker(storage, self.share.as_ref())?
        };
        for _ in 0..2 {
            self.read_listing(storage)?;
            if !self.progress.relisting_due() {
                break;
            }
        }
        if let Some(reason) = marker {
            self.end_pending = Some(reason);
        }
        if let Some(reason) = self.end_pending.take() {
            match self.listed_before {
                // Index files past the read-ahead may be still to read: the steps before it
                // are every step there is of them (the run has ended), and the trial is
                // complete once a listing finds nothing past what it read.
                Some(before) if !self.read_to_end => {
                    self.progress.ended_through(before.saturating_sub(1));
                    self.end_pending = Some(reason);
                }
                _ => {
                    // The hook's last rewrite of its collections file came before the marker.
                    self.read_collections(storage, true)?;
                    self.complete = true;
                    self.end_reason = reason;
                    // Python smdebug: every step counts once the run ended.
                    self.progress.ended(self.steps.keys().next_back().copied());
                    // Nothing is added from now on: the tables' spare room is let go.
                    self.steps.shrink_to_fit();
                    if let Some(share) = &self.share {
                        share.release_index_before(u64::MAX);
                    }
                    self.by_mode_step.shrink_to_fit();
                }
            }
        }
        self.forget_pending();
        if self.complete || self.jobs_read.is_none_or(|t| t.elapsed() >= JOBS_REREAD) {
            self.read_jobs(storage);
        }
        self.last_refresh = Some(Instant::now());
        Ok(())
    }

    /// One listing of the index files from the last complete step on, and what it holds: the
    /// collections files are read after the listing (a worker writes its collections file
    /// before its first index file, so every worker with a file listed is counted), then each
    /// index file not read yet, in key order.
    fn read_listing(&mut self, storage: &dyn Storage) -> Result<()> {
        let from = self
            .progress
            .start_listing()
            .max(self.range.start.unwrap_or(0));
        let horizon = self.horizon();
        if let Some(share) = &self.share {
            // Index files before the listing's start are never read from now on.
            share.release_index_before(from);
        }
        let listed = source::list_index_files_before(storage, Some(from), horizon)?;
        let window_empty = listed.is_empty();
        self.read_to_end = false;
        let mut paths: Vec<source::IndexPath> = listed
            .into_iter()
            .filter(|(path, step, _)| {
                self.range.contains(*step) && !self.pending.contains(*step, path)
            })
            .collect();
        // Nothing at all between the listing's start and the horizon: a run saving steps
        // further apart than the read-ahead (or a reader caught up with its writer) has its
        // next steps past the horizon. The next stretch of them is read, from the first. A
        // listing that starts at the horizon (the run ended, and every step before the
        // horizon counts as read) reads nothing past it while the reader has not moved, but
        // learns whether anything is there: when nothing is, the index was read to its end.
        if let (true, Some(h), Some(ahead)) = (window_empty, horizon, self.read_ahead) {
            let tail_from = from.max(h);
            let mut tail: Vec<source::IndexPath> = Vec::new();
            // A stretch first: on a long run the files past it are many, and a listing of the
            // stretch says as much when it finds one.
            for until in [Some(tail_from.saturating_add(ahead.max(1))), None] {
                tail = source::list_index_files_before(storage, Some(tail_from), until)?
                    .into_iter()
                    .filter(|(path, step, _)| {
                        self.range.contains(*step) && !self.pending.contains(*step, path)
                    })
                    .collect();
                if !tail.is_empty() {
                    break;
                }
            }
            match tail.first().map(|(_, step, _)| *step) {
                Some(first) if from < h => {
                    let end = first.saturating_add(ahead.max(1));
                    paths = tail
                        .into_iter()
                        .filter(|(_, step, _)| *step < end)
                        .collect();
                    self.listed_before = self.listed_before.max(Some(end));
                }
                Some(_) => {}
                None => self.read_to_end = true,
            }
        }
        if let Some(h) = horizon {
            self.listed_before = self.listed_before.max(Some(h));
        }
        self.read_collections(storage, false)?;
        let local_root = self.local_root.clone();
        let share = self.share.clone();
        source::parse_index_files(
            storage,
            local_root.as_deref(),
            share.as_ref().map(|s| s as &dyn source::IndexShare),
            &paths,
            || true,
            |entry| entry,
            |entry| self.apply_index(entry?),
        )?;
        if self.listed.len() > self.names_covered {
            self.read_collections(storage, true)?;
        }
        self.progress.listed();
        Ok(())
    }

    /// Reads the collections files not read yet (none once each declared worker's was read:
    /// [`StepProgress::knows_every_worker`]) and, with `recheck`, those read before whose
    /// size changed since. A hook rewrites its file before the index file of the step that
    /// brought a tensor to a collection (and once more as it closes, before the end marker):
    /// checking again after a listing brings new names, and once the run has ended, keeps the
    /// collections as the files say, at the cost of a size query per worker then.
    fn read_collections(&mut self, storage: &dyn Storage, recheck: bool) -> Result<()> {
        let share = self.share.clone();
        let mut paths = source::unread_collection_files(storage, &self.progress, |p| {
            self.collection_files.contains_key(p)
        })?;
        if recheck {
            for (path, bytes) in &self.collection_files {
                if storage.size(path)?.is_some_and(|now| now != *bytes) {
                    paths.push(path.clone());
                }
            }
            self.names_covered = self.listed.len();
        }
        for key in paths {
            let file = source::read_collections_file(storage, share.as_ref(), &key)?;
            self.collection_files.insert(key.clone(), file.bytes);
            self.collection_reads += 1;
            self.progress
                .collections_file(file.worker.as_deref(), file.num_workers);
            for c in file.collections {
                for p in c.unusable_patterns() {
                    if !self.unusable_patterns.contains(p) {
                        log::warn!("{key}: {p}");
                        self.unusable_patterns.push(p.clone());
                    }
                }
                match self.collections.get_mut(c.name()) {
                    Some(existing) => {
                        for n in c.tensor_names() {
                            existing.add_tensor_name(n);
                        }
                    }
                    None => {
                        self.collections.insert(c.name().to_string(), c);
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads the identity files and what they say; a problem not seen before is logged.
    fn read_jobs(&mut self, storage: &dyn Storage) {
        let (jobs, mut problems) = match read_jobs(storage) {
            Ok(found) => found,
            Err(e) => (
                self.jobs.clone(),
                vec![format!("the run's identity files could not be read: {e}")],
            ),
        };
        problems.splice(0..0, job_problems(&jobs));
        for p in &problems {
            if !self.job_problems.contains(p) {
                log::warn!("{p}");
            }
        }
        self.jobs = jobs;
        self.job_problems = problems;
        self.jobs_read = Some(Instant::now());
    }

    /// Index files at or before the last complete step are never listed again: no need to
    /// remember them.
    fn forget_pending(&mut self) {
        self.pending.forget_through(self.progress.last_complete());
    }

    /// Takes in one index file: its step, worker and tensors. A file listing no tensor adds
    /// nothing (Python smdebug learns steps from tensors). Listed again, it changes nothing; a
    /// second index file for the same step and worker, or workers disagreeing on a step's mode,
    /// is a conflict.
    fn apply_index(&mut self, idx: source::IndexEntry) -> Result<()> {
        if idx.tensors.names().next().is_none() {
            self.read_once(idx.step, idx.path);
            return Ok(());
        }
        let files = self.steps.get(&idx.step).map(|e| {
            (
                e.mode,
                e.mode_step,
                e.workers.get(&idx.worker).map(|w| w.index_file(idx.step)),
                e.workers.values().next().map(|w| w.index_file(idx.step)),
            )
        });
        let known = files
            .as_ref()
            .map(|(mode, mode_step, worker, first)| KnownStep {
                mode: *mode,
                mode_step: *mode_step,
                worker_file: worker.as_deref(),
                first_file: first.as_deref().unwrap_or(""),
            });
        if admit(known, &idx)? == Admit::Again {
            self.read_once(idx.step, idx.path);
            return Ok(());
        }
        for (name, line) in &idx.repeated {
            match self.repeated_names.get_mut(name) {
                Some(seen) => seen.index_files += 1,
                None => {
                    // Logged when first seen; the later files only count.
                    log::warn!("{line}");
                    let first = RepeatedName {
                        name: name.clone(),
                        first: line.clone(),
                        index_files: 1,
                    };
                    self.repeated_names.insert(name.clone(), first);
                }
            }
        }
        if idx.mode != Mode::Global {
            self.by_mode_step.add(idx.mode, idx.mode_step, idx.step);
        }
        for name in idx.tensors.names() {
            // Most names are known already: look them up without copying them.
            match self.names.get_mut(&**name) {
                Some(steps) => steps.add(idx.step),
                None => {
                    self.names
                        .insert(name.to_string(), StepSet::single(idx.step));
                }
            }
            let public = listed_name(name);
            match self.listed.get_mut(public) {
                Some(steps) => steps.add(idx.step),
                None => {
                    self.listed
                        .insert(public.to_string(), StepSet::single(idx.step));
                }
            }
        }
        self.progress.step_written(idx.step, &idx.worker);
        let file_len = idx.tensors.end();
        let entry = self.steps.get_or_insert_with(idx.step, || StepEntry {
            mode: idx.mode,
            mode_step: idx.mode_step,
            workers: Workers::default(),
        });
        let worker = match self.worker_names.iter().find(|w| ***w == *idx.worker) {
            Some(known) => known.clone(),
            None => {
                let name: Arc<str> = idx.worker.as_str().into();
                self.worker_names.push(name.clone());
                name
            }
        };
        entry.workers.insert(WorkerStep {
            file: Arc::new(EventFile::new(
                idx.event_file,
                &idx.path,
                idx.step,
                worker,
                file_len,
            )),
            tensors: idx.tensors,
        });
        self.read_once(idx.step, idx.path);
        Ok(())
    }

    /// Index file `path` of `step` was taken in: later listings skip it. (A file that failed,
    /// a conflict, is not: it fails again, naming both files, at every refresh.)
    fn read_once(&mut self, step: u64, path: String) {
        self.pending.insert(step, path);
    }

    /// Lets go of what the index holds of the global steps before `before` (their entries,
    /// their mode-step numbers, their places in the per-name step sets); the names stay known.
    /// Returns whether anything was let go.
    pub fn release_before(&mut self, before: u64) -> bool {
        if before <= self.released_before {
            return false;
        }
        self.generation += 1;
        self.steps.drop_before(&before);
        // Each mode's steps from its first: a mode numbers its steps in the order of their
        // global steps, so its released steps come first (a mode step left behind out of that
        // order is caught by `check_held`, which looks at the global step it maps to).
        let modes: Vec<Mode> = self.by_mode_step.modes().collect();
        for mode in modes {
            if let Some(last) = self.by_mode_step.release_before(mode, before) {
                let through = self.released_mode_steps.entry(mode).or_insert(last);
                *through = (*through).max(last);
            }
        }
        for steps in self.names.values_mut().chain(self.listed.values_mut()) {
            steps.drop_before(before);
        }
        self.released_before = before;
        true
    }

    /// Fails with [`Error::StepReleased`] when step `step` of `mode` (global for `Global`) was
    /// released by [`release_before`](Self::release_before); `tensor`: the tensor being read.
    pub fn check_held(&self, step: u64, mode: Mode, tensor: Option<&str>, run: &str) -> Result<()> {
        let released = match mode {
            Mode::Global => step < self.released_before,
            m => {
                self.released_mode_steps
                    .get(&m)
                    .is_some_and(|last| step <= *last)
                    || self
                        .by_mode_step
                        .get(m, step)
                        .is_some_and(|g| g < self.released_before)
            }
        };
        if !released {
            return Ok(());
        }
        Err(Error::StepReleased {
            tensor: tensor.map(str::to_string),
            step,
            mode,
            released_before: self.released_before,
            location: run.to_string(),
        })
    }

    /// What [`Trial::read_steps`](super::Trial::read_steps) reads: every step in `mode` (all
    /// steps for `None` or `Global`), with the records of `names` (stored names; every record
    /// when `None`) from each worker's file. Steps holding none of them are left out.
    pub fn plan_steps(&self, mode: Option<Mode>, names: Option<&[&str]>) -> Vec<PlannedStep> {
        let wanted = |name: &str| names.is_none_or(|names| names.contains(&name));
        self.steps
            .iter()
            .filter(|(_, e)| matches!(mode, None | Some(Mode::Global)) || Some(e.mode) == mode)
            .filter_map(|(g, e)| {
                let mut planned = PlannedStep::new(*g, e.mode, e.mode_step);
                for w in e.workers.values() {
                    let entries: Vec<(Arc<str>, Slot)> = w
                        .tensors
                        .entries()
                        .filter(|(name, _)| wanted(name))
                        .map(|(name, slot)| (name.clone(), slot))
                        .collect();
                    planned.add_file(w.file.clone(), entries);
                }
                (!planned.is_empty()).then_some(planned)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::RepeatedName;

    #[test]
    fn a_repeated_name_is_one_line_that_counts_the_other_index_files() {
        let mut r = RepeatedName {
            name: "loss".into(),
            first: "index/000000000/000000000004_worker_0.json: tensor `loss` is listed twice"
                .into(),
            index_files: 1,
        };
        assert_eq!(r.to_string(), r.first);
        r.index_files = 2;
        assert_eq!(
            r.to_string(),
            format!(
                "{} (1 more index file lists `loss` twice; its later entry is read too)",
                r.first
            )
        );
        r.index_files = 200;
        assert_eq!(
            r.to_string(),
            format!(
                "{} (199 more index files list `loss` twice; their later entries are read too)",
                r.first
            )
        );
    }
}
