//! What a trial knows about its run, and how it learns more.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use smdebug_core::{Collection, EndReason, Mode, Reduction, UnusablePattern};

use std::sync::Arc;

use super::source::{self, EventFile, Location, TensorTable};
use super::steps::PlannedStep;
use crate::error::{Error, Result};
use crate::storage::Storage;

/// What a step selection in [`Trial::tensor_records`](crate::trial::Trial::tensor_records) asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepSelector {
    /// One global step.
    One(u64),
    /// Every step the tensor was saved at.
    All,
}

/// Where a step stands for a reader (smdebug's `StepState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum StepState {
    /// Every worker has written the step.
    Available,
    /// Not written (or not by every worker) yet, and the run goes on.
    NotYetAvailable,
    /// The step will never come: the run ended, or every worker has moved past it.
    Unavailable,
}

#[derive(Clone, Debug)]
pub(crate) struct WorkerStep {
    /// Shared with every `Location` handed out for it, with the file's bytes once read.
    pub file: Arc<EventFile>,
    /// The index file that described this step of this worker.
    pub index_file: String,
    pub tensors: TensorTable,
}

#[derive(Clone, Debug)]
pub(crate) struct StepEntry {
    pub mode: Mode,
    pub mode_step: u64,
    pub workers: BTreeMap<String, WorkerStep>,
}

/// The global steps a tensor was saved at, in order. Index files are listed in step order, so
/// a new step is nearly always past the last one and is appended: cheaper than a tree when a
/// long run is opened (two of these per name per step).
#[derive(Clone, Debug, Default)]
pub(crate) struct StepSet(Vec<u64>);

impl StepSet {
    fn from(step: u64) -> StepSet {
        StepSet(vec![step])
    }

    /// Adds a step; nothing when it is there already.
    fn insert(&mut self, step: u64) {
        match self.0.last() {
            Some(&last) if last < step => self.0.push(step),
            _ => {
                if let Err(at) = self.0.binary_search(&step) {
                    self.0.insert(at, step);
                }
            }
        }
    }

    pub fn contains(&self, step: &u64) -> bool {
        self.0.binary_search(step).is_ok()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, u64> {
        self.0.iter()
    }
}

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
    collection_files: BTreeSet<String>,
    /// Patterns in the collections files that do not compile, each once however many workers'
    /// files carry it.
    pub unusable_patterns: Vec<UnusablePattern>,
    /// Names an index file lists twice (the later entry is read), each once however many
    /// index files do it: a Keras run repeats its metrics at every epoch's end.
    pub repeated_names: BTreeMap<String, RepeatedName>,
    pub num_workers: usize,
    pub workers: BTreeSet<String>,
    pub steps: BTreeMap<u64, StepEntry>,
    /// (mode, step within the mode) -> the first global step numbered so, for reads by mode.
    by_mode_step: HashMap<(Mode, u64), u64>,
    /// Stored tensor name (reductions included) -> global steps it was saved at.
    pub names: BTreeMap<String, StepSet>,
    /// Names a reader lists: like Python smdebug, a reduction `smdebug/reductions/mean/w` is
    /// listed as its tensor `w` (read it with `reduction_value`).
    pub listed: BTreeMap<String, StepSet>,
    /// Per worker, the highest global step it has published.
    worker_last_step: HashMap<String, u64>,
    /// `Trial::forget_files_before` has let go of the files of every step before this one.
    pub files_forgotten_before: u64,
    /// Per collection, the listed names it selects, worked out when the collections files
    /// read and the names listed numbered as the key says (both only grow): callers going step
    /// by step (the rules) ask at every step, and matching is a regex per name.
    members: HashMap<String, ((usize, usize), Vec<String>)>,
    pub complete: bool,
    pub end_reason: Option<EndReason>,
    pub last_refresh: Option<Instant>,
    /// The run's directory when it is on local disk: index files are read from it directly.
    pub local_root: Option<std::path::PathBuf>,
}

impl State {
    /// Nothing known yet; `local_root` is the run's directory when it is on local disk.
    pub fn new(local_root: Option<std::path::PathBuf>) -> State {
        State {
            local_root,
            ..State::default()
        }
    }

    /// What reading had to work around, one line each (see `Trial::warnings`).
    pub fn warnings(&self) -> Vec<String> {
        self.unusable_patterns
            .iter()
            .map(|p| p.to_string())
            .chain(self.repeated_names.values().map(|r| r.to_string()))
            .collect()
    }

