//! The [`Storage`] trait every backend implements, the options object-store backends are
//! built with, and the path checks the backends share.

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;

use crate::error::{Error, Result};

/// A run's storage. Implementations are cheap to share (`Arc<dyn Storage>`) and thread-safe.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// The backend and root, for messages: `local disk /tmp/run`, `s3://bucket/run`.
    fn describe(&self) -> &str;

    /// Writes `path` atomically: readers see the old object (or none) or all of `parts`
    /// concatenated, never a part of it. Local disk writes a temporary file in the same folder
    /// and renames it; object stores put the object whole.
    fn put_parts(&self, path: &str, parts: Vec<Bytes>) -> Result<()>;

    /// [`put_parts`](Storage::put_parts) with one buffer.
    fn put(&self, path: &str, data: Bytes) -> Result<()> {
        self.put_parts(path, vec![data])
    }

    /// The whole object. [`Error::NotFound`] when it does not exist.
    fn get(&self, path: &str) -> Result<Bytes>;

    /// Bytes `range` of the object, cut short where the object ends first; an error when the
    /// range starts at or past the end (an empty range returns nothing without any I/O).
    fn get_range(&self, path: &str, range: Range<u64>) -> Result<Bytes>;

    /// [`get_range`](Storage::get_range) into memory the caller chose: bytes
    /// `start..start + buf.len()` of the object written at the start of `buf`, cut short where
    /// the object ends first; how many were written. The same errors as `get_range` over that
    /// range (and nothing read for an empty `buf`). The default reads with `get_range` and
    /// copies; local disk reads straight into `buf`.
    fn get_range_into(&self, path: &str, start: u64, buf: &mut [u8]) -> Result<usize> {
        let bytes = self.get_range(path, start..start.saturating_add(buf.len() as u64))?;
        let n = bytes.len().min(buf.len());
        buf[..n].copy_from_slice(&bytes[..n]);
        Ok(n)
    }

    /// The object's size, `None` when it does not exist; an error when something that cannot be
    /// read as an object is there (a FIFO or a device in a local folder).
    fn size(&self, path: &str) -> Result<Option<u64>>;

    /// Every object under folder `prefix`, as sorted paths relative to the root. A missing
    /// folder lists as empty. Temporary files of an unfinished `put` are never listed.
    fn list(&self, prefix: &str) -> Result<Vec<String>>;

    /// Like [`list`](Storage::list), but only paths sorting strictly after `offset` (a full
    /// relative path, which need not exist): incremental polling lists only what is new.
    fn list_after(&self, prefix: &str, offset: &str) -> Result<Vec<String>>;

    /// Like [`list_after`](Storage::list_after) (or [`list`](Storage::list) for no `offset`),
    /// but only paths sorting strictly before `end` too: a reader of a long run lists one
    /// stretch of it. The default lists to the end and leaves the rest out; local disk walks
    /// only the folders of the stretch.
    fn list_between(&self, prefix: &str, offset: Option<&str>, end: &str) -> Result<Vec<String>> {
        let mut paths = match offset {
            Some(offset) => self.list_after(prefix, offset)?,
            None => self.list(prefix)?,
        };
        paths.retain(|p| p.as_str() < end);
        Ok(paths)
    }

    /// Removes the object; removing one that does not exist is not an error.
    fn delete(&self, path: &str) -> Result<()>;

    /// The run's folder when the storage is local disk (where links and special files can be
    /// looked at), `None` for object stores.
    fn local_root(&self) -> Option<&std::path::Path> {
        None
    }

    /// Whether [`append`](Storage::append) works (local disk: yes; object stores: no).
    fn supports_append(&self) -> bool {
        false
    }

    /// Appends to `path`, creating it. Not atomic: for files that readers expect to grow
    /// (TensorBoard's). Object stores cannot append; callers check
    /// [`supports_append`](Storage::supports_append) and rewrite whole objects instead.
    fn append(&self, path: &str, data: &[u8]) -> Result<()> {
        let _ = data;
        Err(Error::Failed {
            location: self.describe().to_string(),
            op: "append",
            path: path.to_string(),
            source: "this storage cannot append".into(),
        })
    }
}

/// How object-store backends are built. Local disk ignores these.
#[derive(Clone, Debug)]
pub struct StorageOptions {
    /// Backend options as `object_store` spells them (`aws_endpoint`, `aws_allow_http`,
    /// `aws_access_key_id`, `google_service_account`, `azure_storage_account_name`, …). They
    /// override the environment. Default: none.
    pub options: BTreeMap<String, String>,
    /// Read the backend's environment variables (`AWS_*` for s3://, `GOOGLE_*` for gs://,
    /// `AZURE_*` for az://), as the cloud SDKs do. Default: true.
    pub from_env: bool,
    /// Time allowed to open a connection. Default: 5 s.
    pub connect_timeout: Duration,
    /// Time allowed for one request, body included. Default: 5 min.
    pub request_timeout: Duration,
    /// Retries of a failed request (connection refused, 5xx). Default: 3.
    pub max_retries: usize,
    /// No retry starts later than this after the first attempt. Default: 30 s.
    pub retry_timeout: Duration,
}

impl Default for StorageOptions {
    fn default() -> Self {
        StorageOptions {
            options: BTreeMap::new(),
            from_env: true,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(300),
            max_retries: 3,
            retry_timeout: Duration::from_secs(30),
        }
    }
}

impl StorageOptions {
    /// Adds one backend option (`"aws_endpoint"`, `"http://127.0.0.1:9000"`).
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.options.insert(key.into(), value.into());
        self
    }
}

/// Checks a relative storage path: no leading `/`, no empty, `.` or `..` segments.
pub fn check_relative(location: &str, path: &str) -> Result<()> {
    let bad = path.starts_with('/')
        || path
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
        || path.contains('\\');
    if bad {
        return Err(Error::Failed {
            location: location.to_string(),
            op: "resolve",
            path: path.to_string(),
            source: "not a relative path of plain folder names".into(),
        });
    }
    Ok(())
}

/// A normalized folder prefix: no leading or trailing `/`.
pub(crate) fn trim_prefix(prefix: &str) -> &str {
    prefix.trim_matches('/')
}
