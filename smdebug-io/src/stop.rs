//! Stopping a training job from a rule runner in another thread, process or machine.
//!
//! A rule runner (smdebug-rules) writes `<run>/stop_request.json` through the run's storage
//! (local disk or an object store); the training process runs a [`StopWatcher`] that looks for
//! that file every 200 ms and sets the hook's [`StopSignal`]. Both halves live here, beside the
//! storage, so that a training loop honours stop requests with smdebug-core and smdebug-io
//! alone. The training loop sees
//! `hook.stop_requested()` at its next step, stops, and `hook.close()` writes the end marker
//! with the reason.
//!
//! ```
//! use smdebug_core::StopSignal;
//! use smdebug_io::stop::{StopRequest, StopWatcher, request_stop};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let run = dir.path().to_str().unwrap();
//! let signal = StopSignal::default();
//! let watcher = StopWatcher::spawn(run, signal.clone()).unwrap();
//!
//! // Elsewhere (another process, through the same directory or bucket):
//! let store = smdebug_io::open_storage(run).unwrap();
//! request_stop(store.as_ref(), &StopRequest::new("LossNotDecreasing fired at step 40")).unwrap();
//!
//! while signal.requested().is_none() {
//!     std::thread::sleep(std::time::Duration::from_millis(20));
//! }
//! assert_eq!(signal.requested().unwrap(), "LossNotDecreasing fired at step 40");
//! watcher.stop();
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::storage::{Storage, open_storage};
use serde::{Deserialize, Serialize};
use smdebug_core::StopSignal;

/// The stop-request file, relative to the run.
pub const STOP_REQUEST_FILE: &str = "stop_request.json";

/// The longest stop reason kept, in characters; a longer one is cut (and says so).
pub const MAX_REASON_CHARS: usize = 1_000;

/// The largest stop-request file read: a bigger one is refused with an error naming its size.
pub const MAX_STOP_REQUEST_BYTES: u64 = 64 * 1024;

/// A stop reason fit to show and store: control characters (terminal escapes, line breaks)
/// become spaces, runs of spaces one, and it is cut at [`MAX_REASON_CHARS`].
pub fn sanitize_reason(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len().min(MAX_REASON_CHARS * 4));
    let mut kept = 0usize;
    let mut total = 0usize;
    // Leading spaces dropped (as if one came before), trailing ones at the end.
    let mut space = true;
    for c in reason.chars() {
        let c = if c.is_control() || c.is_whitespace() {
            ' '
        } else {
            c
        };
        if c == ' ' && space {
            continue;
        }
        space = c == ' ';
        total += 1;
        if kept < MAX_REASON_CHARS {
            out.push(c);
            kept += 1;
        }
    }
    if total > kept {
        out.push_str(&format!("… ({} more characters)", total - kept));
    } else if out.ends_with(' ') {
        out.pop();
    }
    out
}

/// What a stop request says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StopRequest {
    /// Why the job should stop; it ends up in the run's end marker.
    pub reason: String,
    /// The rule that asked, if a rule did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The step at which it fired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// When the request was written, seconds since the Unix epoch.
    #[serde(default)]
    pub requested_at: f64,
}

impl StopRequest {
    /// A request with a reason (made fit to show: see [`sanitize_reason`]), stamped now.
    pub fn new(reason: impl Into<String>) -> Self {
        StopRequest {
            reason: sanitize_reason(&reason.into()),
            rule: None,
            step: None,
            requested_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
        }
    }
}

/// Writes the stop request into the run (atomically: a watcher never reads half of it).
pub fn request_stop(storage: &dyn Storage, request: &StopRequest) -> Result<()> {
    let json = serde_json::to_vec_pretty(request).map_err(|e| Error::BadStopRequest {
        location: storage.describe().to_string(),
        reason: e.to_string(),
    })?;
    storage.put(STOP_REQUEST_FILE, json.into())
}

/// The run's stop request, if one was written; its reason and rule made fit to show
/// ([`sanitize_reason`]). A file over [`MAX_STOP_REQUEST_BYTES`] is an error naming its size.
pub fn read_stop_request(storage: &dyn Storage) -> Result<Option<StopRequest>> {
    let bad = |reason: String| Error::BadStopRequest {
        location: storage.describe().to_string(),
        reason,
    };
    match storage.size(STOP_REQUEST_FILE) {
        Ok(Some(size)) if size > MAX_STOP_REQUEST_BYTES => {
            return Err(bad(format!(
                "{STOP_REQUEST_FILE} is {size} bytes, more than the {MAX_STOP_REQUEST_BYTES} a \
                 stop request may have"
            )));
        }
        Ok(None) => return Ok(None),
        _ => {}
    }
    match storage.get(STOP_REQUEST_FILE) {
        Ok(bytes) => serde_json::from_slice::<StopRequest>(&bytes)
            .map(|mut request| {
                request.reason = sanitize_reason(&request.reason);
                request.rule = request.rule.as_deref().map(sanitize_reason);
                Some(request)
            })
            .map_err(|e| bad(e.to_string())),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// A thread in the training process that turns a stop request in the run into a
/// [`StopSignal`] request. Stops (and is joined) on [`stop`](StopWatcher::stop) or drop.
pub struct StopWatcher {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StopWatcher {
    /// The default poll interval.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(200);

    /// Watches the run at `location` (path or URL) every 200 ms.
    pub fn spawn(location: &str, signal: StopSignal) -> Result<StopWatcher> {
        StopWatcher::with_storage(open_storage(location)?, signal, Self::DEFAULT_INTERVAL)
    }

    /// Watches an already-open storage. A stop request left in the run by an earlier job is
    /// removed first: a new job starts unstopped.
    pub fn with_storage(
        storage: Arc<dyn Storage>,
        signal: StopSignal,
        interval: Duration,
    ) -> Result<StopWatcher> {
        storage.delete(STOP_REQUEST_FILE)?;
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let thread = std::thread::Builder::new()
            .name("smdebug-stop-watcher".into())
            .spawn(move || {
                while !flag.load(Ordering::Acquire) {
                    match read_stop_request(storage.as_ref()) {
                        Ok(Some(req)) => {
                            signal.request(req.reason);
                            return;
                        }
                        Ok(None) => {}
                        // A transient storage error must not stop training; a request that
                        // is half-written cannot happen (puts are atomic), so keep polling.
                        Err(_) => {}
                    }
                    std::thread::park_timeout(interval);
                }
            })
            .map_err(|source| Error::Thread {
                thread: "stop watcher",
                source,
            })?;
        Ok(StopWatcher {
            done,
            thread: Some(thread),
        })
    }

    /// Stops watching and joins the thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.done.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Drop for StopWatcher {
    fn drop(&mut self) {
        self.shutdown();
    }
}
