//! A worker's progress file (`progress/<worker>.json`): the steps a job plans and ended, and
//! what its writers wrote and dropped; the limit a reader holds it to. smdebug-io writes and
//! reads it.

use serde::{Deserialize, Serialize};

/// The largest progress file read: a bigger one is refused with an error naming its size.
pub const MAX_PROGRESS_BYTES: u64 = 64 * 1024;

/// What one worker's progress file says (`progress/<worker>.json`, JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The worker (`worker_0`), as in the run's other file names.
    pub worker: String,
    /// The global steps the job plans to run, when the job said so.
    #[serde(default)]
    pub planned_steps: Option<u64>,
    /// The last global step the loop ended; `None` before the first.
    #[serde(default)]
    pub last_step: Option<u64>,
    /// Global steps the loop ended.
    #[serde(default)]
    pub steps: u64,
    /// Steps during which the tensor writer dropped at least one record.
    #[serde(default)]
    pub steps_with_drops: u64,
    /// Tensor records written to event files.
    #[serde(default)]
    pub records_written: u64,
    /// Tensor records dropped because the writer's queue was full (or it had stopped).
    #[serde(default)]
    pub records_dropped: u64,
    /// Framework spans written into trace files.
    #[serde(default)]
    pub spans_written: u64,
    /// Framework spans dropped because the span writer's queue was full (or it had stopped).
    #[serde(default)]
    pub spans_dropped: u64,
    /// When this was written, seconds since the Unix epoch.
    #[serde(default)]
    pub wall_time: f64,
    /// Written by the session's finish: the loop has ended and the counts are final.
    #[serde(default)]
    pub finished: bool,
}

impl Progress {
    /// The progress in a progress file; why not when the bytes are not one (not JSON, a field
    /// of the wrong type, a wall time that is not a time).
    pub fn decode(bytes: &[u8]) -> Result<Progress, String> {
        let progress: Progress = serde_json::from_slice(bytes)
            .map_err(|e| format!("not a progress file ({} bytes): {e}", bytes.len()))?;
        if !progress.wall_time.is_finite() {
            return Err(format!(
                "its wall_time is {}, not a time",
                progress.wall_time
            ));
        }
        Ok(progress)
    }

    /// The file's bytes: the progress as JSON.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("progress serializes")
    }

    /// Nothing done yet, for `worker`.
    pub fn new(worker: impl Into<String>) -> Self {
        Progress {
            worker: worker.into(),
            planned_steps: None,
            last_step: None,
            steps: 0,
            steps_with_drops: 0,
            records_written: 0,
            records_dropped: 0,
            spans_written: 0,
            spans_dropped: 0,
            wall_time: 0.0,
            finished: false,
        }
    }
}

/// The counts of several workers' progress files added up. Each sum stops at `u64::MAX`
/// instead of wrapping: the files are anyone's to write, and two of `u64::MAX` dropped
/// records must not add up to a run that dropped nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgressTotals {
    /// Steps ended, over the workers.
    pub steps: u64,
    /// Steps during which a writer dropped records.
    pub steps_with_drops: u64,
    /// Tensor records written.
    pub records_written: u64,
    /// Tensor records dropped.
    pub records_dropped: u64,
    /// Framework spans written.
    pub spans_written: u64,
    /// Framework spans dropped.
    pub spans_dropped: u64,
}

impl ProgressTotals {
    /// The sums over `files`, each saturating at `u64::MAX`.
    pub fn of<'a>(files: impl IntoIterator<Item = &'a Progress>) -> Self {
        files
            .into_iter()
            .fold(ProgressTotals::default(), |t, p| ProgressTotals {
                steps: t.steps.saturating_add(p.steps),
                steps_with_drops: t.steps_with_drops.saturating_add(p.steps_with_drops),
                records_written: t.records_written.saturating_add(p.records_written),
                records_dropped: t.records_dropped.saturating_add(p.records_dropped),
                spans_written: t.spans_written.saturating_add(p.spans_written),
                spans_dropped: t.spans_dropped.saturating_add(p.spans_dropped),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_saturate_instead_of_wrapping() {
        let mut a = Progress::new("worker_0");
        a.records_dropped = u64::MAX;
        a.records_written = 5;
        a.spans_dropped = u64::MAX - 1;
        a.steps = 3;
        let mut b = a.clone();
        b.worker = "worker_1".into();
        b.records_dropped = 2;
        b.spans_dropped = u64::MAX;
        let totals = ProgressTotals::of([&a, &b]);
        assert_eq!(totals.records_dropped, u64::MAX, "wrapping would give 1");
        assert_eq!(totals.spans_dropped, u64::MAX);
        assert_eq!(totals.records_written, 10);
        assert_eq!(totals.steps, 6);
        assert_eq!(ProgressTotals::of([]), ProgressTotals::default());
    }
}
