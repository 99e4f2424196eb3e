//! The rule runner: evaluates rules over a finished run, or follows a live run in its own
//! thread (or process), keeps a status per rule, triggers actions and writes a JSON summary
//! into the run (`rules/rule_job_summary.json`).
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

use serde::{Deserialize, Serialize};
use smdebug_core::StopSignal;
use smdebug_io::Storage;
use smdebug_io::trial::{StepState, Trial, TrialOptions};

use crate::actions::{ActionConfig, ActionContext, RuleEvent, execute};
use crate::error::{Error, Result};
use crate::params::RuleSpec;
use crate::rule::{Evidence, Rule, RuleResult};
use crate::rules::build_rule;

/// The summary file, relative to the run.
pub const SUMMARY_FILE: &str = "rules/rule_job_summary.json";

/// Where a rule stands (SageMaker's `RuleEvaluationStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    /// The run goes on and the rule has not fired.
    InProgress,
    /// The run is over (or the offline evaluation finished) and the rule never fired.
    NoIssuesFound,
    /// The rule fired at least once.
    IssuesFound,
    /// The rule failed (a read error, a bad configuration found at run time); it is no longer
    /// evaluated. The other rules go on.
    Error,
}

/// A rule's status, as reported and written into the summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuleStatus {
    pub rule: String,
    pub status: Status,
    pub parameters: serde_json::Value,
    /// The configured actions' types.
    pub actions: Vec<String>,
    pub first_fired_step: Option<u64>,
    pub last_fired_step: Option<u64>,
    /// Steps at which the rule fired.
    pub fired_count: u64,
    /// Steps at which the rule was evaluated.
    pub steps_evaluated: u64,
    /// Tensors (or values) checked over all steps; 0 means the rule found nothing to check.
    pub datapoints: u64,
    /// The latest firing's message (or the error).
    pub message: String,
    /// The latest firing's evidence.
    pub evidence: Vec<Evidence>,
    /// Actions that failed, with why.
    pub action_errors: Vec<String>,
}

/// Every rule's status and where the run stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub run: String,
    /// Whether the run had written its end marker when the summary was made.
    pub run_complete: bool,
    /// The end marker's reason, if any (a stop request's reason shows here).
    pub end_reason: Option<String>,
    /// The last global step evaluated.
    pub last_step: Option<u64>,
    /// Whether the runner has finished (no more updates will come).
    pub finished: bool,
    /// When the summary was written, seconds since the Unix epoch.
    pub updated_at: f64,
    pub rules: Vec<RuleStatus>,
}

impl Summary {
    /// True when some rule fired.
    pub fn issues_found(&self) -> bool {
        self.rules.iter().any(|r| r.status == Status::IssuesFound)
    }

    /// True when some rule failed.
    pub fn has_errors(&self) -> bool {
        self.rules.iter().any(|r| r.status == Status::Error)
    }

    /// The status of the rule called `name`.
    pub fn rule(&self, name: &str) -> Option<&RuleStatus> {
        self.rules.iter().find(|r| r.rule == name)
    }
}

struct Slot {
    rule: Box<dyn Rule>,
    actions: Vec<ActionConfig>,
    actions_done: bool,
    status: RuleStatus,
}

/// Builds a [`RuleRunner`].
pub struct RunnerBuilder {
    location: String,
    rules: Vec<(Box<dyn Rule>, Vec<ActionConfig>)>,
    specs: Vec<RuleSpec>,
    poll_interval: Duration,
    write_summary: bool,
    stop_signal: Option<StopSignal>,
    open_timeout: Duration,
}

impl RunnerBuilder {
    /// Adds a built-in rule from a spec (with its actions).
    pub fn spec(mut self, spec: RuleSpec) -> Self {
        self.specs.push(spec);
        self
    }

    /// Adds a rule object (a custom rule) with its actions.
    pub fn rule(mut self, rule: Box<dyn Rule>, actions: Vec<ActionConfig>) -> Self {
        self.rules.push((rule, actions));
        self
    }

