//! Where profiler files go: a small storage boundary with atomic `put`, implemented for a local
//! run directory ([`LocalDirStore`]) and for every smdebug-io storage backend, local disk or
//! object store ([`IoStore`]).
//!
//! Keys are `/`-separated paths relative to the run directory
//! (`system/incremental/2024010112/1704110400.algo-1.json`). A `put` is atomic: readers see
//! either the previous content or the whole new content, never part of a file.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::{ProfilerError, Result};

/// Storage for profiler files.
pub trait ProfilerStore: Send + Sync + 'static {
    /// Stores `bytes` under `key` atomically, replacing any previous content.
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()>;
    /// Returns the whole content stored under `key`.
    fn get(&self, key: &str) -> Result<Vec<u8>>;
    /// Lists every key under `prefix` (a folder, `/`-separated, recursive), sorted. A missing
    /// prefix lists nothing.
    fn list(&self, prefix: &str) -> Result<Vec<String>>;
}

/// A run directory on local disk.
///
/// `put` writes a hidden temporary file beside the target and renames it over the target, so
/// the publication is atomic. The temporary name starts with `.` and does not contain `.json`,
/// so neither this crate's reader nor Python smdebug's readers (which match `(.+)\.json` with
/// `re.search`) ever pick up a file that is still being written.
#[derive(Debug, Clone)]
pub struct LocalDirStore {
    root: PathBuf,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl LocalDirStore {
    /// A store rooted at the run directory `root` (created on first `put`).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The run directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path_of(&self, key: &str) -> PathBuf {
        let mut path = self.root.clone();
        path.extend(key.split('/').filter(|part| !part.is_empty()));
        path
    }
}

fn storage_error(operation: &'static str, key: &str, source: io::Error) -> ProfilerError {
    ProfilerError::Storage {
        operation,
        key: key.to_owned(),
        source,
    }
}

impl ProfilerStore for LocalDirStore {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let target = self.path_of(key);
        let parent = target
            .parent()
            .ok_or_else(|| storage_error("put", key, io::Error::other("key has no parent")))?;
        fs::create_dir_all(parent).map_err(|e| storage_error("put", key, e))?;
        let stem = target
            .file_name()
            .map(|n| n.to_string_lossy().replace(".json", ""))
            .unwrap_or_default();
        let temp = parent.join(format!(
            ".{stem}.{}-{}.tmp",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let written = fs::File::create(&temp).and_then(|mut file| file.write_all(bytes));
        if let Err(e) = written.and_then(|()| fs::rename(&temp, &target)) {
            // The temporary file is ours alone; leaving it would only waste space.
            let _ = fs::remove_file(&temp);
            return Err(storage_error("put", key, e));
        }
        Ok(())
    }

    fn get(&self, key: &str) -> Result<Vec<u8>> {
        fs::read(self.path_of(key)).map_err(|e| storage_error("get", key, e))
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let start = self.path_of(prefix);
        let mut keys = Vec::new();
        let mut pending = vec![start];
        while let Some(dir) = pending.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(storage_error("list", prefix, e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| storage_error("list", prefix, e))?;
                let name = entry.file_name();
                if name.to_string_lossy().starts_with('.') {
                    continue;
                }
                let kind = entry
                    .file_type()
                    .map_err(|e| storage_error("list", prefix, e))?;
                let path = entry.path();
                if kind.is_dir() {
                    pending.push(path);
                } else if let Ok(relative) = path.strip_prefix(&self.root) {
                    let key: Vec<String> = relative
                        .components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect();
                    keys.push(key.join("/"));
                }
            }
        }
        keys.sort();
        Ok(keys)
    }
}

/// Any smdebug-io storage (local disk, or an object store: `s3://`, `gs://`, `az://`,
/// `memory://`, ...) as profiler storage. Object stores receive each file as one whole `put`.
#[derive(Clone, Debug)]
pub struct IoStore {
    storage: std::sync::Arc<dyn smdebug_io::Storage>,
}

impl IoStore {
    /// Wraps an opened smdebug-io storage.
    pub fn new(storage: std::sync::Arc<dyn smdebug_io::Storage>) -> Self {
        Self { storage }
    }

    /// Opens a run location (a local path or an object-store URL) through smdebug-io.
    pub fn open(location: &str) -> Result<Self> {
        smdebug_io::open_storage(location)
            .map(Self::new)
            .map_err(|e| storage_error("open", location, io::Error::other(e)))
    }
}

impl ProfilerStore for IoStore {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        self.storage
            .put(key, bytes::Bytes::copy_from_slice(bytes))
            .map_err(|e| storage_error("put", key, io::Error::other(e)))
    }

    fn get(&self, key: &str) -> Result<Vec<u8>> {
        self.storage
            .get(key)
            .map(|bytes| bytes.to_vec())
            .map_err(|e| storage_error("get", key, io::Error::other(e)))
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.storage
            .list(prefix)
            .map_err(|e| storage_error("list", prefix, io::Error::other(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_replaces_whole_content_and_list_hides_temporaries() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalDirStore::new(dir.path());
        store
            .put("system/incremental/a/1.n.json", b"one\n")
            .unwrap();
        store
            .put("system/incremental/a/1.n.json", b"two\n")
            .unwrap();
        std::fs::write(dir.path().join("system/incremental/a/.junk.tmp"), b"x").unwrap();
        assert_eq!(
            store.get("system/incremental/a/1.n.json").unwrap(),
            b"two\n"
        );
        assert_eq!(
            store.list("system").unwrap(),
            vec!["system/incremental/a/1.n.json".to_owned()]
        );
        assert!(store.list("framework").unwrap().is_empty());
    }

    #[test]
    fn get_of_missing_key_names_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let err = LocalDirStore::new(dir.path()).get("nope.json").unwrap_err();
        assert!(err.to_string().contains("nope.json"), "{err}");
    }
}
