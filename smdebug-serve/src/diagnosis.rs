//! The first screen's diagnosis: which rule stopped the job, how much each finding weighs
//! (stops the job, model quality, performance hint, not applicable), how many distinct issues
//! there are (`ProfilerReport`, which sums up the profiler rules beside it, is not counted
//! again), and the run's health in one sentence, its full text beside it for those who ask.

use smdebug_core::EndReason;
use smdebug_rules::report::is_profiler_report;
use smdebug_rules::{RuleInput, Status, Summary};

use crate::run_data::RunData;
use crate::views::{Health, Phase, Severity};

/// The rule whose stop request ended the job (or, before the job ended, asked it to), and the
/// step it fired at, as its request said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StoppingRule {
    /// The rule.
    pub rule: String,
    /// The step its request says it fired at.
    pub fired_step: Option<u64>,
    /// What it found when it asked (its request's reason after `… fired at step N of RUN: `).
    pub finding: Option<String>,
}

/// `<Rule> fired at step <N> of <run>: <finding>`: a rule's stop request's reason (smdebug-rules'
/// `Firing::describe`), as the job's end marker repeats it after `stopped: `.
fn parse_firing(reason: &str) -> Option<(String, Option<u64>, Option<String>)> {
    let reason = reason.trim();
    let (rule, rest) = reason.split_once(" fired at step ")?;
    if rule.is_empty() || rule.contains(char::is_whitespace) {
        return None;
    }
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let step = digits.parse().ok();
    let finding = rest
        .split_once(": ")
        .map(|(_, f)| f.trim().to_owned())
        .filter(|f| !f.is_empty());
    Some((rule.to_owned(), step, finding))
}

/// The rule that stopped the job: the one the end marker names (the request the job honoured;
/// a later request from another rule may have replaced the file since), else, before the
/// marker, the rule of the stop request in the run.
pub(crate) fn stopping_rule(d: &RunData) -> Option<StoppingRule> {
    if let Some(reason) = &d.end_reason {
        let EndReason::Stopped(cause) = reason else {
            return None;
        };
        // A marker written since markers name the rule says which rule and step.
        if let Some(rule) = &cause.rule {
            return Some(StoppingRule {
                rule: rule.clone(),
                fired_step: cause.step,
                finding: parse_firing(&cause.reason).and_then(|(_, _, finding)| finding),
            });
        }
        // An older marker: its reason, as a rule's request words it.
        if let Some((rule, fired_step, finding)) = parse_firing(&cause.reason) {
            return Some(StoppingRule {
                rule,
                fired_step,
                finding,
            });
        }
        // Stopped, by a request that does not read as a rule's: the request's rule, if any.
        let request = d.stop_request.as_ref()?;
        return Some(StoppingRule {
            rule: request.rule.clone()?,
            fired_step: request.step,
            finding: None,
        });
    }
    let request = d.stop_request.as_ref()?;
    let rule = request.rule.clone()?;
    let parsed = parse_firing(&request.reason);
    Some(StoppingRule {
        rule,
        fired_step: request.step.or(parsed.as_ref().and_then(|p| p.1)),
        finding: parsed.and_then(|p| p.2),
    })
}

/// Whether a rule is the umbrella `ProfilerReport` over profiler rules listed beside it: its
/// finding is theirs, so it is not counted as an issue of its own.
pub(crate) fn sums_up(summary: &Summary, rule: &str) -> bool {
    is_profiler_report(rule)
        && summary
            .rules
            .iter()
            .any(|r| r.kind == RuleInput::Profiler && !is_profiler_report(&r.rule))
}

/// The weight of a rule's verdict as shown (`status`: the status the page shows).
pub(crate) fn severity(
    kind: RuleInput,
    status: Status,
    stop_action: bool,
    stopped_job: bool,
) -> Severity {
    match status {
        _ if stopped_job => Severity::StopsJob,
        Status::NoData => Severity::NotApplicable,
        Status::IssuesFound if stop_action => Severity::StopsJob,
        Status::IssuesFound => match kind {
            RuleInput::Profiler => Severity::PerformanceHint,
            _ => Severity::ModelQuality,
        },
        _ => Severity::None,
    }
}

/// Distinct issues: rules that found one, the umbrella `ProfilerReport` left out when the
/// rules it sums up are listed (their findings are counted themselves).
pub(crate) fn issue_count(summary: &Summary) -> usize {
    summary
        .rules
        .iter()
        .filter(|r| r.status == Status::IssuesFound && !sums_up(summary, &r.rule))
        .count()
}

