//! The [`Rule`] trait and what a rule returns at a step (debugging rules) or over a window of
//! profiler data (profiler rules).

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};
use smdebug_io::trial::Trial;

use crate::error::Result;
use crate::window::ProfilerWindow;

/// What a rule reads: saved tensors (debugging rules) or the profiler's system metrics and
/// framework spans (profiler rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleInput {
    /// Tensors of the trial, step by step: the runner calls
    /// [`invoke_at_step`](Rule::invoke_at_step).
    Tensors,
    /// System metrics and framework spans, window by window: the runner calls
    /// [`invoke_on_window`](Rule::invoke_on_window).
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

/// A check evaluated over a run.
///
/// There are two kinds of rules, told apart by [`input`](Rule::input):
///
/// - Debugging rules (the default, [`RuleInput::Tensors`]) implement
///   [`required_tensors`](Rule::required_tensors) and [`invoke_at_step`](Rule::invoke_at_step).
///   The runner calls `invoke_at_step` once per global step, in order, after every worker has
///   written that step.
/// - Profiler rules ([`RuleInput::Profiler`]) implement
///   [`invoke_on_window`](Rule::invoke_on_window): the runner hands them the system samples
///   and closed framework spans that are new since the previous call, in time order, and a
///   last window with `final_window: true` when no more data will come.
///
/// A rule that finds its condition returns a [`RuleResult`] with `fired: true`; it never
/// signals a finding by returning an error or by panicking. Errors are for failures (a corrupt
/// file, an unreachable store).
///
/// Rules may keep state between calls (previous values, counters, per-node tables): the runner
/// keeps one instance per run and calls it from one thread at a time.
///
/// A custom rule:
///
/// ```
/// use smdebug_io::trial::Trial;
/// use smdebug_rules::{Evidence, Result, Rule, RuleResult, TensorSelection, rule_identity};
///
/// /// Fires when any gradient's largest absolute value exceeds `limit`.
/// struct GradientTooLarge {
///     limit: f64,
///     gradients: TensorSelection,
/// }
///
/// impl Rule for GradientTooLarge {
///     rule_identity!(name: "GradientTooLarge", params: [limit], selection: gradients);
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
/// ```
pub trait Rule: Send {
    /// The rule's name as users see it in statuses and summaries (`VanishingGradient`).
    fn name(&self) -> &str;

