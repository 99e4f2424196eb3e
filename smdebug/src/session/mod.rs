//! The [`Session`]: everything that runs beside a training loop, owned by one value and shut
//! down in the right order (documented on the type, where users read it).

mod builder;
mod config_follower;
mod profiling;
mod progress;
mod start;
mod summary;

use std::sync::Arc;
use std::time::{Duration, Instant};

use smdebug_core::phase::Phase;
use smdebug_core::timeline::{TimedIter, Timeline};
use smdebug_core::{Capture, Hook, Mode, StopCause, StopSignal, WorkerInfo};
use smdebug_io::stop::StopWatcher;
use smdebug_io::writer::WriterStatus;
use smdebug_profiler::spans::SpanWriterGuard;
use smdebug_profiler::system::SamplerHandle;
use smdebug_storage::Storage;

#[cfg(feature = "report")]
pub use builder::ReportTarget;
pub use builder::SessionBuilder;
use profiling::SessionSink;
pub use summary::SessionSummary;

use crate::error::{Error, Result};

/// The parts a session started, each shut down by [`Session::finish`].
#[derive(Default)]
pub(crate) struct Parts {
    pub(crate) writer: Option<WriterStatus>,
    /// The run's identity file of this process, beating until the session ends.
    pub(crate) job: Option<smdebug_io::jobs::JobClaim>,
    pub(crate) progress: Option<progress::ProgressReporter>,
    pub(crate) stop_watcher: Option<StopWatcher>,
    pub(crate) config_follower: Option<config_follower::ConfigFollower>,
    pub(crate) span_writer: Option<SpanWriterGuard>,
    pub(crate) sink: Option<Arc<SessionSink>>,
    pub(crate) sampler: Option<SamplerHandle>,
    #[cfg(feature = "rules")]
    pub(crate) runner: Option<smdebug_rules::RunnerHandle>,
    #[cfg(feature = "rules")]
    pub(crate) report: Option<String>,
    #[cfg(feature = "serve")]
    pub(crate) dashboard: Option<smdebug_serve::Server>,
    pub(crate) dashboard_url: Option<String>,
    /// SageMaker's configuration files applied at start, and their keys not applied.
    pub(crate) config: summary::AppliedFiles,
}

/// What [`Session::step`] says about the step that just ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepStatus {
    /// The global step that ended.
    pub step: u64,
    /// Why the job was asked to stop, once someone asked (a rule, the dashboard, another job):
    /// the reason, and the rule and step when a rule asked.
    pub stop: Option<StopCause>,
}

impl StepStatus {
    /// Whether the loop should stop now.
    pub fn stop_requested(&self) -> bool {
        self.stop.is_some()
    }
}

