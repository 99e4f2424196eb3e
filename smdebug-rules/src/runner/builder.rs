//! [`RunnerBuilder`]: the rules (built-in ones from their specs, `ProfilerReport` expanded into
//! its profiler rules, custom ones as given), their actions and the runner's options, checked
//! and put together into a [`RuleRunner`].

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use smdebug_core::{CaptureRequest, StopSignal};
use smdebug_storage::{IntoLocation, Location, Storage};

use super::actions::Dispatcher;
use super::engine::{Following, RuleRunner};
use super::evaluation::{Evaluation, Slot};
use super::feeding::ProfilerSide;
use super::persistence::{Persistence, Reporter};
use super::run::{OpenOptions, RunSource};
use super::threads::{RunnerHandle, start};
use super::trail::{StatusLines, StatusTrail};
use crate::actions::{ActionConfig, ActionContext};
use smdebug_read::follow::{ProfilerSource, ProfilerSubscription};
use smdebug_read::trial::TensorSubscription;

use crate::error::Result;
use crate::params::RuleSpec;
use crate::registry::build_rule;
use crate::report::{ProfilerReportRule, expand_profiler_report, is_profiler_report};
use crate::rule::{LookBack, Rule, RuleInput};

impl RuleRunner {
    /// Starts building a runner for the run at `location`: text (a path or a URL, parsed
    /// once), a `Path` (always local disk) or a parsed [`Location`]. Text that names no
    /// location is the error of [`build`](RunnerBuilder::build) and
    /// [`spawn`](RunnerBuilder::spawn).
    pub fn builder(location: impl IntoLocation) -> RunnerBuilder {
        RunnerBuilder {
            location: location.into_location(),
            storage: None,
            profiler_subscription: None,
            tensor_subscription: None,
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
            read_ahead: None,
            interrupt: None,
            status_lines: None,
        }
    }
}

/// Builds a [`RuleRunner`].
pub struct RunnerBuilder {
    /// The run's location, or why the text given names none.
    location: std::result::Result<Location, smdebug_storage::Error>,
    storage: Option<Arc<dyn Storage>>,
    profiler_subscription: Option<ProfilerSubscription>,
    tensor_subscription: Option<TensorSubscription>,
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
    read_ahead: Option<u64>,
    interrupt: Option<Arc<AtomicBool>>,
    status_lines: Option<StatusLines>,
}

impl RunnerBuilder {
    /// The most bytes one tensor read may allocate, decoded and converted to `f64` as the rules
    /// read it (`TrialOptions::max_tensor_bytes`; default 1 GiB). A value over it is left out
    /// as an unreadable record of the rule that read it (listed in its status's warnings,
    /// naming the file, the tensor and the size; the rule judges on); nothing of that size is
    /// allocated.
    pub fn max_tensor_bytes(mut self, limit: u64) -> Self {
        self.max_tensor_bytes = Some(limit);
        self
    }

