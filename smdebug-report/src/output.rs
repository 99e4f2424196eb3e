//! Writing the page and one JSON result per rule, through smdebug-io's `Storage`.

use std::path::{Path, PathBuf};

use smdebug_storage::Storage;

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
        source: Box<smdebug_storage::Error>,
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

pub use smdebug_format::layout::safe_file_stem;

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

/// Writes the page to `html_key` in `storage` and each rule's [`RuleFile`] beside it (the
/// report inside a run, where SageMaker keeps its rule results next to the page); see
/// [`write_rule_files`]. Every file is one atomic `put`.
pub fn write_report(
    input: &ReportInput,
    storage: &dyn Storage,
    html_key: &str,
) -> Result<WrittenReport, ReportError> {
    let dir = html_key.rsplit_once('/').map_or("", |(dir, _)| dir);
    let rule_files = write_rule_files(input, storage, dir)?;
    put(storage, html_key, render_html(input).into_bytes())?;
    Ok(WrittenReport {
        html: html_key.to_owned(),
        rule_files,
    })
}

/// Writes each rule's [`RuleFile`] as `<RuleName>.json` into the folder `dir` of `storage`
/// (see [`rule_file_name`]; a second rule with the same file name gets `-2`, `-3`, …
/// appended) and returns their keys, in the order of [`ReportInput::rules`].
pub fn write_rule_files(
    input: &ReportInput,
    storage: &dyn Storage,
    dir: &str,
) -> Result<Vec<String>, ReportError> {
    let in_dir = |name: &str| {
        if dir.is_empty() {
            name.to_owned()
        } else {
            format!("{}/{name}", dir.trim_end_matches('/'))
        }
    };
    let mut rule_files = Vec::with_capacity(input.rules.len());
    for rule in &input.rules {
        let base = rule_file_name(&rule.rule);
        let mut key = in_dir(&base);
        let mut n = 2;
        while rule_files.contains(&key) {
            key = in_dir(&format!("{}-{n}.json", base.trim_end_matches(".json")));
            n += 1;
        }
        let json = serde_json::to_vec_pretty(&RuleFile::of(rule)).map_err(|source| {
            ReportError::Encode {
                rule: rule.rule.clone(),
                source,
            }
        })?;
        put(storage, &key, json)?;
        rule_files.push(key);
    }
    Ok(rule_files)
}

/// Writes a file that goes with the page (the notebook, the rules' summary) to `key`.
pub(crate) fn write_beside(
    storage: &dyn Storage,
    key: &str,
    bytes: Vec<u8>,
) -> Result<(), ReportError> {
    put(storage, key, bytes)
}

/// Writes a file that goes with the page into the local folder `dir`, as `name`.
pub(crate) fn write_beside_to(dir: &Path, name: &str, bytes: Vec<u8>) -> Result<(), ReportError> {
    let storage = local_folder(dir, &dir.join(name))?;
    put(&storage, name, bytes)
}

fn put(storage: &dyn Storage, key: &str, bytes: Vec<u8>) -> Result<(), ReportError> {
    storage
        .put(key, bytes.into())
        .map_err(|source| ReportError::Write {
            path: format!("{} {key}", storage.describe()),
            source: Box::new(source),
        })
}

/// The page to a file on local disk, and nothing else: `html_path` (its folder is created when
/// missing). The rules' JSON files are written only where [`write_rule_files_to`] is told.
pub fn write_report_to(
    input: &ReportInput,
    html_path: &Path,
) -> Result<WrittenReport, ReportError> {
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
    let storage = local_folder(dir, html_path)?;
    put(&storage, &file_name, render_html(input).into_bytes())?;
    Ok(WrittenReport {
        html: dir.join(&file_name).display().to_string(),
        rule_files: Vec::new(),
    })
}

/// [`write_rule_files`] into the folder `dir` on local disk (created when missing); returns
/// the files' paths.
pub fn write_rule_files_to(input: &ReportInput, dir: &Path) -> Result<Vec<String>, ReportError> {
    let storage = local_folder(dir, dir)?;
    let keys = write_rule_files(input, &storage, "")?;
    Ok(keys
        .iter()
        .map(|k| dir.join(k).display().to_string())
        .collect())
}

fn local_folder(dir: &Path, named: &Path) -> Result<smdebug_storage::LocalStorage, ReportError> {
    smdebug_storage::LocalStorage::new(dir).map_err(|source| ReportError::Write {
        path: named.display().to_string(),
        source: Box::new(source),
    })
}
