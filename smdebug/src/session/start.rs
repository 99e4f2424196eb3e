//! [`SessionBuilder::start`]: SageMaker's files over the builder's settings, then every part
//! of the session started in order (stop watcher, spans, sampler, configuration follower,
//! rules, dashboard, progress file, and capture last).

use std::sync::Arc;
use std::time::Instant;

use smdebug_core::timeline::{Timeline, TimelineConfig};
use smdebug_core::{Capture, HookBuilder, StopSignal, WorkerInfo};
use smdebug_format::layout::worker_name;
use smdebug_format::record::PayloadChecksum;
use smdebug_io::jobs::{JobClaim, shared_job_id};
use smdebug_io::run_folder::probe_write;
use smdebug_io::run_folder::{self, ClaimRequest, Refusal};
use smdebug_io::stop::StopWatcher;
use smdebug_io::writer::Writer;
use smdebug_profiler::code::{CodeProfileConfig, CodeProfiler, code_profile_support};
use smdebug_profiler::config::{MetricsRegex, ProfilerConfigWatcher};
use smdebug_profiler::spans::SpanRecorder;
use smdebug_profiler::system::{NodeId, SystemSampler};
use smdebug_storage::{Location, Storage, open_storage_with};

#[cfg(feature = "report")]
use super::builder::ReportTarget;
use super::config_follower::{self, ConfigFollower};
use super::profiling::SessionSink;
use super::progress::ProgressReporter;
use super::summary::AppliedFiles;
use super::{Parts, Session, SessionBuilder};
use crate::error::{Error, Result};

/// The profiler configuration file's watcher and the windows in force when it was read: what
/// the configuration follower starts from.
type ProfilerFile = (ProfilerConfigWatcher, TimelineConfig);

/// The follower of SageMaker's profiler configuration file, applying its changes to the
/// timeline's windows and the code profile as they are written.
fn start_config_follower(
    watcher: ProfilerConfigWatcher,
    code: TimelineConfig,
    timeline: &Timeline,
    parts: &Parts,
) -> Result<ConfigFollower> {
    ConfigFollower::spawn(
        watcher,
        code,
        timeline.clone(),
        parts.sink.clone(),
        config_follower::POLL_INTERVAL,
    )
    .map_err(|e| Error::Start {
        part: "the profiler configuration follower",
        reason: e.to_string(),
    })
}

impl<H: Capture> SessionBuilder<H> {
    /// Starts everything: the writer, the stop-request watcher, the span writer and the
    /// timeline, the system sampler, the rules and the dashboard. Every configuration error is
    /// returned here, before the first step; nothing is left running after an error.
    pub fn start(mut self) -> Result<Session<H>> {
        let given = match &self.location {
            Ok(location) => location.clone(),
            Err(_) => return Err(self.location.unwrap_err().into()),
        };
        #[cfg(feature = "rules")]
        if let Some(e) = std::mem::take(&mut self.rule_errors).into_iter().next() {
            return Err(e.into());
        }
        let worker = match self.worker.take() {
            Some(w) => w,
            None => WorkerInfo::from_env()?,
        };
        let mut applied = AppliedFiles::default();
        let (location, profiler_file) = self.apply_config_files(given.clone(), &mut applied)?;
        applied.warn();
        if self.storage.is_some() && location != given {
            return Err(Error::Start {
                part: "the run's storage",
                reason: format!(
                    "the storage given to the builder is the run at {given}, but SageMaker's \
                     configuration files name {location} for the run"
                ),
            });
        }
        #[cfg(feature = "rules")]
        self.apply_rule_requests()?;
        let dataloader_metrics = profiler_file
            .as_ref()
            .and_then(|(w, _)| w.current())
            .and_then(|f| f.dataloader_metrics().cloned());
        // Refused before the location is claimed or anything is written into it.
        self.check_code_window()?;
        let (storage, mut claim) = self.claim_location(&location, worker)?;
        let stop = StopSignal::default();
        let mut parts = Parts {
            stop_watcher: Some(StopWatcher::with_storage(
                storage.clone(),
                stop.clone(),
                self.stop_poll,
            )?),
            config: applied,
            ..Parts::default()
        };
        let timeline = self.start_timeline(worker, &storage, dataloader_metrics, &mut parts)?;

        let sample_here = self
            .sample_here
            .unwrap_or_else(|| local_rank(worker.rank) == 0);
        if let (Some(config), true) = (self.sampler.take(), sample_here) {
            let node = self.node_of(config.node_id());
            parts.sampler = Some(SystemSampler::start(config.node(node), storage.clone())?);
        }

        if let Some((watcher, code)) = profiler_file {
            parts.config_follower = Some(start_config_follower(watcher, code, &timeline, &parts)?);
        }

        self.start_analysis(worker, &location, &storage, &stop, &mut parts)?;

        let (finish_timeout, storage_timeout) = (self.finish_timeout, self.storage_timeout);
        let capture = self.start_capture(worker, &storage, &stop, &timeline, &mut parts)?;
        parts.job = claim.0.take();

        Ok(Session {
            capture: Some(capture),
            location,
            storage,
            stop,
            timeline,
            worker,
            finish_timeout,
            storage_timeout,
            parts,
            started: Instant::now(),
            capture_errors: Vec::new(),
            finished: false,
        })
    }

