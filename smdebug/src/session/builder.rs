//! [`SessionBuilder`]: everything a session runs, with documented defaults, and `start()`.

use std::time::Duration;

use smdebug_core::timeline::{Profiling, TimelineConfig};
use smdebug_core::window::Window;
use smdebug_core::{
    Capture, Collection, Hook, HookBuilder, HookConfig, ReductionConfig, SaveConfig, WorkerInfo,
};
use smdebug_format::record::PayloadChecksum;
use smdebug_io::OverflowPolicy;
use smdebug_io::sagemaker::ConfigSources;
use smdebug_io::stop::StopWatcher;
use smdebug_io::writer::Writer;
use smdebug_profiler::spans::SpanConfig;
use smdebug_profiler::system::SamplerConfig;
use std::sync::Arc;

use smdebug_storage::{IntoLocation, Location, Storage, StorageOptions};

use super::progress::DEFAULT_PROGRESS_INTERVAL;

/// The default of [`SessionBuilder::storage_timeout`].
pub(super) const DEFAULT_STORAGE_TIMEOUT: Duration = Duration::from_secs(30);
use crate::error::{Error, Result};

/// Builds the capture hook `H` from the configured hook builder and the run's writer.
pub(super) type MakeCapture<H> = Box<dyn FnOnce(HookBuilder, Writer) -> Result<H>>;

/// Where the profiling report goes at the end of a session.
#[cfg(feature = "report")]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReportTarget {
    /// `<run>/profiler-output/profiler-report.html`, through the run's storage (local disk or
    /// the object store), with one JSON result per rule beside it.
    IntoRun,
    /// A folder inside the run, `<run>/<folder>/profiler-report.html` with one JSON result per
    /// rule beside it, through the run's storage: the folder follows the run wherever
    /// SageMaker's configuration files put it.
    RunFolder(String),
    /// SageMaker's folder layout inside the run,
    /// `<run>/rule-output/ProfilerReport-<timestamp>/profiler-output/` (the timestamp is the
    /// session's start, seconds since the epoch), through the run's storage.
    SageMakerLayout,
    /// A page on local disk, and nothing else beside it.
    File(std::path::PathBuf),
    /// A folder on local disk for the report: `profiler-report.html` and one JSON result per
    /// rule (`<RuleName>.json`) in it.
    Folder(std::path::PathBuf),
    /// No report.
    Off,
}

/// Configures a [`Session`](crate::Session). Every setting has a default; settings made here are themselves
/// defaults that SageMaker's configuration files override when present (the order is
/// documented on [`Session`](crate::Session)).
///
/// Defaults:
///
/// | setting | default |
/// | --- | --- |
/// | capture | smdebug's: the built-in collections, every 500th step of each mode, raw tensors |
/// | worker | from the launcher's environment (`RANK`/`WORLD_SIZE`, Open MPI, Slurm); one worker otherwise |
/// | writer | a 65 536-record queue (64 MiB of tensor data at most), dropping (and counting) what does not fit; real CRC-32C payload checksums |
/// | system sampling | every 500 ms, in the process of local rank 0 |
/// | framework spans | on: steps, forward, backward, optimizer and data loading at every step; per-module spans (detailed) and the code profile off |
/// | rules | none |
/// | report | into the run, when rules run (feature `report`) |
/// | stop requests | watched every second (the dashboard's Stop, another job's rules) |
/// | progress file | `progress/<worker>.json` rewritten at most once a second; no planned steps |
/// | storage timeout | 30 s: how long `finish` waits on storage (see [`SessionBuilder::storage_timeout`]) |
pub struct SessionBuilder<H: Capture = Hook> {
    /// The run's location, or why the text given names none (returned by `start`).
    pub(super) location: std::result::Result<Location, smdebug_storage::Error>,
    pub(super) storage_options: StorageOptions,
    /// The storage the run is written and read through, when the caller gave one.
    pub(super) storage: Option<Arc<dyn Storage>>,
    pub(super) hook: HookConfig,
    pub(super) worker: Option<WorkerInfo>,
    pub(super) checksum: PayloadChecksum,
    pub(super) queue_capacity: usize,
    pub(super) queue_bytes: usize,
    pub(super) overflow: OverflowPolicy,
    pub(super) sampler: Option<SamplerConfig>,
    pub(super) sample_here: Option<bool>,
    pub(super) spans: Option<SpanConfig>,
    pub(super) timeline: TimelineConfig,
    pub(super) python_compatible: bool,
    pub(super) stop_poll: Duration,
    pub(super) finish_timeout: Duration,
    pub(super) storage_timeout: Duration,
    pub(super) overwrite: bool,
    pub(super) job_id: Option<String>,
    pub(super) join_timeout: Duration,
    pub(super) config_files: Option<ConfigSources>,
    pub(super) planned_steps: Option<u64>,
    pub(super) progress_interval: Duration,
    #[cfg(feature = "rules")]
    pub(super) rules: Vec<smdebug_rules::RuleSpec>,
    #[cfg(feature = "rules")]
    pub(super) custom_rules: Vec<(smdebug_rules::Rule, Vec<smdebug_rules::ActionConfig>)>,
    #[cfg(feature = "rules")]
    pub(super) rule_errors: Vec<smdebug_rules::Error>,
    /// `None`: by the job's size ([`SessionBuilder::rules_poll_interval`]).
    #[cfg(feature = "rules")]
    pub(super) rules_poll: Option<Duration>,
    #[cfg(feature = "rules")]
    pub(super) rule_status_every: Option<Duration>,
    #[cfg(feature = "report")]
    pub(super) report: ReportTarget,
    #[cfg(feature = "serve")]
    pub(super) dashboard: Option<smdebug_serve::ServeOptions>,
    pub(super) make: MakeCapture<H>,
}