/// Everything that runs beside a training loop: capture, system sampling, framework
/// profiling, rules and their actions, the report.
///
/// A session owns, for the run at one location (a path or an object-store URL, written and
/// read through the storage opened for it, or one given to [`SessionBuilder::storage`]):
///
/// - capture: the hook (the core [`Hook`] or a framework adapter's) and the background writer;
/// - framework profiling: the timeline (step spans from the step boundary, data loading from
///   [`Session::data`], forward/backward/optimizer from the scope helpers or the adapter, per
///   module while the detailed window is open) and the span writer;
/// - system sampling (in one process per host);
/// - a watcher of stop requests written into the run (the dashboard's Stop button, another
///   job's rules), which the loop sees at its next step;
/// - with feature `rules`: the rules, following the run in the training process on their own
///   thread, with their actions; with `report`, the profiling report when the run ends; with
///   `serve`, the live dashboard.
///
/// [`Session::finish`] (or dropping the session) shuts them down in this order: the profiling
/// windows close, the span writer publishes, the sampler stops, the hook closes the run and the
/// writer publishes the last step and the end marker, the rules evaluate what is left and write
/// the report, the dashboard and the stop watcher stop. It returns a [`SessionSummary`].
///
/// Every worker keeps `<run>/progress/<worker>.json` current (smdebug-io's
/// [`Progress`](smdebug_format::progress::Progress): the planned steps given to
/// [`SessionBuilder::planned_steps`], the last step, records and spans written and dropped),
/// rewritten at most once a second off the training thread and once more at the end; the
/// dashboard's ETA and writer-drops tiles read it.
///
/// ```no_run
/// use smdebug::prelude::*;
///
/// let mut session = Session::builder("runs/demo")
///     .save(SaveConfig::every(10))
///     .start()?;
/// for (step, batch) in session.data(0..100).enumerate() {
///     let loss = session.forward(|| 1.0 / (batch as f64 + 1.0));
///     session.hook().save_scalar("loss", loss, &["losses"]);
///     if session.step()?.stop_requested() {
///         break;
///     }
///     let _ = step;
/// }
/// println!("{}", session.finish()?);
/// # Ok::<(), smdebug::Error>(())
/// ```
///
/// **Settings and SageMaker's files.** A job configured by SageMaker (or by anyone who writes
/// its two files) changes without a rebuild. The order, each later one overriding what it
/// states:
///
/// 1. the defaults ([`SessionBuilder`] lists them);
/// 2. the builder's settings in code;
/// 3. the hook configuration file (`SMDEBUG_CONFIG_FILE_PATH`, else
///    `/opt/ml/input/config/debughookconfig.json`): `LocalPath` names the run, `HookParameters`
///    and `CollectionConfigurations` replace schedules, reductions and collections, key by key
///    (`smdebug_core::config` has the details);
/// 4. the profiler configuration file (`SMPROFILER_CONFIG_PATH`, else
///    `/opt/ml/input/config/profilerconfig.json`): `DisableProfiler` turns sampling and spans
///    off, a stated `DetailedProfilingConfig`, `DataloaderProfilingConfig` or
///    `PythonProfilingConfig` replaces that profiler's window, the rotation settings replace
///    the span writer's, `ProfilingIntervalInMilliseconds` the sampler's interval, and its
///    `LocalPath` names the run when the hook file did not (one run holds tensors and profiler
///    data, where SageMaker kept two folders);
/// 5. while the job runs, edits of the profiler file: every second the file is looked at, and
///    a window it changed applies from the next step (a window without `StartStep` opens
///    there), as Python smdebug re-reads the file at each step. A later edit that does not
///    parse, or a FIFO, a device or an oversized file in its place, is logged, listed in
///    [`SessionSummary::problems`], and the last good configuration kept.
///
/// A missing file means the settings before it; a file that does not parse is an error of
/// [`SessionBuilder::start`] naming the file and the key, and so is one that is not a regular
/// file (a FIFO, `/dev/zero`: refused without waiting on it) or is over 64 MiB.
///
/// A stop request in the run that cannot be read (not JSON, a field of the wrong type, over
/// 64 KiB, a FIFO) does not stop the job; it is logged and listed in
/// [`SessionSummary::problems`].
/// [`SessionBuilder::without_config_files`] ignores both files.
pub struct Session<H: Capture = Hook> {
    capture: Option<H>,
    location: smdebug_storage::Location,
    storage: Arc<dyn Storage>,
    stop: StopSignal,
    timeline: Timeline,
    worker: WorkerInfo,
    #[cfg_attr(not(feature = "rules"), allow(dead_code))]
    finish_timeout: Duration,
    storage_timeout: Duration,
    parts: Parts,
    started: Instant,
    capture_errors: Vec<String>,
    finished: bool,
}

impl<H: Capture> std::fmt::Debug for Session<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("location", &self.location)
            .field("worker", &self.worker)
            .field("timeline", &self.timeline)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl Session<Hook> {
    /// A session for the run at `location`: a directory, or an object-store URL (`s3://`,
    /// `gs://`, `az://`; features `s3`, `gcs`, `azure`), given as text (parsed once), a
    /// `Path` (always a folder on local disk, whatever its characters) or a parsed
    /// [`Location`](smdebug_storage::Location). Text that names no location (`s3:/bucket`) is
    /// the error of [`SessionBuilder::start`].
    pub fn builder(location: impl smdebug_storage::IntoLocation) -> SessionBuilder<Hook> {
        SessionBuilder::new(location)
    }
}

