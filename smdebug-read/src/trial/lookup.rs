//! Looking a saved value up, and what a miss is: Python smdebug 1.0.34's `Tensor._step`.
//!
//! A tensor's value at a step is looked up among the index files read so far. When the step is
//! not there for the tensor, the trial looks for new files at once and asks again; still
//! missing, the step's state says which error it is: `Available` (the step is complete without
//! the tensor) is [`Error::StepNotAvailable`] (Python's `TensorUnavailableForStep`),
//! `Unavailable` is [`Error::StepUnavailable`], `NotYetAvailable` is
//! [`Error::StepNotYetAvailable`].

use smdebug_core::{Mode, Reduction};

use super::progress::StepState;
use super::source::{Location, Slot};
use super::state::{State, StepEntry, StepSelector, StepSet, WorkerStep};
use crate::error::{Error, Result};

impl State {
    /// Whether `name` is a tensor of the run: a listed name, or a stored (reduction) name.
    pub fn knows_tensor(&self, name: &str) -> bool {
        self.names.contains_key(name) || self.listed.contains_key(name)
    }

    /// Whether `name` (or reductions of it) was saved at global step `g`.
    fn saved_at(&self, name: &str, g: u64) -> bool {
        let has = |set: Option<&StepSet>| set.is_some_and(|s| s.contains(g));
        has(self.listed.get(name)) || has(self.names.get(name))
    }

    /// Whether worker step `tensors` holds `name` itself, or (a listed name) a reduction of it.
    fn holds(tensors: &super::source::TensorTable, name: &str) -> bool {
        tensors.contains_key(name)
            || tensors
                .names()
                .any(|n| Reduction::parse_tensor_name(n).is_some_and(|(_, base)| base == name))
    }

    /// The listed names saved at global step `g` (reductions under their tensor's name).
    fn names_at_global(&self, g: u64, out: &mut std::collections::BTreeSet<String>) {
        for w in self.steps[&g].workers.values() {
            for n in w.tensors.names() {
                let public = Reduction::parse_tensor_name(n).map_or(&**n, |(_, base)| base);
                if !out.contains(public) {
                    out.insert(public.to_string());
                }
            }
        }
    }

    /// Python smdebug's `tensor_names(step=…, mode=…)` before its regex or collection: every
    /// name (`None`, `Global`), the names saved in a mode, or at one step of `mode`'s
    /// numbering. A mode without steps, or a step the mode does not have, is
    /// [`Error::UnknownStep`] (Python's `KeyError`); a global step the run does not have lists
    /// nothing.
    pub fn names_in(&self, step: Option<u64>, mode: Mode, run: &str) -> Result<Vec<String>> {
        let unknown = || Error::UnknownStep {
            step,
            mode,
            location: run.to_string(),
        };
        if let Some(s) = step {
            self.check_held(s, mode, None, run)?;
        }
        let mut out = std::collections::BTreeSet::new();
        match (step, mode) {
            (None, Mode::Global) => return Ok(self.listed.keys().cloned().collect()),
            (None, m) => {
                if self.by_mode_step.range_from(m, 0).next().is_none() {
                    return Err(unknown());
                }
                for (g, e) in &self.steps {
                    if e.mode == m {
                        self.names_at_global(*g, &mut out);
                    }
                }
            }
            (Some(s), Mode::Global) => {
                if self.steps.contains_key(&s) {
                    self.names_at_global(s, &mut out);
                }
            }
            (Some(s), m) => {
                let g = self.global_step(s, m).ok_or_else(unknown)?;
                self.names_at_global(g, &mut out);
            }
        }
        Ok(out.into_iter().collect())
    }

