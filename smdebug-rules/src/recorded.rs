//! What a rule's status records beside its verdict, typed: the parameters it ran with
//! ([`Parameters`]: a built-in rule's as its parameter type, from the registry's
//! [`BuiltinParams`]) and what it found ([`RuleDetails`]: a profiler rule's [`Details`],
//! `ProfilerReport`'s destination, a user rule's own JSON).
//!
//! Their JSON form is what summaries have always recorded (the parameter struct's fields, the
//! details' object), so Python and the dashboard's page read them unchanged. Read back from a
//! summary written by another version (a field renamed, a parameter added), what does not read
//! is kept as recorded with why ([`Parameters::Unreadable`], [`RuleDetails::Unreadable`]), and
//! every reader says so ([`RuleStatus::problems`](crate::RuleStatus::problems)): it is never
//! taken for "the rule has no result".

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::profiler::Details;
use crate::registry::is_profiler_report;
use crate::registry::{BuiltinParams, RuleParams};

/// Why what a status records does not read as the type asked for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Recorded for the rule, but not in the form this version writes (written by another
    /// version of the rule, or damaged).
    #[error(
        "the {rule} rule's {what} recorded in its status do not read as this version writes \
         them ({reason}): they were written by another version of the rule, or damaged"
    )]
    Drift {
        /// The rule.
        rule: String,
        /// `parameters` or `findings`.
        what: &'static str,
        /// What does not fit (serde's words: the field, the type).
        reason: String,
    },
    /// Asked for as another rule's (the `CPUBottleneck` status read as `StepOutlierParams`),
    /// or as a built-in rule's when the rule is not one.
    #[error("the {rule} rule's parameters are not {wanted}'s")]
    OtherRule {
        /// The rule whose status it is.
        rule: String,
        /// The rule whose parameters were asked for.
        wanted: &'static str,
    },
}

/// The parameters a rule ran with.
#[derive(Clone, Debug, PartialEq)]
pub enum Parameters {
    /// A built-in rule's, as its parameter type.
    Builtin(BuiltinParams),
    /// A rule the registry does not have (a user's rule), or `ProfilerReport`'s
    /// `<Rule>_<param>` overrides: as the rule reports them. Null when it reports none.
    Custom(Value),
    /// Recorded for a built-in rule but not as its parameter type: as recorded, and why.
    Unreadable {
        /// The JSON as recorded (written back unchanged).
        recorded: Value,
        /// Why it does not read.
        error: DecodeError,
    },
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters::Custom(Value::Null)
    }
}

impl Parameters {
    /// The parameters `recorded` (their JSON form) of the rule called `rule`: a built-in
    /// rule's as its type, else as given.
    pub fn decode(rule: &str, recorded: Value) -> Parameters {
        match BuiltinParams::decode(rule, &recorded) {
            Some(Ok(params)) => Parameters::Builtin(params),
            Some(Err(e)) => Parameters::Unreadable {
                recorded,
                error: DecodeError::Drift {
                    rule: rule.to_owned(),
                    what: "parameters",
                    reason: e.to_string(),
                },
            },
            None => Parameters::Custom(recorded),
        }
    }

    /// The JSON form, as summaries record it.
    pub fn to_value(&self) -> Value {
        match self {
            Parameters::Builtin(p) => p.to_value(),
            Parameters::Custom(v) | Parameters::Unreadable { recorded: v, .. } => v.clone(),
        }
    }

    /// These parameters as the built-in rule parameter type `P` (its rule's, by the
    /// registry): an error when they are another rule's, or did not read.
    pub fn get<P: RuleParams>(&self, rule: &str) -> Result<&P, DecodeError> {
        let other = || DecodeError::OtherRule {
            rule: rule.to_owned(),
            wanted: P::RULE,
        };
        match self {
            Parameters::Builtin(b) => P::of(b).ok_or_else(other),
            Parameters::Unreadable { error, .. } => Err(error.clone()),
            Parameters::Custom(_) => Err(other()),
        }
    }

    /// Why they did not read, if they did not.
    pub fn problem(&self) -> Option<&DecodeError> {
        match self {
            Parameters::Unreadable { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl Serialize for Parameters {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Parameters::Builtin(p) => p.to_value().serialize(s),
            Parameters::Custom(v) | Parameters::Unreadable { recorded: v, .. } => v.serialize(s),
        }
    }
}

/// `ProfilerReport`'s details: where its report went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportDetails {
    /// The report's page (a path or URL).
    pub report: String,
}

/// What a rule found, as its status records it.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum RuleDetails {
    /// Nothing recorded (a debugging built-in rule, a profiler rule before any data).
    #[default]
    None,
    /// A built-in profiler rule's findings.
    Profiler(Details),
    /// `ProfilerReport`'s: where its report went.
    Report(ReportDetails),
    /// A user rule's own ([`TensorRule::details`](crate::TensorRule::details)), as it reports
    /// them: read them as its own type with
    /// [`RuleStatus::custom_details`](crate::RuleStatus::custom_details).
    Custom(Value),
    /// Recorded for a built-in rule (or `ProfilerReport`) but not as this version writes
    /// them: as recorded, and why.
    Unreadable {
        /// The JSON as recorded (written back unchanged).
        recorded: Value,
        /// Why it does not read.
        error: DecodeError,
    },
}

