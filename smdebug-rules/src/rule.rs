//! What a rule is: a [`TensorRule`] (a debugging rule, over saved tensors step by step) or a
//! [`ProfilerRule`] (over system metrics and framework spans), registered as a [`Rule`]; what a
//! rule consumes ([`Needs`] for a tensor rule, [`ProfilerNeeds`] for a profiler rule: required
//! by its trait, and checked when it is registered); and what a rule returns ([`RuleResult`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use smdebug_core::CaptureRequest;
use smdebug_read::trial::Trial;

use crate::error::{Error, Result};
pub use crate::evidence::Evidence;
pub use crate::needs::{LookBack, Needs, ProfilerInput, ProfilerNeeds};
use crate::window::ProfilerWindow;

/// What a rule reads: saved tensors (debugging rules) or the profiler's system metrics and
/// framework spans (profiler rules).
///
/// It is also the rule's kind as statuses, summaries and listings name it: `debugging` or
/// `profiler` (its [`kind`](Self::kind), its JSON form and its `Display`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum RuleInput {
    /// Tensors of the trial, step by step: a [`TensorRule`], a `debugging` rule.
    #[serde(rename = "debugging", alias = "tensors")]
    Tensors,
    /// System metrics and framework spans, window by window: a [`ProfilerRule`].
    #[serde(rename = "profiler")]
    Profiler,
}

impl RuleInput {
    /// `debugging` or `profiler`, as listings and summaries name the kind of rule.
    pub fn kind(self) -> &'static str {
        match self {
            RuleInput::Tensors => "debugging",
            RuleInput::Profiler => "profiler",
        }
    }
}

impl std::fmt::Display for RuleInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so that `{:9}` aligns listings.
        f.pad(self.kind())
    }
}

/// A debugging rule: a check over the saved tensors of a run, step by step.
///
/// What it consumes is part of the trait and cannot be left out: [`needs`](Self::needs) says
/// which tensors it reads and what the hook must save for it (SageMaker's
/// `collections_to_save`), and [`invoke_at_step`](Self::invoke_at_step) evaluates it. The
/// runner calls `invoke_at_step` once per global step, in order, after every worker has written
/// that step.
///
/// A rule that finds its condition returns a [`RuleResult`] with `fired: true`; it never
/// signals a finding by returning an error or by panicking. Errors are for failures (a corrupt
/// file, an unreachable store). A result's `datapoints` counts what the rule could check: a
/// rule that checked nothing over a whole run ends in [`Status::NoData`](crate::Status::NoData)
/// (with the reason, from its `needs`), never in `NoIssuesFound`.
///
/// Rules may keep state between calls (previous values, counters): the runner keeps one
/// instance per run and calls it from one thread at a time. Register one with
/// [`Rule::tensor`].
///
/// A custom rule:
///
/// ```
/// use smdebug_read::trial::Trial;
/// use smdebug_rules::{Evidence, Needs, Result, RuleResult, TensorRule, TensorSelection, rule_identity};
///
/// /// Fires when any gradient's largest absolute value exceeds `limit`.
/// struct GradientTooLarge {
///     limit: f64,
///     gradients: TensorSelection,
/// }
///
/// impl TensorRule for GradientTooLarge {
///     rule_identity!(name: "GradientTooLarge", params: [limit]);
///
///     fn needs(&self) -> Needs {
///         // Reads the gradients; the hook saves the `gradients` collection for it.
///         Needs::of(self.name(), &self.gradients, "gradients")
///     }
///
///     fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
///         let mut result = RuleResult::new(step);
///         // Each selected tensor saved at this step; the others are skipped.
///         for reading in self.gradients.values_at(self.name(), trial, step)? {
///             let (name, v) = reading?;
///             result.datapoints += 1;
///             let max = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
///             if max > self.limit {
///                 result.fire(format!("{name}: max |g| = {max}"));
///                 result.add_evidence(Evidence::new(&name, step, "abs_max", max).limit(self.limit));
///             }
///         }
///         Ok(result)
///     }
/// }
///
/// let rule = GradientTooLarge {
///     limit: 100.0,
///     gradients: TensorSelection::gradients("GradientTooLarge").unwrap(),
/// };
/// assert_eq!(rule.name(), "GradientTooLarge");
/// assert_eq!(rule.parameters()["limit"], 100.0);
/// assert_eq!(rule.needs().capture[0].collection, "gradients");
/// ```
pub trait TensorRule: Send {
    /// The rule's name as users see it in statuses and summaries (`VanishingGradient`).
    fn name(&self) -> &str;

