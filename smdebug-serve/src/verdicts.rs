//! The rules' verdicts as the dashboard shows them, from the run's rule summary: the overview's
//! list and the pushes' changed verdicts both come from here.

use smdebug_report::RuleFile;
use smdebug_rules::report::{is_profiler_report, summary_report_verdict};
use smdebug_rules::{Status, Summary};

use crate::diagnosis::{severity, short_finding, stopping_rule, sums_up};
use crate::run_data::RunData;
use crate::views::{EvidenceView, Num, RuleView};

/// The rules' statuses of a run, in the order the page lists them ([`RuleView::rank`]: the
/// rule that stopped the job first, then by severity). `ProfilerReport` shows the verdict the
/// rules' one roll-up ([`summary_report_verdict`]) makes from the profiler rules beside it when
/// its own status says less (a summary written before its verdict was made from theirs), and
/// says so.
pub(crate) fn rule_views(d: &RunData) -> Vec<RuleView> {
    let Some(summary) = d.rules.as_ref() else {
        return Vec::new();
    };
    // Only once the job ended on it: a request not honoured yet has stopped nothing.
    let stopped_by = stopping_rule(d)
        .filter(|_| d.end_reason.is_some())
        .map(|c| c.rule);
    let mut views = views_of(summary, stopped_by.as_deref());
    views.sort_by_key(|v| v.rank);
    views
}

/// Where a status ranks among the others of its severity.
fn status_rank(status: Status) -> u32 {
    match status {
        Status::IssuesFound => 0,
        Status::Error => 1,
        Status::InProgress => 2,
        Status::NoIssuesFound => 3,
        Status::NoData => 4,
    }
}

