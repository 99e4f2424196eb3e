//! The job's phases, as the report and the dashboard show them: the job runs from its first
//! record (system sample or span) to its last; the training loop from the start of the first
//! step span to the end of the last; initialization is the time before the loop, finalization
//! the time after it. Given times, not spans: each caller passes its own step spans' times (the
//! report's step digest, the dashboard's span store), so this needs no reader.

use crate::time::seconds;

/// A job's span of time and its training loop, µs since the epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobPhases {
    /// The job's first record.
    pub start_us: u64,
    /// The job's last record.
    pub end_us: u64,
    /// The training loop: the first step span's start and the latest step span's end; `None`
    /// without a step span.
    pub loop_us: Option<(u64, u64)>,
}

impl JobPhases {
    /// The phases of a job running over `job` (first and last record) whose step spans run
    /// over `steps` (`(start, end)` each, in any order).
    pub fn new(job: (u64, u64), steps: impl IntoIterator<Item = (u64, u64)>) -> JobPhases {
        let loop_us = steps
            .into_iter()
            .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
        JobPhases {
            start_us: job.0,
            end_us: job.1,
            loop_us,
        }
    }

    /// The job's length, seconds.
    pub fn job_s(&self) -> f64 {
        seconds(self.end_us.saturating_sub(self.start_us))
    }

    /// The time before the loop, seconds.
    pub fn initialization_s(&self) -> Option<f64> {
        self.loop_us
            .map(|(first, _)| seconds(first.saturating_sub(self.start_us)))
    }

    /// The loop's length, seconds.
    pub fn training_loop_s(&self) -> Option<f64> {
        self.loop_us
            .map(|(first, last)| seconds(last.saturating_sub(first)))
    }

    /// The time after the loop, seconds.
    pub fn finalization_s(&self) -> Option<f64> {
        self.loop_us
            .map(|(_, last)| seconds(self.end_us.saturating_sub(last)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_runs_from_the_first_step_start_to_the_latest_step_end() {
        // A long step started second ends last.
        let p = JobPhases::new(
            (1_000_000, 20_000_000),
            [
                (5_000_000, 6_000_000),
                (3_000_000, 4_000_000),
                (4_000_000, 15_000_000),
            ],
        );
        assert_eq!(p.loop_us, Some((3_000_000, 15_000_000)));
        assert_eq!(p.initialization_s(), Some(2.0));
        assert_eq!(p.training_loop_s(), Some(12.0));
        assert_eq!(p.finalization_s(), Some(5.0));
        assert_eq!(p.job_s(), 19.0);
        let none = JobPhases::new((1, 2), []);
        assert_eq!((none.loop_us, none.initialization_s()), (None, None));
    }
}