    /// How many global steps past the debugging rules' look-back the runner's trial reads the
    /// index, when every rule's look-back is bounded (`TrialOptions::index_read_ahead`;
    /// default 10,000): the steps held are about this many, however long the run. Less holds
    /// less and reads a long run in more stretches (one listing each).
    pub fn index_read_ahead(mut self, steps: u64) -> Self {
        self.read_ahead = Some(steps);
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

    /// Reads the run's profiler data through `subscription` to a source other consumers in
    /// the process read too (a `Session`'s dashboard), so that each file is read once. Take
    /// the subscription before any consumer polls (see [`ProfilerSource::subscribe`]). Without
    /// one the runner has a source of its own; a runner without profiler rules or reporter
    /// lets the subscription go when it is built.
    pub fn profiler_source(mut self, subscription: ProfilerSubscription) -> Self {
        self.profiler_subscription = Some(subscription);
        self
    }

    /// Reads the run's index files (and the event files read whole) through `subscription` to
    /// a [`TensorSource`](smdebug_read::trial::TensorSource) other readers in the process
    /// share (a `Session`'s dashboard), so that each file is read once
    /// ([`TrialOptions::tensor_source`](smdebug_read::trial::TrialOptions::tensor_source)).
    /// A runner whose rules read no tensors lets it go when it opens the run without a trial
    /// (a run with profiler data), and shares only the index its trial reads otherwise (a
    /// run without profiler data is opened as a tensor run).
    pub fn tensor_source(mut self, subscription: TensorSubscription) -> Self {
        self.tensor_subscription = Some(subscription);
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
    /// [`Summary::gave_up`](crate::Summary::gave_up) set. Default: none, follow until the end marker (or the cancel).
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

    /// Says every rule's status as a line at this interval, and each change of status at once
    /// (`smdebug rule VanishingGradient: InProgress -> IssuesFound at step 12: …`), to the
    /// lines' sink: a training job's log ([`StatusLines::to_stderr`]). Default: no lines; each
    /// rule's log in the run (`rules/<Rule>/log`, written unless
    /// [`write_into_run`](Self::write_into_run) is off) has its changes either way.
    pub fn status_lines(mut self, lines: StatusLines) -> Self {
        self.status_lines = Some(lines);
        self
    }

    /// Builds every rule (unknown rules, bad parameters and bad actions fail here) and opens
    /// the run.
    pub fn build(mut self) -> Result<RuleRunner> {
        let location = self.take_location()?;
        self.build_until(location, None)
    }

    /// The run's location, or the error of text that named none, taken by `build` or `spawn`
    /// (which consume the builder; what is left in its place is never read).
    fn take_location(&mut self) -> Result<Location> {
        let held = std::mem::replace(&mut self.location, Ok(Location::Local(Default::default())));
        held.map_err(crate::Error::unparsed_location)
    }

    /// Checks every rule here and now, then opens the run and follows it on a thread of its
    /// own: for a runner started beside a training job that has not written anything yet. The
    /// thread waits up to [`open_timeout`](Self::open_timeout) for the run to appear (the
    /// handle's `cancel` stops the wait); that it never appeared is the thread's error.
    pub fn spawn(mut self) -> Result<RunnerHandle> {
        let location = self.take_location()?;
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
        let shared = Arc::new(Mutex::new(None));
        let published = shared.clone();
        start(shared, move |cancel, woken| {
            let mut runner = self.build_until(location, Some(cancel))?;
            runner.out.shared = published;
            runner.follow_woken(cancel, woken)
        })
    }

    fn build_until(
        mut self,
        location: Location,
        cancel: Option<&AtomicBool>,
    ) -> Result<RuleRunner> {
        let entries = self.entries()?;
        // A report draws the profiler data even when no profiler rule runs.
        let has_profiler = self.reporter.is_some()
            || entries
                .iter()
                .any(|(r, _)| r.input() == RuleInput::Profiler);
        let has_tensors = entries.iter().any(|(r, _)| r.input() == RuleInput::Tensors);
        // The longest look-back of the debugging rules (`None`: one needs the whole run, or
        // none reads tensors and nothing goes step by step through the trial).
        let look_back = has_tensors.then_some(()).and_then(|()| {
            entries
                .iter()
                .filter_map(|(r, _)| match r {
                    Rule::Tensor(t) => Some(t.needs().look_back),
                    Rule::Profiler(_) => None,
                })
                .try_fold(0, |longest, look_back| match look_back {
                    LookBack::Steps(n) => Some(longest.max(n)),
                    LookBack::WholeRun => None,
                })
        });
        let run = RunSource::open(
            &location,
            OpenOptions {
                storage: self.storage.take(),
                max_tensor_bytes: self.max_tensor_bytes,
                profiler: has_profiler,
                tensors: has_tensors,
                tensor_source: self.tensor_subscription.take(),
                look_back,
                read_ahead: self.read_ahead,
                timeout: self.open_timeout,
                poll_interval: self.poll_interval,
            },
            cancel,
        )?;
        let slots: Vec<Slot> = entries
            .into_iter()
            .map(|(rule, actions)| Slot::new(rule, actions))
            .collect();
        let names: Vec<&str> = slots.iter().map(|s| s.status.rule.as_str()).collect();
        let trail = StatusTrail::new(&names, self.status_lines.take());
        let dispatcher = Dispatcher::new(
            &run.location,
            ActionContext {
                storage: run.storage.clone(),
                stop_signal: self.stop_signal,
            },
        );
        let subscription = self.profiler_subscription.take();
        let profiler = ProfilerSide::new(
            has_profiler.then(|| {
                subscription.unwrap_or_else(|| ProfilerSource::new(run.storage.clone()).subscribe())
            }),
            self.reporter.is_some(),
        );
        Ok(RuleRunner {
            run,
            rules: Evaluation::new(slots, dispatcher, self.interrupt),
            profiler,
            out: Persistence::new(self.write_into_run, self.reporter, self.report_every),
            trail,
            following: Following {
                poll_interval: self.poll_interval,
                idle_timeout: self.idle_timeout,
            },
        })
    }

    /// Every rule to run with its actions, checked: the rules given as objects, then
    /// `ProfilerReport` (when a spec names it), then the rules of the specs, `ProfilerReport`
    /// expanded into its profiler rules (a profiler rule also given on its own runs once, as
    /// given on its own).
    fn entries(&mut self) -> Result<Vec<(Rule, Vec<ActionConfig>)>> {
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
        Ok(entries)
    }
}