fn views_of(summary: &Summary, stopped_by: Option<&str>) -> Vec<RuleView> {
    let rolled_up = summary_report_verdict(summary);
    summary
        .rules
        .iter()
        .map(|status| {
            let file = RuleFile::of(status);
            let mut shown = status.status;
            let mut message = file.message;
            // Only a finding or a failure the recorded status does not tell is shown over it.
            let alarming = |s: Status| matches!(s, Status::IssuesFound | Status::Error);
            if let Some((verdict, why)) = rolled_up
                .as_ref()
                .filter(|_| is_profiler_report(&status.rule))
                && alarming(*verdict)
                && !alarming(shown)
            {
                shown = *verdict;
                message = format!("{why} (the summary said {})", status.status.name());
            }
            let stopped_job = stopped_by == Some(status.rule.as_str());
            let stop_action = status.actions.iter().any(|a| a == "stop_training");
            let umbrella = sums_up(summary, &status.rule);
            let weight = severity(status.kind, shown, stop_action, stopped_job);
            // The umbrella after the rules it sums up, with the performance hints.
            let rank = (if stopped_job { 0 } else { 100 })
                + 10 * (weight as u32)
                + status_rank(shown)
                + u32::from(umbrella) * 5;
            RuleView {
                short: short_finding(&message),
                severity: weight,
                stopped_job,
                sums_up: umbrella,
                rank,
                name: file.name,
                kind: file.kind,
                status: shown,
                description: file.description,
                recommendation: file.recommendation,
                message,
                triggered: file.triggered,
                datapoints: file.datapoints,
                parameters: file.parameters,
                first_fired_step: file.first_fired_step,
                first_fired_mode: file.first_fired_mode,
                window: file.window.map(|w| w.describe()),
                details: status.details.to_value(),
                problems: file.problems,
                evidence: status
                    .evidence
                    .iter()
                    .map(|e| EvidenceView {
                        tensor: e.tensor.clone(),
                        step: e.step,
                        mode: e.mode,
                        measure: e.measure.clone(),
                        value: Num(e.value),
                        limit: e.limit.map(Num),
                    })
                    .collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(rule: &str, kind: &str, status: &str) -> serde_json::Value {
        serde_json::json!({
            "rule": rule, "kind": kind, "status": status, "parameters": {}, "actions": [],
            "first_fired_step": null, "last_fired_step": null, "fired_count": 0,
            "steps_evaluated": 0, "datapoints": 1, "message": format!("{rule} said so"),
            "evidence": [], "action_errors": []
        })
    }

    fn summary(report: &str, cpu: &str, finished: bool) -> Summary {
        serde_json::from_value(serde_json::json!({
            "run": "/r", "run_complete": finished, "end_reason": null, "last_step": 10,
            "finished": finished, "updated_at": 0.0,
            "rules": [
                status("ProfilerReport", "profiler", report),
                status("CPUBottleneck", "profiler", cpu),
                status("StepOutlier", "profiler", "NoIssuesFound"),
                status("LossNotDecreasing", "debugging", "IssuesFound"),
            ]
        }))
        .unwrap()
    }

    fn report_view(s: &Summary) -> RuleView {
        views_of(s, None)
            .into_iter()
            .find(|v| v.name == "ProfilerReport")
            .unwrap()
    }

    /// A summary written before ProfilerReport's verdict was made from its rules' shows the
    /// runner's roll-up of them (a debugging rule's finding is not one of them); one that
    /// already says it, or whose rules found nothing, shows what it says.
    #[test]
    fn profiler_report_shows_the_runners_roll_up_of_its_rules_when_its_status_says_less() {
        let older = summary("NoIssuesFound", "IssuesFound", true);
        let view = report_view(&older);
        assert_eq!(view.status, Status::IssuesFound);
        assert_eq!(
            view.message,
            "of 2 profiler rules, 1 found issues (CPUBottleneck); 1 checked and found no \
             issues (the summary said NoIssuesFound)"
        );
        let current = summary("IssuesFound", "IssuesFound", true);
        assert_eq!(report_view(&current).message, "ProfilerReport said so");
        let quiet = summary("NoIssuesFound", "NoIssuesFound", true);
        let view = report_view(&quiet);
        assert_eq!(
            (view.status, view.message.as_str()),
            (Status::NoIssuesFound, "ProfilerReport said so")
        );
        // A rule that failed is shown over a quieter recorded status too.
        let failed = report_view(&summary("InProgress", "Error", false));
        assert_eq!(failed.status, Status::Error);
    }

    /// A profiler rule's firing step is shown with the mode whose step it is (step spans number
    /// each mode's steps from 0); a debugging rule's is a global step, and a summary written
    /// before the mode was recorded reads without one.
    #[test]
    fn a_profiler_rules_first_firing_keeps_its_mode() {
        let mut s = summary("IssuesFound", "IssuesFound", true);
        let mut cpu = serde_json::to_value(&s.rules[1]).unwrap();
        cpu["first_fired_step"] = 9.into();
        cpu["first_fired_mode"] = "EVAL".into();
        s.rules[1] = serde_json::from_value(cpu).unwrap();
        let views = views_of(&s, None);
        let view = |name: &str| views.iter().find(|v| v.name == name).unwrap();
        let cpu = view("CPUBottleneck");
        assert_eq!(
            (cpu.first_fired_step, cpu.first_fired_mode),
            (Some(9), Some(smdebug_core::Mode::Eval))
        );
        let json = serde_json::to_value(cpu).unwrap();
        assert_eq!(json["first_fired_mode"], "EVAL");
        assert_eq!(view("LossNotDecreasing").first_fired_mode, None);
    }

    /// ProfilerReport sums up the profiler rules beside it: three rules found issues, two are
    /// distinct. Listed after the rules, by severity: the rule that stopped the job first with
    /// its badge, model quality, then performance hints (the umbrella after its rules).
    #[test]
    fn the_umbrella_is_not_counted_twice_and_findings_are_listed_by_severity() {
        let mut s = summary("IssuesFound", "IssuesFound", true);
        assert_eq!(crate::diagnosis::issue_count(&s), 2);
        let mut exploding = s.rules[3].clone();
        exploding.rule = "ExplodingTensor".into();
        exploding.actions = vec!["stop_training".into()];
        s.rules.push(exploding);
        let d = RunData {
            rules: Some(s),
            complete: true,
            end_reason: Some(smdebug_core::EndReason::Stopped(
                smdebug_core::StopCause::by_rule(
                    "ExplodingTensor fired at step 3 of /r: non-finite values in loss (1 NaN, 0 Inf)",
                    "ExplodingTensor",
                    3,
                ),
            )),
            ..RunData::default()
        };
        let views = rule_views(&d);
        let order: Vec<(&str, crate::views::Severity, bool)> = views
            .iter()
            .map(|v| (v.name.as_str(), v.severity, v.stopped_job))
            .collect();
        use crate::views::Severity::*;
        assert_eq!(
            order,
            vec![
                ("ExplodingTensor", StopsJob, true),
                ("LossNotDecreasing", ModelQuality, false),
                ("CPUBottleneck", PerformanceHint, false),
                ("ProfilerReport", PerformanceHint, false),
                ("StepOutlier", None, false),
            ]
        );
        assert!(views[3].sums_up && !views[2].sums_up);
        assert_eq!(views[0].short, "LossNotDecreasing said so");
        assert_eq!(crate::diagnosis::issue_count(d.rules.as_ref().unwrap()), 3);
        // Before the job ended on its request, the rule has stopped nothing yet.
        let mut request = smdebug_format::stop::StopRequest::new("ExplodingTensor fired at step 3");
        request.rule = Some("ExplodingTensor".into());
        let asked = RunData {
            rules: d.rules.clone(),
            stop_request: Some(request),
            ..RunData::default()
        };
        let first = &rule_views(&asked)[0];
        assert_eq!(first.name, "ExplodingTensor");
        assert!(!first.stopped_job);
        assert_eq!(first.severity, StopsJob);
    }
}
