//! Profiling windows: when a profiler (detailed spans, data-loading spans, the code profile)
//! runs. SageMaker's `ProfileRange`: a range of steps, or a range of time.
//!
//! A window is given as the user (or SageMaker's `profilerconfig.json`) states it, with parts
//! left open: a step range without a start step begins at the step at which it is first asked
//! about, a time range without a start time begins when it is first asked about, a step range
//! without a length covers one step, and a time range without a duration covers the step that
//! is running when it starts. [`WindowState`] settles the open parts the first time it is asked
//! and answers [`WindowState::contains`] from then on, as Python smdebug 1.0.34 does.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use smdebug_core::window::{Window, WindowState};
//!
//! let mut w = WindowState::new(Window::steps(10, 5));
//! let now = SystemTime::now();
//! assert!(!w.contains(9, now));
//! assert!(w.contains(10, now) && w.contains(14, now));
//! assert!(!w.contains(15, now));
//!
//! // A time window without a start time starts at the first question.
//! let mut t = WindowState::new(Window::duration(Duration::from_secs(60)));
//! assert!(t.contains(0, now));
//! assert!(!t.contains(1, now + Duration::from_secs(61)));
//! ```

use std::time::{Duration, SystemTime};

/// Steps a step window covers when its length is not given (SageMaker's
/// `PROFILING_NUM_STEPS_DEFAULT`).
pub const DEFAULT_NUM_STEPS: u64 = 1;

/// When a profiler runs, as configured. See the module docs for how open parts are settled.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Window {
    /// Never (the profiler is off).
    #[default]
    Never,
    /// At every step.
    Always,
    /// Global steps `start .. start + num_steps`.
    Steps {
        /// The first step; `None`: the step at which the window is first asked about.
        start: Option<u64>,
        /// How many steps; `None`: [`DEFAULT_NUM_STEPS`].
        num_steps: Option<u64>,
    },
    /// Wall-clock time `start .. start + duration`.
    Time {
        /// When it opens; `None`: when the window is first asked about.
        start: Option<SystemTime>,
        /// How long it stays open; `None`: it covers the one step running when it opens.
        duration: Option<Duration>,
    },
}

impl Window {
    /// `num_steps` global steps from `start`.
    pub fn steps(start: u64, num_steps: u64) -> Window {
        Window::Steps {
            start: Some(start),
            num_steps: Some(num_steps),
        }
    }

    /// `num_steps` global steps from the step at which the window is first asked about.
    pub fn next_steps(num_steps: u64) -> Window {
        Window::Steps {
            start: None,
            num_steps: Some(num_steps),
        }
    }

    /// From `start` for `duration` of wall-clock time.
    pub fn time(start: SystemTime, duration: Duration) -> Window {
        Window::Time {
            start: Some(start),
            duration: Some(duration),
        }
    }

    /// For `duration`, from when the window is first asked about.
    pub fn duration(duration: Duration) -> Window {
        Window::Time {
            start: None,
            duration: Some(duration),
        }
    }

    /// Whether the window is ever open.
    pub fn is_enabled(&self) -> bool {
        match self {
            Window::Never => false,
            Window::Steps { num_steps, .. } => *num_steps != Some(0),
            Window::Time { duration, .. } => *duration != Some(Duration::ZERO),
            Window::Always => true,
        }
    }
}

impl std::fmt::Display for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Window::Never => f.write_str("off"),
            Window::Always => f.write_str("every step"),
            Window::Steps { start, num_steps } => {
                let n = num_steps.unwrap_or(DEFAULT_NUM_STEPS);
                match start {
                    Some(s) => write!(f, "steps {s}..{}", s.saturating_add(n)),
                    None => write!(f, "{n} steps from the next"),
                }
            }
            Window::Time { start, duration } => {
                let from = match start {
                    Some(t) => match t.duration_since(SystemTime::UNIX_EPOCH) {
                        Ok(d) => format!("{:.3} s since the epoch", d.as_secs_f64()),
                        Err(_) => "before the epoch".to_string(),
                    },
                    None => "now".to_string(),
                };
                match duration {
                    Some(d) => write!(f, "{:?} from {from}", d),
                    None => write!(f, "one step from {from}"),
                }
            }
        }
    }
}

/// A [`Window`] with its open parts settled as it is asked about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowState {
    window: Window,
    /// Settled bounds: steps `[start, end)` or times `[start, end)`.
    settled: Settled,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Settled {
    Open,
    Steps {
        start: u64,
        end: u64,
    },
    Time {
        start: SystemTime,
        end: SystemTime,
    },
    /// A time window without a duration: from `start`, one step, settled when it opens.
    TimeOneStep {
        start: SystemTime,
        step: Option<u64>,
    },
}