    /// How often a following runner looks for new steps. Default 200 ms.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Write `rules/rule_job_summary.json` into the run. Default true.
    pub fn write_summary(mut self, on: bool) -> Self {
        self.write_summary = on;
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

    /// Builds every rule (unknown rules, bad parameters and bad actions fail here) and opens
    /// the run.
    pub fn build(self) -> Result<RuleRunner> {
        let mut entries = self.rules;
        for spec in &self.specs {
            let rule = build_rule(spec)?;
            let mut actions = spec.actions.clone();
            if crate::rules::find_builtin(&spec.name).is_some_and(|b| b.name == "StalledTraining")
                && rule.parameters()["stop_training_on_fire"] == serde_json::Value::Bool(true)
                && !actions.contains(&ActionConfig::StopTraining)
            {
                actions.push(ActionConfig::StopTraining);
            }
            entries.push((rule, actions));
        }
        for (_, actions) in &entries {
            for a in actions {
                a.validate()?;
            }
        }
        let open = |location: &str| -> Result<(Arc<dyn Storage>, Trial)> {
            let storage = smdebug_io::open_storage(location).map_err(|e| Error::OpenRun {
                location: location.to_string(),
                source: Box::new(e),
            })?;
            let trial = Trial::from_storage(location, storage.clone(), TrialOptions::default())
                .map_err(|e| Error::OpenRun {
                    location: location.to_string(),
                    source: Box::new(e),
                })?;
            Ok((storage, trial))
        };
        let deadline = Instant::now() + self.open_timeout;
        let (storage, trial) = loop {
            match open(&self.location) {
                Ok(x) => break x,
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => std::thread::sleep(self.poll_interval),
            }
        };
        let slots = entries
            .into_iter()
            .map(|(rule, actions)| Slot {
                status: RuleStatus {
                    rule: rule.name().to_string(),
                    status: Status::InProgress,
                    parameters: rule.parameters(),
                    actions: actions.iter().map(|a| a.kind().to_string()).collect(),
                    first_fired_step: None,
                    last_fired_step: None,
                    fired_count: 0,
                    steps_evaluated: 0,
                    datapoints: 0,
                    message: String::new(),
                    evidence: Vec::new(),
                    action_errors: Vec::new(),
                },
                rule,
                actions,
                actions_done: false,
            })
            .collect();
        Ok(RuleRunner {
            location: self.location,
            ctx: ActionContext {
                storage: storage.clone(),
                stop_signal: self.stop_signal,
            },
            storage,
            trial,
            slots,
            next_step: 0,
            last_step: None,
            poll_interval: self.poll_interval,
            write_summary: self.write_summary,
            shared: Arc::new(Mutex::new(None)),
        })
    }
}

/// Evaluates rules over one run. See the module docs.
pub struct RuleRunner {
    location: String,
    storage: Arc<dyn Storage>,
    trial: Trial,
    slots: Vec<Slot>,
    ctx: ActionContext,
    /// Steps below this were handled.
    next_step: u64,
    last_step: Option<u64>,
    poll_interval: Duration,
    write_summary: bool,
    shared: Arc<Mutex<Option<Summary>>>,
}

impl RuleRunner {
    /// Starts building a runner for the run at `location` (path or URL).
    pub fn builder(location: &str) -> RunnerBuilder {
        RunnerBuilder {
            location: location.to_string(),
            rules: Vec::new(),
            specs: Vec::new(),
            poll_interval: Duration::from_millis(200),
            write_summary: true,
            stop_signal: None,
            open_timeout: Duration::ZERO,
        }
    }

    /// The trial the rules read.
    pub fn trial(&self) -> &Trial {
        &self.trial
    }

    /// Evaluates every step available now and finishes: rules that never fired are
    /// `NoIssuesFound`. For a finished run this is the whole evaluation.
    pub fn run_offline(&mut self) -> Result<Summary> {
        self.trial.refresh().map_err(|e| self.read_error(e))?;
        self.process_available(true)?;
        self.finish()
    }

