//! What a profiler rule reads at each call: [`ProfilerWindow`], the system samples and framework
//! spans that are new since the rule's previous call, and the [`StepTimeline`] of the steps
//! seen so far.

use serde::{Deserialize, Serialize};
use smdebug_core::Mode;
use smdebug_core::phase::Phase;
use smdebug_format::system::SystemSample;
use smdebug_read::profile::Span;

/// The profiler data that is new since a rule's previous call.
#[derive(Clone, Copy, Debug)]
pub struct ProfilerWindow<'a> {
    /// New system samples, ordered by time.
    pub samples: &'a [SystemSample],
    /// New closed framework spans, ordered by end time.
    pub spans: &'a [Span],
    /// The earliest timestamp of the whole job seen so far (sample or span start),
    /// microseconds since the epoch; `None` while no profiler data has been seen.
    pub start_us: Option<u64>,
    /// The latest time seen: the latest sample or span end, and when following a live run
    /// also the wall clock. Microseconds since the epoch.
    pub now_us: u64,
    /// No more data will come: the run ended, or this is the end of an offline evaluation.
    pub final_window: bool,
    /// Every step span seen so far (this window's included), to tell which step ran when.
    pub steps: &'a StepTimeline,
}

impl ProfilerWindow<'_> {
    /// The latest step that started at or before `time_us` (0 when none did), in its mode's
    /// numbering: [`ProfilerWindow::step_ref_at`] says which mode.
    pub fn step_at(&self, time_us: u64) -> u64 {
        self.steps.step_at(time_us).unwrap_or(0)
    }

    /// The latest step that started at or before `time_us`, with its mode, as messages and
    /// evidence name it (`TRAIN step 9`); step 0 of no mode when none did.
    pub fn step_ref_at(&self, time_us: u64) -> StepRef {
        match self.steps.mode_step_at(time_us) {
            Some((mode, step)) => StepRef::of_mode(step, mode),
            None => StepRef::global(0),
        }
    }
}

/// A step as a rule names it: a global step (debugging rules: the step tensors are saved
/// under), or a step of one mode's own numbering (profiler rules: step spans number each
/// mode's steps from 0, so `TRAIN` step 9 is not global step 9). Shown as `step 9` or
/// `TRAIN step 9`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepRef {
    /// The step number.
    pub step: u64,
    /// The mode whose numbering `step` is in; `None` for a global step.
    pub mode: Option<Mode>,
}

impl StepRef {
    /// A global step.
    pub fn global(step: u64) -> StepRef {
        StepRef { step, mode: None }
    }

    /// Step `step` of `mode`'s own numbering.
    pub fn of_mode(step: u64, mode: Mode) -> StepRef {
        StepRef {
            step,
            mode: Some(mode),
        }
    }
}

impl std::fmt::Display for StepRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.mode {
            Some(mode) => write!(f, "{} step {}", mode.name(), self.step),
            None => write!(f, "step {}", self.step),
        }
    }
}

/// What a profiler rule's status sums up: the profiler data read from the job's first record
/// to the latest time read, and how many step spans it held. Its details and its message are
/// taken over this window, which the report and the dashboard name beside them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgedWindow {
    /// The job's first record (sample or span start), µs since the epoch.
    pub start_us: u64,
    /// The latest time read, µs since the epoch.
    pub end_us: u64,
    /// The step spans read (every mode's: their step numbers are each mode's own).
    pub step_spans: u64,
    /// Whether no more data will come (the run ended, or the offline evaluation read it all).
    pub whole_run: bool,
}

impl JudgedWindow {
    /// The window after a rule was handed `window`.
    pub fn of(window: &ProfilerWindow<'_>) -> JudgedWindow {
        JudgedWindow {
            start_us: window.start_us.unwrap_or(window.now_us),
            end_us: window.now_us,
            step_spans: window.steps.len() as u64,
            whole_run: window.final_window,
        }
    }

