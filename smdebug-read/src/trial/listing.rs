//! Which steps a trial lists and where a step stands, by Python smdebug 1.0.34's rules (see
//! [`progress`](super::progress)): step listings per mode, complete or not, `has_passed_step`,
//! and what waiting for a step that will never come is.

use smdebug_core::Mode;

use super::progress::StepState;
use super::state::State;
use crate::error::Error;

impl State {
    /// Whether global step `g` (a known step) is complete.
    pub fn is_complete_step(&self, g: u64) -> bool {
        self.progress.is_complete(g)
    }

    /// The global step of a step number in smdebug's numbering (the first global step of a mode
    /// step, as Python's `_mode_to_global`).
    pub fn global_step(&self, step: u64, mode: Mode) -> Option<u64> {
        if mode == Mode::Global {
            return self.steps.contains_key(&step).then_some(step);
        }
        self.by_mode_step.get(mode, step)
    }

    /// The known steps of `mode` in its numbering, each with its global step, in order.
    fn numbered(&self, mode: Mode) -> Box<dyn Iterator<Item = (u64, u64)> + '_> {
        match mode {
            Mode::Global => Box::new(self.steps.keys().map(|g| (*g, *g))),
            m => Box::new(self.by_mode_step.range_from(m, 0)),
        }
    }

    /// Steps of `mode` in smdebug's numbering (global steps for `Global`): the complete ones,
    /// or all of them with `incomplete`.
    pub fn steps_of(&self, mode: Mode, incomplete: bool) -> Vec<u64> {
        self.numbered(mode)
            .filter(|(_, g)| incomplete || self.is_complete_step(*g))
            .map(|(s, _)| s)
            .collect()
    }

    /// Global steps recorded in `mode` (every step for `Global`): the complete ones, or all
    /// of them with `incomplete`.
    pub fn global_steps_of(&self, mode: Mode, incomplete: bool) -> Vec<u64> {
        self.steps
            .iter()
            .filter(|(g, e)| {
                (mode == Mode::Global || e.mode == mode)
                    && (incomplete || self.is_complete_step(**g))
            })
            .map(|(g, _)| *g)
            .collect()
    }

    /// The last known step of `mode` in its numbering, complete or not.
    pub fn last_step(&self, mode: Mode) -> Option<u64> {
        match mode {
            Mode::Global => self.steps.keys().next_back().copied(),
            m => self
                .by_mode_step
                .range_from(m, 0)
                .next_back()
                .map(|(s, _)| s),
        }
    }

    /// Python smdebug's `has_passed_step`: where `step` (in `mode`'s numbering) stands.
    pub fn step_state(&self, step: u64, mode: Mode) -> StepState {
        // The first known step at or after `step`, with its global step.
        let next = match mode {
            Mode::Global => self.steps.range(step..).next().map(|(g, _)| (*g, *g)),
            m => self.by_mode_step.range_from(m, step).next(),
        };
        match next {
            Some((s, g)) if s == step => {
                if self.is_complete_step(g) {
                    StepState::Available
                } else {
                    StepState::NotYetAvailable
                }
            }
            // A later step: this one is skipped for good once the later one is complete.
            Some((_, g)) => {
                if self.progress.last_complete().is_some_and(|l| l >= g) {
                    StepState::Unavailable
                } else {
                    StepState::NotYetAvailable
                }
            }
            None if self.complete => StepState::Unavailable,
            None => StepState::NotYetAvailable,
        }
    }

    /// What waiting for `step` ends with when it will never come (Python's `wait_for_steps`):
    /// before the end of the run, or before the run's last step, [`Error::StepUnavailable`];
    /// past the last step of a finished run, [`Error::NoMoreData`].
    pub fn unavailable_error(&self, step: u64, mode: Mode, location: &str) -> Error {
        let last = self.last_step(mode);
        if self.complete && last.is_none_or(|l| step >= l) {
            Error::NoMoreData {
                step,
                mode,
                last_step: last,
                location: location.to_string(),
            }
        } else {
            Error::StepUnavailable {
                tensor: None,
                step,
                mode,
                location: location.to_string(),
            }
        }
    }

    /// Steps at which `name` (or a reduction of it) was saved, in `mode`'s numbering: the
    /// complete ones, or all with `incomplete`.
    pub fn tensor_steps(&self, name: &str, mode: Option<Mode>, incomplete: bool) -> Vec<u64> {
        let Some(steps) = self.names.get(name).or_else(|| self.listed.get(name)) else {
            return Vec::new();
        };
        let kept = steps
            .iter()
            .filter(|g| incomplete || self.is_complete_step(*g));
        match mode {
            None | Some(Mode::Global) => kept.collect(),
            Some(m) => {
                let mut out: Vec<u64> = kept
                    .filter_map(|g| {
                        let e = &self.steps[&g];
                        (e.mode == m).then_some(e.mode_step)
                    })
                    .collect();
                out.sort_unstable();
                out.dedup();
                out
            }
        }
    }
}
