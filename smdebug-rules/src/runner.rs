//! The rule runner: evaluates rules over a finished run, or follows a live run in its own
//! thread (or process), keeps a status per rule, triggers actions and writes a JSON summary
//! into the run (`rules/rule_job_summary.json`) unless told not to write into the run
//! ([`RunnerBuilder::write_into_run`]).
//!
//! Debugging rules are evaluated step by step over the trial's tensors. Profiler rules are fed
//! the run's system metrics and framework spans: offline in windows of 60 s of job time,
//! following a live run as the sampler and the span writer publish them (see
//! [`crate::profiler`]). A run may hold only profiler data (no tensors at all); then only the
//! profiler rules have something to check.
//!
//! A rule that never fired ends in `NoIssuesFound` when it checked something, and in `NoData`
//! (with the reason in its message) when it checked nothing, once the run is over or the
//! offline evaluation finished ([`crate::status`]). `ProfilerReport`'s status sums up its
//! profiler rules': `IssuesFound` when one of them found issues, `Error` when one failed.
//!
//! ```no_run
//! use smdebug_rules::{RuleRunner, RuleSpec};
//!
//! let mut runner = RuleRunner::builder("/tmp/my_run")
//!     .spec(RuleSpec::parse("VanishingGradient").unwrap())
//!     .spec(RuleSpec::parse("LossNotDecreasing:num_steps=20").unwrap())
//!     .build()
//!     .unwrap();
//! let summary = runner.run_offline().unwrap();
//! for rule in &summary.rules {
//!     println!("{}: {:?} {}", rule.rule, rule.status, rule.message);
//! }
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use smdebug_core::{CaptureRequest, StopSignal};
use smdebug_io::Storage;
use smdebug_io::format::layout::END_MARKER;
use smdebug_io::trial::{StepState, Trial, TrialOptions};

use crate::actions::{ActionConfig, ActionContext, RuleEvent, execute};
use crate::error::{Error, ReportWriteError, Result};
use crate::folder::FolderWatch;
use crate::params::RuleSpec;
use crate::profiler::feed::ProfilerFeed;
use crate::profiler::{ProfilerWindow, StepTimeline};
use crate::registry::build_rule;
use crate::report::{
    ProfilerReportRule, ReportOutcome, expand_profiler_report, is_profiler_report, report_verdict,
};
use crate::rule::{Needs, Rule, RuleInput, RuleResult};
use crate::status::{profiler_no_data_reason, tensor_no_data_reason};
use smdebug_profiler::follow::{DataProblems, merge_code_windows};
use smdebug_profiler::reader::{CodeProfileWindow, ProfileData};

pub use crate::status::{RuleStatus, SUMMARY_FILE, Status, Summary, read_summary};

/// How the runner's trial reads. The runner reads each step's tensors once, as the steps come,
/// often inside the training process: a small whole-file cache holds the current steps' files,
/// where the default (sized for notebooks sweeping a whole run tensor by tensor) would keep up
/// to 256 MiB of old steps in the training job's memory.
fn runner_trial_options(max_tensor_bytes: Option<u64>) -> TrialOptions {
    let defaults = TrialOptions::default();
    TrialOptions {
        max_tensor_bytes: max_tensor_bytes.unwrap_or(defaults.max_tensor_bytes),
        file_cache_bytes: RUNNER_FILE_CACHE_BYTES,
        // The runner looks for new files itself, once per poll (`refresh_run`): the rules'
        // own queries at every step (tensor names, collections) need not list the run again.
        auto_refresh: false,
        ..defaults
    }
}

/// The runner's whole-file cache budget: 32 MiB.
const RUNNER_FILE_CACHE_BYTES: usize = 32 << 20;

/// The runner's state as a reporter sees it: the statuses, the run's storage and trial, and
/// the profiler data read so far. Built by the runner for each report.
#[non_exhaustive]
pub struct RunState<'a> {
    /// The run location, as given.
    pub location: &'a str,
    /// The run's storage (a report written into the run goes through it).
    pub storage: &'a Arc<dyn Storage>,
    /// Whether the runner may write into the run ([`RunnerBuilder::write_into_run`]).
    pub write_into_run: bool,
    /// The trial the debugging rules read; `None` while the run holds no tensor data.
    pub trial: Option<&'a Trial>,
    /// Every rule's status now, with the parameters in force.
    pub summary: &'a Summary,
    /// The system metrics and framework spans read so far.
    pub profile: &'a ProfileData,
    /// The code-profile windows read so far, ordered by start, node and worker.
    pub code_profiles: &'a [CodeProfileWindow],
    /// Problems with the profiler data that the rules worked around (a corrupt line skipped).
    pub data_problems: &'a DataProblems,
}

/// Where a report will go, and what it has to leave out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportPlan {
    /// Where the report goes (a path or URL, shown in `ProfilerReport`'s status), or why it
    /// will not be written.
    pub destination: std::result::Result<String, String>,
    /// Inputs of the report's own that cannot be read (a named trace file): the report is
    /// written without them and `ProfilerReport` ends in `Error`.
    pub problems: Vec<String>,
}

