//! Profiler feeding: the run's system metrics, framework spans and code-profile windows read
//! through the [`ProfilerFeed`] (smdebug-profiler's follower), cut into windows and handed to
//! the profiler rules; what was read is kept for the reporter when there is one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use smdebug_analysis::digest::ProfileDigest;
use smdebug_read::follow::{DataProblems, ProfilerSubscription, merge_code_windows};
use smdebug_read::profile::CodeProfileWindow;

use super::evaluation::Evaluation;
use crate::profiler::ProfilerWindow;
use crate::profiler::feed::ProfilerFeed;
use crate::status::ProfilerSeen;

/// How often a following runner hands profiler rules an empty window when no data arrived, so
/// that rules about elapsed time (MaxInitializationTime) see the clock move.
const IDLE_WINDOW_INTERVAL: Duration = Duration::from_secs(1);

/// How often a runner following a live run looks for new profiler data. The files change
/// seldom: the system sampler republishes its file every 5 s by default (SageMaker's monitor
/// appends every 500 ms), a span file is published when it closes (every minute by default),
/// and a code profile when its window ends. A runner woken at each saved step (8 times a
/// second at a 5 ms step saved every 25th) listed three folders each time and found nothing
/// new nearly always. A backlog still being read and the final look are not held back.
const PROFILER_LOOK_INTERVAL: Duration = Duration::from_secs(1);

/// The data problems of a runner without profiler rules.
static NO_PROBLEMS: DataProblems = DataProblems::new();

/// The runner's profiler side.
pub(super) struct ProfilerSide {
    /// The profiler data reader, when some rule is a profiler rule (or a reporter draws the
    /// profiler data).
    feed: Option<ProfilerFeed>,
    last_window_at: Option<Instant>,
    /// When the profiler data was last looked at (following a live run).
    last_look_at: Option<Instant>,
    /// Keep what was read for the reporter.
    keep: bool,
    /// The profiler data read so far, aggregated for the reporter (empty without one): a size
    /// that does not grow with the run; shared with a report being drawn (a new chunk then
    /// copies it once, rather than every report copying).
    pub profile: Arc<ProfileDigest>,
    /// The code-profile windows read so far, kept for the reporter (empty without one).
    pub code_profiles: Vec<CodeProfileWindow>,
}

impl ProfilerSide {
    /// A side that reads the run's profiler data through `subscription` when there is one,
    /// and keeps it when `keep` (a reporter is attached).
    pub fn new(subscription: Option<ProfilerSubscription>, keep: bool) -> ProfilerSide {
        ProfilerSide {
            feed: subscription.map(ProfilerFeed::new),
            last_window_at: None,
            last_look_at: None,
            keep,
            profile: Arc::default(),
            code_profiles: Vec::new(),
        }
    }

    /// Which kinds of profiler data were ever seen.
    pub fn seen(&self) -> ProfilerSeen {
        self.feed.as_ref().map(|f| f.seen).unwrap_or_default()
    }

    /// Problems with the profiler data that the rules worked around.
    pub fn problems(&self) -> &DataProblems {
        self.feed
            .as_ref()
            .map_or(&NO_PROBLEMS, ProfilerFeed::problems)
    }

    /// Reads new profiler data and hands it to the profiler rules of `rules` (the other rules
    /// there are left alone, so `rules` may hold the profiler rules alone:
    /// [`Evaluation::take_profiler_rules`]). `final_window`: no more data will come. `wall_us`:
    /// following a live run, the clock. Stops between two pieces of a backlog when `rules` is
    /// interrupted.
    pub fn feed(
        &mut self,
        rules: &mut Evaluation,
        final_window: bool,
        wall_us: Option<u64>,
    ) -> Fed {
        let mut fed = Fed::default();
        let Some(feed) = self.feed.as_mut() else {
            return fed;
        };
        // A backlog (a whole run offline) is read a bounded piece at a time, each piece's
        // windows handed to the rules before the next is read.
        loop {
            let look = final_window
                || wall_us.is_none()
                || feed.more
                || self
                    .last_look_at
                    .is_none_or(|t| t.elapsed() >= PROFILER_LOOK_INTERVAL);
            let polled = if look {
                self.last_look_at = Some(Instant::now());
                feed.poll()
            } else {
                Ok(0)
            };
            let arrived = match polled {
                Ok(n) => n,
                Err(e) => {
                    rules.profiler_failed(&e);
                    fed.changed = true;
                    return fed;
                }
            };
            let due = self
                .last_window_at
                .is_none_or(|t| t.elapsed() >= IDLE_WINDOW_INTERVAL);
            fed.arrived |= arrived > 0;
            if arrived == 0 && !final_window && !due && !feed.more {
                return fed;
            }
            self.last_window_at = Some(Instant::now());
            let code_windows = feed.take_code_windows();
            if self.keep {
                merge_code_windows(&mut self.code_profiles, code_windows);
            }
            for chunk in feed.take_chunks(final_window, wall_us) {
                if self.keep {
                    let profile = Arc::make_mut(&mut self.profile);
                    profile.add_samples(&chunk.samples);
                    profile.add_spans(&chunk.spans);
                }
                let window = ProfilerWindow {
                    samples: &chunk.samples,
                    spans: &chunk.spans,
                    start_us: feed.start_us,
                    now_us: chunk.now_us,
                    final_window: chunk.final_window,
                    steps: &feed.steps,
                };
                fed.changed |= rules.invoke_window(&window, &feed.steps);
            }
            if !feed.more || rules.interrupted() {
                break;
            }
        }
        fed.changed |= rules.set_profiler_warnings(&feed.problems().lines());
        fed
    }
}

/// What one [`ProfilerSide::feed`] did.
#[derive(Clone, Copy, Default)]
pub(super) struct Fed {
    /// A rule's status changed.
    pub changed: bool,
    /// New profiler data arrived.
    pub arrived: bool,
}
