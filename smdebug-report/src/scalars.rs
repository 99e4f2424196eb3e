//! The report's scalar curves, from the one reader of a run's tensors: smdebug-read's
//! [`TensorFollower`]. The offline report and the rule runner's report read the run's scalars
//! through a follower of their own into [`ScalarColumns`]
//! ([`ReportInput::scalars_from_columns`]); `smdebug report RUN`'s follower reads them while the
//! rules run, through the source of the run's files the rules' trial reads through
//! ([`offline_runner`](crate::offline_runner), `ScalarsAhead`), so that each file is read
//! once; the dashboard's "Download report", and the report
//! of a process that serves the dashboard too (a `Session`'s, through a [`ScalarsSource`]
//! handed to [`ReportWriter::scalars_from`](crate::ReportWriter::scalars_from)), read nothing
//! again and take what the dashboard's follower keeps, each series' ends and every bucket's
//! lowest and highest value ([`ReportInput::scalars_followed`]): the same points for a series
//! of up to 1,024 values, and for a longer one the extremes of 1,024 aligned stretches of steps
//! instead of 2,000 equal ones, each point a value of the run at its step.
//!
//! A column longer than [`SCALAR_POINTS`] is thinned to the lowest and highest value of each of
//! `SCALAR_POINTS / 2` equal step slices, first and last points kept: the chart (400 slices,
//! each drawn as its mean with a band from its lowest to its highest value) keeps its bands
//! and its ends exactly, and the mean line becomes the mean of the slices' extremes. The
//! report of a 100,000-step run of 50 scalars holds 400,000 points instead of 5 million.

use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use smdebug_analysis::downsample::{MinMax, min_max};
use smdebug_read::trial::{ScalarColumns, TensorFollower, TensorProblem, TensorSubscription};
use smdebug_storage::Storage;

use crate::input::{LoadOptions, NoteArea, ReportInput, ScalarSeries};

/// The most points the report keeps of one scalar in one mode.
pub const SCALAR_POINTS: usize = 4_000;

/// The bytes of one number and its `f64`: a budget below it reads no scalar.
const ONE_NUMBER_BYTES: u64 = 16;

/// Problems with the scalars named in notes; the others are counted.
const NOTED_PROBLEMS: usize = 8;

/// A run's scalars as a reader that already follows them holds them (the dashboard's
/// summaries), for [`ReportInput::scalars_followed`].
#[derive(Clone, Debug, PartialEq)]
pub enum FollowedScalars {
    /// The run holds no tensors (no collections or index files).
    NoTensors,
    /// Each scalar's points per mode, each one of the run's values at its step, in step order;
    /// the scalars in name order.
    Series(Vec<ScalarSeries>),
}

/// Where a [`ReportWriter`](crate::ReportWriter) takes the run's scalars from instead of
/// reading them from the run again: a reader in the same process that follows them already
/// (smdebug-serve's `ServedScalars`, the dashboard a `Session` serves).
pub trait ScalarsSource: Send + Sync + std::fmt::Debug {
    /// The run's scalars now; with `to_the_end` (the rule runner read the run to its end
    /// marker), once the source has read them to that end too. `None` when it cannot give them
    /// (it stopped, or did not reach the end in the time it allows): the writer then reads the
    /// scalars from the run itself.
    fn scalars(&self, to_the_end: bool) -> Option<FollowedScalars>;
}

impl ReportInput {
    /// Adds the scalar tensors of the run in `storage`, read to its end through a
    /// [`TensorFollower`] (every index file once, and of each event file only its one-number
    /// records; nothing larger is decoded).
    pub fn scalars_of_run(
        &mut self,
        location: &str,
        storage: &Arc<dyn Storage>,
        options: &LoadOptions,
    ) {
        self.scalars_read(location, storage, options, None);
    }

    /// [`scalars_of_run`](Self::scalars_of_run), taking what `ahead` read when that is the
    /// whole of the run's scalars (see [`ScalarsAhead`]); else they are read now.
    pub(crate) fn scalars_read(
        &mut self,
        location: &str,
        storage: &Arc<dyn Storage>,
        options: &LoadOptions,
        ahead: Option<ReadScalars>,
    ) {
        if options.max_tensor_bytes < ONE_NUMBER_BYTES {
            self.note(
                NoteArea::Tensors,
                format!(
                    "The tensor budget of {} bytes is less than one number and its 64-bit \
                     value ({ONE_NUMBER_BYTES} bytes): no scalar of {location} was read.",
                    options.max_tensor_bytes
                ),
            );
            return;
        }
        let read = ahead.unwrap_or_else(|| ReadScalars::read(storage));
        if !read.found {
            self.no_tensors();
            return;
        }
        for problem in read.problems.iter().take(NOTED_PROBLEMS) {
            self.note(
                NoteArea::Tensors,
                format!("Cannot read a scalar: {problem}."),
            );
        }
        let more = read.problems.len().saturating_sub(NOTED_PROBLEMS) + read.problems_left_out;
        if more > 0 {
            self.note(
                NoteArea::Tensors,
                format!("... and {more} more problems reading scalars."),
            );
        }
        self.scalars_from_columns(&read.columns, options);
    }

