//! A rule's status as it changes, where people look: one log per rule in the run
//! (`rules/<Rule>/log`, as SageMaker keeps a log per rule job) and status lines for the
//! training log at an interval (as SageMaker prints each rule's status in the job's log).
//!
//! A rule's log starts with its first line when the runner first publishes, gains a line at
//! every change of its status (`InProgress -> IssuesFound` with the message, the verdict at the
//! end) and a line saying where it stands at the end and, with [`StatusLines`], at each
//! interval (the first one interval after the start), when the training log hears it too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use smdebug_format::layout::{rule_folder, rule_log_in};

use super::evaluation::Evaluation;
use super::run::RunSource;
use crate::rule::RuleInput;
use crate::status::RuleStatus;

/// Each rule's log file, in slot order: a second rule whose folder would be the same (the
/// same rule twice with other parameters) gets `-2`, `-3`, … appended, as the report's rule
/// files do, so that no rule's log is written over another's.
fn log_files(rules: &[&str]) -> Vec<String> {
    let mut folders: Vec<String> = Vec::with_capacity(rules.len());
    for rule in rules {
        let base = rule_folder(rule);
        let mut folder = base.clone();
        let mut n = 2;
        while folders.contains(&folder) {
            folder = format!("{base}-{n}");
            n += 1;
        }
        folders.push(folder);
    }
    folders.iter().map(|f| rule_log_in(f)).collect()
}

/// Status lines for a training log: every `every`, one line per rule saying where it stands,
/// handed to `sink`; a change of status is a line at once.
#[derive(Clone)]
pub struct StatusLines {
    /// How often every rule's status is said.
    pub every: Duration,
    /// Where each line goes.
    pub sink: Arc<dyn Fn(&str) + Send + Sync>,
}

impl StatusLines {
    /// Lines to standard error (a training job's log), every `every`.
    pub fn to_stderr(every: Duration) -> StatusLines {
        StatusLines {
            every,
            sink: Arc::new(|line| eprintln!("{line}")),
        }
    }
}

impl std::fmt::Debug for StatusLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusLines")
            .field("every", &self.every)
            .finish_non_exhaustive()
    }
}

/// The rules' logs so far and when status lines were last said.
pub(super) struct StatusTrail {
    /// Per rule slot, its log file in the run ([`log_files`]).
    files: Vec<String>,
    /// Per rule slot, its log so far (stored whole: object stores cannot append).
    logs: Vec<String>,
    /// Per rule slot, whether its log has lines not stored yet.
    unstored: Vec<bool>,
    lines: Option<StatusLines>,
    last_lines: Option<Instant>,
    /// The latest failure to store a log, for the summary's warnings.
    pub write_error: Option<String>,
}

fn now_utc() -> String {
    chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

fn at_step(step: Option<u64>) -> String {
    step.map(|s| format!(" at step {s}")).unwrap_or_default()
}

/// Where a rule stands, with figures from its status: a debugging rule's steps judged, a
/// profiler rule's samples or spans checked and the windows they came in (a profiler rule
/// judges no steps of its own), how often it fired.
fn standing(status: &RuleStatus) -> String {
    let mut parts = Vec::new();
    match status.kind {
        RuleInput::Tensors => parts.push(format!("{} steps judged", status.steps_judged)),
        RuleInput::Profiler if status.steps_evaluated > 0 => parts.push(format!(
            "{} samples or spans checked in {} windows",
            status.datapoints, status.steps_evaluated
        )),
        RuleInput::Profiler => {}
    }
    if status.fired_count > 0 {
        parts.push(format!(
            "fired {} time{}",
            status.fired_count,
            if status.fired_count == 1 { "" } else { "s" }
        ));
    }
    if parts.is_empty() {
        status.status.name().to_string()
    } else {
        format!("{} ({})", status.status.name(), parts.join(", "))
    }
}

impl StatusTrail {
    pub fn new(rules: &[&str], lines: Option<StatusLines>) -> StatusTrail {
        StatusTrail {
            files: log_files(rules),
            logs: vec![String::new(); rules.len()],
            unstored: vec![false; rules.len()],
            lines,
            // The first standing after one interval: a job shorter than that hears only its
            // rules' changes and, at the end, where each one stands.
            last_lines: Some(Instant::now()),
            write_error: None,
        }
    }

    /// Takes the rules' status changes (carrying out the actions they trigger), writes them
    /// into the rules' logs and the status lines, says every rule's status when the interval
    /// has passed (or `last`), and stores the logs that gained lines.
    pub fn record(&mut self, rules: &mut Evaluation, run: &RunSource, store: bool, last: bool) {
        let time = now_utc();
        for (i, slot) in rules.slots.iter().enumerate() {
            if self.logs[i].is_empty() {
                self.logs[i] = format!(
                    "{time} {}: InProgress: evaluation of {} started\n",
                    slot.status.rule, run.location
                );
                self.unstored[i] = true;
            }
        }
        let step = rules.last_step;
        for (i, change) in rules.take_changes() {
            let status = &rules.slots[i].status;
            let message = if status.message.is_empty() {
                String::new()
            } else {
                format!(": {}", status.message)
            };
            let line = format!(
                "{}: {} -> {}{}{message}",
                status.rule,
                change.from.name(),
                change.to.name(),
                at_step(step)
            );
            self.logs[i].push_str(&format!("{time} {line}\n"));
            self.unstored[i] = true;
            if let Some(lines) = &self.lines {
                (lines.sink)(&format!("smdebug rule {line}"));
            }
        }
        // Every rule's standing: said at each interval, and into the logs then and at the last
        // look (the training log has the changes and the job's own summary at its end).
        let interval = self
            .lines
            .as_ref()
            .is_some_and(|l| self.last_lines.is_none_or(|t| t.elapsed() >= l.every));
        if interval || last {
            if interval {
                self.last_lines = Some(Instant::now());
            }
            for (i, slot) in rules.slots.iter().enumerate() {
                let line = format!(
                    "{}: {}{}",
                    slot.status.rule,
                    standing(&slot.status),
                    at_step(step)
                );
                self.logs[i].push_str(&format!("{time} {line}\n"));
                self.unstored[i] = true;
                if let (true, Some(lines)) = (interval, &self.lines) {
                    (lines.sink)(&format!("smdebug rule {line}"));
                }
            }
        }
        if store {
            self.store(run);
        }
    }

    fn store(&mut self, run: &RunSource) {
        for i in 0..self.files.len() {
            if !self.unstored[i] {
                continue;
            }
            let path = &self.files[i];
            match run
                .storage
                .put(path, self.logs[i].clone().into_bytes().into())
            {
                Ok(()) => self.unstored[i] = false,
                Err(e) => {
                    self.write_error = Some(format!("{}: writing {path} failed: {e}", run.location))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smdebug_format::layout::rule_log_file;

    #[test]
    fn a_rules_log_lives_in_its_folder_whatever_its_name() {
        assert_eq!(
            rule_log_file("VanishingGradient"),
            "rules/VanishingGradient/log"
        );
        assert_eq!(rule_log_file("my/rule x"), "rules/my_rule_x/log");
        assert_eq!(rule_log_file(".."), "rules/__/log");
        assert_eq!(rule_log_file(""), "rules/rule/log");
        assert_eq!(
            log_files(&["LossNotDecreasing", "Overfit", "LossNotDecreasing"]),
            [
                "rules/LossNotDecreasing/log",
                "rules/Overfit/log",
                "rules/LossNotDecreasing-2/log"
            ]
        );
    }
}
