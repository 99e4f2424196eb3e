//! The rules' verdicts as the dashboard shows them, from the run's rule summary: the overview's
//! list and the pushes' changed verdicts both come from here.

use smdebug_report::RuleFile;
use smdebug_rules::{Status, Summary};

use crate::views::{EvidenceView, Num, RuleView};

/// The rules' statuses. `ProfilerReport` takes the worst verdict of the profiler rules beside
/// it when its own status says less (a summary written before its verdict was made from
/// theirs), and says so.
pub(crate) fn rule_views(summary: Option<&Summary>) -> Vec<RuleView> {
    let Some(summary) = summary else {
        return Vec::new();
    };
    let profiler_issues: Vec<&str> = summary
        .rules
        .iter()
        .filter(|r| r.kind == smdebug_rules::RuleInput::Profiler && r.status == Status::IssuesFound)
        .map(|r| r.rule.as_str())
        .filter(|name| *name != "ProfilerReport")
        .collect();
    summary
        .rules
        .iter()
        .map(|status| {
            let file = RuleFile::of(status);
            let mut shown = status.status;
            let mut message = file.message;
            if file.name == "ProfilerReport"
                && matches!(shown, Status::NoIssuesFound | Status::InProgress)
                && !profiler_issues.is_empty()
            {
                shown = Status::IssuesFound;
                message = format!(
                    "its rules found issues: {} (the summary said {})",
                    profiler_issues.join(", "),
                    status.status.name()
                );
            }
            RuleView {
                name: file.name,
                kind: file.kind.kind().to_owned(),
                status: shown.name(),
                description: file.description,
                recommendation: file.recommendation,
                message,
                triggered: file.triggered,
                datapoints: file.datapoints,
                parameters: file.parameters,
                first_fired_step: file.first_fired_step,
                window: file.window.map(|w| w.describe()),
                details: status.details.clone(),
                evidence: status
                    .evidence
                    .iter()
                    .map(|e| EvidenceView {
                        tensor: e.tensor.clone(),
                        step: e.step,
                        measure: e.measure.clone(),
                        value: Num(e.value),
                        limit: e.limit.map(Num),
                    })
                    .collect(),
            }
        })
        .collect()
}