    /// Notes that the run holds no tensors (no collections or index files): for a caller that
    /// followed the run's tensors itself and found none.
    pub fn no_tensors(&mut self) {
        self.note(
            NoteArea::Tensors,
            "No tensors were saved in this run (no collections or index files), so there are \
             no loss or metric curves. Save losses with the hook's `losses` collection to see them.",
        );
    }

    /// Adds the scalars of `columns` (a follower's), the first
    /// [`max_scalars`](LoadOptions::max_scalars) by name, each thinned to at most
    /// [`SCALAR_POINTS`] points per mode (see the module docs).
    pub fn scalars_from_columns(&mut self, columns: &ScalarColumns, options: &LoadOptions) {
        let mut total = 0;
        for (name, track) in columns.iter() {
            total += 1;
            if total > options.max_scalars {
                continue;
            }
            let modes: Vec<_> = track
                .iter()
                .filter(|(_, column)| !column.is_empty())
                .map(|(&mode, column)| (mode, thin(&column.window(None, None), SCALAR_POINTS)))
                .collect();
            if !modes.is_empty() {
                self.scalars.push(ScalarSeries {
                    name: name.clone(),
                    modes,
                });
            }
        }
        self.note_scalars_left_out(total, options);
    }

    /// Adds the scalars another reader already holds downsampled (the dashboard's summaries:
    /// each point one of the run's values at its step), or notes that the run holds none. In
    /// name order, the first [`max_scalars`](LoadOptions::max_scalars) are drawn, each mode's
    /// points (ordered by step) thinned as a column would be if there are more than
    /// [`SCALAR_POINTS`].
    pub fn scalars_followed(&mut self, scalars: FollowedScalars, options: &LoadOptions) {
        let series = match scalars {
            FollowedScalars::NoTensors => return self.no_tensors(),
            FollowedScalars::Series(series) => series,
        };
        let mut total = 0;
        for mut one in series {
            total += 1;
            if total > options.max_scalars {
                continue;
            }
            one.modes.retain(|(_, points)| !points.is_empty());
            for (_, points) in &mut one.modes {
                if points.len() > SCALAR_POINTS {
                    *points = thin(points, SCALAR_POINTS);
                }
            }
            if !one.modes.is_empty() {
                self.scalars.push(one);
            }
        }
        self.note_scalars_left_out(total, options);
    }

    fn note_scalars_left_out(&mut self, total: usize, options: &LoadOptions) {
        if total > options.max_scalars {
            self.note(
                NoteArea::Tensors,
                format!(
                    "{total} scalar tensors; the first {} by name are drawn.",
                    options.max_scalars
                ),
            );
        }
    }
}

/// A run's scalars read to the run's end as the report reads them: by a [`TensorFollower`] of
/// its own into [`ScalarColumns`].
pub(crate) struct ReadScalars {
    columns: ScalarColumns,
    problems: Vec<TensorProblem>,
    problems_left_out: usize,
    /// Whether the run holds tensors (collections or index files).
    found: bool,
    /// Whether the run's end marker was there before the follower listed the run: then its
    /// writers were done, and this read holds every scalar the run will ever have.
    ended: bool,
}

impl ReadScalars {
    /// Reads the scalars of the run in `storage` to its end.
    fn read(storage: &Arc<dyn Storage>) -> ReadScalars {
        ReadScalars::follow(TensorFollower::new(Arc::clone(storage)))
    }

    /// Reads the scalars of the run to its end through `shared`, beside the other readers of
    /// its source (see [`TensorFollower::read_to_end_paced`]).
    fn read_shared(shared: TensorSubscription) -> ReadScalars {
        let storage = Arc::clone(shared.source().storage());
        let read = ReadScalars::follow(TensorFollower::new(storage).share(shared.clone()));
        // Nothing more is read through it: nothing is held for it from now on.
        shared.release_all();
        read
    }

    fn follow(mut follower: TensorFollower) -> ReadScalars {
        let ended = matches!(follower.end_marker(), Ok(Some(_)));
        let mut columns = ScalarColumns::default();
        let read = follower.read_to_end_paced(&mut |batch, more| columns.add(batch, more));
        ReadScalars {
            columns,
            problems: read.problems,
            problems_left_out: read.problems_left_out,
            found: follower.found(),
            ended,
        }
    }
}

