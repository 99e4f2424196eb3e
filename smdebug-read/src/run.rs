//! The few files that say how a run stands, read as every reader reads them: the end marker,
//! whether there is profiler data at all, and the identity files of the processes that wrote
//! it. Rules, the report and the dashboard ask here instead of knowing where these files are.

use std::path::{Path, PathBuf};

use crate::error::Result;
use smdebug_core::EndReason;
use smdebug_format::code_profile::CODE_PREFIX;
use smdebug_format::{layout, system::SYSTEM_PREFIX, trace::TRACE_PREFIX};
use smdebug_storage::Location;
use smdebug_storage::Storage;

/// The run's end marker, written when its writer closed.
pub struct EndMarker;

impl EndMarker {
    /// Where it is in the run (for messages that name it).
    pub const PATH: &'static str = layout::END_MARKER;

    /// `None` while the run goes on; `Some(reason)` once it ended, with the reason our writer
    /// stores in it (`None` inside for Python smdebug's empty marker, or one that does not
    /// parse).
    pub fn read(storage: &dyn Storage) -> Result<Option<Option<EndReason>>> {
        match storage.get(Self::PATH) {
            Ok(bytes) => Ok(Some(smdebug_format::parse_end_marker(&bytes))),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether it is there, without reading it.
    pub fn present(storage: &dyn Storage) -> Result<bool> {
        Ok(storage.size(Self::PATH)?.is_some())
    }
}

/// The run's identity files (`jobs/`, see `smdebug_format::jobs`), and one line for each that
/// could not be read (too large, not an identity). A run without `jobs/` (Python smdebug's, or
/// one written before identity files) has none.
pub fn read_jobs(
    storage: &dyn Storage,
) -> Result<(Vec<smdebug_format::jobs::JobIdentity>, Vec<String>)> {
    let got = |key: &str| match storage.get(key) {
        Ok(body) => Ok(Some(body)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    };
    let keys = storage.list(layout::JOBS_DIR)?;
    Ok(smdebug_format::jobs::read_job_files(
        keys,
        |key| storage.size(key),
        got,
    )?)
}

/// Whether the run holds any system-metrics or framework trace file.
pub fn has_profiler_data(storage: &dyn Storage) -> Result<bool> {
    Ok(!storage.list(SYSTEM_PREFIX)?.is_empty() || !storage.list(TRACE_PREFIX)?.is_empty())
}

/// The first index file of `step` (by name, any worker), if one is there.
pub fn index_file_of_step(storage: &dyn Storage, step: u64) -> Result<Option<String>> {
    let folder = layout::index_folder(step);
    Ok(storage
        .list(&folder)?
        .into_iter()
        .filter(|key| layout::parse_index_file(key).is_some_and(|(s, _)| s == step))
        .min())
}

/// The first file (by name) of each kind of profiler data there is: system metrics, framework
/// traces, code profiles, in that order.
pub fn first_profiler_files(storage: &dyn Storage) -> Vec<String> {
    [SYSTEM_PREFIX, TRACE_PREFIX, CODE_PREFIX]
        .into_iter()
        .filter_map(|prefix| storage.list(prefix).ok()?.into_iter().min())
        .collect()
}

/// The entries at a run's top, any one of which makes a folder a run (rather than a folder of
/// runs): the tensor, profiler, rule and progress folders and the end marker.
const RUN_ENTRIES: [&str; 8] = [
    layout::INDEX_DIR,
    layout::EVENTS_DIR,
    layout::COLLECTIONS_DIR,
    layout::SYSTEM_DIR,
    layout::FRAMEWORK_DIR,
    layout::RULES_DIR,
    layout::PROGRESS_DIR,
    layout::END_MARKER,
];

/// Whether `name`, an entry at a folder's top, is one of a run's own.
pub fn is_run_entry(name: &str) -> bool {
    RUN_ENTRIES.contains(&name)
}

/// Whether a local folder holds a run's own files (rather than runs in subfolders).
pub fn local_folder_is_run(dir: &Path) -> bool {
    RUN_ENTRIES.iter().any(|entry| dir.join(entry).exists())
}

/// Whether an object-store prefix holds a run's own files: its end marker, collections,
/// system, framework or rule files (small listings: the index and event folders of a long run
/// are not listed for this).
pub fn store_is_run(storage: &dyn Storage) -> bool {
    matches!(EndMarker::present(storage), Ok(true))
        || [
            layout::COLLECTIONS_DIR,
            layout::SYSTEM_DIR,
            layout::FRAMEWORK_DIR,
            layout::RULES_DIR,
        ]
        .iter()
        .any(|dir| storage.list(dir).is_ok_and(|l| !l.is_empty()))
}

/// A followed run's local folder, watched for being deleted or replaced by another folder at
/// the same path (a rule runner then says so instead of waiting out its idle time-out; the
/// dashboard clears the run's view). Object-store runs have no folder to lose.
#[derive(Debug)]
pub struct FolderWatch {
    root: Option<PathBuf>,
    /// The folder's (device, inode) at the last look that found it.
    id: Option<(u64, u64)>,
}

/// What a look at a run's folder found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FolderChange {
    /// As before (or not created yet, or not on local disk).
    Same,
    /// It is gone.
    Gone,
    /// Another folder is at its path.
    Replaced,
}

impl FolderWatch {
    /// Watches the folder of `location`, when it is on local disk.
    pub fn new(location: &Location) -> FolderWatch {
        FolderWatch {
            root: location.local_path().map(Path::to_path_buf),
            id: None,
        }
    }

    /// The folder, when the run is on local disk.
    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// Looks at the folder. A folder missing now is [`FolderChange::Gone`] once it was seen,
    /// or when `had_data` (something of the run was read already, so it is not a folder yet to
    /// be created).
    pub fn look(&mut self, had_data: bool) -> FolderChange {
        let Some(root) = &self.root else {
            return FolderChange::Same;
        };
        match std::fs::metadata(root) {
            Ok(meta) if meta.is_dir() => {
                let id = file_id(&meta);
                match self.id.replace(id) {
                    Some(old) if old != id => FolderChange::Replaced,
                    _ => FolderChange::Same,
                }
            }
            _ if had_data || self.id.is_some() => {
                self.id = None;
                FolderChange::Gone
            }
            _ => FolderChange::Same,
        }
    }
}

/// A file's (device, inode).
#[cfg(unix)]
pub fn file_id(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// A file's (device, inode): not known off Unix.
#[cfg(not(unix))]
pub fn file_id(_meta: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_gone_once_seen_and_replaced_when_another_takes_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let mut watch = FolderWatch::new(&Location::Local(run.clone()));
        assert_eq!(watch.look(false), FolderChange::Same, "not created yet");
        std::fs::create_dir(&run).unwrap();
        assert_eq!(watch.look(false), FolderChange::Same);
        // Another folder at the same path (a new inode, the old one still held open).
        let moved = dir.path().join("old");
        std::fs::rename(&run, &moved).unwrap();
        std::fs::create_dir(&run).unwrap();
        assert_eq!(watch.look(false), FolderChange::Replaced);
        assert_eq!(watch.look(false), FolderChange::Same);
        std::fs::remove_dir(&run).unwrap();
        assert_eq!(watch.look(false), FolderChange::Gone);
        // Never seen: gone only when something of the run was read already.
        let mut fresh = FolderWatch::new(&Location::Local(dir.path().join("other")));
        assert_eq!(fresh.look(false), FolderChange::Same);
        assert_eq!(fresh.look(true), FolderChange::Gone);
        // A file:// URL is the same folder; an object store has none.
        let url = format!("file://{}", run.display());
        let url = Location::parse(&url).unwrap();
        assert_eq!(FolderWatch::new(&url).root(), Some(run.as_path()));
        let mut s3 = FolderWatch::new(&Location::parse("s3://bucket/run").unwrap());
        assert_eq!(s3.root(), None);
        assert_eq!(s3.look(true), FolderChange::Same);
    }
}