    /// The listed names collection `name` selects, sorted.
    pub fn collection_members(&mut self, name: &str) -> Result<Vec<String>> {
        let key = (self.collection_files.len(), self.listed.len());
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

    pub fn has_anything(&self) -> bool {
        !self.collections.is_empty() || !self.steps.is_empty() || self.complete
    }

    /// Nothing can change any more: the end marker was seen and a final refresh done after it.
    pub fn finished(&self) -> bool {
        self.complete
    }

    fn expected_workers(&self) -> usize {
        self.num_workers.max(self.workers.len()).max(1)
    }

    fn step_complete(&self, e: &StepEntry) -> bool {
        e.workers.len() >= self.expected_workers()
    }

    /// The first global step not yet written by every worker: listing resumes there.
    fn first_incomplete_step(&self) -> Option<u64> {
        self.steps
            .iter()
            .find(|(_, e)| !self.step_complete(e))
            .map(|(s, _)| *s)
    }

    pub fn last_complete_step(&self) -> Option<u64> {
        self.steps
            .iter()
            .rev()
            .find(|(_, e)| self.step_complete(e))
            .map(|(s, _)| *s)
    }

    /// Learns what is new: collections files, index files after the first incomplete step, the
    /// end marker. Reading the marker before the final listing means a run that ends during a
    /// refresh is never reported complete with steps missing.
    pub fn refresh(&mut self, storage: &dyn Storage) -> Result<()> {
        // `Some(reason)` once the run has ended; fetched once per refresh, and not at all after.
        let marker = if self.complete {
            None
        } else {
            source::end_marker(storage)?
        };

        for (key, file) in source::new_collection_files(storage, &self.collection_files)? {
            self.collection_files.insert(key.clone());
            self.num_workers = self.num_workers.max(file.num_workers);
            if let Some(w) = file.worker {
                self.workers.insert(w);
            }
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

        let resume = match self.first_incomplete_step() {
            Some(s) => Some(s),
            None => self.steps.keys().next_back().map(|s| s + 1),
        };
        let local_root = self.local_root.clone();
        source::index_files_from(storage, local_root.as_deref(), resume, |idx| {
            self.apply_index(idx)
        })?;
        if let Some(reason) = marker {
            self.complete = true;
            self.end_reason = reason;
        }
        self.last_refresh = Some(Instant::now());
        Ok(())
    }

    /// Takes in one index file: its step, worker and tensors. Listed again (listing resumes at
    /// the first step not complete everywhere), it changes nothing; a second index file for the
    /// same step and worker, or workers disagreeing on a step's mode, is a conflict.
    fn apply_index(&mut self, idx: source::IndexEntry) -> Result<()> {
        if let Some(e) = self.steps.get(&idx.step) {
            match e.workers.get(&idx.worker) {
                // Listed again: listing resumes at the first step not complete everywhere.
                Some(known) if known.index_file == idx.path => return Ok(()),
                Some(known) => {
                    return Err(Error::ConflictingIndex {
                        first: known.index_file.clone(),
                        second: idx.path,
                        reason: format!(
                            "both describe step {} of worker `{}`",
                            idx.step, idx.worker
                        ),
                    });
                }
                None => {}
            }
            if (e.mode, e.mode_step) != (idx.mode, idx.mode_step) {
                let first = e
                    .workers
                    .values()
                    .next()
                    .map_or_else(String::new, |w| w.index_file.clone());
                return Err(Error::ConflictingIndex {
                    first,
                    second: idx.path,
                    reason: format!(
                        "global step {} is {} step {} in the first and {} step {} in the second",
                        idx.step, e.mode, e.mode_step, idx.mode, idx.mode_step
                    ),
                });
            }
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
        let first = self
            .by_mode_step
            .entry((idx.mode, idx.mode_step))
            .or_insert(idx.step);
        *first = (*first).min(idx.step);
        let entry = self.steps.entry(idx.step).or_insert_with(|| StepEntry {
            mode: idx.mode,
            mode_step: idx.mode_step,
            workers: BTreeMap::new(),
        });
        for name in idx.tensors.names() {
            // Most names are known already: look them up without copying them.
            match self.names.get_mut(&**name) {
                Some(steps) => {
                    steps.insert(idx.step);
                }
                None => {
                    self.names.insert(name.to_string(), StepSet::from(idx.step));
                }
            }
            let public = Reduction::parse_tensor_name(name).map_or(&**name, |(_, base)| base);
            match self.listed.get_mut(public) {
                Some(steps) => {
                    steps.insert(idx.step);
                }
                None => {
                    self.listed
                        .insert(public.to_string(), StepSet::from(idx.step));
                }
            }
        }
        if !self.workers.contains(&idx.worker) {
            self.workers.insert(idx.worker.clone());
        }
        match self.worker_last_step.get_mut(&idx.worker) {
            Some(last) => *last = (*last).max(idx.step),
            None => {
                self.worker_last_step.insert(idx.worker.clone(), idx.step);
            }
        }
        let file_len = idx.tensors.end();
        entry.workers.insert(
            idx.worker.clone(),
            WorkerStep {
                file: Arc::new(EventFile::new(idx.event_file, idx.worker.into(), file_len)),
                index_file: idx.path,
                tensors: idx.tensors,
            },
        );
        Ok(())
    }

    /// The global step for a step number in smdebug's numbering.
    fn global_step(&self, step: u64, mode: Mode) -> Option<u64> {
        if mode == Mode::Global {
            return self.steps.contains_key(&step).then_some(step);
        }
        self.by_mode_step.get(&(mode, step)).copied()
    }

    pub fn step_state(&self, step: u64, mode: Mode) -> StepState {
        if let Some(g) = self.global_step(step, mode)
            && self.step_complete(&self.steps[&g])
        {
            return StepState::Available;
        }
        if self.complete {
            return StepState::Unavailable;
        }
        // Every worker has published a later step (of this mode, for mode steps): this one is not
        // coming.
        let passed = |w: &String| -> bool {
            self.steps.iter().rev().any(|(g, e)| {
                e.workers.contains_key(w)
                    && match mode {
                        Mode::Global => *g > step,
                        m => e.mode == m && e.mode_step > step,
                    }
            })
        };
        let workers: Vec<&String> = self.workers.iter().collect();
        if workers.len() >= self.expected_workers() && workers.iter().all(|w| passed(w)) {
            return StepState::Unavailable;
        }
        StepState::NotYetAvailable
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
                    let entries = w
                        .tensors
                        .entries()
                        .filter(|(name, _, _)| wanted(name))
                        .cloned()
                        .collect();
                    planned.add_file(w.file.clone(), entries);
                }
                (!planned.is_empty()).then_some(planned)
            })
            .collect()
    }

