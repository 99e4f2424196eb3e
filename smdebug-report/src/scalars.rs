//! The report's scalar curves, from the one reader of a run's tensors, smdebug-read's
//! [`TensorFollower`], summarized as they are read into smdebug-analysis's fixed-size
//! [`ScalarSummaries`] (per scalar and mode at most 1,024 buckets, each with its first, last,
//! lowest and highest value): the curves cost the same memory at 1,000 steps as at 400,000,
//! and each point drawn is one of the run's values at its step (every value of a series of up
//! to 1,024; for a longer one the ends and each aligned bucket's extremes). Where they come from:
//!
//! - `smdebug report RUN` ([`offline_runner`](crate::offline_runner)): a follower reads them
//!   while the rules run, through the source of the run's files the rules' trial reads through
//!   (`ScalarsAhead`), so that each file is read once;
//! - a rule runner following a live run (a `Session`'s without the dashboard): a follower
//!   subscribed to the rules' source, kept up on the runner's own thread after its looks
//!   (`LiveScalars`, [`ReportWriter::follow_scalars`](crate::ReportWriter::follow_scalars));
//! - a process that serves the dashboard too: the dashboard's own summaries, handed over as a
//!   [`ScalarsSource`] ([`ReportWriter::scalars_from`](crate::ReportWriter::scalars_from));
//! - otherwise a follower of the report's own reads them to the run's end
//!   ([`ReportInput::scalars_of_run`]).
//!
//! A series handed in with more than [`SCALAR_POINTS`] points (a [`FollowedScalars`] built by
//! a caller) is thinned to the lowest and highest value of each of `SCALAR_POINTS / 2` equal
//! step slices, first and last points kept.

use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use std::time::{Duration, Instant};

use smdebug_analysis::downsample::{MinMax, min_max};
use smdebug_analysis::scalars::ScalarSummaries;
use smdebug_read::trial::{TensorFollower, TensorSubscription};
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

impl FollowedScalars {
    /// The scalars as the report draws them from `summaries` (`found`: the run holds tensors):
    /// per scalar and mode, the first and last value and each bucket's lowest and highest, in
    /// step order, each step once (at most 2 × [`BUCKETS`](smdebug_analysis::scalars::BUCKETS)
    /// + 2 points, whatever the run's length).
    pub fn of_summaries(found: bool, summaries: &ScalarSummaries) -> FollowedScalars {
        if found {
            FollowedScalars::Series(series_of(summaries))
        } else {
            FollowedScalars::NoTensors
        }
    }
}

/// Per scalar and mode, the first and last value of `summaries` and each bucket's lowest and
/// highest, in step order, each step once.
fn series_of(summaries: &ScalarSummaries) -> Vec<ScalarSeries> {
    summaries
        .iter()
        .map(|(name, track)| ScalarSeries {
            name: name.clone(),
            modes: track
                .iter()
                .map(|(&mode, series)| {
                    let mut points: Vec<(u64, f64)> = series
                        .first()
                        .into_iter()
                        .chain(series.buckets().iter().flat_map(|(_, b)| [b.min, b.max]))
                        .chain(series.last())
                        .map(|p| (p.step, p.value))
                        .collect();
                    points.sort_by_key(|p| p.0);
                    points.dedup_by_key(|p| p.0);
                    (mode, points)
                })
                .collect(),
        })
        .collect()
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

    /// [`scalars_of_run`](Self::scalars_of_run), taking what was read beside the rules
    /// (`ahead`: see [`ScalarsAhead`] and [`LiveScalars`]) when there is that; else they are
    /// read now.
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
        self.scalars_followed(FollowedScalars::Series(read.series), options);
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
/// its own into [`ScalarSummaries`], and drawn from them.
pub(crate) struct ReadScalars {
    /// The scalars as drawn ([`FollowedScalars::of_summaries`]).
    series: Vec<ScalarSeries>,
    /// The problems met, as the notes name them.
    problems: Vec<String>,
    problems_left_out: usize,
    /// Whether the run holds tensors (collections or index files).
    found: bool,
}

impl ReadScalars {
    /// Reads the scalars of the run in `storage` to its end.
    fn read(storage: &Arc<dyn Storage>) -> ReadScalars {
        ReadScalars::follow(TensorFollower::new(Arc::clone(storage)))
    }

    /// Reads the scalars of the run to its end through `shared`, beside the other readers of
    /// its source (see [`TensorFollower::read_to_end_paced`]), and whether the run's end marker
    /// was there before the follower listed the run: then its writers were done, and this read
    /// holds every scalar the run will ever have.
    fn read_shared(shared: TensorSubscription) -> (ReadScalars, bool) {
        let storage = Arc::clone(shared.source().storage());
        let mut follower = TensorFollower::new(storage).share(shared.clone());
        let ended = matches!(follower.end_marker(), Ok(Some(_)));
        let read = ReadScalars::follow(follower);
        // Nothing more is read through it: nothing is held for it from now on.
        shared.release_all();
        (read, ended)
    }

    fn follow(mut follower: TensorFollower) -> ReadScalars {
        let mut summaries = ScalarSummaries::default();
        let read = follower.read_to_end_paced(&mut |batch, _| summaries.add(batch));
        ReadScalars {
            series: series_of(&summaries),
            problems: read.problems.iter().map(ToString::to_string).collect(),
            problems_left_out: read.problems_left_out,
            found: follower.found(),
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
    /// The reading thread: what it read, and whether the run had ended before it listed it.
    read: Mutex<Option<JoinHandle<(ReadScalars, bool)>>>,
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
        let (read, ended) = handle.join().ok()?;
        (complete && ended).then_some(read)
    }
}

impl std::fmt::Debug for ScalarsAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScalarsAhead")
    }
}