/// Where the report goes inside the run at `location`: its folder `dir`.
#[cfg(feature = "report")]
fn report_location_in(location: &smdebug_storage::Location, dir: &str) -> String {
    use smdebug_rules::report::REPORT_FILE;
    let dir = dir.trim_matches('/');
    match location {
        smdebug_storage::Location::Local(folder) => {
            folder.join(dir).join(REPORT_FILE).display().to_string()
        }
        smdebug_storage::Location::Store { url, .. } => {
            format!("{}/{dir}/{REPORT_FILE}", url.trim_end_matches('/'))
        }
    }
}

/// Where the report goes inside the run at `location` by default.
#[cfg(feature = "report")]
fn report_location(location: &smdebug_storage::Location) -> String {
    report_location_in(location, smdebug_rules::report::DEFAULT_REPORT_DIR)
}

impl<H: Capture> Session<H> {
    /// The capture hook: the core [`Hook`] (`save_tensor`, `save_scalar`, `set_mode`), or the
    /// framework adapter's (`save_parameters`, `save_gradients`, `wrap`, `probe`, ...).
    ///
    /// # Panics
    ///
    /// Never: the hook is there until [`finish`](Self::finish), which consumes the session.
    pub fn hook(&mut self) -> &mut H {
        self.capture
            .as_mut()
            .expect("the hook is taken only by finish(), which consumes the session")
    }

    /// The run's location (SageMaker's configuration file's, when one names it).
    pub fn location(&self) -> &smdebug_storage::Location {
        &self.location
    }

    /// The run's storage.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// This process's worker.
    pub fn worker(&self) -> WorkerInfo {
        self.worker
    }

    /// The loop's timeline (spans and profiling windows).
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// The stop signal the hook, the rules and the stop watcher share; a loop's own code may
    /// request a stop through it too.
    pub fn stop_signal(&self) -> StopSignal {
        self.stop.clone()
    }

    /// Why the job was asked to stop, once someone asked: the reason, and the rule and step
    /// when a rule asked.
    pub fn stop_requested(&self) -> Option<StopCause> {
        self.stop.cause()
    }

    /// Changes how many global steps the job plans (see
    /// [`SessionBuilder::planned_steps`]), for a loop that learns it after the start (the data
    /// set's size, an early-stopping schedule); the progress file says so from its next write.
    pub fn set_planned_steps(&self, steps: u64) {
        if let Some(progress) = &self.parts.progress {
            progress.shared().set_planned_steps(steps);
        }
    }

    /// The dashboard's URL, when the session serves one (feature `serve`).
    pub fn dashboard_url(&self) -> Option<&str> {
        self.parts.dashboard_url.as_deref()
    }

    /// Ends the step: the hook publishes it (and the adapter saves what its probes kept), the
    /// step's span closes and the profiling windows move on. Says whether someone asked the
    /// job to stop. An error saving a kept tensor is returned after the step advanced;
    /// training may go on.
    pub fn step(&mut self) -> Result<StepStatus> {
        let capture = self.hook();
        let result = capture.end_step();
        let steps = capture.core().global_step();
        let step = steps.saturating_sub(1);
        if let Some(progress) = &self.parts.progress {
            progress.shared().step_ended(step, steps);
        }
        result.map_err(|e| Error::Capture(Box::new(e)))?;
        Ok(StepStatus {
            step,
            stop: self.stop.cause(),
        })
    }

    /// Switches mode (TRAIN, EVAL, PREDICT); the step counters of each mode are kept.
    pub fn set_mode(&mut self, mode: Mode) -> Result<()> {
        self.hook()
            .switch_mode(mode)
            .map_err(|e| Error::Capture(Box::new(e)))
    }

    /// Wraps the loop's data: each `next()` is a data-loading span while data-loading
    /// profiling is on, and marks where the step begins. The iterator holds no borrow of the
    /// session.
    pub fn data<I: IntoIterator>(&self, data: I) -> TimedIter<I::IntoIter> {
        self.timeline.data(data)
    }

    /// Runs the forward pass `f` inside a forward span.
    pub fn forward<R>(&self, f: impl FnOnce() -> R) -> R {
        self.timeline.scope(Phase::Forward, f)
    }

    /// Runs the backward pass `f` inside a backward span.
    pub fn backward<R>(&self, f: impl FnOnce() -> R) -> R {
        self.timeline.scope(Phase::Backward, f)
    }