/// Draws a report from the runner's state ([`RunnerBuilder::reporter`]). The runner calls
/// [`prepare`](Self::prepare), records the plan in `ProfilerReport`'s status, then calls
/// [`write`](Self::write), so the report shows its own status.
pub trait Reporter: Send {
    /// Where the report of `run` will go and what it has to leave out.
    fn prepare(&mut self, run: &RunState<'_>) -> ReportPlan;
    /// Writes the report of `run` (after a [`prepare`](Self::prepare) that gave a destination).
    fn write(&mut self, run: &RunState<'_>) -> std::result::Result<(), ReportWriteError>;
}

struct Slot {
    rule: Rule,
    /// A tensor rule's needs, asked once when the runner is built.
    needs: Option<Needs>,
    actions: Vec<ActionConfig>,
    actions_done: bool,
    status: RuleStatus,
}

impl Slot {
    fn input(&self) -> RuleInput {
        self.rule.input()
    }
}

/// Builds a [`RuleRunner`].
pub struct RunnerBuilder {
    location: String,
    storage: Option<Arc<dyn Storage>>,
    rules: Vec<(Rule, Vec<ActionConfig>)>,
    specs: Vec<RuleSpec>,
    poll_interval: Duration,
    write_into_run: bool,
    stop_signal: Option<StopSignal>,
    open_timeout: Duration,
    idle_timeout: Option<Duration>,
    reporter: Option<Box<dyn Reporter>>,
    report_every: Option<Duration>,
    max_tensor_bytes: Option<u64>,
    interrupt: Option<Arc<AtomicBool>>,
}

impl RunnerBuilder {
    /// The most bytes one tensor read may allocate, decoded and converted to `f64` as the rules
    /// read it (`TrialOptions::max_tensor_bytes`; default 1 GiB). A value over it is an error of
    /// the rule that read it, naming the file, the tensor and the size; nothing of that size
    /// is allocated.
    pub fn max_tensor_bytes(mut self, limit: u64) -> Self {
        self.max_tensor_bytes = Some(limit);
        self
    }

    /// A flag that, once set (by a rule, a signal handler, another thread), makes the runner
    /// evaluate no further step or profiler window: [`RuleRunner::run_offline`] finishes with
    /// what was evaluated so far. A host that must stop now (Ctrl-C in a Python rule) sets it.
    pub fn interrupt(mut self, flag: Arc<AtomicBool>) -> Self {
        self.interrupt = Some(flag);
        self
    }

    /// Adds a built-in rule from a spec (with its actions).
    pub fn spec(mut self, spec: RuleSpec) -> Self {
        self.specs.push(spec);
        self
    }

    /// Adds a rule object (a custom rule: [`Rule::tensor`] or [`Rule::profiler`]) with its
    /// actions. It is checked ([`Rule::validate`]) when the runner is built or spawned.
    pub fn rule(mut self, rule: Rule, actions: Vec<ActionConfig>) -> Self {
        self.rules.push((rule, actions));
        self
    }

    /// Reads the run through `storage` (already open, with its own options: an object store's
    /// endpoint and credentials) instead of opening `location` with the defaults.
    pub fn storage(mut self, storage: Arc<dyn Storage>) -> Self {
        self.storage = Some(storage);
        self
    }

    /// What the hook of the run must save for the rules given so far (built-in ones from their
    /// specs, custom ones from their [`needs`](crate::TensorRule::needs)): apply them to the
    /// hook before it is built (`smdebug_core::HookBuilder::capture`). See [`crate::capture`].
    pub fn capture_requests(&self) -> Result<Vec<CaptureRequest>> {
        let mut out = crate::capture::capture_requests(&self.specs)?;
        for (rule, _) in &self.rules {
            rule.validate()?;
            out.extend(rule.capture_requests());
        }
        Ok(out)
    }

    /// How often a following runner looks for new steps. Default 200 ms.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Write into the run: `rules/rule_job_summary.json` as the run progresses, and the
    /// report when the [reporter](Self::reporter) was given no other place for it.
    /// Default true: the follower beside a training job keeps its summary in the run. With
    /// false nothing is written into the run (actions still run: a `stop_training` action
    /// writes its stop request).
    pub fn write_into_run(mut self, on: bool) -> Self {
        self.write_into_run = on;
        self
    }

    /// A stop signal in this process that `stop_training` actions also set (a runner inside
    /// the training process). Cross-process stops go through the run's stop-request file.
    pub fn stop_signal(mut self, signal: StopSignal) -> Self {
        self.stop_signal = Some(signal);
        self
    }

    /// How long to wait for the run to appear before failing (a runner started before the
    /// training job). Default: 0, fail at once.
    pub fn open_timeout(mut self, timeout: Duration) -> Self {
        self.open_timeout = timeout;
        self
    }

    /// Stop following a run when nothing new (no step complete on every worker, no profiler
    /// data) arrived for this long: its writer most likely died. The runner then finishes with
    /// [`Summary::gave_up`] set. Default: none, follow until the end marker (or the cancel).
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = Some(timeout);
        self
    }

    /// Hands the runner's state to `reporter` when the runner finishes (and every
    /// [`report_every`](Self::report_every) while following): smdebug-report's `ReportWriter`
    /// draws the profiling report from it. The runner keeps the profiler data it reads for the
    /// reporter (system metrics as time series, 16 bytes a value, and the spans).
    pub fn reporter(mut self, reporter: impl Reporter + 'static) -> Self {
        self.reporter = Some(Box::new(reporter));
        self
    }

    /// While following a live run, hand the state to the reporter this often (default: at the
    /// end only).
    pub fn report_every(mut self, every: Duration) -> Self {
        self.report_every = Some(every);
        self
    }

    /// Builds every rule (unknown rules, bad parameters and bad actions fail here) and opens
    /// the run.
    pub fn build(self) -> Result<RuleRunner> {
        self.build_until(None)
    }

    /// Checks every rule here and now, then opens the run and follows it on a thread of its
    /// own: for a runner started beside a training job that has not written anything yet. The
    /// thread waits up to [`open_timeout`](Self::open_timeout) for the run to appear (the
    /// handle's `cancel` stops the wait); that it never appeared is the thread's error.
    pub fn spawn(self) -> Result<RunnerHandle> {
        for spec in &self.specs {
            if is_profiler_report(&spec.name) {
                expand_profiler_report(spec)?;
            } else {
                build_rule(spec)?;
            }
            for a in &spec.actions {
                a.validate()?;
            }
        }
        for (rule, actions) in &self.rules {
            rule.validate()?;
            for a in actions {
                a.validate()?;
            }
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = cancel.clone();
        let shared = Arc::new(Mutex::new(None));
        let published = shared.clone();
        let thread = std::thread::Builder::new()
            .name("smdebug-rules".into())
            .spawn(move || {
                let mut runner = self.build_until(Some(&flag))?;
                runner.shared = published;
                runner.follow(&flag)
            })
            .map_err(|e| Error::Runner(format!("cannot start the runner thread: {e}")))?;
        Ok(RunnerHandle {
            cancel,
            shared,
            thread: Some(thread),
        })
    }

    fn build_until(mut self, cancel: Option<&AtomicBool>) -> Result<RuleRunner> {
        let mut entries = std::mem::take(&mut self.rules);
        let key = |name: &str| {
            crate::registry::find_builtin(name).map_or(name.to_string(), |b| b.name.into())
        };
        let given = std::mem::take(&mut self.specs);
        let explicit: std::collections::HashSet<String> = given
            .iter()
            .filter(|s| !is_profiler_report(&s.name))
            .map(|s| key(&s.name))
            .collect();
        let mut specs = Vec::new();
        let mut report_slot = None;
        for spec in given {
            if !is_profiler_report(&spec.name) {
                specs.push(spec);
                continue;
            }
            for a in &spec.actions {
                a.validate()?;
            }
            // A profiler rule also given on its own runs once, as given on its own.
            let expanded = expand_profiler_report(&spec)?;
            specs.extend(
                expanded
                    .into_iter()
                    .filter(|s| !explicit.contains(&key(&s.name))),
            );
            report_slot.get_or_insert(ProfilerReportRule {
                parameters: spec.parameters.clone(),
            });
        }
        if let Some(r) = report_slot {
            entries.push((Rule::profiler(r), Vec::new()));
        }
        for spec in &specs {
            let rule = build_rule(spec)?;
            let mut actions = spec.actions.clone();
            if crate::registry::find_builtin(&spec.name)
                .is_some_and(|b| b.name == "StalledTraining")
                && rule.parameters()["stop_training_on_fire"] == serde_json::Value::Bool(true)
                && !actions.contains(&ActionConfig::StopTraining)
            {
                actions.push(ActionConfig::StopTraining);
            }
            entries.push((rule, actions));
        }
        for (rule, actions) in &entries {
            rule.validate()?;
            for a in actions {
                a.validate()?;
            }
        }
        // A report draws the profiler data even when no profiler rule runs.
        let has_profiler = self.reporter.is_some()
            || entries
                .iter()
                .any(|(r, _)| r.input() == RuleInput::Profiler);
        let given_storage = self.storage.take();
        let trial_options = runner_trial_options(self.max_tensor_bytes);
        let open = |location: &str| -> Result<(Arc<dyn Storage>, Option<Trial>)> {
            let open_error = |e: smdebug_io::Error| Error::OpenRun {
                location: location.to_string(),
                source: Box::new(e),
            };
            let storage = match &given_storage {
                Some(s) => s.clone(),
                None => smdebug_io::open_storage(location).map_err(open_error)?,
            };
            match Trial::from_storage(location, storage.clone(), trial_options.clone()) {
                Ok(trial) => Ok((storage, Some(trial))),
                // A run with profiler data and no tensors is a run for the profiler rules.
                Err(e @ smdebug_io::Error::NoSuchRun { .. }) if has_profiler => {
                    if has_profiler_data(storage.as_ref()).map_err(open_error)? {
                        Ok((storage, None))
                    } else {
                        Err(open_error(e))
                    }
                }
                Err(e) => Err(open_error(e)),
            }
        };
        let deadline = Instant::now() + self.open_timeout;
        let (storage, trial) = loop {
            match open(&self.location) {
                Ok(x) => break x,
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(e) if cancel.is_some_and(|c| c.load(Ordering::Acquire)) => return Err(e),
                Err(_) => std::thread::sleep(self.poll_interval),
            }
        };
        let slots = entries
            .into_iter()
            .map(|(rule, actions)| Slot {
                needs: rule.needs(),
                status: RuleStatus {
                    rule: rule.name().to_string(),
                    kind: rule.input().kind().to_string(),
                    status: Status::InProgress,
                    parameters: rule.parameters(),
                    actions: actions.iter().map(|a| a.kind().to_string()).collect(),
                    first_fired_step: None,
                    last_fired_step: None,
                    first_fired_time_us: None,
                    last_fired_time_us: None,
                    fired_count: 0,
                    steps_evaluated: 0,
                    datapoints: 0,
                    message: String::new(),
                    evidence: Vec::new(),
                    action_errors: Vec::new(),
                    details: serde_json::Value::Null,
                    warnings: Vec::new(),
                },
                rule,
                actions,
                actions_done: false,
            })
            .collect();
        let feed = has_profiler.then(|| ProfilerFeed::new(storage.clone()));
        Ok(RuleRunner {
            location: self.location,
            ctx: ActionContext {
                storage: storage.clone(),
                stop_signal: self.stop_signal,
            },
            storage,
            trial,
            slots,
            feed,
            run_complete: false,
            end_reason: None,
            last_window_at: None,
            next_step: 0,
            last_step: None,
            poll_interval: self.poll_interval,
            write_into_run: self.write_into_run,
            idle_timeout: self.idle_timeout,
            last_arrival: Instant::now(),
            gave_up: None,
            folder: FolderWatch::default(),
            write_error: None,
            shared: Arc::new(Mutex::new(None)),
            profile: ProfileData::default(),
            code_profiles: Vec::new(),
            reporter: self.reporter,
            report_every: self.report_every,
            last_report: None,
            report_outcome: None,
            verdicts_final: false,
            trial_options,
            interrupt: self.interrupt,
        })
    }
}

/// Whether the run holds any system-metrics or framework trace file.
fn has_profiler_data(storage: &dyn Storage) -> smdebug_io::Result<bool> {
    Ok(!storage.list("system")?.is_empty()
        || !storage
            .list(smdebug_profiler::spans::TRACE_PREFIX)?
            .is_empty())
}

fn wall_clock_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// How often a following runner hands profiler rules an empty window when no data arrived, so
/// that rules about elapsed time (MaxInitializationTime) see the clock move.
const IDLE_WINDOW_INTERVAL: Duration = Duration::from_secs(1);

/// The data problems of a runner without profiler rules.
static NO_PROBLEMS: DataProblems = DataProblems::new();

/// Evaluates rules over one run. See the module docs.
pub struct RuleRunner {
    location: String,
    storage: Arc<dyn Storage>,
    /// `None` while the run holds no tensor data (a run with profiler data only).
    trial: Option<Trial>,
    slots: Vec<Slot>,
    /// The profiler data reader, when some rule is a profiler rule.
    feed: Option<ProfilerFeed>,
    run_complete: bool,
    end_reason: Option<String>,
    last_window_at: Option<Instant>,
    ctx: ActionContext,
    /// Steps below this were handled.
    next_step: u64,
    last_step: Option<u64>,
    poll_interval: Duration,
    write_into_run: bool,
    idle_timeout: Option<Duration>,
    /// When a step was last evaluated or profiler data last arrived (the idle time-out's clock).
    last_arrival: Instant,
    gave_up: Option<String>,
    /// Whether the run's local folder was deleted while followed.
    folder: FolderWatch,
    write_error: Option<String>,
    shared: Arc<Mutex<Option<Summary>>>,
    /// The profiler data read so far, kept for the reporter (empty without one).
    profile: ProfileData,
    /// The code-profile windows read so far, kept for the reporter (empty without one).
    code_profiles: Vec<CodeProfileWindow>,
    reporter: Option<Box<dyn Reporter>>,
    report_every: Option<Duration>,
    last_report: Option<Instant>,
    /// What became of the latest report (for `ProfilerReport`'s status).
    report_outcome: Option<ReportOutcome>,
    /// The run is over (or the offline evaluation finished): rules that never fired have
    /// their verdicts.
    verdicts_final: bool,
    /// How the runner's trial reads.
    trial_options: TrialOptions,
    /// Set: evaluate nothing more ([`RunnerBuilder::interrupt`]).
    interrupt: Option<Arc<AtomicBool>>,
}

impl RuleRunner {
    /// Starts building a runner for the run at `location` (path or URL).
    pub fn builder(location: &str) -> RunnerBuilder {
        RunnerBuilder {
            location: location.to_string(),
            storage: None,
            rules: Vec::new(),
            specs: Vec::new(),
            poll_interval: Duration::from_millis(200),
            write_into_run: true,
            stop_signal: None,
            open_timeout: Duration::ZERO,
            idle_timeout: None,
            reporter: None,
            report_every: None,
            max_tensor_bytes: None,
            interrupt: None,
        }
    }

    /// The trial the debugging rules read; `None` while the run holds no tensor data.
    pub fn trial(&self) -> Option<&Trial> {
        self.trial.as_ref()
    }

    /// Evaluates every step and all profiler data available now and finishes: rules that never
    /// fired are `NoIssuesFound`. For a finished run this is the whole evaluation.
    pub fn run_offline(&mut self) -> Result<Summary> {
        self.refresh_run()?;
        self.process_available(true)?;
        if !self.interrupted() {
            self.feed_profiler(true, None);
        }
        self.finish()
    }

    /// Whether the [interrupt flag](RunnerBuilder::interrupt) is set.
    fn interrupted(&self) -> bool {
        self.interrupt
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Acquire))
    }

