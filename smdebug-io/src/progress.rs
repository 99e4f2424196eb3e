//! The training job's progress, one small file per worker: how many steps the job plans, the
//! last step it ended, and what its writers wrote and dropped.
//!
//! The training process (smdebug's `Session`) rewrites `progress/<worker>.json`
//! ([`layout::progress_file`]) through the run's storage, at most about once a second while
//! the loop runs and once more when it finishes; every write is a whole file put atomically,
//! so a reader never sees half of one. A dashboard reads it for an ETA and for the writer's
//! drops, which otherwise exist only in the training process. Python smdebug and TensorBoard
//! do not look into the `progress/` folder.
//!
//! ```
//! use smdebug_format::progress::Progress;
//! use smdebug_io::progress::{read_progress, read_run_progress, write_progress};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = smdebug_storage::open_storage(dir.path().to_str().unwrap()).unwrap();
//! assert_eq!(read_progress(store.as_ref(), "worker_0").unwrap(), None);
//! let mut p = Progress::new("worker_0");
//! p.planned_steps = Some(100);
//! p.last_step = Some(9);
//! p.steps = 10;
//! write_progress(store.as_ref(), &p).unwrap();
//! assert_eq!(read_progress(store.as_ref(), "worker_0").unwrap(), Some(p.clone()));
//! let all = read_run_progress(store.as_ref()).unwrap();
//! assert_eq!(all.progress, vec![p]);
//! assert!(all.problems.is_empty());
//! ```

use crate::error::{Error, Result};
use smdebug_format::layout;
use smdebug_format::progress::{MAX_PROGRESS_BYTES, Progress};
use smdebug_storage::Storage;

/// Writes `progress` as `progress/<worker>.json`, atomically (a whole-file put: a temporary
/// file renamed on local disk, one object on a store).
pub fn write_progress(storage: &dyn Storage, progress: &Progress) -> Result<()> {
    let path = layout::progress_file(&progress.worker);
    Ok(storage.put(&path, progress.encode().into())?)
}

/// `worker`'s progress file; `None` when there is none. A file over [`MAX_PROGRESS_BYTES`] or
/// one that is not a progress file's JSON is an error naming the file.
pub fn read_progress(storage: &dyn Storage, worker: &str) -> Result<Option<Progress>> {
    read_progress_file(storage, &layout::progress_file(worker))
}

fn read_progress_file(storage: &dyn Storage, path: &str) -> Result<Option<Progress>> {
    let bad = |reason: String| Error::BadProgressFile {
        location: storage.describe().to_string(),
        path: path.to_string(),
        reason,
    };
    match storage.size(path)? {
        None => return Ok(None),
        Some(size) if size > MAX_PROGRESS_BYTES => {
            return Err(bad(format!(
                "{size} bytes, more than the {MAX_PROGRESS_BYTES} a progress file may have"
            )));
        }
        Some(_) => {}
    }
    let bytes = match storage.get(path) {
        Ok(bytes) => bytes,
        // Deleted between the two calls (the run was cleared).
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if bytes.len() as u64 > MAX_PROGRESS_BYTES {
        return Err(bad(format!(
            "{} bytes, more than the {MAX_PROGRESS_BYTES} a progress file may have",
            bytes.len()
        )));
    }
    Progress::decode(&bytes).map(Some).map_err(bad)
}

/// Every worker's progress in a run: the files that read, in worker order, and an error for
/// each that did not.
#[derive(Debug, Default)]
pub struct RunProgress {
    /// The progress files read, in worker order.
    pub progress: Vec<Progress>,
    /// The files that could not be read, each an error naming it.
    pub problems: Vec<Error>,
}

/// Reads every progress file of the run (one listing of `progress/`). A run without any gives
/// nothing; only a failed listing is an error.
pub fn read_run_progress(storage: &dyn Storage) -> Result<RunProgress> {
    let mut out = RunProgress::default();
    let mut keys = storage.list(layout::PROGRESS_DIR)?;
    keys.sort();
    for key in keys {
        let Some(worker) = layout::parse_progress_file(&key) else {
            continue;
        };
        match read_progress_file(storage, &key) {
            Ok(Some(mut p)) => {
                // The file's name says whose it is.
                p.worker = worker;
                out.progress.push(p);
            }
            Ok(None) => {}
            Err(e) => out.problems.push(e),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use smdebug_storage::open_storage;

    #[test]
    fn a_corrupt_or_oversized_file_is_an_error_naming_it_and_a_missing_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_storage(dir.path().to_str().unwrap()).unwrap();
        assert!(
            read_run_progress(store.as_ref())
                .unwrap()
                .progress
                .is_empty()
        );
        store
            .put("progress/worker_1.json", b"{\"worker\": 3".to_vec().into())
            .unwrap();
        let e = read_progress(store.as_ref(), "worker_1").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("progress/worker_1.json") && text.contains("12 bytes"),
            "{text}"
        );
        store
            .put(
                "progress/worker_2.json",
                vec![b' '; MAX_PROGRESS_BYTES as usize + 1].into(),
            )
            .unwrap();
        let e = read_progress(store.as_ref(), "worker_2").unwrap_err();
        assert!(e.to_string().contains("65537 bytes"), "{e}");
        let mut good = Progress::new("worker_0");
        good.records_dropped = 7;
        write_progress(store.as_ref(), &good).unwrap();
        let all = read_run_progress(store.as_ref()).unwrap();
        assert_eq!(all.progress, vec![good]);
        assert_eq!(all.problems.len(), 2, "{:?}", all.problems);
    }

    #[test]
    fn unknown_fields_are_ignored_and_missing_counts_are_zero() {
        let p: Progress = serde_json::from_str(r#"{"worker":"w","later":1}"#).unwrap();
        assert_eq!(p, Progress::new("w"));
    }
}
