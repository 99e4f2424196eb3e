//! Python smdebug 1.0.34's step semantics, in one place: which workers a run has, which steps
//! are complete, where a step stands, and which steps a trial reads.
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

use smdebug_core::Mode;

use super::state::State;
use crate::error::{Error, Result};

/// Where a step stands for a reader (smdebug's `StepState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum StepState {
    /// The step is complete: every worker wrote it, or it can no longer change.
    Available,
    /// Not written (or not by every worker) yet, and the run goes on.
    NotYetAvailable,
    /// The step will never come: the run ended without it, or the run is past it.
    Unavailable,
}

/// The global steps a trial reads (Python smdebug's `range_steps`): from `start` (included) to
/// `end` (excluded); `None` leaves that side open. Index files of other steps are not read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepRange {
    /// The first step read (`None`: from the first).
    pub start: Option<u64>,
    /// The first step not read (`None`: to the last).
    pub end: Option<u64>,
}

impl StepRange {
    /// Every step.
    pub const ALL: StepRange = StepRange {
        start: None,
        end: None,
    };

    /// Steps `start..end`; `end` must be past `start` when both are given (Python asserts it).
    pub fn new(start: Option<u64>, end: Option<u64>) -> Result<StepRange> {
        let range = StepRange { start, end };
        range.check()?;
        Ok(range)
    }

    /// Fails when both ends are given and `end` is not past `start`.
    pub fn check(&self) -> Result<()> {
        match (self.start, self.end) {
            (Some(start), Some(end)) if end <= start => Err(Error::BadRangeSteps { start, end }),
            _ => Ok(()),
        }
    }

    /// Whether global step `step` is read.
    pub fn contains(&self, step: u64) -> bool {
        self.start.is_none_or(|s| step >= s) && self.end.is_none_or(|e| step < e)
    }
}

impl State {
    /// How many workers must write a step for it to be complete: the collections file's
    /// `num_workers`, or (no collections file) the workers that wrote steps so far.
    pub(super) fn expected_workers(&self) -> usize {
        self.declared_workers
            .unwrap_or_else(|| self.step_workers.len().max(1))
    }

    /// The run's workers as Python smdebug names them: the collections files' workers (the
    /// workers that wrote steps when there is no collections file).
    pub fn workers(&self) -> Vec<String> {
        if self.collection_workers.is_empty() {
            self.step_workers.iter().cloned().collect()
        } else {
            self.collection_workers.iter().cloned().collect()
        }
    }

    /// A worker's index file of `step` was read: `written` workers have written it now. The step
    /// is the last complete one when that is the count the run declares (Python's `==`: a
    /// collections file declaring 0 workers completes nothing before the end).
    pub(super) fn worker_wrote(&mut self, step: u64, written: usize, expected: usize) {
        if written == expected && self.last_complete.is_none_or(|l| step > l) {
            self.last_complete = Some(step);
        }
    }

    /// Python smdebug's incomplete-step window: while more than `window` known steps are past
    /// the last complete step (its formula: the number of steps minus the last complete step
    /// plus one), the last complete step moves on by half the window. Python moves once per
    /// refresh; this moves until the window holds, so the answer does not depend on how many
    /// queries came before.
    pub(super) fn apply_window(&mut self) {
        let half = i128::from(self.window / 2);
        if half == 0 {
            return;
        }
        let known = self.steps.len() as i128;
        let mut last = self.last_complete.map_or(-1, i128::from);
        while known - (last + 1) > i128::from(self.window) {
            last += half;
        }
        if let Ok(last) = u64::try_from(last)
            && self.last_complete.is_none_or(|l| last > l)
        {
            self.last_complete = Some(last);
        }
    }

    /// Whether global step `g` (a known step) is complete.
    pub fn is_complete_step(&self, g: u64) -> bool {
        self.complete || self.last_complete.is_some_and(|l| g <= l)
    }

    /// The global step of a step number in smdebug's numbering (the first global step of a mode
    /// step, as Python's `_mode_to_global`).
    pub fn global_step(&self, step: u64, mode: Mode) -> Option<u64> {
        if mode == Mode::Global {
            return self.steps.contains_key(&step).then_some(step);
        }
        self.by_mode_step.get(&(mode, step)).copied()
    }

    /// The known steps of `mode` in its numbering, each with its global step, in order.
    fn numbered(&self, mode: Mode) -> Box<dyn Iterator<Item = (u64, u64)> + '_> {
        match mode {
            Mode::Global => Box::new(self.steps.keys().map(|g| (*g, *g))),
            m => Box::new(
                self.by_mode_step
                    .range((m, 0)..=(m, u64::MAX))
                    .map(|((_, s), g)| (*s, *g)),
            ),
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
                .range((m, 0)..=(m, u64::MAX))
                .next_back()
                .map(|((_, s), _)| *s),
        }
    }

    /// Python smdebug's `has_passed_step`: where `step` (in `mode`'s numbering) stands.
    pub fn step_state(&self, step: u64, mode: Mode) -> StepState {
        // The first known step at or after `step`, with its global step.
        let next = match mode {
            Mode::Global => self.steps.range(step..).next().map(|(g, _)| (*g, *g)),
            m => self
                .by_mode_step
                .range((m, step)..=(m, u64::MAX))
                .next()
                .map(|((_, s), g)| (*s, *g)),
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
                if self.last_complete.is_some_and(|l| l >= g) {
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
            .filter(|g| incomplete || self.is_complete_step(**g));
        match mode {
            None | Some(Mode::Global) => kept.copied().collect(),
            Some(m) => {
                let mut out: Vec<u64> = kept
                    .filter_map(|g| {
                        let e = &self.steps[g];
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_reads_from_its_start_up_to_its_end() {
        let r = StepRange::new(Some(2), Some(5)).unwrap();
        assert_eq!(
            (0..8).filter(|s| r.contains(*s)).collect::<Vec<_>>(),
            [2, 3, 4]
        );
        assert!(StepRange::ALL.contains(u64::MAX));
        let open_end = StepRange::new(Some(6), None).unwrap();
        assert!(!open_end.contains(5) && open_end.contains(6) && open_end.contains(u64::MAX));
        let err = StepRange::new(Some(5), Some(5)).unwrap_err();
        assert!(
            matches!(err, Error::BadRangeSteps { start: 5, end: 5 }),
            "{err}"
        );
    }

    /// The window moves the last complete step on by half a window at a time, as Python's
    /// formula does, until no more than a window of steps is past it.
    #[test]
    fn the_incomplete_step_window_moves_the_last_complete_step_by_half_windows() {
        let mut st = State::new(None, StepRange::ALL, 4);
        for g in 0..10 {
            st.steps.insert(
                g,
                super::super::state::StepEntry {
                    mode: Mode::Global,
                    mode_step: g,
                    workers: Default::default(),
                },
            );
        }
        st.apply_window();
        // 10 - (-1 + 1) > 4 -> 1; 10 - 2 > 4 -> 3; 10 - 4 > 4 -> 5; 10 - 6 = 4 stops.
        assert_eq!(st.last_complete, Some(5));
        assert_eq!(st.step_state(5, Mode::Global), StepState::Available);
        assert_eq!(st.step_state(6, Mode::Global), StepState::NotYetAvailable);
        let mut tiny = State::new(None, StepRange::ALL, 1);
        tiny.steps = st.steps.clone();
        tiny.apply_window();
        assert_eq!(
            tiny.last_complete, None,
            "half of a window of 1 moves nothing"
        );
    }
}
