//! Code profiles back: the windows of a run, their summaries, flame graphs and profiles.

use bytes::Bytes;
use smdebug_storage::Storage;

use crate::profile::error::{ProfileError, Result};
use smdebug_format::code_profile::{
    CODE_PREFIX, CodeProfileFile, CodeProfileSummary, parse_code_profile_key,
};

/// Largest summary file read (a summary lists at most a thousand functions twice).
pub const MAX_CODE_SUMMARY_BYTES: u64 = 4 << 20;
/// Largest flame graph or profile file read.
pub const MAX_CODE_PROFILE_BYTES: u64 = 64 << 20;

/// One code-profile window read back.
#[derive(Clone, Debug, PartialEq)]
pub struct CodeProfileWindow {
    /// The window's files.
    pub file: CodeProfileFile,
    /// Its summary.
    pub summary: CodeProfileSummary,
}

/// A run's code-profile windows, read leniently.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CodeProfiles {
    /// Every window whose summary could be read, ordered by start, then node and worker.
    pub windows: Vec<CodeProfileWindow>,
    /// One line per summary that could not be read (left out of `windows`).
    pub warnings: Vec<String>,
}

fn malformed(key: &str, message: impl Into<String>) -> ProfileError {
    ProfileError::MalformedCodeProfile {
        key: key.to_owned(),
        message: message.into(),
    }
}

/// Every code-profile window that has a summary, ordered by start, then node and worker
/// (a window's summary is written after its other files).
pub(super) fn code_profile_files(storage: &dyn Storage) -> Result<Vec<CodeProfileFile>> {
    let mut files: Vec<CodeProfileFile> = storage
        .list(CODE_PREFIX)?
        .iter()
        .filter_map(|key| parse_code_profile_key(key))
        .filter(|(_, extension)| *extension == smdebug_format::code_profile::SUMMARY_EXTENSION)
        .map(|(file, _)| file)
        .collect();
    files.sort_by(|a, b| {
        (a.start_us, &a.node, a.worker, a.end_us).cmp(&(b.start_us, &b.node, b.worker, b.end_us))
    });
    Ok(files)
}

/// The summary of `file`'s window.
pub(super) fn code_profile_summary(
    storage: &dyn Storage,
    file: &CodeProfileFile,
) -> Result<CodeProfileSummary> {
    let key = file.summary_key();
    let bytes = bounded(storage, &key, MAX_CODE_SUMMARY_BYTES)?;
    serde_json::from_slice(&bytes).map_err(|e| malformed(&key, e.to_string()))
}

/// Every window with its summary; an unreadable summary is a warning.
pub(super) fn code_profiles(storage: &dyn Storage) -> Result<CodeProfiles> {
    let mut profiles = CodeProfiles::default();
    for file in code_profile_files(storage)? {
        match code_profile_summary(storage, &file) {
            Ok(summary) => profiles.windows.push(CodeProfileWindow { file, summary }),
            Err(e) => profiles
                .warnings
                .push(format!("{e}; this code-profile window is left out")),
        }
    }
    Ok(profiles)
}

/// The file at `key`, `None` when it does not exist.
pub(super) fn optional(storage: &dyn Storage, key: &str) -> Result<Option<Bytes>> {
    match bounded(storage, key, MAX_CODE_PROFILE_BYTES) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(ProfileError::Storage(e)) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The file, refused without reading it when it is larger than `limit`.
fn bounded(storage: &dyn Storage, key: &str, limit: u64) -> Result<Bytes> {
    if let Some(size) = storage.size(key)?
        && size > limit
    {
        return Err(malformed(
            key,
            format!("{size} bytes, more than the {limit} read"),
        ));
    }
    Ok(storage.get(key)?)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use smdebug_storage::LocalStorage;

    use super::*;
    use crate::profile::ProfilerReader;
    use smdebug_format::code_profile::code_profile_base_key;

    #[test]
    fn a_damaged_summary_is_a_warning_and_the_other_windows_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(LocalStorage::new(dir.path()).unwrap());
        let good = code_profile_base_key(2_000_000_000_000_000, 2_000_000_001_000_000, 0, "n");
        let bad = code_profile_base_key(1_000_000_000_000_000, 1_000_000_001_000_000, 0, "n");
        let body = serde_json::to_vec(&CodeProfileSummary::sampled_nothing(
            "n",
            2_000_000_000_000_000,
        ))
        .unwrap();
        storage.put(&format!("{good}.json"), body.into()).unwrap();
        storage
            .put(
                &format!("{bad}.json"),
                Bytes::from_static(b"{\"version\": 1, \"node"),
            )
            .unwrap();
        storage
            .put(&format!("{good}.svg"), Bytes::from_static(b"<svg/>"))
            .unwrap();
        let reader = ProfilerReader::new(storage);
        let profiles = reader.code_profiles().unwrap();
        assert_eq!(profiles.windows.len(), 1);
        assert_eq!(profiles.warnings.len(), 1);
        assert!(profiles.warnings[0].contains(&format!("{bad}.json")));
        let window = &profiles.windows[0];
        assert_eq!(window.summary.node_id, "n");
        assert_eq!(
            reader
                .code_profile_flamegraph(&window.file)
                .unwrap()
                .unwrap(),
            Bytes::from_static(b"<svg/>")
        );
        assert!(reader.code_profile_pprof(&window.file).unwrap().is_none());
    }
}
