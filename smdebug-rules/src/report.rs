//! The profiling report from the rules' side: the `ProfilerReport` rule, which runs every
//! profiler rule and writes smdebug-profiler's HTML report with every rule's result, and the
//! conversion of rule statuses into the report's [`RuleOutcome`]s.
//!
//! `ProfilerReport` takes SageMaker's parameter form: a profiler rule's parameter is overridden
//! as `<Rule>_<param>` (`CPUBottleneck_threshold=30`, `StepOutlier_mode=TRAIN`). Actions given
//! to `ProfilerReport` apply to every profiler rule it runs. The report goes to
//! `<run>/rules/ProfilerReport/profiler-output/profiler-report.html` (uploaded beside the run
//! for object-store runs) unless the runner is told another path
//! ([`RunnerBuilder::report`](crate::runner::RunnerBuilder::report)).
//!
//! ```
//! use smdebug_rules::{RuleSpec, build_rule};
//! use smdebug_rules::report::expand_profiler_report;
//!
//! let spec = RuleSpec::parse("ProfilerReport:CPUBottleneck_threshold=30,StepOutlier_n_outliers=3").unwrap();
//! let specs = expand_profiler_report(&spec).unwrap();
//! assert_eq!(specs.len(), 11);
//! let cpu = specs.iter().find(|s| s.name == "CPUBottleneck").unwrap();
//! assert_eq!(build_rule(cpu).unwrap().parameters()["threshold"], 30.0);
//! assert!(expand_profiler_report(&RuleSpec::parse("ProfilerReport:Nope_x=1").unwrap()).is_err());
//! ```

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};
use smdebug_profiler::report::{LoadOptions, RuleOutcome};

use crate::error::{Error, Result};
use crate::params::RuleSpec;
use crate::registry::{builtin_profiler_rules, find_builtin};
use crate::rule::{Rule, RuleInput, RuleResult};
use crate::runner::{RuleStatus, Status, Summary};

/// The rule's name.
pub const PROFILER_REPORT: &str = "ProfilerReport";

/// Where the report goes inside a run, when no other path is given.
pub const DEFAULT_REPORT_DIR: &str = "rules/ProfilerReport/profiler-output";

/// The report page's file name in [`DEFAULT_REPORT_DIR`].
pub const REPORT_FILE: &str = "profiler-report.html";

/// Whether a spec names the `ProfilerReport` rule (`ProfilerReport` or `profiler_report`).
pub fn is_profiler_report(name: &str) -> bool {
    name.trim().to_ascii_lowercase().replace('_', "") == "profilerreport"
}

/// The specs of the profiler rules a `ProfilerReport` spec runs, with its `<Rule>_<param>`
/// overrides and its actions. An override naming no profiler rule is an error.
pub fn expand_profiler_report(spec: &RuleSpec) -> Result<Vec<RuleSpec>> {
    let rules = builtin_profiler_rules();
    let mut specs: Vec<RuleSpec> = rules
        .iter()
        .map(|b| {
            let mut s = RuleSpec::new(b.name);
            s.actions = spec.actions.clone();
            s
        })
        .collect();
    for (key, value) in &spec.parameters {
        let target = rules.iter().position(|b| {
            key.strip_prefix(b.name)
                .is_some_and(|rest| rest.starts_with('_') && rest.len() > 1)
        });
        let Some(i) = target else {
            return Err(Error::UnknownParameter {
                rule: PROFILER_REPORT.into(),
                param: key.clone(),
                expected: rules
                    .iter()
                    .map(|b| format!("{}_<param>", b.name))
                    .collect(),
            });
        };
        let param = &key[rules[i].name.len() + 1..];
        specs[i].parameters.insert(param.to_string(), value.clone());
    }
    // Building checks every override now, not when the run is evaluated.
    for s in &specs {
        crate::registry::build_rule(s)?;
    }
    Ok(specs)
}

/// Where and how a runner writes the report.
#[derive(Clone, Debug)]
pub struct ReportTarget {
    /// The HTML file on local disk; `None`: [`DEFAULT_REPORT_DIR`] inside the run.
    pub html: Option<PathBuf>,
    /// What the report reads besides the run (Kineto traces, scalar limits).
    pub load: LoadOptions,
    /// While following a live run, regenerate this often (`None`: only at the end).
    pub every: Option<Duration>,
}

/// The `ProfilerReport` rule's slot in the runner: it checks nothing itself (its profiler rules
/// run beside it) and never fires; its status says where the report went.
pub(crate) struct ProfilerReportRule {
    pub(crate) parameters: Map<String, Value>,
}

impl Rule for ProfilerReportRule {
    fn name(&self) -> &str {
        PROFILER_REPORT
    }

    fn parameters(&self) -> Value {
        Value::Object(self.parameters.clone())
    }

    fn input(&self) -> RuleInput {
        RuleInput::Profiler
    }

    fn invoke_on_window(
        &mut self,
        window: &crate::profiler::ProfilerWindow<'_>,
    ) -> Result<Vec<RuleResult>> {
        let mut r = RuleResult::new(0);
        r.datapoints = window.samples.len() + window.spans.len();
        Ok(if r.datapoints > 0 {
            vec![r]
        } else {
            Vec::new()
        })
    }
}

/// The report's view of one rule status: its description and recommendation come from the
/// built-in registry (empty for custom rules).
pub fn outcome(status: &RuleStatus) -> RuleOutcome {
    let builtin = find_builtin(&status.rule);
    let (description, recommendation) = if is_profiler_report(&status.rule) {
        (
            "runs every profiler rule and writes this report".to_string(),
            String::new(),
        )
    } else {
        builtin.map_or((String::new(), String::new()), |b| {
            (b.fires_when.to_string(), b.recommendation.to_string())
        })
    };
    let status_name = match status.status {
        Status::InProgress => "InProgress",
        Status::NoIssuesFound => "NoIssuesFound",
        Status::IssuesFound => "IssuesFound",
        Status::Error => "Error",
    };
    let mut details = status.details.clone();
    if !status.evidence.is_empty() || !status.warnings.is_empty() {
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
        details = match details {
            Value::Object(mut m) => {
                m.extend(extra);
                Value::Object(m)
            }
            Value::Null => Value::Object(extra),
            other => {
                extra.insert("details".into(), other);
                Value::Object(extra)
            }
        };
    }
    RuleOutcome {
        name: status.rule.clone(),
        kind: status.kind.clone(),
        description,
        recommendation,
        status: status_name.to_string(),
        triggered: status.fired_count,
        datapoints: status.datapoints,
        parameters: status.parameters.clone(),
        message: status.message.clone(),
        first_fired_step: status.first_fired_step,
        first_fired_time_us: status.first_fired_time_us,
        details,
    }
}

/// Every rule's outcome, in the summary's order.
pub fn outcomes(summary: &Summary) -> Vec<RuleOutcome> {
    summary.rules.iter().map(outcome).collect()
}

/// The default rule set for a run: every built-in debugging rule that needs no parameter
/// (StalledTraining only when following a live run: on a finished run it says nothing), and
/// `ProfilerReport` (all profiler rules and the report) when `profiler` is set.
pub fn default_specs(follow: bool, profiler: bool) -> Vec<RuleSpec> {
    let mut specs = Vec::new();
    for b in crate::registry::builtin_rules() {
        let needs_value = matches!(b.build(&Map::new()), Err(Error::BadParameter { .. }));
        if !needs_value && (follow || b.name != "StalledTraining") {
            specs.push(RuleSpec::new(b.name));
        }
    }
    if profiler {
        specs.push(RuleSpec::new(PROFILER_REPORT));
    }
    specs
}
