//! Whether a followed run is still the run that was read: a run folder deleted, replaced by
//! another (a new folder at the same path), or written again from step 0 into the same folder
//! (a session with `overwrite`, the README's demo rerun) must not be shown as the old run with
//! the new one's data mixed in.
//!
//! What is checked on each pass, cheaply:
//! - a local run folder: that it still exists, and is the same folder (device and inode);
//! - a *witness*, one file already read: the first step's index file (written once, so any
//!   change to it means a new run), else the first system or framework file (appended to, so
//!   only shrinking means a new run); that it is still there with what it had, and, on local
//!   disk, that it is the same file;
//! - the end marker, once seen: that it was not removed.

use std::path::Path;

use smdebug_read::run::{
    EndMarker, FolderChange, FolderWatch, file_id, first_profiler_files, index_file_of_step,
};
use smdebug_storage::Location;
use smdebug_storage::Storage;

/// What became of the run.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// Its folder (or every file in it) is gone.
    Deleted(String),
    /// Another run is there now.
    Replaced(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Witness {
    key: String,
    size: u64,
    /// Written once (an index file): any change is a new run.
    immutable: bool,
    /// On local disk: inode and modification time.
    local: Option<(u64, Option<std::time::SystemTime>)>,
}

/// What the follower remembers of the run's identity.
#[derive(Default)]
pub(crate) struct Identity {
    /// The run's folder, when it is on local disk (made at the first check).
    folder: Option<FolderWatch>,
    witness: Option<Witness>,
    marker_seen: bool,
}

fn local_stamp(root: Option<&Path>, key: &str) -> Option<(u64, Option<std::time::SystemTime>)> {
    let meta = std::fs::metadata(root?.join(key)).ok()?;
    Some((file_id(&meta).1, meta.modified().ok()))
}

impl Identity {
    /// Checks the run against what was remembered. `had_data`: something of it was read.
    pub(crate) fn check(
        &mut self,
        location: &Location,
        storage: &dyn Storage,
        had_data: bool,
    ) -> Option<Change> {
        let folder = self
            .folder
            .get_or_insert_with(|| FolderWatch::new(location));
        match folder.look(had_data) {
            FolderChange::Replaced => {
                return Some(Change::Replaced(
                    "the run folder was replaced by another folder at the same path".into(),
                ));
            }
            FolderChange::Gone => {
                return Some(Change::Deleted("the run folder was deleted".into()));
            }
            FolderChange::Same => {}
        }
        let root = folder.root().map(Path::to_path_buf);
        if self.marker_seen && matches!(EndMarker::present(storage), Ok(false)) {
            self.marker_seen = false;
            return Some(self.gone_or_replaced(
                storage,
                format!("its end marker ({}) was removed", EndMarker::PATH),
            ));
        }
        let witness = self.witness.clone()?;
        let now = storage.size(&witness.key);
        let stamp = local_stamp(root.as_deref(), &witness.key);
        let why = match now {
            Ok(None) => format!("{}, read before, is gone", witness.key),
            Ok(Some(size))
                if size < witness.size || (witness.immutable && size != witness.size) =>
            {
                format!(
                    "{} was rewritten ({} bytes, {} before)",
                    witness.key, size, witness.size
                )
            }
            Ok(Some(_))
                if witness.immutable && witness.local.is_some() && stamp != witness.local =>
            {
                format!("{} was rewritten", witness.key)
            }
            // Unchanged, or it cannot be asked now (a transient error): checked next time.
            _ => return None,
        };
        self.witness = None;
        Some(self.gone_or_replaced(storage, why))
    }

    fn gone_or_replaced(&self, storage: &dyn Storage, why: String) -> Change {
        if storage.list("").is_ok_and(|keys| keys.is_empty()) {
            Change::Deleted(format!("every file of the run was deleted ({why})"))
        } else {
            Change::Replaced(format!("the run was written again from the start ({why})"))
        }
    }

    /// Remembers what identifies the run once there is something of it: `first_step`, the
    /// first step whose index file was read; `marker`, whether the end marker is there.
    pub(crate) fn learn(
        &mut self,
        location: &Location,
        storage: &dyn Storage,
        first_step: Option<u64>,
        profiled: bool,
        marker: bool,
    ) {
        self.marker_seen |= marker;
        if self.witness.is_some() {
            return;
        }
        let root = location.local_path();
        let pick = |key: String, immutable: bool| -> Option<Witness> {
            let size = storage.size(&key).ok()??;
            Some(Witness {
                local: local_stamp(root, &key),
                key,
                size,
                immutable,
            })
        };
        if let Some(step) = first_step {
            let key = index_file_of_step(storage, step).ok().flatten();
            if let Some(w) = key.and_then(|k| pick(k, true)) {
                self.witness = Some(w);
                return;
            }
        }
        if profiled {
            for first in first_profiler_files(storage) {
                if let Some(w) = pick(first, false) {
                    self.witness = Some(w);
                    return;
                }
            }
        }
    }
}