impl<H: Capture> std::fmt::Debug for SessionBuilder<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionBuilder")
            .field("location", &self.location)
            .field("storage", &self.storage.as_ref().map(|s| s.describe()))
            .field("worker", &self.worker)
            .field("sampler", &self.sampler.is_some())
            .field("spans", &self.spans.is_some())
            .field("timeline", &self.timeline)
            .finish_non_exhaustive()
    }
}

impl SessionBuilder<Hook> {
    pub(super) fn new(location: impl IntoLocation) -> SessionBuilder<Hook> {
        SessionBuilder {
            location: location.into_location(),
            storage_options: StorageOptions::default(),
            storage: None,
            hook: HookConfig::default(),
            worker: None,
            checksum: PayloadChecksum::Crc32c,
            queue_capacity: 1 << 16,
            queue_bytes: smdebug_io::writer::DEFAULT_MAX_QUEUED_BYTES,
            overflow: OverflowPolicy::Drop,
            sampler: Some(SamplerConfig::default()),
            sample_here: None,
            spans: Some(SpanConfig::default()),
            timeline: TimelineConfig::default(),
            python_compatible: false,
            stop_poll: StopWatcher::DEFAULT_INTERVAL,
            finish_timeout: Duration::from_secs(120),
            storage_timeout: DEFAULT_STORAGE_TIMEOUT,
            overwrite: false,
            job_id: None,
            join_timeout: Duration::from_secs(120),
            config_files: Some(ConfigSources::from_env()),
            planned_steps: None,
            progress_interval: DEFAULT_PROGRESS_INTERVAL,
            #[cfg(feature = "rules")]
            rules: Vec::new(),
            #[cfg(feature = "rules")]
            custom_rules: Vec::new(),
            #[cfg(feature = "rules")]
            rule_errors: Vec::new(),
            #[cfg(feature = "rules")]
            rules_poll: None,
            #[cfg(feature = "rules")]
            rule_status_every: Some(Duration::from_secs(60)),
            #[cfg(feature = "report")]
            report: ReportTarget::IntoRun,
            #[cfg(feature = "serve")]
            dashboard: None,
            make: Box::new(|builder: HookBuilder, writer: Writer| Ok(builder.build(writer)?)),
        }
    }
}

impl SessionBuilder<Hook> {
    /// Captures through candle's adapter: `session.hook()` is a
    /// [`CandleHook`](smdebug_candle::CandleHook) (`save_parameters`, `save_gradients`,
    /// `backward`, `wrap`, `wrap_model`, `probe`).
    ///
    /// Needs this crate's `candle` feature.
    #[cfg(feature = "candle")]
    pub fn candle(self) -> SessionBuilder<smdebug_candle::CandleHook> {
        self.capture_with(smdebug_candle::CandleHook::new)
    }

