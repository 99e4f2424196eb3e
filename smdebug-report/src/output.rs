//! Writing the page and one JSON result per rule, through smdebug-io's `Storage`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use smdebug_io::Storage;
use smdebug_rules::report::is_profiler_report;
use smdebug_rules::{RuleStatus, Status, find_builtin};

use crate::{ReportInput, render_html};

/// One rule's result file (`<RuleName>.json` beside the page): the status with the rule's
/// description and recommendation from the built-in registry (empty for custom rules).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuleFile {
    /// The rule's name (`CPUBottleneck`, `LossNotDecreasing`, …).
    pub name: String,
    /// `debugging` or `profiler`.
    pub kind: String,
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
    /// The first step it fired at.
    pub first_fired_step: Option<u64>,
    /// When it first fired, microseconds since the epoch.
    pub first_fired_time_us: Option<u64>,
    /// Rule-specific evidence: the rule's details, with its latest evidence and its data
    /// warnings added.
    pub details: Value,
}

impl RuleFile {
    /// The file of one rule status.
    pub fn of(status: &RuleStatus) -> RuleFile {
        let (description, recommendation) = describe(&status.rule);
        RuleFile {
            name: status.rule.clone(),
            kind: status.kind.clone(),
            description: description.to_owned(),
            recommendation: recommendation.to_owned(),
            status: status.status,
            triggered: status.fired_count,
            datapoints: status.datapoints,
            parameters: status.parameters.clone(),
            message: status.message.clone(),
            first_fired_step: status.first_fired_step,
            first_fired_time_us: status.first_fired_time_us,
            details: details(status),
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
    if extra.is_empty() {
        return status.details.clone();
    }
    match status.details.clone() {
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

/// Why writing the report failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// Storing a file failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file that was being written.
        path: String,
        /// The storage's error.
        #[source]
        source: Box<smdebug_io::Error>,
    },
    /// The page's path names a directory.
    #[error("cannot write {}: is a directory, not the report's HTML file", .0.display())]
    IsADirectory(PathBuf),
    /// A rule result could not be encoded as JSON.
    #[error("cannot encode the result of rule `{rule}`: {source}")]
    Encode {
        /// The rule's name.
        rule: String,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
}

/// The files [`write_report`] wrote, as storage keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrittenReport {
    /// The HTML page.
    pub html: String,
    /// One JSON file per rule, in the order of [`ReportInput::rules`].
    pub rule_files: Vec<String>,
}

/// The file name of a rule's JSON result: the rule name with every character other than ASCII
/// letters, digits, `-` and `_` replaced by `_`, then `.json` (`rule` when the name is empty).
pub fn rule_file_name(rule: &str) -> String {
    let mut name: String = rule
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        name.push_str("rule");
    }
    name.push_str(".json");
    name
}

/// Writes the page to `html_key` in `storage` and each rule's [`RuleFile`] to
/// `<RuleName>.json` beside it (see [`rule_file_name`]; a second rule with the same file name
/// gets `-2`, `-3`, … appended). Every file is one atomic `put`.
pub fn write_report(
    input: &ReportInput,
    storage: &dyn Storage,
    html_key: &str,
) -> Result<WrittenReport, ReportError> {
    let dir = html_key.rsplit_once('/').map_or("", |(dir, _)| dir);
    let beside = |name: &str| {
        if dir.is_empty() {
            name.to_owned()
        } else {
            format!("{dir}/{name}")
        }
    };
    let put = |key: &str, bytes: Vec<u8>| {
        storage
            .put(key, bytes.into())
            .map_err(|source| ReportError::Write {
                path: format!("{} {key}", storage.describe()),
                source: Box::new(source),
            })
    };
    let mut rule_files = Vec::with_capacity(input.rules.len());
    for rule in &input.rules {
        let base = rule_file_name(&rule.rule);
        let mut key = beside(&base);
        let mut n = 2;
        while rule_files.contains(&key) {
            key = beside(&format!("{}-{n}.json", base.trim_end_matches(".json")));
            n += 1;
        }
        let json = serde_json::to_vec_pretty(&RuleFile::of(rule)).map_err(|source| {
            ReportError::Encode {
                rule: rule.rule.clone(),
                source,
            }
        })?;
        put(&key, json)?;
        rule_files.push(key);
    }
    put(html_key, render_html(input).into_bytes())?;
    Ok(WrittenReport {
        html: html_key.to_owned(),
        rule_files,
    })
}

/// [`write_report`] to a file on local disk: the page at `html_path`, the rule files beside
/// it; the folder is created when missing.
pub fn write_report_to(
    input: &ReportInput,
    html_path: &Path,
) -> Result<WrittenReport, ReportError> {
    // Checked before anything is written: the rule files would otherwise land beside it.
    if html_path.is_dir() {
        return Err(ReportError::IsADirectory(html_path.to_path_buf()));
    }
    let dir = match html_path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let file_name = html_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let storage =
        smdebug_io::storage::LocalStorage::new(dir).map_err(|source| ReportError::Write {
            path: html_path.display().to_string(),
            source: Box::new(source),
        })?;
    let written = write_report(input, &storage, &file_name)?;
    let local = |key: &str| dir.join(key).display().to_string();
    Ok(WrittenReport {
        html: local(&written.html),
        rule_files: written.rule_files.iter().map(|k| local(k)).collect(),
    })
}