impl WindowState {
    /// A window not asked about yet.
    pub fn new(window: Window) -> WindowState {
        WindowState {
            window,
            settled: Settled::Open,
        }
    }

    /// The window as configured.
    pub fn window(&self) -> &Window {
        &self.window
    }

    /// Whether global step `step`, running at `now`, is inside the window. The first call
    /// settles the parts the configuration left open.
    pub fn contains(&mut self, step: u64, now: SystemTime) -> bool {
        if self.settled == Settled::Open {
            self.settled = match &self.window {
                Window::Never | Window::Always => Settled::Open,
                Window::Steps { start, num_steps } => {
                    let start = start.unwrap_or(step);
                    let n = num_steps.unwrap_or(DEFAULT_NUM_STEPS);
                    Settled::Steps {
                        start,
                        end: start.saturating_add(n),
                    }
                }
                Window::Time {
                    start,
                    duration: Some(d),
                } => {
                    let start = start.unwrap_or(now);
                    Settled::Time {
                        start,
                        end: start.checked_add(*d).unwrap_or(start),
                    }
                }
                Window::Time {
                    start,
                    duration: None,
                } => Settled::TimeOneStep {
                    start: start.unwrap_or(now),
                    step: None,
                },
            };
        }
        match &mut self.settled {
            Settled::Open => matches!(self.window, Window::Always),
            Settled::Steps { start, end } => (*start..*end).contains(&step),
            Settled::Time { start, end } => *start <= now && now < *end,
            Settled::TimeOneStep { start, step: first } => {
                if now < *start {
                    return false;
                }
                let first = *first.get_or_insert(step);
                step == first
            }
        }
    }

    /// Whether the window can never open again after global step `step` at `now` (a settled
    /// step range that ended, a time range in the past). A profiler whose window is over
    /// releases what it holds.
    pub fn is_over(&self, step: u64, now: SystemTime) -> bool {
        match &self.settled {
            Settled::Open => matches!(self.window, Window::Never) || !self.window.is_enabled(),
            Settled::Steps { end, .. } => step >= *end,
            Settled::Time { end, .. } => now >= *end,
            Settled::TimeOneStep { step: first, .. } => first.is_some_and(|f| step > f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
    }

    /// The steps among `steps` that `window` contains, asked in order, one second apart.
    fn open_steps(window: Window, steps: std::ops::Range<u64>) -> Vec<u64> {
        let mut w = WindowState::new(window);
        steps.filter(|s| w.contains(*s, at(*s))).collect()
    }

    #[test]
    fn step_windows_cover_their_steps_only() {
        assert_eq!(open_steps(Window::steps(3, 2), 0..10), [3, 4]);
        assert_eq!(open_steps(Window::steps(0, 0), 0..10), Vec::<u64>::new());
        assert_eq!(open_steps(Window::Always, 0..3), [0, 1, 2]);
        assert_eq!(open_steps(Window::Never, 0..3), Vec::<u64>::new());
    }

    #[test]
    fn open_parts_settle_at_the_first_question() {
        // No start: the first step asked about; no length: one step (SageMaker's defaults).
        let mut w = WindowState::new(Window::next_steps(3));
        assert!(w.contains(7, at(0)));
        assert!(!w.contains(6, at(0)));
        assert!(w.contains(9, at(0)) && !w.contains(10, at(0)));
        let mut one = WindowState::new(Window::Steps {
            start: Some(5),
            num_steps: None,
        });
        assert!(!one.contains(4, at(0)) && one.contains(5, at(0)) && !one.contains(6, at(0)));
    }

    #[test]
    fn time_windows_follow_the_clock() {
        assert_eq!(
            open_steps(Window::time(at(2), Duration::from_secs(3)), 0..10),
            [2, 3, 4]
        );
        // Without a duration: the one step running when the window opens.
        let from_4 = Window::Time {
            start: Some(at(4)),
            duration: None,
        };
        assert_eq!(open_steps(from_4, 0..10), [4]);
    }

    #[test]
    fn a_window_knows_when_it_is_over() {
        let mut w = WindowState::new(Window::steps(2, 2));
        assert!(!w.contains(0, at(0)));
        assert!(!w.is_over(3, at(3)));
        assert!(w.is_over(4, at(4)));
        assert!(WindowState::new(Window::Never).is_over(0, at(0)));
        assert!(!WindowState::new(Window::Always).is_over(1 << 40, at(0)));
    }

    #[test]
    fn windows_print_as_people_read_them() {
        assert_eq!(Window::steps(10, 5).to_string(), "steps 10..15");
        assert_eq!(Window::Never.to_string(), "off");
        assert_eq!(Window::next_steps(2).to_string(), "2 steps from the next");
    }
}