    /// Runs the optimizer step `f` inside an optimizer span.
    pub fn optimizer<R>(&self, f: impl FnOnce() -> R) -> R {
        self.timeline.scope(Phase::Optimizer, f)
    }

    /// Runs `f` inside a span of a phase of the caller's own (its own row in the trace).
    pub fn scope<R>(&self, phase: &'static str, f: impl FnOnce() -> R) -> R {
        self.timeline.scope(Phase::Custom(phase.into()), f)
    }

    /// Shuts everything down in order (see [`Session`]) and says what happened.
    ///
    /// Problems met on the way (a sampler that could not publish, a rule runner that failed)
    /// are in [`SessionSummary::problems`]. Every figure counts what storage acknowledged.
    ///
    /// # Errors
    ///
    /// [`Error::Lost`] when storage failed and something was not stored (tensor records and
    /// their steps, spans, system metrics, the end marker); it names what, and
    /// [`Error::summary`] gives the whole summary. Waits on storage are bounded by
    /// [`SessionBuilder::storage_timeout`]: when storage fails or stops answering, this
    /// returns within that plus two seconds.
    pub fn finish(mut self) -> Result<SessionSummary> {
        let summary = self.shut_down();
        if summary.lost.is_empty() {
            Ok(summary)
        } else {
            Err(Error::Lost(Box::new(summary)))
        }
    }

    fn shut_down(&mut self) -> SessionSummary {
        self.finished = true;
        let steps = self.capture.as_ref().map_or(0, |c| c.core().global_step());
        let config = std::mem::take(&mut self.parts.config);
        let mut end = Ending {
            summary: SessionSummary {
                location: self.location.to_string(),
                steps,
                config_files: config.files,
                config_warnings: config.warnings,
                ..SessionSummary::default()
            },
            problems: std::mem::take(&mut self.capture_errors),
            lost: Vec::new(),
            deadline: Instant::now() + self.storage_timeout,
            timeout: self.storage_timeout,
        };
        // 1. The profiling windows close (the code profile stops) and the spans are published,
        //    then the sampler: the rules must see all profiler data before the end marker.
        self.stop_profiling(&mut end, steps);
        // 2. The run ends: the last step and the end marker (with the stop reason), then the
        //    writer thread drains and stops when the hook is dropped, waiting no later than
        //    the deadline.
        self.end_run(&mut end);
        // The progress file's final counts, now that both writers have drained.
        if let Some(progress) = self.parts.progress.take() {
            let summary = &end.summary;
            let spans = (summary.spans_written > 0 || summary.spans_dropped > 0)
                .then_some((summary.spans_written, summary.spans_dropped));
            match within(end.deadline, move || {
                progress.finish(steps.checked_sub(1), steps, spans)
            }) {
                Some(None) => {}
                Some(Some(problem)) => end.problems.push(problem),
                None => end.late("progress file"),
            }
        }
        // What reads storage after the deadline (the rules stopped, the stop watcher) gets until
        // `tail`: a storage that failed leaves finish within the deadline plus GRACE.
        let tail = end.deadline.max(Instant::now() + GRACE);
        // 3. The rules see the end marker, evaluate the rest and write the report.
        #[cfg(feature = "rules")]
        self.finish_rules(&mut end, tail);
        // 4. The dashboard, the stop watcher and, last, the job's identity file.
        self.stop_the_rest(&mut end, tail);
        let mut summary = end.summary;
        summary.duration = self.started.elapsed();
        summary.problems = end.problems;
        summary.lost = end.lost;
        summary
    }

