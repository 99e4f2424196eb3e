//! Local disk: atomic writes through a temporary file and a rename in the same folder.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use super::store::{Storage, check_relative, trim_prefix};
use crate::error::{Error, Result};

/// Suffix of temporary files; with a leading `.` in the name they are never listed.
const TEMP_SUFFIX: &str = ".tmp";

/// A run directory on local disk.
#[derive(Debug)]
pub struct LocalStorage {
    root: PathBuf,
    describe: String,
    temp_counter: AtomicU64,
}

fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(TEMP_SUFFIX)
}

/// The temporary file a `put` of `target` writes first: hidden (a leading `.`), ending in
/// [`TEMP_SUFFIX`], and without the target's extension (`.json` becomes `_json`), so that no
/// reader that matches names by pattern (Python smdebug's readers `re.search` for `(.+)\.json`)
/// picks up a file still being written.
fn temp_name(target: &Path, n: u64) -> String {
    let name = target
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("file")
        .replace('.', "_");
    format!(".{name}.{}-{n}{TEMP_SUFFIX}", std::process::id())
}

impl LocalStorage {
    /// Storage rooted at `root`. The folder need not exist yet: the first `put` creates it.
    pub fn new(root: impl Into<PathBuf>) -> Result<LocalStorage> {
        let root = root.into();
        if root.as_os_str().is_empty() {
            return Err(Error::InvalidLocation {
                location: String::new(),
                reason: "empty path".to_string(),
            });
        }
        let describe = format!("local disk {}", root.display());
        Ok(LocalStorage {
            root,
            describe,
            temp_counter: AtomicU64::new(0),
        })
    }

    /// The run directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn resolve(&self, path: &str) -> Result<PathBuf> {
        check_relative(&self.describe, path)?;
        Ok(self.root.join(path))
    }

    fn io_err(&self, op: &'static str, path: &str, e: io::Error) -> Error {
        if e.kind() == io::ErrorKind::NotFound && matches!(op, "get" | "get_range") {
            return Error::NotFound {
                location: self.describe.clone(),
                path: path.to_string(),
            };
        }
        Error::Failed {
            location: self.describe.clone(),
            op,
            path: path.to_string(),
            source: Box::new(e),
        }
    }

    fn write_temp(&self, temp: &Path, parts: &[Bytes]) -> io::Result<()> {
        // The writer gathers small records into one part already, so the parts go out as they
        // are: no staging buffer to allocate and copy through.
        let mut file = File::create(temp)?;
        for p in parts {
            file.write_all(p)?;
        }
        Ok(())
    }

    /// Recursively collects files under `dir` (relative name `rel`) sorting after `offset`.
    fn walk(
        &self,
        dir: &Path,
        rel: &str,
        offset: Option<&str>,
        end: Option<&str>,
        out: &mut Vec<String>,
    ) -> Result<()> {
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => return Ok(()),
            Err(e) => return Err(self.io_err("list", rel, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| self.io_err("list", rel, e))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue; // not UTF-8: not something this crate wrote
            };
            if is_temp_name(&name) {
                continue;
            }
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let ft = entry
                .file_type()
                .map_err(|e| self.io_err("list", &child, e))?;
            if ft.is_dir() {
                // Every path under `child/` sorts before `offset` unless `offset` is inside it.
                let dir_prefix = format!("{child}/");
                if let Some(off) = offset
                    && dir_prefix.as_str() < off
                    && !off.starts_with(&dir_prefix)
                {
                    continue;
                }
                // Every path under `child/` sorts at or after `end`.
                if end.is_some_and(|end| dir_prefix.as_str() >= end) {
                    continue;
                }
                self.walk(&entry.path(), &child, offset, end, out)?;
            } else if offset.is_none_or(|off| child.as_str() > off)
                && end.is_none_or(|end| child.as_str() < end)
            {
                out.push(child);
            }
        }
        Ok(())
    }

    fn list_impl(
        &self,
        prefix: &str,
        offset: Option<&str>,
        end: Option<&str>,
    ) -> Result<Vec<String>> {
        let prefix = trim_prefix(prefix);
        let dir = if prefix.is_empty() {
            self.root.clone()
        } else {
            self.resolve(prefix)?
        };
        let mut out = Vec::new();
        self.walk(&dir, prefix, offset, end, &mut out)?;
        out.sort_unstable();
        Ok(out)
    }
}

impl Storage for LocalStorage {
    fn describe(&self) -> &str {
        &self.describe
    }