    /// The rule runner and the dashboard, on rank 0 only. With both on, they read the run's
    /// profiler data through one source and its tensor files through another, so that each
    /// file is read once: both subscribe before either reads.
    #[cfg_attr(not(feature = "rules"), allow(unused_variables))]
    fn start_analysis(
        &mut self,
        worker: WorkerInfo,
        location: &Location,
        storage: &Arc<dyn Storage>,
        stop: &StopSignal,
        parts: &mut Parts,
    ) -> Result<()> {
        #[cfg(feature = "serve")]
        let (runner_profiler, dashboard_profiler, runner_tensors, dashboard_tensors) =
            if worker.rank == 0
                && self.dashboard.is_some()
                && (!self.rules.is_empty() || !self.custom_rules.is_empty())
            {
                let source = smdebug_read::follow::ProfilerSource::new(storage.clone());
                let tensors = smdebug_read::trial::TensorSource::new(storage.clone());
                (
                    Some(source.subscribe()),
                    Some(source.subscribe()),
                    Some(tensors.subscribe()),
                    Some(tensors.subscribe()),
                )
            } else {
                (None, None, None, None)
            };
        #[cfg(all(feature = "rules", not(feature = "serve")))]
        let (runner_profiler, runner_tensors) = (None, None);

        // The dashboard first: the rules' report takes its scalars from it.
        #[cfg(feature = "serve")]
        if let (Some(mut options), 0) = (self.dashboard.take(), worker.rank) {
            options.runs = vec![location.clone()];
            options.storage = self.storage_options.clone();
            // The dashboard reads the run through the session's storage, whichever it is.
            options.run_storage.add(location, Arc::clone(storage));
            if let Some(subscription) = dashboard_profiler {
                options.shared_profiler.add(location, subscription);
            }
            if let Some(subscription) = dashboard_tensors {
                options.shared_tensors.add(location, subscription);
            }
            let server = smdebug_serve::Server::start(options)?;
            parts.dashboard_url = Some(server.url().to_string());
            parts.dashboard = Some(server);
        }

        #[cfg(feature = "rules")]
        if worker.rank == 0 && (!self.rules.is_empty() || !self.custom_rules.is_empty()) {
            // One process writes every step: its writer wakes the rules at each
            // ([`Self::start_capture`]); several: only a look finds the others'.
            let poll = self.rules_poll.unwrap_or(match worker.world_size {
                1 => std::time::Duration::from_secs(1),
                _ => std::time::Duration::from_millis(200),
            });
            let (runner, report) = self.start_rules(
                location,
                storage,
                stop,
                (runner_profiler, runner_tensors),
                poll,
                parts,
            )?;
            parts.runner = Some(runner);
            parts.report = report;
        }
        Ok(())
    }

    /// SageMaker's files over the builder's settings, each stating what it overrides (into
    /// `applied`): the run's location, and the profiler file's watcher for the follower.
    fn apply_config_files(
        &mut self,
        mut location: Location,
        applied: &mut AppliedFiles,
    ) -> Result<(Location, Option<ProfilerFile>)> {
        let Some(sources) = &self.config_files else {
            return Ok((location, None));
        };
        if let Some(file) = sources.load_hook_config()? {
            log::info!("capture configured by {}", file.path().display());
            applied.add(file.path(), file.unapplied_keys());
            if let Some(path) = &file.config().out_dir {
                location = Location::parse(path)?;
            }
            self.hook = file.over(std::mem::take(&mut self.hook))?;
        }
        let watcher = ProfilerConfigWatcher::from_sources(sources)?;
        if let Some(file) = watcher.current() {
            log::info!("profiling configured by {}", watcher.path().display());
            applied.add(watcher.path(), file.unapplied_keys());
            let in_file = |e: smdebug_profiler::ProfilerError| e.in_config_file(watcher.path());
            self.timeline = file.windows_over(&self.timeline);
            if let Some(spans) = self.spans.take() {
                self.spans = Some(file.span_config(spans).map_err(in_file)?);
            }
            self.sampler = match self.sampler.take() {
                _ if file.system_profiling_off() => None,
                Some(sampler) => Some(file.sampler_config(sampler).map_err(in_file)?),
                None => None,
            };
            // The profiler's own LocalPath names the run when the hook's file did not.
            let hook_named = self.hook.out_dir.is_some();
            if let (false, Some(path)) = (
                hook_named,
                file.profiling_parameters
                    .as_ref()
                    .and_then(|p| p.local_path.clone()),
            ) {
                location = Location::parse(&path)?;
            }
        }
        Ok((location, Some((watcher, self.timeline.clone()))))
    }