    /// Captures through burn's adapter: `session.hook()` is a
    /// [`BurnHook`](smdebug_burn::BurnHook).
    ///
    /// Needs this crate's `burn` feature.
    #[cfg(feature = "burn")]
    pub fn burn(self) -> SessionBuilder<smdebug_burn::BurnHook> {
        self.capture_with(smdebug_burn::BurnHook::new)
    }

    /// Captures through tch-rs's adapter: `session.hook()` is a
    /// [`TchHook`](smdebug_tch::TchHook).
    ///
    /// Needs this crate's `tch` feature.
    #[cfg(feature = "tch")]
    pub fn tch(self) -> SessionBuilder<smdebug_tch::TchHook> {
        self.capture_with(smdebug_tch::TchHook::new)
    }
}

impl<H: Capture> SessionBuilder<H> {
    /// Captures through another hook type, built by `make` from the configured hook builder
    /// and the run's writer: a framework adapter's hook
    /// (`.capture_with(|b, w| CandleHook::new(b, w))`; the framework features give shortcuts).
    pub fn capture_with<H2: Capture + 'static>(
        self,
        make: impl FnOnce(HookBuilder, Writer) -> std::result::Result<H2, H2::Error> + 'static,
    ) -> SessionBuilder<H2> {
        SessionBuilder {
            location: self.location,
            storage_options: self.storage_options,
            storage: self.storage,
            hook: self.hook,
            worker: self.worker,
            checksum: self.checksum,
            queue_capacity: self.queue_capacity,
            queue_bytes: self.queue_bytes,
            overflow: self.overflow,
            sampler: self.sampler,
            sample_here: self.sample_here,
            spans: self.spans,
            timeline: self.timeline,
            python_compatible: self.python_compatible,
            stop_poll: self.stop_poll,
            finish_timeout: self.finish_timeout,
            storage_timeout: self.storage_timeout,
            overwrite: self.overwrite,
            job_id: self.job_id,
            join_timeout: self.join_timeout,
            config_files: self.config_files,
            planned_steps: self.planned_steps,
            progress_interval: self.progress_interval,
            #[cfg(feature = "rules")]
            rules: self.rules,
            #[cfg(feature = "rules")]
            custom_rules: self.custom_rules,
            #[cfg(feature = "rules")]
            rule_errors: self.rule_errors,
            #[cfg(feature = "rules")]
            rules_poll: self.rules_poll,
            #[cfg(feature = "rules")]
            rule_status_every: self.rule_status_every,
            #[cfg(feature = "report")]
            report: self.report,
            #[cfg(feature = "serve")]
            dashboard: self.dashboard,
            make: Box::new(move |b, w| make(b, w).map_err(|e| Error::Capture(Box::new(e)))),
        }
    }

    /// Options for an object-store location (endpoint, credentials); by default they come from
    /// the environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`).
    pub fn storage_options(mut self, options: StorageOptions) -> Self {
        self.storage_options = options;
        self
    }

    /// Writes and reads the run through `storage` instead of opening one for the location: an
    /// object store of the caller's own (a client with its own credentials, retries or
    /// encryption), a wrapper that counts, throttles or mirrors what passes through it, or any
    /// other [`Storage`]. Everything the session does with the run goes through it: the probe
    /// write and the run's claim, the tensor writer, the span writer, the system sampler, the
    /// progress and identity files, the stop requests, the rules, the report written into the
    /// run and the dashboard. The location still names the run (in messages, the summary, the
    /// dashboard and the report's location), and [`storage_options`](Self::storage_options) is
    /// not used.
    ///
    /// The storage is the run at the builder's location: when a SageMaker configuration file
    /// names another location for the run, [`start`](Self::start) fails with
    /// [`Error::Start`](crate::Error::Start) naming both rather than write that run through a
    /// storage given for this one.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use smdebug::Session;
    /// use smdebug::storage::{LocalStorage, Storage};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Any `Storage`: here local disk, opened by the caller.
    /// let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new("/tmp/run")?);
    /// let mut session = Session::builder("/tmp/run").storage(storage).start()?;
    /// session.step()?;
    /// session.finish()?;
    /// # Ok(()) }
    /// ```
    pub fn storage(mut self, storage: Arc<dyn Storage>) -> Self {
        self.storage = Some(storage);
        self
    }

    /// Starts from a whole capture configuration (collections, schedules, reductions).
    pub fn hook_config(mut self, config: HookConfig) -> Self {
        self.hook = config;
        self
    }

    /// The default schedule: collections without their own are saved on these steps.
    pub fn save(mut self, save: SaveConfig) -> Self {
        self.hook.save_config = save;
        self
    }

    /// What collections without their own reduction config save.
    pub fn reductions(mut self, reductions: ReductionConfig) -> Self {
        self.hook.reduction_config = reductions;
        self
    }

    /// Adds a collection (or replaces a built-in of the same name).
    pub fn collection(mut self, collection: Collection) -> Self {
        self.hook
            .collections
            .retain(|c| c.name() != collection.name());
        self.hook.collections.push(collection);
        self
    }

    /// Also writes TensorBoard scalars and histograms under `<run>/tensorboard/`.
    pub fn tensorboard(mut self, on: bool) -> Self {
        self.hook.export_tensorboard = on;
        self
    }

    /// This process's rank and the job's size (default: from the launcher's environment).
    pub fn worker(mut self, worker: WorkerInfo) -> Self {
        self.worker = Some(worker);
        self
    }

    /// How many records may wait for the writer before new ones are dropped and counted
    /// (default 65 536; the queue also holds at most [`writer_queue_bytes`](Self::writer_queue_bytes)
    /// of tensor data).
    pub fn writer_queue(mut self, records: usize) -> Self {
        self.queue_capacity = records;
        self
    }

    /// How many bytes of tensor data may wait for the writer before new tensors are dropped
    /// and counted (default 64 MiB,
    /// [`DEFAULT_MAX_QUEUED_BYTES`](smdebug_io::writer::DEFAULT_MAX_QUEUED_BYTES): what a
    /// writer that falls behind can add to the training process's memory).
    pub fn writer_queue_bytes(mut self, bytes: usize) -> Self {
        self.queue_bytes = bytes;
        self
    }

    /// What a full writer queue does: drop and count (the default; training never waits), or
    /// block the training loop.
    pub fn overflow(mut self, policy: OverflowPolicy) -> Self {
        self.overflow = policy;
        self
    }

    /// Files that Python smdebug 1.0.34 reads as well: its legacy constant payload checksum
    /// instead of CRC-32C, and SageMaker node ids (`algo-<n>`) for system metrics and spans.
    pub fn python_compatible(mut self, on: bool) -> Self {
        self.python_compatible = on;
        self
    }

    /// System sampling with `config` (interval, node id, rotation, GPUs).
    pub fn system(mut self, config: SamplerConfig) -> Self {
        self.sampler = Some(config);
        self
    }

    /// No system sampling.
    pub fn no_system(mut self) -> Self {
        self.sampler = None;
        self
    }

    /// Whether this process samples the host. Default: the process of local rank 0
    /// (`LOCAL_RANK`, `OMPI_COMM_WORLD_LOCAL_RANK`, `SLURM_LOCALID`; the job's rank when none is
    /// set), so the processes of one host do not sample it twice.
    pub fn sample_on_this_worker(mut self, on: bool) -> Self {
        self.sample_here = Some(on);
        self
    }

    /// Framework spans written with `config` (node id, queue, file rotation).
    pub fn spans(mut self, config: SpanConfig) -> Self {
        self.spans = Some(config);
        self
    }

    /// No framework spans and no code profile: the timeline is off.
    pub fn no_spans(mut self) -> Self {
        self.spans = None;
        self
    }

    /// When each profiler runs (step and phase spans, data loading, detailed, code).
    pub fn profiling(mut self, config: TimelineConfig) -> Self {
        self.timeline = config;
        self
    }

    /// When per-module spans are recorded (SageMaker's detailed profiling). Default: never.
    pub fn detailed_profiling(mut self, window: Window) -> Self {
        self.timeline.set(Profiling::Detailed, window);
        self
    }

    /// When data-loading spans are recorded. Default: every step.
    pub fn dataloader_profiling(mut self, window: Window) -> Self {
        self.timeline.set(Profiling::DataLoading, window);
        self
    }

    /// When the sampling code profile runs (SageMaker's Python profiling). Default: never.
    ///
    /// Needs the `code-profile` feature (Linux): without it, a window set here makes
    /// [`start`](Self::start) fail with [`Error::FeatureMissing`](crate::Error::FeatureMissing)
    /// naming it, and a window a SageMaker profiler file opens later is a warning.
    pub fn code_profiling(mut self, window: Window) -> Self {
        self.timeline.set(Profiling::Code, window);
        self
    }

    /// How often stop requests written into the run are looked for. Default: 1 s (each look
    /// wakes a thread beside the loop's; a stop is honoured at the step after the look).
    pub fn stop_poll_interval(mut self, interval: Duration) -> Self {
        self.stop_poll = interval;
        self
    }

    /// How long [`Session::finish`](crate::Session::finish) waits for the rules to evaluate the last steps and write
    /// the report before it stops them. Default: 120 s.
    pub fn finish_timeout(mut self, timeout: Duration) -> Self {
        self.finish_timeout = timeout;
        self
    }

    /// How long [`Session::finish`](crate::Session::finish) waits on storage: for the span writer, the sampler and the
    /// tensor writer to store what they hold and the end marker, and for the progress file.
    /// Storage that fails (a full disk, a missing bucket, a store that went away) or does not
    /// answer within this makes `finish` stop waiting: what was not stored is counted and named
    /// in the error it returns ([`Error::Lost`](crate::Error::Lost)), and the rules, which
    /// would wait for an end marker that is not coming, are stopped at once with what they
    /// read. So when storage fails, `finish` returns within this plus two seconds, never the
    /// rules' [`finish_timeout`](Self::finish_timeout). Default: 30 s.
    pub fn storage_timeout(mut self, timeout: Duration) -> Self {
        self.storage_timeout = timeout;
        self
    }

    /// Reads SageMaker's configuration files from `sources` (default:
    /// [`ConfigSources::from_env`]: `SMDEBUG_CONFIG_FILE_PATH`, else
    /// `/opt/ml/input/config/debughookconfig.json`, and `SMPROFILER_CONFIG_PATH`, else
    /// `/opt/ml/input/config/profilerconfig.json`). What a file states overrides what this
    /// builder set; see [`Session`](crate::Session) for the order.
    pub fn config_files(mut self, sources: ConfigSources) -> Self {
        self.config_files = Some(sources);
        self
    }

    /// Reads no configuration file: the job is configured by this builder alone.
    pub fn without_config_files(mut self) -> Self {
        self.config_files = None;
        self
    }

    /// How many global steps the job plans to run (epochs × steps per epoch, TRAIN and EVAL
    /// steps together), written into the run's progress file: the dashboard shows an ETA from
    /// it and the step rate. Default: not said (the dashboard shows no ETA).
    pub fn planned_steps(mut self, steps: u64) -> Self {
        self.planned_steps = Some(steps);
        self
    }

    /// How often, at most, the step path hands the run's progress file
    /// (`progress/<worker>.json`: planned steps, last step, records and spans written and
    /// dropped) to its writer thread. Default: 1 s. The file is written once more at
    /// [`Session::finish`](crate::Session::finish)(super::Session::finish).
    pub fn progress_interval(mut self, interval: Duration) -> Self {
        self.progress_interval = interval;
        self
    }

    /// Replaces a run at this location, finished or not (rank 0 deletes the run's own files
    /// before the job starts: the folders and markers a run owns, nothing else). Default:
    /// false, and a location holding a run is an error of [`start`](Self::start): a run that
    /// ended is [`Error::RunExists`](crate::Error::RunExists) (as in Python smdebug), one
    /// without an end marker (its job was killed) is refused naming what it holds, since a new
    /// job must never continue an old one's steps. Whatever this says, a location holding
    /// anything that is not a run's (a project folder, a home folder) is refused and nothing
    /// in it is touched, and a run that a live process still writes is never replaced
    /// (`smdebug_io::run_folder` has the rules).
    pub fn overwrite(mut self, on: bool) -> Self {
        self.overwrite = on;
        self
    }

    /// The id shared by every process of this job (default: the launcher's, see
    /// `smdebug_io::jobs::shared_job_id`: `SMDEBUG_JOB_ID`, SageMaker's, torchrun's, Slurm's;
    /// without one, rank 0 makes one and the other ranks take rank 0's). It is written into
    /// the run's identity files (`jobs/<worker>/<process>.json`), by which readers tell a run
    /// of one job from files of two.
    pub fn job_id(mut self, id: impl Into<String>) -> Self {
        self.job_id = Some(id.into());
        self
    }

    /// How long a worker of rank > 0 waits at [`start`](Self::start) for rank 0 of its job to
    /// claim the run (rank 0 replaces an old run first, so the others write nothing before
    /// it has). Default: 2 minutes.
    pub fn join_timeout(mut self, timeout: Duration) -> Self {
        self.join_timeout = timeout;
        self
    }

    /// Runs a built-in rule in the training process, given as the command line gives it:
    /// `"VanishingGradient"`, `"LossNotDecreasing:num_steps=20"`, `"ProfilerReport"`. A spec
    /// that does not parse is an error of [`start`](Self::start).
    ///
    /// Needs this crate's `rules` feature.
    #[cfg(feature = "rules")]
    pub fn rule(mut self, spec: &str) -> Self {
        match smdebug_rules::RuleSpec::parse(spec) {
            Ok(s) => self.rules.push(s),
            Err(e) => self.rule_errors.push(e),
        }
        self
    }

    /// Runs each of these built-in rules (see [`rule`](Self::rule)).
    ///
    /// Needs this crate's `rules` feature.
    #[cfg(feature = "rules")]
    pub fn rules<'a>(self, specs: impl IntoIterator<Item = &'a str>) -> Self {
        specs.into_iter().fold(self, |b, s| b.rule(s))
    }

    /// Runs a built-in rule given as a spec, with its actions
    /// (`RuleSpec::parse("ExplodingTensor")?.action(ActionConfig::StopTraining)`).
    ///
    /// Needs this crate's `rules` feature.
    #[cfg(feature = "rules")]
    pub fn rule_spec(mut self, spec: smdebug_rules::RuleSpec) -> Self {
        self.rules.push(spec);
        self
    }

    /// Runs a rule of the caller's own (`Rule::tensor(my_rule)` or `Rule::profiler(...)`), with
    /// its actions.
    ///
    /// Needs this crate's `rules` feature.
    #[cfg(feature = "rules")]
    pub fn custom_rule(
        mut self,
        rule: smdebug_rules::Rule,
        actions: Vec<smdebug_rules::ActionConfig>,
    ) -> Self {
        self.custom_rules.push((rule, actions));
        self
    }

    /// How often the in-process rules look for new steps and profiler data. Besides, the
    /// session's writer wakes them each time it has written a step of this process, so that
    /// they evaluate it at once. Default: 1 s in a job of one process, whose steps all come
    /// from that writer (the poll is left for profiler data, published every few seconds, and
    /// for rules about time passing); 200 ms in a job of several, whose other processes' steps
    /// only a look finds.
    ///
    /// Needs this crate's `rules` feature.
    #[cfg(feature = "rules")]
    pub fn rules_poll_interval(mut self, interval: Duration) -> Self {
        self.rules_poll = Some(interval);
        self
    }

    /// How often each rule's status is a line in the training log (standard error), as
    /// SageMaker prints rule statuses in a job's log: `smdebug rule VanishingGradient:
    /// InProgress (120 steps judged) at step 120`; a change of status is a line at once
    /// (`… InProgress -> IssuesFound at step 130: …`). `None`: no lines. Default: every 60 s.
    /// Each rule's log in the run (`rules/<Rule>/log`) has its changes either way.
    ///
    /// Needs this crate's `rules` feature.
    #[cfg(feature = "rules")]
    pub fn rule_status_lines(mut self, every: Option<Duration>) -> Self {
        self.rule_status_every = every;
        self
    }

    /// Where the profiling report goes at the end. Default: into the run.
    ///
    /// Needs this crate's `report` feature.
    #[cfg(feature = "report")]
    pub fn report(mut self, target: ReportTarget) -> Self {
        self.report = target;
        self
    }

    /// Serves the live dashboard of this run from the training process (rank 0 only), on
    /// `options`' address, port and token (its `runs` are replaced by this run); the URL is
    /// in [`Session::dashboard_url`] and the summary. With rules on too, the rules and the
    /// dashboard read each file of the run once between them, and the report at the end takes
    /// its scalars from the dashboard (as its "Download report" does) instead of reading them
    /// again.
    ///
    /// Needs this crate's `serve` feature.
    #[cfg(feature = "serve")]
    pub fn dashboard(mut self, options: smdebug_serve::ServeOptions) -> Self {
        self.dashboard = Some(options);
        self
    }
}