    fn put_parts(&self, path: &str, parts: Vec<Bytes>) -> Result<()> {
        let target = self.resolve(path)?;
        let dir = target.parent().unwrap_or(&self.root);
        fs::create_dir_all(dir).map_err(|e| self.io_err("put", path, e))?;
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(temp_name(&target, n));
        let result = self
            .write_temp(&temp, &parts)
            .and_then(|()| fs::rename(&temp, &target));
        if let Err(e) = result {
            let _ = fs::remove_file(&temp);
            return Err(self.io_err("put", path, e));
        }
        Ok(())
    }

    fn get(&self, path: &str) -> Result<Bytes> {
        check_relative(&self.describe, path)?;
        super::regular::read_whole(&self.root, path)
            .map(Bytes::from)
            .map_err(|e| self.io_err("get", path, e))
    }

    fn get_range(&self, path: &str, range: Range<u64>) -> Result<Bytes> {
        if range.start >= range.end {
            return Ok(Bytes::new());
        }
        check_relative(&self.describe, path)?;
        super::regular::read_range(&self.root, path, range)
            .map(Bytes::from)
            .map_err(|e| self.io_err("get_range", path, e))
    }

    fn get_range_into(&self, path: &str, start: u64, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        check_relative(&self.describe, path)?;
        super::regular::read_range_into(&self.root, path, start, buf)
            .map_err(|e| self.io_err("get_range", path, e))
    }

    fn size(&self, path: &str) -> Result<Option<u64>> {
        let p = self.resolve(path)?;
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_file() => Ok(Some(m.len())),
            // A folder is not an object.
            Ok(m) if m.is_dir() => Ok(None),
            // A link: what `get` would read, with the same checks (inside the run, a regular
            // file).
            Ok(m) if m.file_type().is_symlink() => match super::regular::open(&self.root, path) {
                Ok((_, size)) => Ok(Some(size)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(self.io_err("size", path, e)),
            },
            // A FIFO, a device or a socket is there but never read (`get` refuses it too): an
            // error naming it, not "absent", so that a reader says so.
            Ok(m) => Err(self.io_err(
                "size",
                path,
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{}, not a regular file: not read",
                        super::regular::kind_of(&m.file_type())
                    ),
                ),
            )),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io_err("size", path, e)),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.list_impl(prefix, None, None)
    }

    fn list_after(&self, prefix: &str, offset: &str) -> Result<Vec<String>> {
        self.list_impl(prefix, Some(offset), None)
    }

    fn list_between(&self, prefix: &str, offset: Option<&str>, end: &str) -> Result<Vec<String>> {
        self.list_impl(prefix, offset, Some(end))
    }

    fn delete(&self, path: &str) -> Result<()> {
        let p = self.resolve(path)?;
        match fs::remove_file(p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.io_err("delete", path, e)),
        }
    }

    fn local_root(&self) -> Option<&Path> {
        Some(&self.root)
    }

    fn supports_append(&self) -> bool {
        true
    }

    fn append(&self, path: &str, data: &[u8]) -> Result<()> {
        let p = self.resolve(path)?;
        let write = || -> io::Result<()> {
            if let Some(dir) = p.parent() {
                fs::create_dir_all(dir)?;
            }
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&p)?
                .write_all(data)
        };
        write().map_err(|e| self.io_err("append", path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_files_are_hidden_and_never_look_like_json() {
        let name = temp_name(Path::new("/run/system/incremental/1.algo-1.json"), 7);
        assert!(is_temp_name(&name), "{name}");
        assert!(!name.contains(".json"), "{name}");
        assert!(name.starts_with(".1_algo-1_json."), "{name}");
    }

    /// A stretch of a file is read as asked, cut short where the file ends; one that starts at
    /// or past the end, a folder and (on Unix) a FIFO in a file's place are errors naming what
    /// is wrong, never a wait.
    #[test]
    fn ranges_read_what_the_file_holds_and_refuse_what_is_not_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStorage::new(dir.path()).unwrap();
        store
            .put("a/f.bin", Bytes::from_static(b"0123456789"))
            .unwrap();
        assert_eq!(&store.get_range("a/f.bin", 3..6).unwrap()[..], b"345");
        assert_eq!(&store.get_range("a/f.bin", 8..1 << 40).unwrap()[..], b"89");
        let past = store.get_range("a/f.bin", 10..12).unwrap_err().to_string();
        assert!(past.contains("past the end (10 bytes)"), "{past}");
        assert!(store.get_range("a", 0..4).is_err(), "a folder");
        #[cfg(unix)]
        {
            let fifo = dir.path().join("a/fifo.bin");
            let made = std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap();
            assert!(made.success());
            let fifo = store.get_range("a/fifo.bin", 0..4).unwrap_err().to_string();
            assert!(fifo.contains("a FIFO, not a regular file"), "{fifo}");
        }
    }
}