    /// Rules ask for what they read: every worker's hook saves it, at the union of the schedule
    /// in force and the rule's (SageMaker's `collections_to_save`).
    #[cfg(feature = "rules")]
    fn apply_rule_requests(&mut self) -> Result<()> {
        let mut requests = smdebug_rules::capture_requests(&self.rules)?;
        for (rule, _) in &self.custom_rules {
            rule.validate()?;
            requests.extend(rule.capture_requests());
        }
        for request in &requests {
            self.hook.apply(request)?;
        }
        Ok(())
    }

    /// The run's storage, probed for writes and claimed for this job (rank 0 judges the
    /// location and replaces an old run; the other ranks join once it has).
    fn claim_location(
        &self,
        location: &Location,
        worker: WorkerInfo,
    ) -> Result<(Arc<dyn Storage>, Claimed)> {
        let storage: Arc<dyn Storage> = match &self.storage {
            Some(storage) => Arc::clone(storage),
            None => open_storage_with(location, &self.storage_options)?,
        };
        // A location that takes no writes fails with the storage's own reason, before anything
        // starts that would write into it: rank 0 before it claims the location, the other
        // ranks once it has (they write nothing before: a probe of theirs in flight while rank
        // 0 looks at the folder would be a file that is not a run's).
        let probe = || {
            probe_write(storage.as_ref(), &worker_name(worker.rank)).map_err(|e| {
                Error::NotWritable {
                    location: location.to_string(),
                    source: Box::new(e),
                }
            })
        };
        if worker.rank == 0 {
            probe()?;
        }
        // Rank 0 judges the location and replaces an old run (its own files only); the other
        // ranks write nothing before rank 0 of their job has claimed it. A foreign folder, a run
        // still written by a live process, and an old run not to be replaced are refused.
        let request = ClaimRequest {
            job: self
                .job_id
                .clone()
                .or_else(|| shared_job_id(|v| std::env::var(v).ok())),
            overwrite: self.overwrite,
            join_timeout: self.join_timeout,
            ..ClaimRequest::new(worker.rank, worker.world_size)
        };
        let claim = run_folder::claim(storage.clone(), &request).map_err(|e| match e {
            smdebug_io::Error::Refused { refusal, .. } if matches!(*refusal, Refusal::Ended(_)) => {
                let Refusal::Ended(extent) = *refusal else {
                    unreachable!("matched above")
                };
                Error::RunExists {
                    location: location.to_string(),
                    extent: extent.to_string(),
                }
            }
            e => e.into(),
        })?;
        // A session that fails to start from here on leaves no identity behind.
        let claim = Claimed(Some(claim));
        if worker.rank != 0 {
            probe()?;
        }
        Ok((storage, claim))
    }

    /// The node a sampler or span writer records: SageMaker's `algo-1` when the files are to be
    /// read by Python smdebug, else the node's own.
    fn node_of(&self, node: &NodeId) -> NodeId {
        if self.python_compatible {
            NodeId::algo(1)
        } else {
            node.clone()
        }
    }