    /// Steps at which `name` (or a reduction of it) was saved.
    pub fn tensor_steps(&self, name: &str, mode: Option<Mode>) -> Vec<u64> {
        let Some(steps) = self.names.get(name).or_else(|| self.listed.get(name)) else {
            return Vec::new();
        };
        steps
            .iter()
            .filter_map(|g| {
                let e = &self.steps[g];
                match mode {
                    None | Some(Mode::Global) => Some(*g),
                    Some(m) => (e.mode == m).then_some(e.mode_step),
                }
            })
            .collect()
    }

    pub fn tensor_workers(&self, name: &str, step: u64, mode: Mode) -> Vec<String> {
        self.global_step(step, mode)
            .map(|g| {
                self.steps[&g]
                    .workers
                    .iter()
                    .filter(|(_, w)| w.tensors.contains_key(name))
                    .map(|(n, _)| n.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn location_at(&self, name: &str, g: u64, worker: Option<&str>, run: &str) -> Result<Location> {
        let e = &self.steps[&g];
        let not_available = || Error::StepNotAvailable {
            tensor: name.to_string(),
            step: g,
            mode: e.mode,
            location: run.to_string(),
        };
        // One lookup of the name per worker tried (the first worker that has it, when none is
        // asked for).
        let (ws, (start, length)) = match worker {
            Some(w) => {
                let ws = e.workers.get(w).ok_or_else(|| Error::WorkerNotFound {
                    worker: w.to_string(),
                    step: g,
                    available: e.workers.keys().cloned().collect(),
                })?;
                (ws, ws.tensors.get(name).ok_or_else(not_available)?)
            }
            None => e
                .workers
                .values()
                .find_map(|ws| ws.tensors.get(name).map(|at| (ws, at)))
                .ok_or_else(not_available)?,
        };
        Ok(Location {
            file: ws.file.clone(),
            step: g,
            mode: e.mode,
            mode_step: e.mode_step,
            start,
            length,
        })
    }

    pub fn locate(
        &self,
        name: &str,
        step: u64,
        mode: Mode,
        worker: Option<&str>,
        run: &str,
    ) -> Result<Location> {
        if !self.names.contains_key(name) {
            if self.listed.contains_key(name) {
                return Err(Error::OnlyReductionsSaved {
                    tensor: name.to_string(),
                    step,
                });
            }
            return Err(Error::TensorNotFound {
                name: name.to_string(),
                location: run.to_string(),
            });
        }
        let g = self
            .global_step(step, mode)
            .ok_or_else(|| Error::StepNotAvailable {
                tensor: name.to_string(),
                step,
                mode,
                location: run.to_string(),
            })?;
        self.location_at(name, g, worker, run)
    }

    pub fn locations_for(
        &self,
        name: &str,
        steps: StepSelector,
        mode: Option<Mode>,
        worker: Option<&str>,
        run: &str,
    ) -> Result<Vec<Location>> {
        let Some(saved) = self.names.get(name) else {
            return Err(Error::TensorNotFound {
                name: name.to_string(),
                location: run.to_string(),
            });
        };
        let mode_ok = |g: &u64| mode.is_none_or(|m| m == Mode::Global || self.steps[g].mode == m);
        match steps {
            StepSelector::One(g) => {
                if !saved.contains(&g) || !mode_ok(&g) {
                    return Err(Error::StepNotAvailable {
                        tensor: name.to_string(),
                        step: g,
                        mode: mode.unwrap_or(Mode::Global),
                        location: run.to_string(),
                    });
                }
                Ok(vec![self.location_at(name, g, worker, run)?])
            }
            StepSelector::All => saved
                .iter()
                .filter(|g| mode_ok(g))
                .filter(|g| {
                    worker.is_none_or(|w| {
                        self.steps[g]
                            .workers
                            .get(w)
                            .is_some_and(|ws| ws.tensors.contains_key(name))
                    })
                })
                .map(|g| self.location_at(name, *g, worker, run))
                .collect(),
        }
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