    /// The configuration follower stops, the timeline closes at `steps`, the code profiles and
    /// the spans are written, then the sampler stops.
    fn stop_profiling(&mut self, end: &mut Ending, steps: u64) {
        if let Some(follower) = self.parts.config_follower.take() {
            end.problems.extend(follower.stop());
        }
        self.timeline.close(steps);
        let recorder = self.parts.sink.as_ref().map(|s| s.recorder());
        if let Some(sink) = self.parts.sink.take() {
            match within(end.deadline, move || sink.finish_code_profiles()) {
                Some(Some(Ok(r))) => end.summary.code_profiles = r.written,
                Some(Some(Err(e))) => end.problems.push(format!("code profile: {e}")),
                Some(None) => {}
                None => end.late("code profile"),
            }
        }
        if let Some(spans) = self.parts.span_writer.take() {
            let summary = &mut end.summary;
            match within(end.deadline, move || spans.finish()) {
                Some(Ok(r)) => {
                    summary.spans_written = r.written;
                    summary.spans_dropped = r.dropped;
                    summary.spans_lost = r.lost;
                    summary.span_files = r.files;
                    if let Some(e) = r.last_write_error {
                        end.problems.push(format!("span writer: {e}"));
                    }
                }
                Some(Err(e)) => end.problems.push(format!("span writer: {e}")),
                None => {
                    if let Some(r) = &recorder {
                        summary.spans_written = r.written();
                        summary.spans_dropped = r.dropped();
                        summary.spans_lost = r
                            .recorded()
                            .saturating_sub(r.written())
                            .saturating_sub(r.dropped());
                    }
                    end.late("span writer");
                }
            }
            if end.summary.spans_lost > 0 {
                let lost = format!("{} framework spans", end.summary.spans_lost);
                end.lost.push(lost);
            }
        }
        if let Some(sampler) = self.parts.sampler.take() {
            match within(end.deadline, move || sampler.stop()) {
                Some(Ok(r)) => {
                    end.summary.system_samples = r.samples;
                    end.summary.system_records = r.records;
                    if let Some(e) = r.last_write_error {
                        end.problems.push(format!("system sampler: {e}"));
                    }
                    if r.records_lost > 0 {
                        end.lost
                            .push(format!("{} system-metric records", r.records_lost));
                    }
                }
                Some(Err(e)) => end.problems.push(format!("system sampler: {e}")),
                None => {
                    end.late("system sampler");
                    end.lost
                        .push("the system metrics the sampler still held".to_string());
                }
            }
        }
    }

    /// The run ends: the hook closes it (the last step and the end marker), the writer drains
    /// by the deadline, and its counts go into the summary with what it lost.
    fn end_run(&mut self, end: &mut Ending) {
        if let Some(mut capture) = self.capture.take() {
            if let Err(e) = capture.close_run() {
                end.problems.push(format!("capture: {e}"));
            }
            if let Some(status) = &self.parts.writer {
                status.shutdown_by(end.deadline);
            }
            drop(capture);
        }
        end.summary.stopped = self.stop.cause();
        let Some(status) = self.parts.writer.take() else {
            return;
        };
        let summary = &mut end.summary;
        summary.records_written = status.records_written();
        summary.records_dropped = status.dropped();
        summary.records_lost = status.discarded();
        summary.steps_lost = status.steps_lost();
        summary.bytes_written = status.bytes_written();
        summary.end_marker_written = status.end_marker_written();
        if let Some(e) = status.error() {
            end.problems.push(format!("capture writer: {e}"));
        }
        let finished = status.wait_closed(Instant::now());
        if summary.records_lost > 0 {
            end.lost.push(format!(
                "{} tensor records of {} steps",
                summary.records_lost, summary.steps_lost
            ));
        }
        if !finished {
            end.lost
                .push("the tensor records the writer still held".to_string());
        }
        if !summary.end_marker_written {
            end.lost.push(format!(
                "the end marker ({})",
                smdebug_format::layout::END_MARKER
            ));
        }
        if !finished {
            end.late("capture writer");
        }
    }