    /// The workers that saved `name` (or reductions of it) at `step` in `mode`'s numbering
    /// (Python's `Tensor.workers`), in name order.
    /// A released step is [`Error::StepReleased`].
    pub fn tensor_workers(
        &self,
        name: &str,
        step: u64,
        mode: Mode,
        run: &str,
    ) -> Result<Vec<String>> {
        self.check_held(step, mode, Some(name), run)?;
        let Some(g) = self.global_step(step, mode) else {
            return Ok(Vec::new());
        };
        if !self.saved_at(name, g) {
            return Ok(Vec::new());
        }
        Ok(self.steps[&g]
            .workers
            .iter()
            .filter(|(_, w)| Self::holds(&w.tensors, name))
            .map(|(n, _)| n.to_string())
            .collect())
    }

    /// Where tensor `name`'s record at `step` (in `mode`'s numbering) is, read from `worker` (the
    /// first worker that saved it, in name order, when `None`). `Ok(None)` when the index files
    /// read so far do not have the tensor at that step: the caller looks for new files and,
    /// still missing, reports [`State::miss`]. An unknown name is [`Error::TensorNotFound`]; a
    /// worker that did not save the tensor there is [`Error::WorkerNotFound`]; a step where only
    /// reductions of it were saved is [`Error::OnlyReductionsSaved`]; an index entry that locates
    /// no record is [`Error::BadIndexEntry`].
    pub fn find(
        &self,
        name: &str,
        step: u64,
        mode: Mode,
        worker: Option<&str>,
        run: &str,
    ) -> Result<Option<Location>> {
        if !self.knows_tensor(name) {
            return Err(Error::TensorNotFound {
                name: name.to_string(),
                location: run.to_string(),
            });
        }
        self.check_held(step, mode, Some(name), run)?;
        let Some(g) = self.global_step(step, mode) else {
            return Ok(None);
        };
        if !self.saved_at(name, g) {
            return Ok(None);
        }
        self.location_at(name, g, step, worker).map(Some)
    }

    /// The error for a lookup of `name` at `step` that found nothing, after looking for new
    /// files: what the step's state says (see the module docs).
    pub fn miss(&self, name: &str, step: u64, mode: Mode, run: &str) -> Error {
        if let Err(released) = self.check_held(step, mode, Some(name), run) {
            return released;
        }
        match self.step_state(step, mode) {
            StepState::Available => Error::StepNotAvailable {
                tensor: name.to_string(),
                step,
                mode,
                location: run.to_string(),
            },
            StepState::Unavailable => Error::StepUnavailable {
                tensor: Some(name.to_string()),
                step,
                mode,
                location: run.to_string(),
            },
            StepState::NotYetAvailable => Error::StepNotYetAvailable {
                tensor: Some(name.to_string()),
                step,
                mode,
                location: run.to_string(),
            },
        }
    }

    /// The record of `name` at known global step `g` (asked for as `step`), from `worker`.
    fn location_at(&self, name: &str, g: u64, step: u64, worker: Option<&str>) -> Result<Location> {
        Self::location_in(&self.steps[&g], name, g, step, worker).map(|(loc, _)| loc)
    }

