//! Test support (feature `testing`): a real S3-compatible server for object-store tests, a
//! storage that counts the calls made to it and the reads of each file ([`CountingStorage`]),
//! and the one way tests wait for something to happen ([`wait_until`], [`wait_for`],
//! [`wait_for_exit`]): on the condition, with a deadline, never by sleeping a guessed time.
//!
//! [`MotoServer::start`] runs moto's standalone server (`python -m moto.server`, Python from
//! `$SMDEBUG_PYTHON`, else `python3`; `pip install 'moto[server]'`) on a free loopback port and
//! kills it when dropped. Tests in several crates use it, so it lives here rather than being
//! copied into each test file.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::StorageOptions;

/// The Python that test helpers run: `$SMDEBUG_PYTHON`, else `python3`.
pub fn python() -> String {
    std::env::var("SMDEBUG_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// A loopback port nothing listens on at the moment of the call.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a loopback port")
}

/// How often [`poll`] (and the waits built on it) looks at its condition.
const WAIT_POLL: Duration = Duration::from_millis(20);

/// Polls `f` until it gives `Some` and returns that, or `None` once `limit` has passed: the
/// one polling loop of the test helpers ([`wait_for`], [`wait_until`], [`wait_for_exit`]). For
/// a test that must undo something (open a gate its threads are held at) before it fails;
/// otherwise use [`wait_for`], which fails naming what did not happen.
pub fn poll<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(WAIT_POLL);
    }
}

/// Polls `f` until it gives `Some` and returns that. Panics naming `what` if `limit` passes
/// first: a test that waits for an event that never comes fails, it does not hang. `limit` is a
/// deadline for a broken build, not a timing the test expects (give it tens of seconds).
///
/// `f` may do work as well as look: a test that trains until the loop hears a stop request
/// runs one step per call, so the steps are paced by the poll and the wait has its deadline.
pub fn wait_for<T>(limit: Duration, what: &str, f: impl FnMut() -> Option<T>) -> T {
    poll(limit, f).unwrap_or_else(|| panic!("timed out after {limit:?} waiting for {what}"))
}

/// Polls `condition` until it holds; panics naming `what` if `limit` passes first
/// ([`wait_for`] without a value).
pub fn wait_until(limit: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    wait_for(limit, what, || condition().then_some(()));
}

/// Waits for `child` to exit and returns its status. If `limit` passes first, kills it (a
/// child that hangs must not outlive the test) and panics naming `what`.
pub fn wait_for_exit(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let status = poll(limit, || {
        child
            .try_wait()
            .unwrap_or_else(|e| panic!("asking whether {what} ended: {e}"))
    });
    status.unwrap_or_else(|| {
        let _ = child.kill();
        let _ = child.wait();
        panic!("timed out after {limit:?} waiting for {what} (killed it)")
    })
}