    /// The rules see the end marker, evaluate the rest and write the report, within
    /// [`SessionBuilder::finish_timeout`]. Without an end marker (storage failed) they would wait
    /// for it until their timeout: they are stopped at once instead (by `tail`), with what they
    /// read.
    #[cfg(feature = "rules")]
    fn finish_rules(&mut self, end: &mut Ending, tail: Instant) {
        let Some(runner) = self.parts.runner.take() else {
            return;
        };
        let result = if end.summary.end_marker_written {
            // The rules look now and every 200 ms until they are done, rather than at their
            // poll: a look may find the end marker and still need another to confirm the last
            // steps.
            let (waker, mut woken) = (runner.waker(), None::<Instant>);
            let deadline = Instant::now() + self.finish_timeout;
            while !runner.is_finished() && Instant::now() < deadline {
                if woken.is_none_or(|at| at.elapsed() >= Duration::from_millis(200)) {
                    waker.wake();
                    woken = Some(Instant::now());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let timed_out = !runner.is_finished();
            let result = if timed_out {
                runner.cancel()
            } else {
                runner.join()
            };
            if timed_out && result.is_ok() {
                end.problems.push(format!(
                    "the rules had not finished {} s after the run ended; their \
                     statuses are as far as they got",
                    self.finish_timeout.as_secs_f64()
                ));
            }
            Some(result)
        } else {
            end.problems.push(
                "the rules were stopped without the run's end (its end marker was not \
                 stored); their statuses are as far as they got"
                    .to_string(),
            );
            within(tail, move || runner.cancel())
        };
        match result {
            Some(Ok(rules)) => {
                end.summary.report = self.parts.report.take();
                end.summary.rules = rules.rules;
            }
            Some(Err(e)) => end.problems.push(format!("rules: {e}")),
            None => end.late("the rules"),
        }
    }

    /// The dashboard and the stop watcher stop; last, this process's identity file says it
    /// finished: until now it was live, so no other job could take the run while the rules
    /// still wrote into it. A run whose end was stored gives each a grace of its own; after a
    /// storage failure they all share what is left of `tail` (the identity file's heartbeat
    /// thread and last write wait on storage too).
    fn stop_the_rest(&mut self, end: &mut Ending, tail: Instant) {
        #[cfg(feature = "serve")]
        if let Some(server) = self.parts.dashboard.take() {
            server.shutdown();
        }
        end.summary.dashboard = self.parts.dashboard_url.take();
        let ended = end.summary.end_marker_written;
        let deadline_now = || {
            if ended {
                tail.max(Instant::now() + GRACE)
            } else {
                tail
            }
        };
        if let Some(watcher) = self.parts.stop_watcher.take() {
            match within(deadline_now(), move || watcher.stop()) {
                Some(stopped) => {
                    end.problems.extend(stopped.problems);
                    if !stopped.ended {
                        end.problems.push(format!(
                            "the stop watcher had not stopped {} s after it was asked (a read \
                             of the run's storage hanging); it was left behind",
                            StopWatcher::STOP_WAIT.as_secs()
                        ));
                    }
                }
                None => end.late("stop watcher"),
            }
        }
        if let Some(mut job) = self.parts.job.take() {
            match within(deadline_now(), move || job.finish()) {
                Some(Ok(())) => {}
                Some(Err(e)) => end.problems.push(format!("job identity: {e}")),
                None => end.late("the job's identity file"),
            }
        }
    }
}

/// What a session's shutdown gathers as its parts stop: the summary, the problems met and what
/// was lost, and the deadline storage is waited on.
struct Ending {
    summary: SessionSummary,
    problems: Vec<String>,
    lost: Vec<String>,
    /// The storage timeout from the start of the shutdown.
    deadline: Instant,
    timeout: Duration,
}

impl Ending {
    /// `part` was left behind: storage did not answer by the deadline.
    fn late(&mut self, part: &str) {
        self.problems.push(format!(
            "{part}: storage did not answer within {} s (the storage timeout); left behind",
            self.timeout.as_secs_f64()
        ));
    }
}

/// What the parts stopped after storage's deadline get, at least: they read storage (the
/// rules, the stop watcher) and stop quickly unless it hangs.
const GRACE: Duration = Duration::from_secs(2);

/// Runs `f` on a thread of its own and waits for it until `deadline`: `None` when it had not
/// finished by then (it is left to finish, or to hang on storage, by itself).
fn within<T: Send + 'static>(
    deadline: Instant,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("smdebug-finish".to_string())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .ok()?;
    rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .ok()
}

impl<H: Capture> Drop for Session<H> {
    /// A session dropped without [`finish`](Session::finish) shuts down the same way; its
    /// summary goes to the log (`log::info!`, problems at `warn`).
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let summary = self.shut_down();
        for p in &summary.problems {
            log::warn!("smdebug session {}: {p}", summary.location);
        }
        if !summary.lost.is_empty() {
            log::error!(
                "smdebug session {}: storage failed; not stored: {}",
                summary.location,
                summary.lost.join("; ")
            );
        }
        log::info!("smdebug session ended: {summary}");
    }
}