    /// The rule's parameters as JSON, recorded in the summary. Default: none.
    fn parameters(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// What the rule reads. Default: tensors (a debugging rule).
    fn input(&self) -> RuleInput {
        RuleInput::Tensors
    }

    /// The names of the tensors the rule reads at `step` (those it would check if saved there).
    /// Debugging rules implement this; the default reads nothing.
    fn required_tensors(&self, _trial: &Trial, _step: u64) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// Evaluates the rule at global step `step`. Tensors not saved at this step are skipped
    /// (the result then has no datapoints), never an error. Debugging rules implement this; the
    /// default checks nothing.
    fn invoke_at_step(&mut self, _trial: &Trial, step: u64) -> Result<RuleResult> {
        Ok(RuleResult::new(step))
    }

    /// Evaluates a profiler rule over the profiler data that is new since the previous call.
    ///
    /// Every result counts its datapoints into the rule's status; each fired result is one
    /// firing (with its `time_us`). A result that did not fire but carries a message tells why
    /// the rule had nothing to check ("no GPU metrics in this run"). Profiler rules implement
    /// this; the default checks nothing.
    fn invoke_on_window(&mut self, _window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
        Ok(Vec::new())
    }

    /// What the rule has found so far, for reports: percentiles, counts, per-node and per-GPU
    /// tables, histograms. Recorded in the summary. Default: nothing.
    fn details(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// Called by a runner that follows a live run when no new step has arrived for `idle`;
    /// `last_step` is the last step the rule saw. Rules about progress (StalledTraining) fire
    /// here; the default does nothing.
    fn on_idle(
        &mut self,
        _trial: &Trial,
        _last_step: Option<u64>,
        _idle: Duration,
    ) -> Result<Option<RuleResult>> {
        Ok(None)
    }
}

/// Writes the identity part of `impl Rule` — [`name`](Rule::name),
/// [`parameters`](Rule::parameters), and [`required_tensors`](Rule::required_tensors) or
/// [`input`](Rule::input) — the same way for every rule, built-in or custom.
///
/// - `rule_identity!()`: the name is `Self::NAME`, the parameters are the field `params`
///   (any `Serialize` type) as JSON; the rule writes `required_tensors` itself.
/// - `rule_identity!(tensors: field)`: the same, and the rule reads the tensors that the
///   [`TensorSelection`](crate::TensorSelection) in `field` selects.
/// - `rule_identity!(profiler)`: the same, for a profiler rule
///   ([`RuleInput::Profiler`]).
/// - `rule_identity!(name: "AccuracyDrop", params: [drop, patience], tensors: ["accuracy"])`:
///   a rule without a `NAME` constant or a parameter struct: the listed fields are its
///   parameters and the listed names its tensors. `selection: field` in place of `tensors`
///   reads what the [`TensorSelection`](crate::TensorSelection) in `field` selects; `params`,
///   `tensors` and `selection` may be left out.
///
/// ```
/// use smdebug_io::trial::Trial;
/// use smdebug_rules::{Result, Rule, RuleResult, rule_identity};
///
/// struct Watch {
///     limit: f64,
/// }
///
/// impl Rule for Watch {
///     rule_identity!(name: "Watch", params: [limit], tensors: ["loss"]);
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
    (tensors: $selection:ident) => {
        $crate::rule_identity!();
        fn required_tensors(
            &self,
            trial: &$crate::__private::Trial,
            _step: u64,
        ) -> $crate::Result<Vec<String>> {
            self.$selection.names(Self::NAME, trial)
        }
    };
    (profiler) => {
        $crate::rule_identity!();
        fn input(&self) -> $crate::RuleInput {
            $crate::RuleInput::Profiler
        }
    };
    (name: $name:expr $(, params: [$($param:ident),* $(,)?])? $(, tensors: [$($tensor:expr),* $(,)?])? $(, selection: $selection:ident)? $(,)?) => {
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
        $(fn required_tensors(
            &self,
            _trial: &$crate::__private::Trial,
            _step: u64,
        ) -> $crate::Result<Vec<String>> {
            Ok(vec![$(String::from($tensor)),*])
        })?
        $(fn required_tensors(
            &self,
            trial: &$crate::__private::Trial,
            _step: u64,
        ) -> $crate::Result<Vec<String>> {
            self.$selection.names($name, trial)
        })?
    };
}

/// One measurement behind a rule's verdict: which tensor, at which step, what was measured, the
/// value and the limit it was compared with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The tensor measured (or a description such as `loss (TRAIN)` for derived quantities).
    pub tensor: String,
    /// Global step of the measurement.
    pub step: u64,
    /// What was measured (`abs_mean`, `nan_count`, `dead_units_percent`, …).
    pub measure: String,
    /// The measured value (NaN and ±Inf appear as `null` in JSON, and read back as NaN).
    #[serde(deserialize_with = "null_as_nan")]
    pub value: f64,
    /// The limit the value was compared with, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
}

fn null_as_nan<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

impl Evidence {
    /// `measure` of `tensor` at `step` was `value`.
    pub fn new(tensor: &str, step: u64, measure: &str, value: f64) -> Self {
        Evidence {
            tensor: tensor.to_string(),
            step,
            measure: measure.to_string(),
            value,
            limit: None,
        }
    }

    /// Records the limit the value was compared with.
    pub fn limit(mut self, limit: f64) -> Self {
        self.limit = Some(limit);
        self
    }
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
    /// How many tensors (or values) the rule could check at this step; 0 means it had nothing
    /// to look at.
    pub datapoints: usize,
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

    /// Marks the result fired and appends `message` (several findings are joined with `; `).
    pub fn fire(&mut self, message: impl AsRef<str>) {
        self.fired = true;
        if !self.message.is_empty() {
            self.message.push_str("; ");
        }
        self.message.push_str(message.as_ref());
    }
}