    /// Refreshes the trial (opening it once tensor data appeared) and learns whether the run
    /// has ended.
    fn refresh_run(&mut self) -> Result<()> {
        if self.trial.is_none() && self.slots.iter().any(|s| s.input() == RuleInput::Tensors) {
            match Trial::from_storage(
                &self.location,
                self.storage.clone(),
                self.trial_options.clone(),
            ) {
                Ok(t) => self.trial = Some(t),
                Err(smdebug_io::Error::NoSuchRun { .. }) => {}
                Err(e) => return Err(self.read_error(e)),
            }
        }
        match &self.trial {
            Some(trial) => {
                trial.refresh().map_err(|e| self.read_error(e))?;
                self.run_complete = trial.is_complete().map_err(|e| self.read_error(e))?;
                self.end_reason = trial
                    .end_reason()
                    .map_err(|e| self.read_error(e))?
                    .map(|r| r.to_string());
            }
            None => match self.storage.get(END_MARKER) {
                Ok(bytes) => {
                    self.run_complete = true;
                    self.end_reason =
                        smdebug_io::format::parse_end_marker(&bytes).map(|r| r.to_string());
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(self.read_error(e)),
            },
        }
        Ok(())
    }

    /// Reads new profiler data and hands it to the profiler rules. `final_window`: no more
    /// data will come. `wall_us`: following a live run, the clock. Returns whether a status
    /// changed.
    fn feed_profiler(&mut self, final_window: bool, wall_us: Option<u64>) -> bool {
        let Some(mut feed) = self.feed.take() else {
            return false;
        };
        let changed = self.feed_profiler_from(&mut feed, final_window, wall_us);
        self.feed = Some(feed);
        changed
    }

    fn feed_profiler_from(
        &mut self,
        feed: &mut ProfilerFeed,
        final_window: bool,
        wall_us: Option<u64>,
    ) -> bool {
        let profiler_slots: Vec<usize> = (0..self.slots.len())
            .filter(|i| self.slots[*i].input() == RuleInput::Profiler)
            .collect();
        let arrived = match feed.poll() {
            Ok(n) => n,
            Err(e) => {
                for i in &profiler_slots {
                    let st = &mut self.slots[*i].status;
                    if st.status != Status::Error {
                        st.status = Status::Error;
                        st.message = format!("reading the run's profiler data failed: {e}");
                    }
                }
                self.settle_profiler_report();
                return true;
            }
        };
        let due = self
            .last_window_at
            .is_none_or(|t| t.elapsed() >= IDLE_WINDOW_INTERVAL);
        if arrived > 0 {
            self.last_arrival = Instant::now();
        }
        if arrived == 0 && !final_window && !due {
            return false;
        }
        self.last_window_at = Some(Instant::now());
        let mut changed = false;
        let code_windows = feed.take_code_windows();
        if self.reporter.is_some() {
            merge_code_windows(&mut self.code_profiles, code_windows);
        }
        for chunk in feed.take_chunks(final_window, wall_us) {
            if self.reporter.is_some() {
                self.profile.add_samples(&chunk.samples);
                self.profile.add_spans(&chunk.spans);
            }
            let window = ProfilerWindow {
                samples: &chunk.samples,
                spans: &chunk.spans,
                start_us: feed.start_us,
                now_us: chunk.now_us,
                final_window: chunk.final_window,
                steps: &feed.steps,
            };
            for i in &profiler_slots {
                if self.slots[*i].status.status == Status::Error {
                    continue;
                }
                let outcome = match &mut self.slots[*i].rule {
                    Rule::Profiler(rule) => rule.invoke_on_window(&window),
                    Rule::Tensor(_) => continue,
                };
                changed |= self.record_window(*i, outcome, &feed.steps);
            }
        }
        let warnings = feed.problems().lines();
        for i in &profiler_slots {
            let st = &mut self.slots[*i].status;
            if st.warnings != warnings {
                st.warnings = warnings.clone();
                changed = true;
            }
        }
        if changed {
            self.settle_profiler_report();
        }
        changed
    }

    /// Follows the run until it writes its end marker (then evaluates the rest and finishes),
    /// or until `cancel` is set. Never blocks the training job: it only reads.
    ///
    /// With an [idle time-out](RunnerBuilder::idle_timeout), also stops when nothing new
    /// arrived for that long, and says so in [`Summary::gave_up`].
    pub fn follow(&mut self, cancel: &AtomicBool) -> Result<Summary> {
        let mut last_progress = Instant::now();
        let mut last_written = Instant::now();
        self.last_arrival = Instant::now();
        self.publish();
        loop {
            // A run folder deleted under the runner (before or while it is read) is said to
            // be gone, not waited for.
            let gone = self.folder.gone(&self.location);
            let refreshed = if gone { Ok(()) } else { self.refresh_run() };
            if gone || (refreshed.is_err() && self.folder.gone(&self.location)) {
                self.gave_up = Some(format!(
                    "the run folder {} was deleted while it was followed; stopped following",
                    self.location
                ));
                return self.finish();
            }
            refreshed?;
            let complete = self.run_complete;
            let (processed, mut changed) = self.process_available(complete)?;
            changed |= self.feed_profiler(complete, (!complete).then(wall_clock_us));
            if complete {
                return self.finish();
            }
            if processed > 0 {
                last_progress = Instant::now();
            } else {
                self.idle(last_progress.elapsed());
            }
            if changed || last_written.elapsed() >= Duration::from_secs(2) {
                self.publish();
                last_written = Instant::now();
            }
            // After the idle rules had their look, so StalledTraining can fire first.
            if let Some(limit) = self.idle_timeout
                && self.last_arrival.elapsed() >= limit
            {
                self.gave_up = Some(format!(
                    "nothing new arrived for {} s and the run has no end marker \
                     ({END_MARKER}): its writer seems to have stopped; stopped following",
                    limit.as_secs_f64()
                ));
                return self.finish();
            }
            if let Some(every) = self.report_every
                && self.last_report.is_none_or(|t| t.elapsed() >= every)
            {
                self.write_report();
            }
            if cancel.load(Ordering::Acquire) {
                return self.finish();
            }
            std::thread::park_timeout(self.poll_interval);
            if cancel.load(Ordering::Acquire) {
                return self.finish();
            }
        }
    }

    /// Follows the run on a thread of its own.
    pub fn spawn(mut self) -> Result<RunnerHandle> {
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = cancel.clone();
        let shared = self.shared.clone();
        let thread = std::thread::Builder::new()
            .name("smdebug-rules".into())
            .spawn(move || self.follow(&flag))
            .map_err(|e| Error::Runner(format!("cannot start the runner thread: {e}")))?;
        Ok(RunnerHandle {
            cancel,
            shared,
            thread: Some(thread),
        })
    }

    /// The statuses now.
    pub fn summary(&self) -> Summary {
        Summary {
            run: self.location.clone(),
            run_complete: self.run_complete,
            end_reason: self.end_reason.clone(),
            last_step: self.last_step,
            finished: false,
            updated_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            rules: self
                .slots
                .iter()
                .map(|s| {
                    let mut status = s.status.clone();
                    // A rule without details of its own keeps what the runner put there
                    // (where ProfilerReport's report went).
                    let details = s.rule.details();
                    if !details.is_null() {
                        status.details = details;
                    }
                    status
                })
                .collect(),
            gave_up: self.gave_up.clone(),
            write_error: self.write_error.clone(),
        }
    }

    fn read_error(&self, e: smdebug_io::Error) -> Error {
        Error::OpenRun {
            location: self.location.clone(),
            source: Box::new(e),
        }
    }

    /// Evaluates the steps that every worker has written. With `all`, also steps some worker
    /// skipped (the run is over). Returns (steps processed, whether any status changed).
    fn process_available(&mut self, all: bool) -> Result<(usize, bool)> {
        let Some(trial) = &self.trial else {
            return Ok((0, false));
        };
        if !self.slots.iter().any(|s| s.input() == RuleInput::Tensors) {
            return Ok((0, false));
        }
        let steps = trial
            .all_global_steps(None)
            .map_err(|e| self.read_error(e))?;
        let mut processed = 0;
        let mut changed = false;
        let from = self.next_step;
        for step in steps.into_iter().filter(|s| *s >= from) {
            if self.interrupted() {
                break;
            }
            if !all {
                let state = match &self.trial {
                    Some(trial) => trial
                        .has_passed_step(step, None)
                        .map_err(|e| self.read_error(e))?,
                    None => break,
                };
                match state {
                    StepState::Available => {}
                    StepState::NotYetAvailable => break,
                    StepState::Unavailable => {
                        self.next_step = step + 1;
                        continue;
                    }
                }
            }
            changed |= self.evaluate(step);
            if let Some(trial) = &self.trial {
                // The rules are past the steps before this one: their files' memory serves the
                // steps to come (the runner's cache is small, see `runner_trial_options`).
                trial.forget_files_before(step);
            }
            self.last_arrival = Instant::now();
            self.next_step = step + 1;
            self.last_step = Some(step);
            processed += 1;
        }
        Ok((processed, changed))
    }

    /// Invokes every live rule at `step`; returns whether any status changed.
    fn evaluate(&mut self, step: u64) -> bool {
        let mut changed = false;
        for i in 0..self.slots.len() {
            if self.slots[i].status.status == Status::Error
                || self.slots[i].input() != RuleInput::Tensors
            {
                continue;
            }
            let outcome = match (&self.trial, &mut self.slots[i].rule) {
                (Some(trial), Rule::Tensor(rule)) => rule.invoke_at_step(trial, step),
                _ => continue,
            };
            changed |= self.record(i, outcome.map(Some));
        }
        changed
    }

    fn idle(&mut self, idle: Duration) {
        let mut changed = false;
        for i in 0..self.slots.len() {
            if self.slots[i].status.status == Status::Error
                || self.slots[i].input() != RuleInput::Tensors
            {
                continue;
            }
            let last = self.last_step;
            let outcome = match (&self.trial, &mut self.slots[i].rule) {
                (Some(trial), Rule::Tensor(rule)) => rule.on_idle(trial, last, idle),
                _ => continue,
            };
            changed |= self.record(i, outcome);
        }
        if changed {
            self.publish();
        }
    }

    fn record(&mut self, i: usize, outcome: Result<Option<RuleResult>>) -> bool {
        match outcome {
            Ok(None) => false,
            Ok(Some(r)) => {
                let st = &mut self.slots[i].status;
                st.steps_evaluated += 1;
                st.datapoints += r.datapoints as u64;
                if !r.fired {
                    return false;
                }
                let step = r.step;
                self.fired(i, r, Some(step));
                true
            }
            Err(e) => {
                let st = &mut self.slots[i].status;
                st.status = Status::Error;
                st.message = e.to_string();
                true
            }
        }
    }

    /// Records a profiler rule's results over one window.
    fn record_window(
        &mut self,
        i: usize,
        outcome: Result<Vec<RuleResult>>,
        steps: &StepTimeline,
    ) -> bool {
        let results = match outcome {
            Ok(results) => results,
            Err(e) => return self.record(i, Err(e)),
        };
        let mut changed = false;
        self.slots[i].status.steps_evaluated += 1;
        for r in results {
            let st = &mut self.slots[i].status;
            st.datapoints += r.datapoints as u64;
            if !r.fired {
                if !r.message.is_empty() && st.status != Status::IssuesFound {
                    changed |= st.message != r.message;
                    st.message = r.message;
                }
                continue;
            }
            let step = match r.time_us {
                Some(t) => steps.step_at(t),
                None => Some(r.step),
            };
            self.fired(i, r, step);
            changed = true;
        }
        changed
    }

    /// Records a firing and runs the rule's actions (once).
    fn fired(&mut self, i: usize, r: RuleResult, step: Option<u64>) {
        let slot = &mut self.slots[i];
        let st = &mut slot.status;
        st.status = Status::IssuesFound;
        if let Some(step) = step {
            st.first_fired_step.get_or_insert(step);
            st.last_fired_step = Some(step);
        }
        if let Some(t) = r.time_us {
            st.first_fired_time_us.get_or_insert(t);
            st.last_fired_time_us = Some(t);
        }
        st.fired_count += 1;
        st.message = r.message.clone();
        st.evidence = r.evidence.clone();
        if !slot.actions_done && !slot.actions.is_empty() {
            slot.actions_done = true;
            let event = RuleEvent {
                rule: st.rule.clone(),
                run: self.location.clone(),
                step: step.unwrap_or(0),
                message: r.message,
                evidence: r.evidence,
            };
            for a in &slot.actions {
                if let Err(e) = execute(a, &event, &self.ctx) {
                    slot.status.action_errors.push(e.to_string());
                }
            }
        }
    }

    fn finish(&mut self) -> Result<Summary> {
        let profiler_seen = self.feed.as_ref().is_some_and(|f| f.seen_any);
        // A runner that gave up on a live run cannot say that a rule found nothing, nor that
        // it had nothing to check: those stay InProgress.
        if self.gave_up.is_none() {
            self.verdicts_final = true;
            let trial = self.trial.as_ref();
            for s in &mut self.slots {
                let st = &mut s.status;
                if st.status != Status::InProgress {
                    continue;
                }
                if st.datapoints > 0 {
                    st.status = Status::NoIssuesFound;
                    continue;
                }
                st.status = Status::NoData;
                st.message = match &s.needs {
                    Some(needs) => {
                        tensor_no_data_reason(&st.rule, needs, trial, st.steps_evaluated)
                    }
                    None => profiler_no_data_reason(&st.message, profiler_seen),
                };
            }
        }
        self.settle_profiler_report();
        self.write_report();
        let mut summary = self.summary();
        summary.finished = true;
        self.store(&summary);
        summary.write_error = self.write_error.clone();
        Ok(summary)
    }

    /// Sets `ProfilerReport`'s status from its profiler rules' ([`report_verdict`]) and what
    /// became of the report.
    fn settle_profiler_report(&mut self) {
        let Some(i) = self
            .slots
            .iter()
            .position(|s| is_profiler_report(&s.status.rule))
        else {
            return;
        };
        let members: Vec<&RuleStatus> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(j, s)| *j != i && s.input() == RuleInput::Profiler)
            .map(|(_, s)| &s.status)
            .collect();
        let (status, mut message) = report_verdict(&members, self.verdicts_final);
        let fired = members.iter().map(|m| m.fired_count).sum();
        let st = &mut self.slots[i].status;
        st.status = status;
        st.fired_count = fired;
        match &self.report_outcome {
            Some(ReportOutcome::Written(destination)) => {
                message.push_str(&format!("; report: {destination}"));
            }
            Some(ReportOutcome::Failed(why)) => {
                st.status = Status::Error;
                message.push_str(&format!("; {why}"));
            }
            Some(ReportOutcome::NotDrawn(why)) => message.push_str(&format!("; {why}")),
            None => {}
        }
        st.message = message;
    }