/// Scalars read beside the rule runner, for the report it writes: taken by
/// [`ReportInput::scalars_read`] instead of reading the run's scalars again.
pub(crate) trait ScalarsBeside: Send + Sync + std::fmt::Debug {
    /// What was read, for a report of a run the runner found `complete` or not; `None`: the
    /// report reads the scalars itself.
    fn take(&self, complete: bool) -> Option<ReadScalars>;

    /// Called on the runner's thread after each of its looks at a live run.
    fn keep_up(&self) {}
}

impl ScalarsBeside for ScalarsAhead {
    fn take(&self, complete: bool) -> Option<ReadScalars> {
        ScalarsAhead::take(self, complete)
    }
}

/// How often [`LiveScalars`] reads on while the runner follows a live run. The report is drawn
/// at the end (or every few minutes), so a second behind costs nothing; and the runner's thread
/// lists the run's index files once a second more, not once more each look.
const KEEP_UP_EVERY: Duration = Duration::from_secs(1);

/// The most time one look of [`LiveScalars`] spends reading (a backlog is read over the next
/// looks), so that the runner's next look is not held up.
const KEEP_UP_BUDGET: Duration = Duration::from_millis(100);

/// A live run's scalars for the report of the rule runner that follows it (a `Session`'s
/// without the dashboard): read by a [`TensorFollower`] subscribed to the
/// [`TensorSource`](smdebug_read::trial::TensorSource) the runner's trial reads through, on the
/// runner's own thread after its looks (at most once a second), into fixed-size
/// [`ScalarSummaries`]. So each index and event file of the run is read once for the rules and
/// the report, no thread is added, and the report reads nothing of the run again when it is
/// drawn: it reads on to what is there then (past the end marker when the run ended).
pub(crate) struct LiveScalars {
    inner: Mutex<LiveInner>,
}

struct LiveInner {
    follower: TensorFollower,
    summaries: ScalarSummaries,
    /// The first problems, as the report names them (the others are counted).
    problems: Vec<String>,
    problems_left_out: usize,
    last_look: Option<Instant>,
}

impl LiveInner {
    /// Reads what is new, for about `budget`.
    fn read(&mut self, budget: Duration) {
        let LiveInner {
            follower,
            summaries,
            ..
        } = self;
        let inc = follower.poll(budget, &mut |batch, _| summaries.add(batch));
        self.problems_left_out += inc.problems_left_out;
        for problem in inc.problems {
            if self.problems.len() < NOTED_PROBLEMS {
                self.problems.push(problem.to_string());
            } else {
                self.problems_left_out += 1;
            }
        }
        self.last_look = Some(Instant::now());
    }
}

impl LiveScalars {
    /// Reads the run's scalars through `shared` from now on.
    pub(crate) fn new(shared: TensorSubscription) -> LiveScalars {
        let storage = Arc::clone(shared.source().storage());
        LiveScalars {
            inner: Mutex::new(LiveInner {
                follower: TensorFollower::new(storage).share(shared),
                summaries: ScalarSummaries::default(),
                problems: Vec::new(),
                problems_left_out: 0,
                last_look: None,
            }),
        }
    }
}

impl ScalarsBeside for LiveScalars {
    /// Everything the run holds now: read on to its end (past its end marker once the runner
    /// found it `complete`).
    fn take(&self, _complete: bool) -> Option<ReadScalars> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        // The runner found the end marker (if it did) before this last read: its listing
        // holds every file.
        inner.read(Duration::MAX);
        Some(ReadScalars {
            series: series_of(&inner.summaries),
            problems: inner.problems.clone(),
            problems_left_out: inner.problems_left_out,
            found: inner.follower.found(),
        })
    }

    fn keep_up(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.last_look.is_none_or(|t| t.elapsed() >= KEEP_UP_EVERY) {
            inner.read(KEEP_UP_BUDGET);
        }
    }
}

impl std::fmt::Debug for LiveScalars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveScalars")
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
    use smdebug_core::Mode;

    use super::*;

    #[test]
    fn the_reports_scalars_are_the_summaries_ends_and_extremes_whatever_the_length() {
        let value =
            |s: u64| ((s * 7919) % 1000) as f64 / 10.0 + if s == 31_337 { 500.0 } else { 0.0 };
        let points: Vec<(u64, f64, f64)> =
            (0..100_000u64).map(|s| (s, value(s), s as f64)).collect();
        let mut summaries = ScalarSummaries::default();
        summaries.add(vec![("loss".to_owned(), Mode::Train, points)]);
        let series = series_of(&summaries);
        assert_eq!(series.len(), 1);
        let (mode, points) = &series[0].modes[0];
        assert_eq!(*mode, Mode::Train);
        assert!(
            points.len() <= 2 * smdebug_analysis::scalars::BUCKETS + 2,
            "{}",
            points.len()
        );
        assert_eq!(points.first(), Some(&(0, value(0))));
        assert_eq!(points.last(), Some(&(99_999, value(99_999))));
        assert!(points.contains(&(31_337, value(31_337))), "the spike");
        assert!(points.windows(2).all(|w| w[0].0 < w[1].0), "in step order");
        // Each point is the run's value at its step.
        assert!(points.iter().all(|&(s, v)| v == value(s)));
    }

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