    /// Follows the run until it writes its end marker (then evaluates the rest and finishes),
    /// or until `cancel` is set. Never blocks the training job: it only reads.
    pub fn follow(&mut self, cancel: &AtomicBool) -> Result<Summary> {
        let mut last_progress = Instant::now();
        let mut last_written = Instant::now();
        self.publish()?;
        loop {
            self.trial.refresh().map_err(|e| self.read_error(e))?;
            let complete = self.trial.is_complete().map_err(|e| self.read_error(e))?;
            let (processed, changed) = self.process_available(complete)?;
            if complete {
                return self.finish();
            }
            if processed > 0 {
                last_progress = Instant::now();
            } else {
                self.idle(last_progress.elapsed())?;
            }
            if changed || last_written.elapsed() >= Duration::from_secs(2) {
                self.publish()?;
                last_written = Instant::now();
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
            run_complete: self.trial.is_complete().unwrap_or(false),
            end_reason: self
                .trial
                .end_reason()
                .ok()
                .flatten()
                .map(|r| r.to_string()),
            last_step: self.last_step,
            finished: false,
            updated_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            rules: self.slots.iter().map(|s| s.status.clone()).collect(),
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
        let steps = self
            .trial
            .global_steps(None)
            .map_err(|e| self.read_error(e))?;
        let mut processed = 0;
        let mut changed = false;
        let from = self.next_step;
        for step in steps.into_iter().filter(|s| *s >= from) {
            if !all {
                let state = self
                    .trial
                    .has_passed_step(step, None)
                    .map_err(|e| self.read_error(e))?;
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
            if self.slots[i].status.status == Status::Error {
                continue;
            }
            let outcome = self.slots[i].rule.invoke_at_step(&self.trial, step);
            changed |= self.record(i, outcome.map(Some));
        }
        changed
    }

    fn idle(&mut self, idle: Duration) -> Result<()> {
        let mut changed = false;
        for i in 0..self.slots.len() {
            if self.slots[i].status.status == Status::Error {
                continue;
            }
            let last = self.last_step;
            let outcome = self.slots[i].rule.on_idle(&self.trial, last, idle);
            changed |= self.record(i, outcome);
        }
        if changed {
            self.publish()?;
        }
        Ok(())
    }

    fn record(&mut self, i: usize, outcome: Result<Option<RuleResult>>) -> bool {
        let slot = &mut self.slots[i];
        match outcome {
            Ok(None) => false,
            Ok(Some(r)) => {
                slot.status.steps_evaluated += 1;
                slot.status.datapoints += r.datapoints as u64;
                if !r.fired {
                    return false;
                }
                let st = &mut slot.status;
                st.status = Status::IssuesFound;
                st.first_fired_step.get_or_insert(r.step);
                st.last_fired_step = Some(r.step);
                st.fired_count += 1;
                st.message = r.message.clone();
                st.evidence = r.evidence.clone();
                if !slot.actions_done && !slot.actions.is_empty() {
                    slot.actions_done = true;
                    let event = RuleEvent {
                        rule: st.rule.clone(),
                        run: self.location.clone(),
                        step: r.step,
                        message: r.message,
                        evidence: r.evidence,
                    };
                    for a in &slot.actions {
                        if let Err(e) = execute(a, &event, &self.ctx) {
                            slot.status.action_errors.push(e.to_string());
                        }
                    }
                }
                true
            }
            Err(e) => {
                slot.status.status = Status::Error;
                slot.status.message = e.to_string();
                true
            }
        }
    }

    fn finish(&mut self) -> Result<Summary> {
        for s in &mut self.slots {
            if s.status.status == Status::InProgress {
                s.status.status = Status::NoIssuesFound;
                if s.status.datapoints == 0 && s.status.rule != "StalledTraining" {
                    s.status.message = "no tensors of this run matched the rule's selection".into();
                }
            }
        }
        let mut summary = self.summary();
        summary.finished = true;
        self.store(&summary)?;
        Ok(summary)
    }

    fn publish(&mut self) -> Result<()> {
        let summary = self.summary();
        self.store(&summary)
    }

    fn store(&mut self, summary: &Summary) -> Result<()> {
        if let Ok(mut s) = self.shared.lock() {
            *s = Some(summary.clone());
        }
        if !self.write_summary {
            return Ok(());
        }
        let json = serde_json::to_vec_pretty(summary).map_err(|e| Error::BadFile {
            path: SUMMARY_FILE.into(),
            reason: e.to_string(),
        })?;
        self.storage
            .put(SUMMARY_FILE, json.into())
            .map_err(|e| Error::Store {
                location: self.location.clone(),
                op: "put",
                path: SUMMARY_FILE.into(),
                source: Box::new(e),
            })
    }
}

/// Reads the summary a runner wrote into a run.
pub fn read_summary(location: &str) -> Result<Option<Summary>> {
    let storage = smdebug_io::open_storage(location).map_err(|e| Error::OpenRun {
        location: location.to_string(),
        source: Box::new(e),
    })?;
    match storage.get(SUMMARY_FILE) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::BadFile {
                path: format!("{location}/{SUMMARY_FILE}"),
                reason: e.to_string(),
            }),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(Error::Store {
            location: location.to_string(),
            op: "get",
            path: SUMMARY_FILE.into(),
            source: Box::new(e),
        }),
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