    /// Hands the state to the reporter; `ProfilerReport`'s message says where the report went
    /// (or why it was not written). Never fails the runner: a report that cannot be written is
    /// `ProfilerReport`'s error.
    fn write_report(&mut self) {
        let slot = self
            .slots
            .iter()
            .position(|s| is_profiler_report(&s.status.rule));
        let Some(mut reporter) = self.reporter.take() else {
            self.report_outcome = Some(ReportOutcome::NotDrawn(
                "no report was drawn: no report writer is attached to the runner \
                 (smdebug-report's ReportWriter)"
                    .into(),
            ));
            self.settle_profiler_report();
            return;
        };
        self.last_report = Some(Instant::now());
        let summary = self.summary();
        let plan = reporter.prepare(&self.state(&summary));
        let destination = match plan.destination {
            Ok(d) => d,
            Err(why) => {
                if let Some(i) = slot {
                    self.slots[i].status.details = serde_json::Value::Null;
                }
                self.report_outcome = Some(ReportOutcome::NotDrawn(why));
                self.settle_profiler_report();
                self.reporter = Some(reporter);
                return;
            }
        };
        // The page shows this slot too: say where the report goes, and what it had to leave
        // out, before it is drawn.
        if let Some(i) = slot {
            self.slots[i].status.details = serde_json::json!({ "report": destination });
        }
        self.report_outcome = Some(if plan.problems.is_empty() {
            ReportOutcome::Written(destination.clone())
        } else {
            ReportOutcome::Failed(format!(
                "report: {destination}; {}",
                plan.problems.join(" ")
            ))
        });
        self.settle_profiler_report();
        let summary = self.summary();
        if let Err(e) = reporter.write(&self.state(&summary)) {
            if let Some(i) = slot {
                self.slots[i].status.details = serde_json::Value::Null;
            }
            self.report_outcome = Some(ReportOutcome::Failed(format!(
                "the report could not be written to {destination}: {e}"
            )));
            self.settle_profiler_report();
        }
        self.reporter = Some(reporter);
    }

