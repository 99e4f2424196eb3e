//! Where a run lives, for every crate of smdebug that reads or writes one: local disk or any `object_store` backend, behind one small sync trait.
//!
//! The training loop, the writer thread and the rules are synchronous, so [`Storage`] is too;
//! the object-store backend runs its async client on a small tokio runtime of its own. Local
//! disk is always there; every object store, `memory://` included, is a cargo feature
//! ([`Backend`]).
//!
//! Paths are relative to the storage's root (the run directory) and use `/`: `index/000000000/
//! 000000000003_worker_0.json`. A `prefix` in [`Storage::list`] is a folder (`"index"`,
//! `"events/000000000003"`; `""` for everything).
//!
//! ```
//! use smdebug_storage::{open_storage, Storage};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = open_storage(dir.path()).unwrap();
//! store.put("index/000000000/000000000001_worker_0.json", b"{}".to_vec().into()).unwrap();
//! store.put("index/000000000/000000000002_worker_0.json", b"{}".to_vec().into()).unwrap();
//! assert_eq!(store.list("index").unwrap().len(), 2);
//! assert_eq!(
//!     store.list_after("index", "index/000000000/000000000001_worker_0.json").unwrap(),
//!     vec!["index/000000000/000000000002_worker_0.json".to_string()],
//! );
//!
//! // The same through an in-process object store, shared by every handle on `memory://doc`
//! // (feature `memory`):
//! # #[cfg(feature = "memory")] {
//! let mem = open_storage("memory://doc/run").unwrap();
//! mem.put("a/b.json", bytes::Bytes::from_static(b"[1]")).unwrap();
//! assert_eq!(&open_storage("memory://doc/run").unwrap().get("a/b.json").unwrap()[..], b"[1]");
//! # }
//! ```

mod backend;
mod error;
mod local;
mod location;
#[cfg(feature = "object-store")]
mod object;
pub mod regular;
mod store;
#[cfg(feature = "testing")]
pub mod testing;

use std::sync::Arc;

pub use backend::Backend;
pub use error::{BoxError, Error, Result};
pub use local::LocalStorage;
pub use location::{IntoLocation, Location};
#[cfg(feature = "object-store")]
pub use object::ObjectStorage;
pub use store::check_relative;
pub use store::{Storage, StorageOptions};

/// Opens the storage at `location` with default [`StorageOptions`]: a path, a `file://` URL or a
/// [`Location::Local`] is local disk; `memory://name/...` is an in-process store shared by every
/// handle opened on the same `name` in this process; `s3://`, `gs://`, `az://` (and the other
/// schemes `object_store` parses) are object stores configured from the environment. Each
/// object store is behind its cargo feature ([`Backend`]); one left out is
/// [`Error::BackendNotCompiled`] naming the feature.
pub fn open_storage(location: impl IntoLocation) -> Result<Arc<dyn Storage>> {
    open_storage_with(location, &StorageOptions::default())
}

/// [`open_storage`] with explicit options.
pub fn open_storage_with(
    location: impl IntoLocation,
    options: &StorageOptions,
) -> Result<Arc<dyn Storage>> {
    match location.into_location()? {
        Location::Local(path) => Ok(Arc::new(LocalStorage::new(path)?)),
        Location::Store { url, .. } => open_object_store(&url, options),
    }
}

#[cfg(feature = "object-store")]
fn open_object_store(location: &str, options: &StorageOptions) -> Result<Arc<dyn Storage>> {
    let url = url::Url::parse(location).map_err(|e| Error::InvalidLocation {
        location: location.to_string(),
        reason: e.to_string(),
    })?;
    Ok(Arc::new(ObjectStorage::open(&url, options)?))
}

/// Without object stores every URL [`local_path`] lets through names a backend left out.
#[cfg(not(feature = "object-store"))]
fn open_object_store(location: &str, _options: &StorageOptions) -> Result<Arc<dyn Storage>> {
    match Backend::for_location(location) {
        Some(backend) => Err(Error::BackendNotCompiled {
            location: location.trim_end_matches('/').to_string(),
            backend: backend.name(),
            feature: backend.feature(),
        }),
        None => Err(Error::InvalidLocation {
            location: location.to_string(),
            reason: "not a local path or an object-store URL".to_string(),
        }),
    }
}
