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
    match local_path(location)? {
        Some(path) => Ok(Arc::new(LocalStorage::new(path)?)),
        None => {
            let url = url::Url::parse(location).map_err(|e| Error::InvalidLocation {
                location: location.to_string(),
                reason: e.to_string(),
            })?;
            Ok(Arc::new(ObjectStorage::open(&url, options)?))
        }
    }
}

/// Whether `storage` takes writes: a small hidden object is stored and removed again. A
/// missing bucket, denied credentials, a read-only or full disk, an unreachable store: the
/// storage's own error, before anything that writes the run starts. `name` makes the object's
/// key this writer's own (`worker_0`). Removing it is best effort (a store may allow writes
/// and not deletes); the key is hidden from local listings either way.
pub fn probe_write(storage: &dyn Storage, name: &str) -> Result<()> {
    // A name the run owns: a probe left behind never makes the folder look foreign.
    let key = crate::format::layout::start_probe_file(name, std::process::id());
    storage.put(&key, bytes::Bytes::from_static(b"smdebug write probe\n"))?;
    if let Err(e) = storage.delete(&key) {
        log::warn!("smdebug: the write probe `{key}` could not be removed: {e}");
    }
    Ok(())
}

/// The URL schemes a location may name: local disk (`file`), the in-process store
/// (`memory`) and the object stores `object_store` opens (each behind its [`Backend`]).
const SCHEMES: [&str; 12] = [
    "file", "memory", "s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "adl", "http", "https",
];

/// Where `location` lives: `Some(path)` on local disk (a plain path or a `file://` URL),
/// `None` for an object-store URL. A location that looks like a URL but is not a well-formed
/// one of a known scheme (`s3:/bucket/run` with one slash, `s3:bucket`, `foo://x`) is refused
/// rather than taken as a local folder named `s3:`; `./s3:/x` is such a folder.
pub(crate) fn local_path(location: &str) -> Result<Option<std::path::PathBuf>> {
    let invalid = |reason: String| Error::InvalidLocation {
        location: location.to_string(),
        reason,
    };
    let scheme = location.split_once(':').map(|(s, _)| s).filter(|s| {
        // A drive letter (`C:\runs`) is a path; a scheme has two characters or more.
        s.len() > 1
            && s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    let Some(scheme) = scheme else {
        return Ok(Some(location.into()));
    };
    let lower = scheme.to_ascii_lowercase();
    let known = SCHEMES.contains(&lower.as_str());
    let rest = &location[scheme.len() + 1..];
    if !rest.starts_with("//") {
        return Err(invalid(if known {
            format!(
                "`{scheme}:` must be followed by `//` (`{lower}://{}`); a local folder whose \
                 name ends in `:` is written `./{location}`",
                rest.trim_start_matches('/')
            )
        } else {
            format!(
                "`{scheme}:` looks like a URL scheme but is not one smdebug opens; a local \
                 folder whose name ends in `:` is written `./{location}`"
            )
        }));
    }
    if !known {
        return Err(invalid(format!(
            "unknown scheme `{scheme}://`: use a path, file://, memory://, s3://, gs://, \
             az:// (abfs[s]://, adl://) or http(s)://"
        )));
    }
    if lower != "file" {
        return Ok(None);
    }
    let url = url::Url::parse(location).map_err(|e| invalid(e.to_string()))?;
    url.to_file_path()
        .map(Some)
        .map_err(|()| invalid("not a local file path".to_string()))
}
