//! The `ProfilerReport` rule: it runs every profiler rule, and the runner hands its state to
//! the report writer attached to it ([`RunnerBuilder::reporter`]; smdebug-report's
//! `ReportWriter` draws the HTML page). This crate does not draw the report.
//!
//! `ProfilerReport` takes SageMaker's parameter form: a profiler rule's parameter is overridden
//! as `<Rule>_<param>` (`CPUBottleneck_threshold=30`, `StepOutlier_mode=TRAIN`). Actions given
//! to `ProfilerReport` apply to every profiler rule it runs. A report written into the run goes
//! to `<run>/`[`DEFAULT_REPORT_DIR`]`/`[`REPORT_FILE`].
//!
//! `ProfilerReport`'s own status sums up its profiler rules' ([`report_verdict`]): `Error` when
//! one of them failed, `IssuesFound` when one found issues, `NoIssuesFound` when at least one
//! checked something and none found issues, `NoData` when none had anything to check. Its
//! message names the rules behind the verdict and says where the report went.
//!
//! [`RunnerBuilder::reporter`]: crate::runner::RunnerBuilder::reporter
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

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::params::RuleSpec;
use crate::registry::builtin_profiler_rules;
pub use crate::registry::is_profiler_report;
use crate::rule::{ProfilerInput, ProfilerNeeds, ProfilerRule, RuleResult};
use crate::status::{RuleStatus, Status};

/// The rule's name.
pub const PROFILER_REPORT: &str = "ProfilerReport";

/// Where the report goes inside a run, when no other path is given.
pub const DEFAULT_REPORT_DIR: &str = "rules/ProfilerReport/profiler-output";

/// The report page's file name in [`DEFAULT_REPORT_DIR`].
pub const REPORT_FILE: &str = "profiler-report.html";

/// SageMaker's folder for the report of a `ProfilerReport` rule started at `at`, inside the
/// job's output: `rule-output/ProfilerReport-<seconds since the epoch>/profiler-output`, as
/// SageMaker names its rule job's output (the timestamp tells the rule jobs of one training job
/// apart).
pub fn sagemaker_report_dir(at: std::time::SystemTime) -> String {
    let seconds = at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("rule-output/{PROFILER_REPORT}-{seconds}/profiler-output")
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

/// The `ProfilerReport` rule's slot in the runner: it checks nothing itself (its profiler rules
/// run beside it) and never fires; its status says where the report went.
pub(crate) struct ProfilerReportRule {
    pub(crate) parameters: Map<String, Value>,
}

impl ProfilerRule for ProfilerReportRule {
    fn name(&self) -> &str {
        PROFILER_REPORT
    }

    fn parameters(&self) -> Value {
        Value::Object(self.parameters.clone())
    }

    fn needs(&self) -> ProfilerNeeds {
        // It counts what its profiler rules read: the report draws both.
        ProfilerNeeds::reading([ProfilerInput::SystemMetrics, ProfilerInput::Spans])
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

/// What became of a report, as `ProfilerReport`'s status says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ReportOutcome {
    /// Written (or being written) to this destination.
    Written(String),
    /// Written without some of its inputs, or not written: `ProfilerReport` is in `Error`.
    Failed(String),
    /// Not drawn, and why (no report writer, nowhere to write it).
    NotDrawn(String),
}

/// `ProfilerReport`'s status and message from its profiler rules' statuses. `final_verdicts`:
/// the run is over (or the offline evaluation finished), so rules that never fired have their
/// verdicts; before, the report is `InProgress` unless a rule found issues or failed.
pub fn report_verdict(rules: &[&RuleStatus], final_verdicts: bool) -> (Status, String) {
    let named = |status: Status| -> Vec<&str> {
        rules
            .iter()
            .filter(|r| r.status == status)
            .map(|r| r.rule.as_str())
            .collect()
    };
    let (issues, errors, no_data, clean) = (
        named(Status::IssuesFound),
        named(Status::Error),
        named(Status::NoData),
        named(Status::NoIssuesFound),
    );
    let status = if !errors.is_empty() {
        Status::Error
    } else if !issues.is_empty() {
        Status::IssuesFound
    } else if !final_verdicts {
        Status::InProgress
    } else if !clean.is_empty() {
        Status::NoIssuesFound
    } else {
        Status::NoData
    };
    let mut parts = Vec::new();
    for (list, what) in [
        (&issues, "found issues"),
        (&errors, "failed"),
        (&no_data, "had no data to check"),
    ] {
        if !list.is_empty() {
            parts.push(format!("{} {what} ({})", list.len(), list.join(", ")));
        }
    }
    if !clean.is_empty() {
        parts.push(format!("{} checked and found no issues", clean.len()));
    }
    let running = named(Status::InProgress).len();
    if running > 0 {
        parts.push(format!("{running} in progress"));
    }
    let message = if rules.is_empty() {
        "no profiler rule ran".to_string()
    } else {
        format!("of {} profiler rules, {}", rules.len(), parts.join("; "))
    };
    (status, message)
}

/// `ProfilerReport`'s verdict as [`report_verdict`] makes it from the profiler rules recorded
/// beside it in `summary` (final once the runner finished); `None` when the summary has no
/// `ProfilerReport`. What the runner writes, and what a reader of a summary written by an
/// earlier version, before the verdict was made from its rules', works out again.
pub fn summary_report_verdict(summary: &crate::Summary) -> Option<(Status, String)> {
    summary.rules.iter().find(|r| is_profiler_report(&r.rule))?;
    let members: Vec<&RuleStatus> = summary
        .rules
        .iter()
        .filter(|r| r.kind == crate::RuleInput::Profiler && !is_profiler_report(&r.rule))
        .collect();
    Some(report_verdict(&members, summary.finished))
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
