//! Where a run lives: local disk or any `object_store` backend, behind one small sync trait.
//!
//! The training loop, the writer thread and the rules are synchronous, so [`Storage`] is too;
//! the object-store backend runs its async client on a small tokio runtime of its own.
//!
//! Paths are relative to the storage's root (the run directory) and use `/`: `index/000000000/
//! 000000000003_worker_0.json`. A `prefix` in [`Storage::list`] is a folder (`"index"`,
//! `"events/000000000003"`; `""` for everything).
//!
//! ```
//! use smdebug_io::storage::{open_storage, Storage};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = open_storage(dir.path().to_str().unwrap()).unwrap();
//! store.put("index/000000000/000000000001_worker_0.json", b"{}".to_vec().into()).unwrap();
//! store.put("index/000000000/000000000002_worker_0.json", b"{}".to_vec().into()).unwrap();
//! assert_eq!(store.list("index").unwrap().len(), 2);
//! assert_eq!(
//!     store.list_after("index", "index/000000000/000000000001_worker_0.json").unwrap(),
//!     vec!["index/000000000/000000000002_worker_0.json".to_string()],
//! );
//!
//! // The same through an in-process object store, shared by every handle on `memory://doc`:
//! let mem = open_storage("memory://doc/run").unwrap();
//! mem.put("a/b.json", bytes::Bytes::from_static(b"[1]")).unwrap();
//! assert_eq!(&open_storage("memory://doc/run").unwrap().get("a/b.json").unwrap()[..], b"[1]");
//! ```

mod backend;
mod local;
mod object;
pub(crate) mod regular;
mod store;

use std::sync::Arc;

use crate::error::{Error, Result};
pub use backend::Backend;
pub use local::LocalStorage;
pub use object::ObjectStorage;
pub(crate) use store::check_relative;
pub use store::{Storage, StorageOptions};

/// Opens the storage at `location` with default [`StorageOptions`]: a plain path or `file://`
/// URL is local disk; `memory://name/...` is an in-process store shared by every handle opened
/// on the same `name` in this process; `s3://`, `gs://`, `az://` (and the other schemes
/// `object_store` parses) are object stores configured from the environment, each behind its
/// cargo feature ([`Backend`]).
pub fn open_storage(location: &str) -> Result<Arc<dyn Storage>> {
    open_storage_with(location, &StorageOptions::default())
}

/// [`open_storage`] with explicit options.
pub fn open_storage_with(location: &str, options: &StorageOptions) -> Result<Arc<dyn Storage>> {
    if !location.contains("://") {
        return Ok(Arc::new(LocalStorage::new(location)?));
    }
    let url = url::Url::parse(location).map_err(|e| Error::InvalidLocation {
        location: location.to_string(),
        reason: e.to_string(),
    })?;
    if url.scheme() == "file" {
        let path = url.to_file_path().map_err(|()| Error::InvalidLocation {
            location: location.to_string(),
            reason: "not a local file path".to_string(),
        })?;
        return Ok(Arc::new(LocalStorage::new(path)?));
    }
    Ok(Arc::new(ObjectStorage::open(&url, options)?))
}