    /// The timeline the hook and the loop record spans on: off without spans; else the span
    /// writer and the code profiler (readied now only for a window set at start) behind the
    /// session's sink, kept in `parts`.
    fn start_timeline(
        &mut self,
        worker: WorkerInfo,
        storage: &Arc<dyn Storage>,
        dataloader_metrics: Option<MetricsRegex>,
        parts: &mut Parts,
    ) -> Result<Timeline> {
        let Some(config) = self.spans.take() else {
            return Ok(Timeline::off());
        };
        let node = self.node_of(&NodeId::from_hostname());
        let worker_id = u32::try_from(worker.rank).unwrap_or(u32::MAX);
        let (recorder, guard) =
            SpanRecorder::start(config.node(node.clone()).worker(worker_id), storage.clone())?;
        parts.span_writer = Some(guard);
        // Not when the loop's phases are never recorded (`DisableProfiler`): no span at all.
        if !matches!(self.timeline.phases, smdebug_core::window::Window::Never) {
            record_process_start(&recorder);
        }
        let code = match code_profile_support() {
            Ok(()) => {
                // Readied (pprof-rs's sample table, 45-115 MB, allocated) only for a window
                // set now; a window a profiler file opens later readies it then.
                let code = CodeProfiler::start(
                    CodeProfileConfig::default()
                        .node(node)
                        .worker(worker_id)
                        .warm_up(self.timeline.code.is_enabled()),
                    storage.clone(),
                )?;
                // A window from the start of the loop is sampled from its first step
                // (a later one finds the sampler ready anyway).
                if self.timeline.code.is_enabled() {
                    code.wait_ready(std::time::Duration::from_secs(5));
                }
                Some(code)
            }
            // A window set now was refused by `check_code_window`; one a profiler file opens
            // later is a warning then.
            Err(_) => None,
        };
        let sink = Arc::new(SessionSink::new(recorder, dataloader_metrics, code));
        parts.sink = Some(sink.clone());
        Ok(Timeline::new(self.timeline.clone(), sink))
    }