impl RuleDetails {
    /// The details `recorded` (their JSON form) of the rule called `rule`: a built-in profiler
    /// rule's as [`Details`], `ProfilerReport`'s as [`ReportDetails`], a user rule's as given.
    pub fn decode(rule: &str, recorded: Value) -> RuleDetails {
        if recorded.is_null() {
            return RuleDetails::None;
        }
        let drift = |recorded: Value, reason: String| RuleDetails::Unreadable {
            recorded,
            error: DecodeError::Drift {
                rule: rule.to_owned(),
                what: "findings",
                reason,
            },
        };
        if is_profiler_report(rule) {
            return match serde_json::from_value::<ReportDetails>(recorded.clone()) {
                Ok(r) => RuleDetails::Report(r),
                Err(e) => drift(recorded, e.to_string()),
            };
        }
        if crate::registry::builtin_kind(rule) == Some(crate::RuleInput::Profiler) {
            return match Details::decode(&recorded) {
                Ok(Some(d)) => RuleDetails::Profiler(d),
                Ok(None) => RuleDetails::None,
                Err(e) => drift(recorded, e.to_string()),
            };
        }
        RuleDetails::Custom(recorded)
    }

    /// The JSON form, as summaries record it.
    pub fn to_value(&self) -> Value {
        match self {
            RuleDetails::None => Value::Null,
            RuleDetails::Profiler(d) => d.to_value(),
            RuleDetails::Report(r) => serde_json::to_value(r).unwrap_or(Value::Null),
            RuleDetails::Custom(v) | RuleDetails::Unreadable { recorded: v, .. } => v.clone(),
        }
    }

    /// Whether nothing is recorded.
    pub fn is_none(&self) -> bool {
        matches!(self, RuleDetails::None)
    }

    /// Why they did not read, if they did not.
    pub fn problem(&self) -> Option<&DecodeError> {
        match self {
            RuleDetails::Unreadable { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl Serialize for RuleDetails {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RuleDetails::None => s.serialize_unit(),
            RuleDetails::Profiler(d) => d.serialize(s),
            RuleDetails::Report(r) => r.serialize(s),
            RuleDetails::Custom(v) | RuleDetails::Unreadable { recorded: v, .. } => v.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiler::{CPUBottleneckParams, StepOutlierParams};

    #[test]
    fn builtin_parameters_read_as_their_rules_type_and_write_back_the_same_json() {
        let recorded = serde_json::json!({"threshold": 30.0});
        let p = Parameters::decode("CPUBottleneck", recorded);
        let cpu: &CPUBottleneckParams = p.get("CPUBottleneck").unwrap();
        assert_eq!(cpu.threshold, 30.0);
        assert_eq!(p.to_value()["threshold"], 30.0);
        assert!(matches!(
            p.get::<StepOutlierParams>("CPUBottleneck"),
            Err(DecodeError::OtherRule {
                wanted: "StepOutlier",
                ..
            })
        ));
        let custom = Parameters::decode("MyRule", serde_json::json!({"limit": 1}));
        assert_eq!(custom, Parameters::Custom(serde_json::json!({"limit": 1})));
    }

    #[test]
    fn a_renamed_parameter_or_finding_is_kept_as_recorded_with_why() {
        let recorded = serde_json::json!({"cpu_threshhold": 90.0});
        let p = Parameters::decode("CPUBottleneck", recorded.clone());
        let err = p.get::<CPUBottleneckParams>("CPUBottleneck").unwrap_err();
        assert!(err.to_string().contains("cpu_threshhold"), "{err}");
        assert_eq!(serde_json::to_value(&p).unwrap(), recorded);
        let details = serde_json::json!({"kind": "bottlenecks", "nodez": {}});
        let d = RuleDetails::decode("IOBottleneck", details.clone());
        assert!(d.problem().unwrap().to_string().contains("nodes"), "{d:?}");
        assert_eq!(serde_json::to_value(&d).unwrap(), details);
        let report = RuleDetails::decode("ProfilerReport", serde_json::json!({"report": "/r"}));
        assert_eq!(
            report,
            RuleDetails::Report(ReportDetails {
                report: "/r".into()
            })
        );
    }
}
