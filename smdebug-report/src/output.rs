//! Writing the page and one JSON result per rule, through smdebug-io's `Storage`.

use std::path::{Path, PathBuf};

use smdebug_io::Storage;

use crate::input::ReportInput;
use crate::render::render_html;
use crate::rule_file::RuleFile;

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

/// `name` made safe as a file name: every character other than ASCII letters, digits, `-` and
/// `_` becomes `_`.
pub fn safe_file_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The file name of a rule's JSON result: the rule name through [`safe_file_stem`], then `.json`
/// (`rule.json` when the name is empty).
pub fn rule_file_name(rule: &str) -> String {
    let mut name = safe_file_stem(rule);
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