    /// The rule's parameters as JSON, recorded in the summary. Default: none.
    fn parameters(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// The tensors the rule reads and what the hook must save for it.
    fn needs(&self) -> Needs;

    /// Evaluates the rule at global step `step`. Tensors not saved at this step are skipped
    /// (the result then has no datapoints), never an error.
    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult>;

    /// What the rule has found so far, for reports: counts, per-tensor tables. Recorded in the
    /// summary. Default: nothing.
    fn details(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// Called by a runner that follows a live run when no new step has arrived for `idle`;
    /// `last_step` is the last step the rule saw. Rules about progress (StalledTraining) fire
    /// here; the others have nothing to do then (the default).
    fn on_idle(
        &mut self,
        _trial: &Trial,
        _last_step: Option<u64>,
        _idle: Duration,
    ) -> Result<Option<RuleResult>> {
        Ok(None)
    }
}

/// A profiler rule: a check over the system metrics and framework spans of a run.
///
/// What it consumes is part of the trait and cannot be left out: [`needs`](Self::needs) says
/// which of the profiler data it reads (system metrics, framework spans, the step timeline),
/// and [`invoke_on_window`](Self::invoke_on_window) evaluates it. The runner hands it the
/// system samples and closed framework spans that are new since the previous call, in time
/// order, and a last window with `final_window: true` when no more data will come. Every
/// result counts its datapoints into the rule's status; each fired result is one firing (with
/// its `time_us`). A result that did not fire but carries a message tells why the rule had
/// nothing to check ("no GPU metrics in this run"): a rule that checked no datapoint over the
/// whole run ends in [`Status::NoData`](crate::Status::NoData) with that message, or, without
/// one, with the reason its `needs` gives (no framework spans in the run). Profiler rules ask
/// the hook for nothing. Register one with [`Rule::profiler`]; a rule whose `needs` declares
/// nothing is refused there ([`Rule::validate`]).
///
/// ```
/// use smdebug_rules::{ProfilerInput, ProfilerNeeds, ProfilerRule, ProfilerWindow, Result, RuleResult, rule_identity};
///
/// /// Fires when a framework span lasts longer than `limit_us`.
/// struct LongSpan {
///     limit_us: u64,
/// }
///
/// impl ProfilerRule for LongSpan {
///     rule_identity!(name: "LongSpan", params: [limit_us]);
///
///     fn needs(&self) -> ProfilerNeeds {
///         ProfilerNeeds::reading([ProfilerInput::Spans, ProfilerInput::StepTimeline])
///     }
///
///     fn invoke_on_window(&mut self, window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
///         let mut out = Vec::new();
///         for span in window.spans {
///             let mut r = RuleResult::at_time(window.step_at(span.start_us), span.start_us);
///             r.datapoints = 1;
///             if span.end_us - span.start_us > self.limit_us {
///                 r.fire(format!("{} took {} µs", span.phase, span.end_us - span.start_us));
///             }
///             out.push(r);
///         }
///         Ok(out)
///     }
/// }
///
/// let rule = LongSpan { limit_us: 1_000 };
/// assert!(rule.needs().reads(ProfilerInput::Spans));
/// assert_eq!(rule.needs().describe(), "framework spans and the step timeline");
/// ```
pub trait ProfilerRule: Send {
    /// The rule's name as users see it in statuses and summaries (`CPUBottleneck`).
    fn name(&self) -> &str;

    /// The rule's parameters as JSON, recorded in the summary. Default: none.
    fn parameters(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// The profiler data the rule reads.
    fn needs(&self) -> ProfilerNeeds;

    /// Evaluates the rule over the profiler data that is new since the previous call.
    fn invoke_on_window(&mut self, window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>>;

    /// What the rule has found so far, typed: the evidence the report's sections and the
    /// dashboard show (bottleneck snapshots, outlier steps, percentiles). Recorded in the
    /// summary in its JSON form. Default: nothing.
    fn details(&self) -> Option<crate::profiler::Details> {
        None
    }
}

/// A rule as the runner takes it: a [`TensorRule`] or a [`ProfilerRule`]. Which one it is
/// decides what the runner hands it; the traits make sure it has what it needs for that.
///
/// ```
/// use smdebug_rules::{Rule, RuleInput, RuleSpec, build_rule};
/// let rule: Rule = build_rule(&RuleSpec::new("VanishingGradient")).unwrap();
/// assert_eq!(rule.input(), RuleInput::Tensors);
/// assert_eq!(rule.capture_requests()[0].collection, "gradients");
/// let cpu = build_rule(&RuleSpec::new("CPUBottleneck")).unwrap();
/// assert!(cpu.capture_requests().is_empty());
/// ```
pub enum Rule {
    /// A debugging rule over saved tensors.
    Tensor(Box<dyn TensorRule>),
    /// A profiler rule over system metrics and framework spans.
    Profiler(Box<dyn ProfilerRule>),
}

impl Rule {
    /// Registers a debugging rule.
    pub fn tensor(rule: impl TensorRule + 'static) -> Rule {
        Rule::Tensor(Box::new(rule))
    }

    /// Registers a profiler rule.
    pub fn profiler(rule: impl ProfilerRule + 'static) -> Rule {
        Rule::Profiler(Box::new(rule))
    }

    /// The rule's name.
    pub fn name(&self) -> &str {
        match self {
            Rule::Tensor(r) => r.name(),
            Rule::Profiler(r) => r.name(),
        }
    }

    /// The rule's parameters as JSON.
    pub fn parameters(&self) -> serde_json::Value {
        match self {
            Rule::Tensor(r) => r.parameters(),
            Rule::Profiler(r) => r.parameters(),
        }
    }

    /// What the rule has found so far, for reports.
    pub fn details(&self) -> serde_json::Value {
        match self {
            Rule::Tensor(r) => r.details(),
            Rule::Profiler(r) => r
                .details()
                .map_or(serde_json::Value::Null, |d| d.to_value()),
        }
    }

    /// What the rule reads.
    pub fn input(&self) -> RuleInput {
        match self {
            Rule::Tensor(_) => RuleInput::Tensors,
            Rule::Profiler(_) => RuleInput::Profiler,
        }
    }

    /// The debugging rule, to call it by hand; `None` for a profiler rule.
    pub fn as_tensor(&mut self) -> Option<&mut (dyn TensorRule + 'static)> {
        match self {
            Rule::Tensor(r) => Some(r.as_mut()),
            Rule::Profiler(_) => None,
        }
    }

    /// The profiler rule, to feed it windows by hand; `None` for a debugging rule.
    pub fn as_profiler(&mut self) -> Option<&mut (dyn ProfilerRule + 'static)> {
        match self {
            Rule::Profiler(r) => Some(r.as_mut()),
            Rule::Tensor(_) => None,
        }
    }

    /// A tensor rule's [`needs`](TensorRule::needs); `None` for a profiler rule.
    pub fn needs(&self) -> Option<Needs> {
        match self {
            Rule::Tensor(r) => Some(r.needs()),
            Rule::Profiler(_) => None,
        }
    }

    /// A profiler rule's [`needs`](ProfilerRule::needs); `None` for a tensor rule.
    pub fn profiler_needs(&self) -> Option<ProfilerNeeds> {
        match self {
            Rule::Profiler(r) => Some(r.needs()),
            Rule::Tensor(_) => None,
        }
    }

    /// What the hook must save for the rule: a tensor rule's [`Needs::capture`]; nothing for a
    /// profiler rule.
    pub fn capture_requests(&self) -> Vec<CaptureRequest> {
        self.needs().map(|n| n.capture).unwrap_or_default()
    }

    /// The checks made when a rule is registered with a runner: a name, capture requests that
    /// a hook can apply (patterns that compile, schedules that hold together), and a
    /// declaration of what it consumes that says something: a tensor rule reads tensors or
    /// says what else it needs ([`Needs::requiring`]), a profiler rule reads some profiler
    /// data ([`ProfilerNeeds::reading`]). A rule that fails them is an [`Error::BadRule`]
    /// naming it and what its declaration lacks.
    ///
    /// ```
    /// use smdebug_rules::{ProfilerNeeds, ProfilerRule, ProfilerWindow, Result, Rule, RuleResult};
    ///
    /// struct ReadsNothing;
    /// impl ProfilerRule for ReadsNothing {
    ///     fn name(&self) -> &str { "ReadsNothing" }
    ///     fn needs(&self) -> ProfilerNeeds { ProfilerNeeds::default() }
    ///     fn invoke_on_window(&mut self, _: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
    ///         Ok(Vec::new())
    ///     }
    /// }
    /// let err = Rule::profiler(ReadsNothing).validate().unwrap_err().to_string();
    /// assert!(err.contains("ReadsNothing") && err.contains("declares no profiler data"), "{err}");
    /// ```
    pub fn validate(&self) -> Result<()> {
        let name = self.name();
        let bad = |reason: String| Error::BadRule {
            rule: name.to_string(),
            reason,
        };
        if name.trim().is_empty() {
            return Err(bad("a rule needs a name".into()));
        }
        let mut scratch = smdebug_core::HookConfig::default();
        for request in self.capture_requests() {
            scratch.apply(&request).map_err(|source| Error::Capture {
                rule: name.to_string(),
                source,
            })?;
        }
        let problem = match self {
            Rule::Tensor(r) => r.needs().problem(),
            Rule::Profiler(r) => r.needs().problem(),
        };
        match problem {
            Some(problem) => Err(bad(problem)),
            None => Ok(()),
        }
    }
}

impl From<Box<dyn TensorRule>> for Rule {
    fn from(rule: Box<dyn TensorRule>) -> Rule {
        Rule::Tensor(rule)
    }
}

impl From<Box<dyn ProfilerRule>> for Rule {
    fn from(rule: Box<dyn ProfilerRule>) -> Rule {
        Rule::Profiler(rule)
    }
}

/// Writes the identity part of a rule's trait impl ([`TensorRule`] or [`ProfilerRule`]) —
/// [`name`](TensorRule::name) and [`parameters`](TensorRule::parameters) — the same way for
/// every rule, built-in or custom. What the rule consumes ([`TensorRule::needs`],
/// [`TensorRule::invoke_at_step`], [`ProfilerRule::needs`], [`ProfilerRule::invoke_on_window`])
/// it writes itself.
///
/// - `rule_identity!()`: the name is `Self::NAME`, the parameters are the field `params`
///   (any `Serialize` type) as JSON.
/// - `rule_identity!(name: "AccuracyDrop", params: [drop, patience])`: a rule without a `NAME`
///   constant or a parameter struct: the listed fields are its parameters (`params` may be
///   left out).
///
/// ```
/// use smdebug_read::trial::Trial;
/// use smdebug_rules::{Needs, Result, RuleResult, TensorRule, rule_identity};
///
/// struct Watch {
///     limit: f64,
/// }
///
/// impl TensorRule for Watch {
///     rule_identity!(name: "Watch", params: [limit]);
///
///     fn needs(&self) -> Needs {
///         Needs::tensors(self.name(), &["loss"], "losses")
///     }
///
///     fn invoke_at_step(&mut self, _trial: &Trial, step: u64) -> Result<RuleResult> {
///         Ok(RuleResult::new(step))
///     }
/// }
///
/// let rule = Watch { limit: 2.0 };
/// assert_eq!(rule.name(), "Watch");
/// assert_eq!(rule.parameters()["limit"], 2.0);
/// ```
#[macro_export]
macro_rules! rule_identity {
    () => {
        fn name(&self) -> &str {
            Self::NAME
        }
        fn parameters(&self) -> $crate::__private::Value {
            $crate::params::to_json(&self.params)
        }
    };
    (name: $name:expr $(, params: [$($param:ident),* $(,)?])? $(,)?) => {
        fn name(&self) -> &str {
            $name
        }
        fn parameters(&self) -> $crate::__private::Value {
            #[allow(unused_mut)]
            let mut params = $crate::__private::Map::new();
            $($(params.insert(
                stringify!($param).to_string(),
                $crate::params::to_json(&self.$param),
            );)*)?
            $crate::__private::Value::Object(params)
        }
    };
}

/// At most this many evidence entries per result through [`RuleResult::add_evidence`].
pub const MAX_EVIDENCE: usize = 10;

/// What a rule found at one step (debugging rules) or at one time (profiler rules).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleResult {
    /// Global step evaluated. For profiler rules: the step the finding concerns, or the step
    /// that was running at `time_us` (0 when no step span covers it).
    pub step: u64,
    /// When the condition was seen, microseconds since the Unix epoch (profiler rules); `None`
    /// for results of debugging rules.
    pub time_us: Option<u64>,
    /// Whether the rule's condition is present at this step.
    pub fired: bool,
    /// How many tensors (or values) the rule checked at this step; 0 means it had nothing to
    /// look at.
    pub datapoints: usize,
    /// How many it read here without judging them (yet): a window still filling, fewer samples
    /// than the rule needs, a weight's first saved value with nothing to compare it with, a
    /// core count still unknown. They count as data the rule had at this step (its step
    /// counts as judged in "judged N of M steps"), but a rule whose results only ever held
    /// such values reached no verdict and ends in `NoData`, never `NoIssuesFound`.
    pub unjudged: usize,
    /// The step is not one the rule judges by its definition (an EVAL step for
    /// WeightUpdateRatio, a step past PoorWeightInitialization's `steps`): it counts in
    /// neither N nor M of "judged N of M steps". Debugging rules only.
    pub outside: bool,
    /// What was found, for people; empty when nothing fired.
    pub message: String,
    /// The measurements behind a firing (at most a few per tensor).
    pub evidence: Vec<Evidence>,
}

impl RuleResult {
    /// A result with nothing checked and nothing found yet.
    pub fn new(step: u64) -> Self {
        RuleResult {
            step,
            time_us: None,
            fired: false,
            datapoints: 0,
            unjudged: 0,
            outside: false,
            message: String::new(),
            evidence: Vec::new(),
        }
    }

    /// A profiler rule's result at `time_us` (microseconds since the epoch), during `step`.
    pub fn at_time(step: u64, time_us: u64) -> Self {
        RuleResult {
            time_us: Some(time_us),
            ..RuleResult::new(step)
        }
    }

    /// Adds a measurement unless the result holds [`MAX_EVIDENCE`] already, so a rule firing
    /// on hundreds of tensors keeps its summary readable.
    pub fn add_evidence(&mut self, evidence: Evidence) {
        if self.evidence.len() < MAX_EVIDENCE {
            self.evidence.push(evidence);
        }
    }

    /// A result for a step the rule does not judge by its definition ([`outside`](Self::outside)).
    pub fn outside(step: u64) -> Self {
        RuleResult {
            outside: true,
            ..RuleResult::new(step)
        }
    }

    /// Marks the result fired and appends `message` (several findings are joined with `; `).
    pub fn fire(&mut self, message: impl AsRef<str>) {
        self.fired = true;
        if !self.message.is_empty() {
            self.message.push_str("; ");
        }
        self.message.push_str(message.as_ref());
    }
}