    /// What the reporter sees.
    fn state<'a>(&'a self, summary: &'a Summary) -> RunState<'a> {
        RunState {
            location: &self.location,
            storage: &self.storage,
            write_into_run: self.write_into_run,
            trial: self.trial.as_ref(),
            summary,
            profile: &self.profile,
            code_profiles: &self.code_profiles,
            data_problems: self
                .feed
                .as_ref()
                .map_or(&NO_PROBLEMS, ProfilerFeed::problems),
        }
    }

    fn publish(&mut self) {
        let summary = self.summary();
        self.store(&summary);
    }

    /// Publishes the summary to [`RunnerHandle::summary`] and, when writing into the run,
    /// stores it there; a failed write is kept in [`Summary::write_error`], not fatal.
    fn store(&mut self, summary: &Summary) {
        if let Ok(mut s) = self.shared.lock() {
            *s = Some(summary.clone());
        }
        if !self.write_into_run {
            return;
        }
        let written = serde_json::to_vec_pretty(summary)
            .map_err(|e| e.to_string())
            .and_then(|json| {
                self.storage
                    .put(SUMMARY_FILE, json.into())
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = written {
            self.write_error = Some(format!(
                "{}: writing {SUMMARY_FILE} failed: {e}",
                self.location
            ));
        }
    }
}

/// A runner following a run on its own thread.
pub struct RunnerHandle {
    cancel: Arc<AtomicBool>,
    shared: Arc<Mutex<Option<Summary>>>,
    thread: Option<JoinHandle<Result<Summary>>>,
}

impl RunnerHandle {
    /// The latest published statuses (`None` before the first publication).
    pub fn summary(&self) -> Option<Summary> {
        self.shared.lock().ok().and_then(|s| s.clone())
    }

    /// Whether the runner has finished (the run ended, or it was cancelled, or it failed).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Waits for the run to end and returns the final statuses.
    pub fn join(mut self) -> Result<Summary> {
        self.wait()
    }

    /// Stops following now (evaluating what is already there) and returns the final statuses.
    pub fn cancel(mut self) -> Result<Summary> {
        self.cancel.store(true, Ordering::Release);
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
        self.wait()
    }

    fn wait(&mut self) -> Result<Summary> {
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| Error::Runner("the runner thread panicked".into()))?,
            None => Err(Error::Runner("the runner was already joined".into())),
        }
    }
}

impl Drop for RunnerHandle {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
