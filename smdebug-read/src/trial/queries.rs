//! What a run holds, as a [`Trial`] answers: tensor names, steps (per mode, complete or not,
//! where a step stands, waiting for steps), modes, workers, collections, whether the run ended,
//! what reading had to work around, and the summary the CLI's `info` prints.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use smdebug_core::{Collection, EndReason, Mode, PyRegex};

use super::state::State;
use super::{NamesKey, RepeatedName, StepState, Trial, TrialInfo, num_workers};
use crate::error::{Error, Result};

impl Trial {
    /// Every tensor name seen so far (in complete and incomplete steps), sorted. Reductions are
    /// listed under their tensor's name, as Python smdebug does; read them with
    /// [`TrialTensor::reduction_value`](super::TrialTensor::reduction_value).
    pub fn tensor_names(&self) -> Result<Vec<String>> {
        Ok(self.fresh()?.listed.keys().cloned().collect())
    }

    /// Where the tensor names and collections stand now (new files looked for first, as
    /// [`tensor_names`](Self::tensor_names) does): see [`NamesKey`].
    pub fn names_key(&self) -> Result<NamesKey> {
        let st = self.fresh()?;
        Ok(NamesKey {
            trial: self.id,
            collection_reads: st.collection_reads(),
            names: st.listed.len(),
        })
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
        st.check_held(step, mode, None, &self.location)?;
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
        st.check_held(step, Mode::Global, None, &self.location)?;
        if !st.steps.contains_key(&step) {
            self.refresh_if_live(&mut st)?;
        }
        Ok(st.steps.get(&step).map(|e| match e.mode {
            Mode::Global => (Mode::Global, step),
            mode => (mode, e.mode_step),
        }))
    }

    /// Lets go of the event files of global steps before `step` that reads kept (mapped, or
    /// fetched within [`file_cache_bytes`](super::TrialOptions::file_cache_bytes)), so that the
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
        self.files.release_before(step);
    }

    /// Lets go of the index of the global steps before `step` that are complete, for readers
    /// that go step by step and will not ask about them again (the rule runner, behind every
    /// rule's look-back): a trial following a long run then holds what it has not passed,
    /// however long the run. Steps not complete yet are kept (a slow worker's files of them may
    /// still be read), so what is let go is the steps before `step` and at or before the
    /// [last complete step](Trial::last_complete_step); returns the first global step still
    /// held ([`released_before`](Trial::released_before)). Their event files are let go too
    /// ([`forget_files_before`](Trial::forget_files_before)).
    ///
    /// After it, a query about a released step (a value, `has_passed_step`, `step_mode`,
    /// `global_step`, `wait_for_steps`, the tensor names or workers at it, in global or a mode's
    /// numbering) is [`Error::StepReleased`], never "not saved" nor
    /// "not yet": a reader must not take it for a step without the tensor. Listings
    /// ([`steps`](Trial::steps), [`TrialTensor::steps`](super::TrialTensor::steps),
    /// [`TrialTensor::values`](super::TrialTensor::values),
    /// [`read_steps`](Trial::read_steps), [`info`](Trial::info)) hold the steps still held;
    /// tensor names stay known. Releasing never makes the trial read a file again: index files
    /// of complete steps are never listed again anyway.
    pub fn release_steps_before(&self, step: u64) -> u64 {
        let mut st = self.lock();
        let complete_until = if st.finished() {
            u64::MAX
        } else {
            st.progress.resume_step()
        };
        // The reader is past `step`: with a read-ahead, the index is read on from there even
        // when steps before it cannot go yet (a worker behind).
        st.reader_at = st.reader_at.max(step);
        let before = step.min(complete_until);
        if before > st.released_before {
            let from = st.files_forgotten_before;
            if before > from {
                for entry in st.steps.range(from..before).map(|(_, e)| e) {
                    for w in entry.workers.values() {
                        w.file.forget(&self.files);
                    }
                }
                st.files_forgotten_before = before;
                self.files.release_before(before);
            }
            st.release_before(before);
        }
        st.released_before
    }

    /// The first global step whose index the trial still holds: 0 unless
    /// [`release_steps_before`](Trial::release_steps_before) let steps go.
    pub fn released_before(&self) -> u64 {
        self.lock().released_before
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
    /// `has_passed_step`; the rules are in the [module docs](super)). A step not available yet is
    /// looked for again at once.
    pub fn has_passed_step(&self, step: u64, mode: Option<Mode>) -> Result<StepState> {
        let mode = mode.unwrap_or(Mode::Global);
        let mut st = self.throttled()?;
        st.check_held(step, mode, None, &self.location)?;
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
    /// files every [`poll_interval`](super::TrialOptions::poll_interval), as Python's `wait_for_steps`
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
                    st.check_held(step, mode, None, &self.location)?;
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

    /// The run's identity files, one per process that wrote it (see `smdebug_format::jobs`): a run
    /// whose files name two jobs, or a worker of two processes, is also in
    /// [`warnings`](Trial::warnings). Empty for a run without them (Python smdebug's).
    pub fn jobs(&self) -> Result<Vec<smdebug_format::jobs::JobIdentity>> {
        let st = self.throttled()?;
        Ok(st.jobs.clone())
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
            end_reason: st.end_reason.clone(),
            warnings: st.warnings(),
        }
    }

    /// The summary the CLI's `info` prints.
    pub fn info(&self) -> Result<TrialInfo> {
        let st = self.fresh()?;
        Ok(self.info_of(&st))
    }
}