    /// Seconds from the job's first record to the latest time read.
    pub fn seconds(&self) -> f64 {
        self.end_us.saturating_sub(self.start_us) as f64 / 1e6
    }

    /// In words: `the whole run: 0.000 to 312.400 s after its first record, 1500 step
    /// spans`.
    pub fn describe(&self) -> String {
        let what = if self.whole_run {
            "the whole run"
        } else {
            "the run so far"
        };
        format!(
            "{what}: 0.000 to {:.3} s after its first record, {} step spans",
            self.seconds(),
            self.step_spans
        )
    }
}

/// The `Step` spans seen so far, by start time: which step the loop was in at a given time.
/// Step spans number each mode's steps from 0, as the trace files write them: their steps are
/// each mode's own (`TRAIN` step 9, `EVAL` step 9), not the run's global steps.
#[derive(Clone, Debug, Default)]
pub struct StepTimeline {
    /// (start_us, end_us, step, mode), sorted by start.
    steps: Vec<(u64, u64, u64, Mode)>,
}

impl StepTimeline {
    /// Adds the step spans among `spans` (spans of other phases are ignored).
    pub fn extend(&mut self, spans: &[Span]) {
        let before = self.steps.len();
        for span in spans {
            if let (Phase::Step(mode), Some(step)) = (span.phase_kind(), span.step) {
                self.steps.push((span.start_us, span.end_us, step, mode));
            }
        }
        if self.steps.len() > before {
            self.steps.sort_unstable();
        }
    }

    /// The latest step that started at or before `time_us` (in its mode's numbering).
    pub fn step_at(&self, time_us: u64) -> Option<u64> {
        self.mode_step_at(time_us).map(|(_, step)| step)
    }

    /// The latest step that started at or before `time_us`, with its mode.
    pub fn mode_step_at(&self, time_us: u64) -> Option<(Mode, u64)> {
        let after = self.steps.partition_point(|s| s.0 <= time_us);
        after
            .checked_sub(1)
            .map(|i| (self.steps[i].3, self.steps[i].2))
    }

    /// The start of the first step span, microseconds since the epoch.
    pub fn first_start_us(&self) -> Option<u64> {
        self.steps.first().map(|s| s.0)
    }

    /// How many step spans were seen.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether no step span was seen.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_judged_window_says_what_it_covers() {
        let mut w = JudgedWindow {
            start_us: 1_000_000,
            end_us: 313_400_000,
            step_spans: 1500,
            whole_run: true,
        };
        assert_eq!(
            w.describe(),
            "the whole run: 0.000 to 312.400 s after its first record, 1500 step spans"
        );
        w.whole_run = false;
        assert!(w.describe().starts_with("the run so far: "));
    }

    #[test]
    fn step_timeline_answers_the_latest_step_started() {
        let mut t = StepTimeline::default();
        assert_eq!(t.step_at(5), None);
        let span = |start, end, step| Span {
            phase: "Step:ModeKeys.TRAIN".into(),
            name: "Step:ModeKeys.TRAIN".into(),
            start_us: start,
            end_us: end,
            node: "n".into(),
            worker: Some(0),
            step: Some(step),
            mode: None,
            args: Default::default(),
        };
        t.extend(&[span(20, 30, 2), span(10, 20, 1)]);
        let mut eval = span(40, 50, 0);
        eval.phase = "Step:ModeKeys.EVAL".into();
        t.extend(&[eval]);
        assert_eq!(t.step_at(5), None);
        assert_eq!(t.step_at(15), Some(1));
        assert_eq!(t.mode_step_at(25), Some((Mode::Train, 2)));
        assert_eq!(t.mode_step_at(45), Some((Mode::Eval, 0)));
        assert_eq!(t.step_at(25), Some(2));
        assert_eq!(t.step_at(39), Some(2));
        assert_eq!(t.first_start_us(), Some(10));
    }
}