/// A rule's finding in a few words, for a sentence: non-finite values counted by kind of
/// tensor ("NaN in loss and 10 gradients", from ExplodingTensor's `name (N NaN, M Inf)`
/// list), else the message's first clause, at most [`SHORT_CHARS`] characters.
pub(crate) fn short_finding(message: &str) -> String {
    if let Some(s) = non_finite_phrase(message) {
        return s;
    }
    let first = message.split(['\n', ';']).next().unwrap_or_default().trim();
    clip(first, SHORT_CHARS)
}

/// The longest short finding, in characters.
pub const SHORT_CHARS: usize = 90;

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_owned();
    }
    let cut: String = s.chars().take(n - 1).collect();
    // At a word's end when one is near.
    let cut = match cut.rfind(' ') {
        Some(i) if i > n / 2 => cut[..i].trim_end_matches([',', ':']).to_owned(),
        _ => cut,
    };
    cut + "…"
}

/// `name (N NaN, M Inf)` items of a message: the tensors with non-finite values.
fn non_finite_items(message: &str) -> Vec<(&str, u64, u64)> {
    let mut out = Vec::new();
    let mut rest = message;
    while let Some(open) = rest.find(" (") {
        let name_start = rest[..open]
            .rfind(|c: char| c.is_whitespace() || c == ',' || c == ':')
            .map_or(0, |i| i + 1);
        let name = &rest[name_start..open];
        let after = &rest[open + 2..];
        let Some(close) = after.find(')') else { break };
        let inner = &after[..close];
        if let Some((nan, inf)) = inner.split_once(" NaN, ")
            && let Some(inf) = inf.strip_suffix(" Inf")
            && let (Ok(nan), Ok(inf)) = (nan.trim().parse(), inf.trim().parse())
            && !name.is_empty()
        {
            out.push((name, nan, inf));
        }
        rest = &after[close + 1..];
    }
    out
}

/// What kind of tensor a name is, for counting: `loss`, `gradient`, `weight`, or `tensor`.
fn tensor_kind(name: &str) -> &'static str {
    let lower = name.to_ascii_lowercase();
    if lower.contains("loss") {
        "loss"
    } else if lower.starts_with("gradient") || lower.contains("grad/") || lower.contains("/grad") {
        "gradient"
    } else if lower.ends_with("weight") || lower.ends_with("bias") || lower.contains("weights/") {
        "weight"
    } else {
        "tensor"
    }
}