/// The run's scalars read on a thread of their own from the moment this is made, while the
/// rules evaluate the run, for a report written once at the end of a finished run (`smdebug
/// report RUN`: [`offline_runner`](crate::offline_runner)): the report then takes them
/// instead of reading the run's scalars after the rules. They are read through a subscription
/// to the [`TensorSource`](smdebug_read::trial::TensorSource) the rules' trial reads through
/// too, going no further ahead of the rules than the source holds for them
/// ([`TensorFollower::read_to_end_paced`]): each index, event and collections file of the run
/// is read once for both. The report takes them only when they are the run's whole: the
/// run's end marker was there before they were listed, and the rule runner found the run
/// complete. Otherwise (a run still being written, a thread that could not start or failed)
/// the scalars are read at the end as before.
pub(crate) struct ScalarsAhead {
    read: Mutex<Option<JoinHandle<ReadScalars>>>,
    /// The reading thread's subscription, told to stop waiting for the rules once the report
    /// is drawn (they are done).
    shared: TensorSubscription,
}

impl ScalarsAhead {
    /// Starts reading the run's scalars through `shared`.
    pub(crate) fn start(shared: TensorSubscription) -> ScalarsAhead {
        let reading = shared.clone();
        let handle = std::thread::Builder::new()
            .name("report-scalars".to_string())
            .spawn(move || ReadScalars::read_shared(reading))
            .ok();
        if handle.is_none() {
            // No thread: the scalars are read at the end, and nothing is held for this one.
            shared.release_all();
        }
        ScalarsAhead {
            read: Mutex::new(handle),
            shared,
        }
    }

    /// What was read, once the read is done, when it is the whole of a run the rule runner
    /// found `complete`; taken once. The rules are done: the read no longer waits for them.
    pub(crate) fn take(&self, complete: bool) -> Option<ReadScalars> {
        let handle = self
            .read
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        self.shared.stop_waiting();
        let read = handle.join().ok()?;
        (complete && read.ended).then_some(read)
    }
}

impl std::fmt::Debug for ScalarsAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScalarsAhead")
    }
}

/// At most `max` of `points` (in step order): all of them when they fit, else the first and
/// the last point with the lowest and the highest value of each of `max / 2 - 1` equal step
/// slices (smdebug-profiler's one min-max downsampler).
fn thin(points: &[(u64, f64)], max: usize) -> Vec<(u64, f64)> {
    min_max(points, &MinMax::new(max).keep_ends(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_columns_are_kept_whole() {
        let points: Vec<(u64, f64)> = (0..100).map(|s| (s, s as f64)).collect();
        assert_eq!(thin(&points, 4_000), points);
    }

    #[test]
    fn long_columns_keep_their_ends_and_every_slices_extremes() {
        // 100,000 steps of a noisy decay with one spike and one dip.
        let mut points: Vec<(u64, f64)> = (0..100_000u64)
            .map(|s| (s, 1.0 / (1.0 + s as f64) + ((s * 7919) % 13) as f64 * 1e-4))
            .collect();
        points[31_337].1 = 50.0;
        points[77_001].1 = -3.0;
        points[50_000].1 = f64::NAN;
        let kept = thin(&points, 4_000);
        assert!(kept.len() <= 4_000, "{}", kept.len());
        assert_eq!(kept[0], points[0]);
        assert_eq!(kept.last(), points.last());
        assert!(kept.windows(2).all(|w| w[0].0 < w[1].0), "step order");
        assert!(kept.contains(&(31_337, 50.0)));
        assert!(kept.contains(&(77_001, -3.0)));
        // Each kept point is one of the column's own.
        assert!(kept.iter().all(|p| points[p.0 as usize].1 == p.1));
        // Every slice of 50 steps keeps its lowest and highest value.
        let slices = 4_000 / 2 - 1;
        for slice in [3usize, 700, 1_998] {
            let in_slice: Vec<&(u64, f64)> = points[1..points.len() - 1]
                .iter()
                .filter(|p| {
                    ((p.0 as f64 / 99_999.0 * slices as f64) as usize).min(slices - 1) == slice
                })
                .collect();
            assert!(!in_slice.is_empty(), "slice {slice}");
            let min = in_slice.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
            let max = in_slice
                .iter()
                .map(|p| p.1)
                .fold(f64::NEG_INFINITY, f64::max);
            assert!(kept.iter().any(|p| p.1 == min), "slice {slice} min");
            assert!(kept.iter().any(|p| p.1 == max), "slice {slice} max");
        }
    }
}