    /// A code-profile window (set here or by SageMaker's files) that this build cannot sample:
    /// off Linux no build can; on Linux the facade's `code-profile` feature is what is missing.
    fn check_code_window(&self) -> Result<()> {
        if !self.timeline.code.is_enabled() {
            return Ok(());
        }
        match code_profile_support() {
            Ok(()) => Ok(()),
            Err(_) if cfg!(target_os = "linux") => Err(Error::FeatureMissing {
                what: "a code-profile window (SageMaker's Python profiling)".to_string(),
                feature: "code-profile",
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Rank 0's rule runner over the run, with the report the builder asked for, and where that
    /// report goes.
    #[cfg(feature = "rules")]
    fn start_rules(
        &mut self,
        location: &Location,
        storage: &Arc<dyn Storage>,
        stop: &StopSignal,
        (profiler, tensors): (
            Option<smdebug_read::follow::ProfilerSubscription>,
            Option<smdebug_read::trial::TensorSubscription>,
        ),
        poll: std::time::Duration,
        parts: &Parts,
    ) -> Result<(smdebug_rules::RunnerHandle, Option<String>)> {
        #[cfg(not(feature = "serve"))]
        let _ = parts;
        let mut runner = smdebug_rules::RuleRunner::builder(location)
            .storage(storage.clone())
            .stop_signal(stop.clone())
            .poll_interval(poll)
            .open_timeout(std::time::Duration::from_secs(24 * 3600));
        if let Some(every) = self.rule_status_every {
            runner = runner.status_lines(smdebug_rules::runner::StatusLines::to_stderr(every));
        }
        for spec in std::mem::take(&mut self.rules) {
            runner = runner.spec(spec);
        }
        for (rule, actions) in std::mem::take(&mut self.custom_rules) {
            runner = runner.rule(rule, actions);
        }
        if let Some(subscription) = profiler {
            runner = runner.profiler_source(subscription);
        }
        // With the dashboard on, the report's scalars are its summaries (as its "Download
        // report" takes them): no file of the run is read again for them.
        #[cfg(feature = "serve")]
        let scalars = parts
            .dashboard
            .as_ref()
            .and_then(|server| server.report_scalars(location));
        #[cfg(all(feature = "report", not(feature = "serve")))]
        let scalars: Option<std::convert::Infallible> = None;
        // Without it, the report reads them beside the rules, through the source of the run's
        // files the rules' trial reads through (both subscribed before either reads): each
        // index and event file once, and nothing again at the finish.
        #[cfg(feature = "report")]
        let (tensors, follow_scalars) = match tensors {
            None if scalars.is_none() && !matches!(self.report, ReportTarget::Off) => {
                let source = smdebug_read::trial::TensorSource::new(storage.clone());
                (Some(source.subscribe()), Some(source.subscribe()))
            }
            given => (given, None),
        };
        if let Some(subscription) = tensors {
            runner = runner.tensor_source(subscription);
        }
        #[cfg(not(feature = "report"))]
        let report = None;
        #[cfg(feature = "report")]
        let report = {
            let writer = |w: smdebug_report::ReportWriter| {
                #[cfg(feature = "serve")]
                if let Some(source) = &scalars {
                    return w.scalars_from(source.clone());
                }
                match follow_scalars.clone() {
                    Some(subscription) => w.follow_scalars(subscription),
                    None => w,
                }
            };
            let (with_report, report) = match &self.report {
                ReportTarget::IntoRun => (
                    runner.reporter(writer(smdebug_report::ReportWriter::into_run())),
                    Some(super::report_location(location)),
                ),
                ReportTarget::RunFolder(dir) => (
                    runner.reporter(writer(smdebug_report::ReportWriter::into_run_folder(dir))),
                    Some(super::report_location_in(location, dir)),
                ),
                ReportTarget::SageMakerLayout => {
                    let dir =
                        smdebug_rules::report::sagemaker_report_dir(std::time::SystemTime::now());
                    (
                        runner
                            .reporter(writer(smdebug_report::ReportWriter::into_run_folder(&dir))),
                        Some(super::report_location_in(location, &dir)),
                    )
                }
                ReportTarget::File(path) => (
                    runner.reporter(writer(smdebug_report::ReportWriter::to_file(path))),
                    Some(path.display().to_string()),
                ),
                ReportTarget::Folder(dir) => {
                    let page = dir.join(smdebug_rules::report::REPORT_FILE);
                    let shown = page.display().to_string();
                    (
                        runner.reporter(writer(
                            smdebug_report::ReportWriter::to_file(page).rule_files_to(dir),
                        )),
                        Some(shown),
                    )
                }
                ReportTarget::Off => (runner, None),
            };
            runner = with_report;
            report
        };
        Ok((runner.spawn()?, report))
    }

    /// Capture, started last: a hook ends its run when dropped, so a session that fails to
    /// start before this point leaves no end marker behind. Then the progress file (a session
    /// that failed to start leaves none).
    fn start_capture(
        self,
        worker: WorkerInfo,
        storage: &Arc<dyn Storage>,
        stop: &StopSignal,
        timeline: &Timeline,
        parts: &mut Parts,
    ) -> Result<H> {
        let writer = Writer::builder(storage.clone());
        // The rules in the process evaluate each step as soon as it is written.
        #[cfg(feature = "rules")]
        let writer = match &parts.runner {
            Some(runner) => {
                let waker = runner.waker();
                writer.on_step_written(move |_| waker.wake())
            }
            None => writer,
        };
        let writer = writer
            .worker_rank(worker.rank)
            .checksum(if self.python_compatible {
                PayloadChecksum::SmdebugLegacy
            } else {
                self.checksum
            })
            .queue_capacity(self.queue_capacity)
            .max_queued_bytes(self.queue_bytes)
            .overflow(self.overflow)
            .build()?;
        parts.writer = Some(writer.status());

        let builder = HookBuilder::from_config(self.hook)
            .worker_info(worker)
            .stop_signal(stop.clone())
            .timeline(timeline.clone());
        let writer_status = writer.status();
        let capture = (self.make)(builder, writer)?;
        let progress = ProgressReporter::start(
            storage.clone(),
            worker_name(worker.rank),
            self.planned_steps,
            self.progress_interval,
            writer_status,
            parts.sink.as_ref().map(|s| s.recorder()),
        );
        if let Some(sink) = &parts.sink {
            sink.set_progress(progress.shared().clone());
        }
        parts.progress = Some(progress);
        Ok(capture)
    }
}

/// The run's claim while the session starts: withdrawn (its identity file removed) when
/// starting fails.
struct Claimed(Option<JobClaim>);

impl Drop for Claimed {
    fn drop(&mut self) {
        if let Some(claim) = self.0.take() {
            claim.withdraw();
        }
    }
}

/// This process's rank among the processes of its host: the launcher's local rank, or `rank`.
fn local_rank(rank: usize) -> usize {
    ["LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
        .unwrap_or(rank)
}

/// The process's start as a span from it to now, the session's start (phase `Process`, named
/// [`PROCESS_START_SPAN`]): the job's first record, so that the report and the
/// MaxInitializationTime rule count initialization from the process's start, as SageMaker
/// does, and not from the session's. On Linux the kernel's start time of the process; elsewhere
/// the first time smdebug was used in it ([`smdebug_io::jobs::process_started`]).
fn record_process_start(recorder: &SpanRecorder) {
    let (started_s, _) = smdebug_io::jobs::process_started();
    let Ok(since) = std::time::Duration::try_from_secs_f64(started_s) else {
        return;
    };
    let started = std::time::UNIX_EPOCH + since;
    if let Ok(before) = std::time::SystemTime::now().duration_since(started) {
        recorder.record(
            smdebug_profiler::spans::Phase::Custom(PROCESS_PHASE.into()),
            Some(PROCESS_START_SPAN.into()),
            started,
            before,
            None,
        );
    }
}

/// The phase (trace row) of the process-start span.
const PROCESS_PHASE: &str = "Process";
/// The name of the span from the process's start to the session's.
const PROCESS_START_SPAN: &str = "process start to session start";
