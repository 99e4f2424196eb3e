//! One rule's result as the report shows it and writes it beside the page.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use smdebug_core::Mode;
use smdebug_rules::report::is_profiler_report;
use smdebug_rules::{JudgedWindow, RuleInput, RuleStatus, Status, find_builtin};

/// One rule's result file (`<RuleName>.json` beside the page): the status with the rule's
/// description and recommendation from the built-in registry (empty for custom rules).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuleFile {
    /// The rule's name (`CPUBottleneck`, `LossNotDecreasing`, …).
    pub name: String,
    /// What the rule reads, which is its kind (`debugging` or `profiler` in JSON).
    pub kind: RuleInput,
    /// What the rule checks.
    pub description: String,
    /// What to change when it fires.
    pub recommendation: String,
    /// Where the rule stands.
    pub status: Status,
    /// How many times the rule fired.
    pub triggered: u64,
    /// How many datapoints (steps, samples) it looked at.
    pub datapoints: u64,
    /// The parameters it ran with.
    pub parameters: Value,
    /// Its last message (the finding, or the error).
    pub message: String,
    /// The first step it fired at (a global step for a debugging rule; for a profiler rule a
    /// step of `first_fired_mode`'s own numbering).
    pub first_fired_step: Option<u64>,
    /// For a profiler rule, the mode whose step `first_fired_step` is (`TRAIN`, `EVAL`, ...).
    #[serde(default)]
    pub first_fired_mode: Option<Mode>,
    /// When it first fired, microseconds since the epoch.
    pub first_fired_time_us: Option<u64>,
    /// For a profiler rule, the data its message and details cover (see
    /// [`RuleStatus::window`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<JudgedWindow>,
    /// Rule-specific evidence: the rule's details, with its latest evidence and its data
    /// warnings added.
    pub details: Value,
    /// What of the rule's status does not read as this version writes it (its parameters, its
    /// findings: a summary written by another version), each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

impl RuleFile {
    /// The file of one rule status.
    pub fn of(status: &RuleStatus) -> RuleFile {
        let (description, recommendation) = describe(&status.rule);
        RuleFile {
            name: status.rule.clone(),
            kind: status.kind,
            description: description.to_owned(),
            recommendation: recommendation.to_owned(),
            status: status.status,
            triggered: status.fired_count,
            datapoints: status.datapoints,
            parameters: status.parameters.to_value(),
            message: status.message.clone(),
            first_fired_step: status.first_fired_step,
            first_fired_mode: status.first_fired_mode,
            first_fired_time_us: status.first_fired_time_us,
            window: status.window,
            details: details(status),
            problems: status.problems().iter().map(ToString::to_string).collect(),
        }
    }
}

/// What a rule checks and what to change when it fires, from the built-in registry.
pub(crate) fn describe(rule: &str) -> (&'static str, &'static str) {
    if is_profiler_report(rule) {
        return ("runs every profiler rule and writes this report", "");
    }
    find_builtin(rule).map_or(("", ""), |b| (b.fires_when, b.recommendation))
}

/// A status's details with its evidence and warnings added.
pub(crate) fn details(status: &RuleStatus) -> Value {
    let mut extra = Map::new();
    if !status.evidence.is_empty() {
        extra.insert(
            "evidence".into(),
            serde_json::to_value(&status.evidence).unwrap_or(Value::Null),
        );
    }
    if !status.warnings.is_empty() {
        extra.insert("warnings".into(), Value::from(status.warnings.clone()));
    }
    let details = status.details.to_value();
    if extra.is_empty() {
        return details;
    }
    match details {
        Value::Object(mut m) => {
            m.extend(extra);
            Value::Object(m)
        }
        Value::Null => Value::Object(extra),
        other => {
            extra.insert("details".into(), other);
            Value::Object(extra)
        }
    }
}
