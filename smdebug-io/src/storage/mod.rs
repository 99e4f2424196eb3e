//! Where a run lives: local disk or any `object_store` backend, behind one small sync trait.
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
//! // The same through an in-process object store, shared by every handle on `memory://doc`
//! // (feature `memory`):
//! # #[cfg(feature = "memory")] {
//! let mem = open_storage("memory://doc/run").unwrap();
//! mem.put("a/b.json", bytes::Bytes::from_static(b"[1]")).unwrap();
//! assert_eq!(&open_storage("memory://doc/run").unwrap().get("a/b.json").unwrap()[..], b"[1]");
//! # }
//! ```

mod backend;
mod local;
mod location;
#[cfg(feature = "object-store")]
mod object;
pub mod regular;
mod store;

use std::sync::Arc;

use crate::error::{Error, Result};
pub use backend::Backend;
pub use local::LocalStorage;
pub use location::Location;
#[cfg(feature = "object-store")]
pub use object::ObjectStorage;
pub use store::check_relative;
pub use store::{Storage, StorageOptions};

/// Opens the storage at `location` with default [`StorageOptions`]: a plain path or `file://`
/// URL is local disk; `memory://name/...` is an in-process store shared by every handle opened
/// on the same `name` in this process; `s3://`, `gs://`, `az://` (and the other schemes
/// `object_store` parses) are object stores configured from the environment. Each object store
/// is behind its cargo feature ([`Backend`]); one left out is
/// [`Error::BackendNotCompiled`] naming the feature.
pub fn open_storage(location: &str) -> Result<Arc<dyn Storage>> {
    open_storage_with(location, &StorageOptions::default())
}

/// [`open_storage`] with explicit options.
pub fn open_storage_with(location: &str, options: &StorageOptions) -> Result<Arc<dyn Storage>> {
    match Location::parse(location)? {
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

/// Whether `storage` takes writes: a small hidden object is stored and removed again. A
/// missing bucket, denied credentials, a read-only or full disk, an unreachable store: the
/// storage's own error, before anything that writes the run starts. `name` makes the object's
/// key this writer's own (`worker_0`). Removing it is best effort (a store may allow writes
/// and not deletes); the key is hidden from local listings either way.
pub fn probe_write(storage: &dyn Storage, name: &str) -> Result<()> {
    // A name the run owns: a probe left behind never makes the folder look foreign.
    let key = smdebug_format::layout::start_probe_file(name, std::process::id());
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
/// `None` for a URL of a scheme an object store opens ([`Location::parse`] is the public
/// face of it). A location that looks like a URL but is not a well-formed
/// one of a known scheme (`s3:/bucket/run` with one slash, `s3:bucket`, `foo://x`) is refused
/// rather than taken as a local folder named `s3:`; `./s3:/x` is such a folder.
fn local_path(location: &str) -> Result<Option<std::path::PathBuf>> {
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
    file_url_path(&rest[2..]).map(Some).map_err(invalid)
}

/// The local path of a `file://` URL, given what follows `file://`: an empty host or
/// `localhost`, then an absolute path whose `%XX` escapes are decoded (`file:///tmp/my%20run`
/// is `/tmp/my run`). Decoded by hand with `percent-encoding` rather than with `url`, whose
/// IDNA tables the lean training build leaves out (`url` decides the same for these).
fn file_url_path(after_scheme: &str) -> std::result::Result<std::path::PathBuf, String> {
    if after_scheme.contains(['?', '#']) {
        return Err("a file:// location has no query or fragment (`?`, `#`)".to_string());
    }
    let (host, path) = match after_scheme.find('/') {
        Some(slash) => after_scheme.split_at(slash),
        None => (after_scheme, ""),
    };
    if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
        return Err(format!(
            "not a local file path: host `{host}` (a local file URL is file:///path)"
        ));
    }
    if path.is_empty() {
        return Err("not a local file path: no path after the host".to_string());
    }
    let bytes: Vec<u8> = percent_encoding::percent_decode_str(path).collect();
    #[cfg(unix)]
    let path = {
        use std::os::unix::ffi::OsStringExt;
        std::path::PathBuf::from(std::ffi::OsString::from_vec(bytes))
    };
    #[cfg(not(unix))]
    let path = std::path::PathBuf::from(
        String::from_utf8(bytes).map_err(|_| "the path is not UTF-8 once decoded".to_string())?,
    );
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_urls_are_local_paths_decoded() {
        let cases = [
            ("file:///tmp/run", "/tmp/run"),
            ("file:///tmp/my%20run", "/tmp/my run"),
            ("file://localhost/tmp/run", "/tmp/run"),
            ("FILE:///tmp/r%C3%A9sum%C3%A9", "/tmp/résumé"),
            ("file:///tmp/100%25", "/tmp/100%"),
        ];
        for (location, path) in cases {
            assert_eq!(
                local_path(location).unwrap(),
                Some(std::path::PathBuf::from(path)),
                "{location}"
            );
            // What `url` makes of the same location.
            #[cfg(feature = "object-store")]
            assert_eq!(
                url::Url::parse(location).unwrap().to_file_path().unwrap(),
                std::path::PathBuf::from(path),
                "{location}"
            );
        }
        for bad in ["file://host/tmp/run", "file://", "file:///tmp/run?x=1"] {
            let err = local_path(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidLocation { .. }), "{bad}: {err}");
        }
        assert_eq!(local_path("s3://bucket/run").unwrap(), None);
        assert_eq!(
            local_path("./s3:/x").unwrap(),
            Some(std::path::PathBuf::from("./s3:/x"))
        );
    }
}