/// "NaN in loss and 10 gradients" from a message listing `name (N NaN, M Inf)` items.
fn non_finite_phrase(message: &str) -> Option<String> {
    let items = non_finite_items(message);
    if items.is_empty() {
        return None;
    }
    let nan = items.iter().any(|i| i.1 > 0);
    let inf = items.iter().any(|i| i.2 > 0);
    let what = match (nan, inf) {
        (true, true) => "NaN and Inf",
        (false, true) => "Inf",
        _ => "NaN",
    };
    let mut kinds: Vec<(&'static str, Vec<&str>)> = Vec::new();
    for (name, ..) in &items {
        let k = tensor_kind(name);
        match kinds.iter_mut().find(|e| e.0 == k) {
            Some(e) => e.1.push(name),
            None => kinds.push((k, vec![name])),
        }
    }
    let order = ["loss", "gradient", "weight", "tensor"];
    kinds.sort_by_key(|(k, _)| order.iter().position(|o| o == k));
    let parts: Vec<String> = kinds
        .iter()
        .map(|(k, names)| match (*k, names.len()) {
            ("loss", 1) => names[0].to_owned(),
            (k, 1) => format!("1 {k} ({})", names[0]),
            ("loss", n) => format!("{n} losses"),
            (k, n) => format!("{n} {k}s"),
        })
        .collect();
    let list = match parts.as_slice() {
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
        [] => return None,
    };
    Some(format!("{what} in {list}"))
}

/// The first three rules' names of `list`, and how many more.
fn named(list: &[&crate::views::RuleView]) -> String {
    let names: Vec<&str> = list.iter().take(3).map(|r| r.name.as_str()).collect();
    match list.len().saturating_sub(3) {
        0 => names.join(", "),
        more => format!("{} and {more} more", names.join(", ")),
    }
}

/// The sentence of a run a rule stopped (`stopped`: "Stopped at step N"): the rule, the step
/// it fired at when that is not the last, its finding, and how many other issues there are.
fn stopped_by_rule(
    d: &RunData,
    rules: &[crate::views::RuleView],
    issues: usize,
    stopped: String,
) -> String {
    let last = d.steps.last().copied();
    let cause = stopping_rule(d);
    let rule = cause.as_ref().map_or("a rule", |c| c.rule.as_str());
    let fired = cause
        .as_ref()
        .and_then(|c| c.fired_step)
        .filter(|&s| Some(s) != last)
        .map(|s| format!(" (fired at step {s})"))
        .unwrap_or_default();
    let finding = cause
        .as_ref()
        .and_then(|c| c.finding.as_deref())
        .or_else(|| {
            rules
                .iter()
                .find(|r| Some(r.name.as_str()) == cause.as_ref().map(|c| c.rule.as_str()))
                .map(|r| r.message.as_str())
        })
        .map(short_finding)
        .filter(|f| !f.is_empty())
        .map(|f| format!(": {f}"))
        .unwrap_or_default();
    let also = match issues.saturating_sub(usize::from(cause.is_some())) {
        0 => String::new(),
        1 => " · 1 more issue".to_owned(),
        n => format!(" · {n} more issues"),
    };
    format!("{stopped} by {rule}{fired}{finding}{also}")
}

/// The sentence for a run whose rules' views are `rules` (as the page lists them).
pub(crate) fn health(
    d: &RunData,
    phase: Phase,
    rules: &[crate::views::RuleView],
    issues: usize,
) -> Health {
    let last = d.steps.last().copied();
    let at = |word: &str| match last {
        Some(s) => format!("{word} at step {s}"),
        None => format!("{word} before its first saved step"),
    };
    let findings: Vec<&crate::views::RuleView> = rules
        .iter()
        .filter(|r| r.status == Status::IssuesFound && !r.sums_up)
        .collect();
    let worst = rules
        .iter()
        .filter(|r| r.severity != Severity::NotApplicable)
        .map(|r| r.severity)
        .min()
        .unwrap_or(Severity::None);
    let issues_part = match issues {
        0 if d.rules.is_some() => "no rule found an issue".to_owned(),
        0 => "no rule statuses yet".to_owned(),
        1 => format!("1 issue: {}", named(&findings)),
        n => format!("{n} issues: {}", named(&findings)),
    };
    let mut details = Vec::new();
    if let Some(reason) = &d.end_reason {
        details.push(format!("End marker: {reason}"));
    }
    if let Some(request) = &d.stop_request {
        details.push(format!("Stop request in the run: {}", request.reason));
    }
    let sentence = match phase {
        Phase::StoppedByRule => stopped_by_rule(d, rules, issues, at("Stopped")),
        Phase::StoppedByPerson => format!(
            "{} by a person{} · {issues_part}",
            at("Stopped"),
            match &d.end_reason {
                Some(EndReason::Stopped(cause)) => Some(cause.reason.trim()),
                _ => None,
            }
            .filter(|r| !r.is_empty())
            .map(|r| format!(" ({})", clip(r, 60)))
            .unwrap_or_default()
        ),
        Phase::Ended => format!(
            "{} · {issues_part}",
            match last {
                Some(s) => format!("Ended after step {s}"),
                None => "Ended".to_owned(),
            }
        ),
        Phase::Crashed => format!("{} · {issues_part}", at("Crashed")),
        Phase::Stalled => format!("{} · {issues_part}", at("Stalled")),
        // No step number while it advances: the sentence is fetched again every 10 s at most,
        // the header's step count with every push.
        Phase::Live => format!("Live · {issues_part}"),
        // A path that does not exist is said to (the state tile says how long it was waited
        // for), not "waiting for the run to start" as if it were an empty folder.
        Phase::Waiting if d.missing_since.is_some() => {
            "No run here: the folder does not exist (waiting for it)".to_owned()
        }
        Phase::Waiting => "Waiting for the run to start".to_owned(),
    };
    for r in &findings {
        details.push(format!("{} ({}): {}", r.name, r.status.name(), r.message));
    }
    Health {
        sentence,
        details: details.join("\n"),
        severity: worst,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPLODING: &str = "ExplodingTensor fired at step 3 of /tmp/r: non-finite values in \
        gradient/fc1.bias (32 NaN, 0 Inf), gradient/fc1.weight (25088 NaN, 0 Inf), \
        gradient/fc2.bias (32 NaN, 0 Inf), gradient/fc2.weight (1024 NaN, 0 Inf), \
        gradient/fc3.bias (32 NaN, 0 Inf), gradient/fc3.weight (1024 NaN, 0 Inf), \
        gradient/fc4.bias (32 NaN, 0 Inf), gradient/fc4.weight (1024 NaN, 0 Inf), \
        gradient/fc5.bias (10 NaN, 0 Inf), gradient/fc5.weight (320 NaN, 0 Inf), loss (1 NaN, 0 Inf)";

    #[test]
    fn a_rules_stop_request_reads_as_rule_step_and_finding() {
        let (rule, step, finding) = parse_firing(EXPLODING).unwrap();
        assert_eq!((rule.as_str(), step), ("ExplodingTensor", Some(3)));
        assert_eq!(
            short_finding(&finding.unwrap()),
            "NaN in loss and 10 gradients"
        );
        assert_eq!(parse_firing("stopped from the dashboard"), None);
    }

    #[test]
    fn the_end_markers_rule_is_the_stopper_whatever_its_reason_says() {
        // A marker naming its rule: no parsing of the words, and a later request in the run
        // (another rule's) does not change who stopped the job.
        let mut later = smdebug_format::stop::StopRequest::new("DeadRelu fired at step 9 of /r: …");
        later.rule = Some("DeadRelu".into());
        later.step = Some(9);
        let d = RunData {
            complete: true,
            end_reason: Some(EndReason::Stopped(smdebug_core::StopCause::by_rule(
                "a custom rule's own words, in no set form",
                "ExplodingTensor",
                3,
            ))),
            stop_request: Some(later.clone()),
            ..RunData::default()
        };
        let cause = stopping_rule(&d).unwrap();
        assert_eq!(
            (cause.rule.as_str(), cause.fired_step),
            ("ExplodingTensor", Some(3))
        );
        // A marker written before markers named the rule: read from its words.
        let old = RunData {
            complete: true,
            end_reason: Some(EndReason::Stopped(EXPLODING.into())),
            stop_request: Some(later),
            ..RunData::default()
        };
        let cause = stopping_rule(&old).unwrap();
        assert_eq!(
            (cause.rule.as_str(), cause.fired_step),
            ("ExplodingTensor", Some(3))
        );
        // Completed: nobody stopped it.
        let done = RunData {
            complete: true,
            end_reason: Some(EndReason::Completed),
            ..RunData::default()
        };
        assert_eq!(stopping_rule(&done), None);
    }

    #[test]
    fn a_long_message_is_cut_to_its_first_clause_at_a_word() {
        let dead = "leaky_relu1.output: 32 of 32 units (100.0 %) active in less than 1 % of \
                    samples; leaky_relu2.output: 32 of 32 units";
        assert_eq!(
            short_finding(dead),
            "leaky_relu1.output: 32 of 32 units (100.0 %) active in less than 1 % of samples"
        );
        let long = "word ".repeat(40);
        let short = short_finding(&long);
        assert!(
            short.chars().count() <= SHORT_CHARS && short.ends_with('…'),
            "{short}"
        );
        assert_eq!(
            short_finding("x (1 NaN, 2 Inf), fc.weight (0 NaN, 3 Inf)"),
            "NaN and Inf in 1 weight (fc.weight) and 1 tensor (x)"
        );
    }

    #[test]
    fn the_sentence_of_a_run_that_did_not_stop() {
        let d = RunData {
            steps: vec![0, 1, 2, 99],
            ..RunData::default()
        };
        let none = health(&d, Phase::Live, &[], 0);
        assert_eq!(none.sentence, "Live · no rule statuses yet");
        assert_eq!(
            health(&d, Phase::Ended, &[], 0).sentence,
            "Ended after step 99 · no rule statuses yet"
        );
        assert_eq!(
            health(&d, Phase::Stalled, &[], 0).sentence,
            "Stalled at step 99 · no rule statuses yet"
        );
        assert_eq!(none.severity, Severity::None);
    }

    #[test]
    fn the_severity_of_a_verdict() {
        use RuleInput::{Profiler, Tensors as Debugging};
        assert_eq!(
            severity(Debugging, Status::IssuesFound, false, true),
            Severity::StopsJob
        );
        assert_eq!(
            severity(Debugging, Status::IssuesFound, true, false),
            Severity::StopsJob
        );
        assert_eq!(
            severity(Debugging, Status::IssuesFound, false, false),
            Severity::ModelQuality
        );
        assert_eq!(
            severity(Profiler, Status::IssuesFound, false, false),
            Severity::PerformanceHint
        );
        assert_eq!(
            severity(Profiler, Status::NoData, true, false),
            Severity::NotApplicable
        );
        assert_eq!(
            severity(Debugging, Status::NoIssuesFound, true, false),
            Severity::None
        );
    }
}