/// A moto S3 server on a free loopback port, killed on drop.
pub struct MotoServer {
    child: Child,
    /// The port it listens on.
    pub port: u16,
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl MotoServer {
    /// Starts moto and waits (up to 30 s) until it accepts connections. Panics with the
    /// install command when moto is missing: a test that needs S3 must not pass without it.
    pub fn start() -> MotoServer {
        let py = python();
        match Command::new(&py)
            .args(["-c", "import moto.server"])
            .output()
        {
            Ok(out) if out.status.success() => {}
            Ok(out) => panic!(
                "moto is not installed for `{py}` ({}): run `pip install 'moto[server]'` \
                 (or `bash .ci/setup-python` and set SMDEBUG_PYTHON)",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => panic!(
                "cannot run `{py}` ({e}): install Python 3 and run `pip install 'moto[server]'`"
            ),
        }
        let port = free_port();
        let child = Command::new(&py)
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto");
        let mut moto = MotoServer { child, port };
        let what = format!("moto to listen on port {port}");
        wait_until(Duration::from_secs(30), &what, || {
            if let Ok(Some(status)) = moto.child.try_wait() {
                panic!("moto exited ({status}): run `pip install 'moto[server]'`");
            }
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        moto
    }

    /// The endpoint URL, `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates a bucket with a plain HTTP PUT (moto accepts unsigned requests).
    pub fn create_bucket(&self, bucket: &str) {
        let port = self.port;
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to moto");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("set a read timeout");
        write!(
            s,
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .expect("send the bucket request");
        let mut resp = String::new();
        let _ = s.read_to_string(&mut resp);
        assert!(
            resp.starts_with("HTTP/1.1 200"),
            "bucket creation failed: {resp}"
        );
    }

    /// Storage options that reach this server (and ignore the process environment).
    pub fn options(&self) -> StorageOptions {
        s3_options(self.port)
    }

    /// The same settings as environment variables, for child processes that open
    /// `s3://` URLs with the default options.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }
}

/// Storage options for an S3 endpoint on a loopback port (a moto server, or nothing at all to
/// test an unreachable store).
pub fn s3_options(port: u16) -> StorageOptions {
    StorageOptions {
        from_env: false,
        ..Default::default()
    }
    .with("aws_endpoint", format!("http://127.0.0.1:{port}"))
    .with("aws_allow_http", "true")
    .with("aws_access_key_id", "testing")
    .with("aws_secret_access_key", "testing")
    .with("aws_region", "us-east-1")
}

/// What a [`CountingStorage`] was asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StorageCalls {
    /// Whole-object reads.
    pub gets: u64,
    /// Range reads.
    pub ranges: u64,
    /// Sizes asked.
    pub sizes: u64,
    /// Listings (`list` and `list_after`).
    pub lists: u64,
    /// Bytes read, whole or by range.
    pub bytes: u64,
    /// The most bytes one read returned.
    pub largest_read: u64,
}

/// What a [`CountingStorage`] returned of one file: reads that found it (whole or by range;
/// a read of a file that is not there is no read of it) and the bytes they returned; and how
/// often the file was written through it (a file written again may be read again).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileReads {
    /// Reads that returned some of the file.
    pub reads: u64,
    /// The bytes they returned.
    pub bytes: u64,
    /// Whole writes of the file (`put`) and appends to it.
    pub writes: u64,
}

/// A storage that counts what it is asked before passing it on: a test proves a reader does
/// no more than it should by counting calls, not by timing them. It also counts the reads of
/// each file ([`file_reads`](Self::file_reads)). It has no local root (whatever `inner` is),
/// so a reader reads every file through it.
#[derive(Debug)]
pub struct CountingStorage {
    inner: std::sync::Arc<dyn crate::Storage>,
    calls: std::sync::Mutex<StorageCalls>,
    files: std::sync::Mutex<std::collections::BTreeMap<String, FileReads>>,
    listings: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
}

impl CountingStorage {
    /// Counts the calls made to `inner`.
    pub fn new(inner: std::sync::Arc<dyn crate::Storage>) -> CountingStorage {
        CountingStorage {
            inner,
            calls: std::sync::Mutex::new(StorageCalls::default()),
            files: std::sync::Mutex::default(),
            listings: std::sync::Mutex::default(),
        }
    }

    /// The calls so far.
    pub fn calls(&self) -> StorageCalls {
        *self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The reads of each file read so far, by path (with the writes of it through this storage).
    pub fn file_reads(&self) -> std::collections::BTreeMap<String, FileReads> {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        files
            .iter()
            .filter(|(_, f)| f.reads > 0)
            .map(|(path, f)| (path.clone(), *f))
            .collect()
    }

    /// How many listings (`list` and `list_after`) were asked of a prefix starting with `prefix`.
    pub fn listings_of(&self, prefix: &str) -> u64 {
        let listings = self.listings.lock().unwrap_or_else(|e| e.into_inner());
        listings
            .iter()
            .filter(|(p, _)| p.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    }

    fn listed(&self, prefix: &str) {
        self.count(|c| c.lists += 1);
        let mut listings = self.listings.lock().unwrap_or_else(|e| e.into_inner());
        *listings.entry(prefix.to_owned()).or_default() += 1;
    }

    fn wrote(&self, path: &str) {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        files.entry(path.to_owned()).or_default().writes += 1;
    }

    fn count(&self, f: impl FnOnce(&mut StorageCalls)) {
        f(&mut self.calls.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn read(&self, path: &str, read: crate::Result<bytes::Bytes>) -> crate::Result<bytes::Bytes> {
        if let Ok(b) = &read {
            let n = b.len() as u64;
            self.count(|c| {
                c.bytes += n;
                c.largest_read = c.largest_read.max(n);
            });
            let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
            let file = files.entry(path.to_owned()).or_default();
            file.reads += 1;
            file.bytes += n;
        }
        read
    }
}

impl crate::Storage for CountingStorage {
    fn describe(&self) -> &str {
        self.inner.describe()
    }
    fn put_parts(&self, path: &str, parts: Vec<bytes::Bytes>) -> crate::Result<()> {
        self.inner.put_parts(path, parts)?;
        self.wrote(path);
        Ok(())
    }
    fn get(&self, path: &str) -> crate::Result<bytes::Bytes> {
        self.count(|c| c.gets += 1);
        self.read(path, self.inner.get(path))
    }
    fn get_range(&self, path: &str, range: std::ops::Range<u64>) -> crate::Result<bytes::Bytes> {
        self.count(|c| c.ranges += 1);
        self.read(path, self.inner.get_range(path, range))
    }
    fn size(&self, path: &str) -> crate::Result<Option<u64>> {
        self.count(|c| c.sizes += 1);
        self.inner.size(path)
    }
    fn list(&self, prefix: &str) -> crate::Result<Vec<String>> {
        self.listed(prefix);
        self.inner.list(prefix)
    }
    fn list_after(&self, prefix: &str, offset: &str) -> crate::Result<Vec<String>> {
        self.listed(prefix);
        self.inner.list_after(prefix, offset)
    }
    fn delete(&self, path: &str) -> crate::Result<()> {
        self.inner.delete(path)
    }
    fn supports_append(&self) -> bool {
        self.inner.supports_append()
    }
    fn append(&self, path: &str, data: &[u8]) -> crate::Result<()> {
        self.inner.append(path, data)?;
        self.wrote(path);
        Ok(())
    }
}