    /// [`location_at`](State::location_at) in step entry `e` (global step `g`'s), with the
    /// worker step the record is in.
    fn location_in<'e>(
        e: &'e StepEntry,
        name: &str,
        g: u64,
        step: u64,
        worker: Option<&str>,
    ) -> Result<(Location, &'e WorkerStep)> {
        // Python's step dict: the workers that saved the tensor or reductions of it.
        let saved_by = || -> Vec<String> {
            e.workers
                .iter()
                .filter(|(_, w)| Self::holds(&w.tensors, name))
                .map(|(n, _)| n.to_string())
                .collect()
        };
        let only_reductions = || Error::OnlyReductionsSaved {
            tensor: name.to_string(),
            step,
        };
        let (ws, slot) = match worker {
            Some(w) => {
                let Some(ws) = e.workers.get(w).filter(|ws| Self::holds(&ws.tensors, name)) else {
                    return Err(Error::WorkerNotFound {
                        worker: w.to_string(),
                        step,
                        available: saved_by(),
                    });
                };
                (ws, ws.tensors.get(name).ok_or_else(only_reductions)?)
            }
            None => e
                .workers
                .values()
                .find_map(|ws| ws.tensors.get(name).map(|slot| (ws, slot)))
                .ok_or_else(only_reductions)?,
        };
        match slot {
            Slot::Record(start, length) => Ok((
                Location {
                    file: ws.file.clone(),
                    step: g,
                    mode: e.mode,
                    mode_step: e.mode_step,
                    start,
                    length,
                },
                ws,
            )),
            Slot::Unusable(entry) => Err(entry.error(name)),
        }
    }

    /// What [`find`](State::find) finds for `name` at its saved steps after global step
    /// `after`, in order, for a caller going through them (values decoded ahead): `each` is
    /// given each step in `mode`'s numbering, its location and the worker step it is in, until
    /// it returns false or `scan` saved steps were looked at. The steps `find` finds nothing
    /// for, or an error, are left out. Each step is looked up once, where `find` looks up the
    /// tensor's name three times and the step twice.
    pub(crate) fn find_saved_after(
        &self,
        name: &str,
        after: u64,
        mode: Mode,
        worker: Option<&str>,
        scan: usize,
        mut each: impl FnMut(u64, Location, &WorkerStep) -> bool,
    ) {
        // A stored name: `find` knows it, and it was saved at every step of its set.
        let Some(saved) = self.names.get(name) else {
            return;
        };
        let from = match saved.search(after) {
            Ok(i) => i + 1,
            Err(i) => i,
        };
        for i in from..saved.len().min(from.saturating_add(scan)) {
            let g = saved.get(i);
            let Some(e) = self.steps.get(&g) else {
                continue;
            };
            // The step in `mode`'s numbering, which `find` must take back to `g`.
            let step = match mode {
                Mode::Global => g,
                m if e.mode == m && self.by_mode_step.get(m, e.mode_step) == Some(g) => e.mode_step,
                _ => continue,
            };
            if self.check_held(step, mode, Some(name), "").is_err() {
                continue;
            }
            if let Ok((loc, ws)) = Self::location_in(e, name, g, step, worker)
                && !each(step, loc, ws)
            {
                return;
            }
        }
    }

    /// Where `name`'s records are: at one global step, or at every complete step (as Python's
    /// `Tensor.values`), optionally in one mode and from one worker.
    pub fn locations_for(
        &self,
        name: &str,
        steps: StepSelector,
        mode: Option<Mode>,
        worker: Option<&str>,
        run: &str,
    ) -> Result<Vec<Location>> {
        let Some(saved) = self.names.get(name) else {
            if self.listed.contains_key(name) {
                return Err(Error::OnlyReductionsSaved {
                    tensor: name.to_string(),
                    step: match steps {
                        StepSelector::One(g) => g,
                        StepSelector::All => saved_first(self.listed.get(name)),
                    },
                });
            }
            return Err(Error::TensorNotFound {
                name: name.to_string(),
                location: run.to_string(),
            });
        };
        let mode_ok = |g: &u64| mode.is_none_or(|m| m == Mode::Global || self.steps[g].mode == m);
        match steps {
            StepSelector::One(g) => {
                self.check_held(g, Mode::Global, Some(name), run)?;
                if !saved.contains(g) || !mode_ok(&g) {
                    return Err(Error::StepNotAvailable {
                        tensor: name.to_string(),
                        step: g,
                        mode: mode.unwrap_or(Mode::Global),
                        location: run.to_string(),
                    });
                }
                Ok(vec![self.location_at(name, g, g, worker)?])
            }
            StepSelector::All => saved
                .iter()
                .filter(|g| mode_ok(g) && self.is_complete_step(*g))
                .filter(|g| {
                    worker.is_none_or(|w| {
                        self.steps[g]
                            .workers
                            .get(w)
                            .is_some_and(|ws| ws.tensors.contains_key(name))
                    })
                })
                .map(|g| self.location_at(name, g, g, worker))
                .collect(),
        }
    }
}

/// The first step of a step set, 0 for none.
fn saved_first(steps: Option<&StepSet>) -> u64 {
    steps.and_then(|s| s.iter().next()).unwrap_or(0)
}
