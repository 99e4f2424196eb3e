//! Whether the local folder of a followed run was deleted while it was followed (a runner
//! then says so instead of waiting out its idle time-out and blaming the writer).

use std::path::PathBuf;

/// Watches a run's local folder; object-store runs have no folder to lose.
#[derive(Debug, Default)]
pub(crate) struct FolderWatch {
    /// The folder existed at some look.
    seen: bool,
}

fn local_folder(location: &str) -> Option<PathBuf> {
    if let Some(path) = location.strip_prefix("file://") {
        return Some(PathBuf::from(path));
    }
    (!location.contains("://")).then(|| PathBuf::from(location))
}

impl FolderWatch {
    /// True when the run's folder existed at an earlier look and is gone now.
    pub(crate) fn gone(&mut self, location: &str) -> bool {
        let Some(folder) = local_folder(location) else {
            return false;
        };
        let exists = folder.is_dir();
        self.seen |= exists;
        self.seen && !exists
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_gone_only_after_it_was_seen() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let location = run.to_str().unwrap();
        let mut watch = FolderWatch::default();
        assert!(!watch.gone(location), "not created yet");
        std::fs::create_dir(&run).unwrap();
        assert!(!watch.gone(location));
        std::fs::remove_dir(&run).unwrap();
        assert!(watch.gone(location));
        assert!(!FolderWatch::default().gone("s3://bucket/run"));
    }
}
