//! Stopping a training job from a rule runner in another thread, process or machine.
//!
//! A rule runner (smdebug-rules) writes `<run>/stop_request.json` through the run's storage
//! (local disk or an object store); the training process runs a [`StopWatcher`] that looks for
//! that file every second and sets the hook's [`StopSignal`]. Both halves live here, beside the
//! storage, so that a training loop honours stop requests with smdebug-core and smdebug-io
//! alone. The training loop sees
//! `hook.stop_requested()` at its next step, stops, and `hook.close()` writes the end marker
//! with the reason.
//!
//! ```
//! use smdebug_core::{StopCause, StopSignal};
//! use smdebug_format::stop::StopRequest;
//! use smdebug_io::stop::{StopWatcher, request_stop};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let run = dir.path().to_str().unwrap();
//! let signal = StopSignal::default();
//! let watcher = StopWatcher::spawn(run, signal.clone()).unwrap();
//!
//! // Elsewhere (another process, through the same directory or bucket):
//! let store = smdebug_storage::open_storage(run).unwrap();
//! request_stop(store.as_ref(), &StopRequest::new("LossNotDecreasing fired at step 40")).unwrap();
//!
//! while signal.cause().is_none() {
//!     std::thread::sleep(std::time::Duration::from_millis(20));
//! }
//! assert_eq!(signal.cause().unwrap().reason, "LossNotDecreasing fired at step 40");
//! watcher.stop();
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use smdebug_core::{StopCause, StopSignal};
use smdebug_storage::{Storage, open_storage};

use smdebug_format::layout::STOP_REQUEST_FILE;
use smdebug_format::stop::{MAX_STOP_REQUEST_BYTES, StopRequest};

/// What [`request_stop`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum StopOutcome {
    /// The request was written.
    Written,
    /// The run holds a stop request already (the job stops, or stopped, for it): it is kept,
    /// and the new one is not written.
    AlreadyRequested(StopRequest),
}

/// Writes the stop request into the run (atomically: a watcher never reads half of it),
/// unless the run holds one already. The first request is the one the job stops for, and the
/// one its end marker names: a later one (a second rule firing before the job reached its next
/// step, the dashboard's button) must not replace it in the file, or readers would name a
/// rule that stopped nothing. A file there that does not read as a stop request is replaced.
/// (A job's [`StopWatcher`] removes a request an earlier job left before it starts.)
pub fn request_stop(storage: &dyn Storage, request: &StopRequest) -> Result<StopOutcome> {
    if let Ok(Some(existing)) = read_stop_request(storage) {
        return Ok(StopOutcome::AlreadyRequested(existing));
    }
    storage.put(STOP_REQUEST_FILE, request.encode().into())?;
    Ok(StopOutcome::Written)
}

/// The run's stop request, if one was written; its reason and rule made fit to show
/// ([`sanitize_reason`](smdebug_format::stop::sanitize_reason)). At most [`MAX_STOP_REQUEST_BYTES`] + 1 bytes are read: a larger file
/// is an error saying so. A file that is not a stop request (not JSON, a field of the wrong
/// type, empty) is [`Error::BadStopRequest`]; one the storage refuses (a FIFO or a device in a
/// local run: never opened for a blocking read) or cannot reach is the storage's error.
pub fn read_stop_request(storage: &dyn Storage) -> Result<Option<StopRequest>> {
    let bad = |reason: String| Error::BadStopRequest {
        location: storage.describe().to_string(),
        reason,
    };
    let bytes = match storage.get_range(STOP_REQUEST_FILE, 0..MAX_STOP_REQUEST_BYTES + 1) {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => return Ok(None),
        // An empty file has no range to read.
        Err(_) if matches!(storage.size(STOP_REQUEST_FILE), Ok(Some(0))) => {
            return Err(bad(format!("{STOP_REQUEST_FILE} is empty")));
        }
        Err(e) => return Err(e.into()),
    };
    if bytes.len() as u64 > MAX_STOP_REQUEST_BYTES {
        let size = match storage.size(STOP_REQUEST_FILE) {
            Ok(Some(size)) => format!("{size} bytes"),
            _ => "larger".to_string(),
        };
        return Err(bad(format!(
            "{STOP_REQUEST_FILE} is {size}, more than the {MAX_STOP_REQUEST_BYTES} bytes a stop \
             request may have"
        )));
    }
    StopRequest::decode(&bytes)
        .map(Some)
        .map_err(|e| bad(format!("not a stop request ({} bytes): {e}", bytes.len())))
}

/// A thread in the training process that turns a stop request in the run into a
/// [`StopSignal`] request. Stops on [`stop`](StopWatcher::stop) or drop, waiting for its thread
/// at most [`StopWatcher::STOP_WAIT`].
///
/// A stop request that cannot be read (not JSON, a field of the wrong type, too large, a FIFO)
/// does not stop the job: no one can tell what it asked. Once two looks in a row read it so (a
/// file written in place may be caught empty by one look), it is logged (`log::error!`, once per
/// distinct reason, with the reason) and kept in [`problems`](StopWatcher::problems), and
/// the watcher goes on looking: a request written properly afterwards stops the job.
pub struct StopWatcher {
    done: Arc<AtomicBool>,
    problems: Arc<Mutex<Vec<String>>>,
    thread: Option<JoinHandle<()>>,
}

impl StopWatcher {
    /// The default poll interval.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

    /// How long [`stop`](Self::stop) waits for the thread (in a read from a storage that does
    /// not answer) before leaving it behind.
    pub const STOP_WAIT: Duration = Duration::from_secs(5);

    /// The most distinct problems kept; later ones are logged only.
    pub const MAX_PROBLEMS: usize = 16;

    /// Watches the run at `location` (path or URL: text, a `Path` or a parsed `Location`) every
    /// second.
    pub fn spawn(
        location: impl smdebug_storage::IntoLocation,
        signal: StopSignal,
    ) -> Result<StopWatcher> {
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
        let problems = Arc::new(Mutex::new(Vec::new()));
        let flag = done.clone();
        let seen = problems.clone();
        let thread = std::thread::Builder::new()
            .name("smdebug-stop-watcher".into())
            .spawn(move || {
                // What the last look could not read: a problem is said when two looks in a
                // row meet it. A request written in place (`echo … > stop_request.json`, not
                // renamed into place as `request_stop` does) can be caught empty or half
                // written by one look, and the next reads it whole.
                let mut last_problem: Option<String> = None;
                while !flag.load(Ordering::Acquire) {
                    match read_stop_request(storage.as_ref()) {
                        Ok(Some(req)) => {
                            signal.request(StopCause {
                                reason: req.reason,
                                rule: req.rule,
                                step: req.step,
                            });
                            return;
                        }
                        Ok(None) => last_problem = None,
                        // Neither a bad request nor a storage error stops training; both are
                        // said, once each, and the watcher keeps looking.
                        Err(e) => {
                            let text = e.to_string();
                            if last_problem.as_ref() == Some(&text) {
                                note_problem(&seen, &e);
                            }
                            last_problem = Some(text);
                        }
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
            problems,
            thread: Some(thread),
        })
    }

    /// Why stop requests in the run could not be read so far, each distinct one once, oldest
    /// first (at most [`MAX_PROBLEMS`](Self::MAX_PROBLEMS)).
    pub fn problems(&self) -> Vec<String> {
        self.problems
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stops watching: whether the thread ended within [`STOP_WAIT`](Self::STOP_WAIT) (if
    /// not, it is left to end on its own) and the [`problems`](Self::problems) met until then.
    pub fn stop(mut self) -> WatcherStopped {
        let ended = self.shutdown();
        WatcherStopped {
            ended,
            problems: self.problems(),
        }
    }

    fn shutdown(&mut self) -> bool {
        self.done.store(true, Ordering::Release);
        match self.thread.take() {
            Some(t) => {
                t.thread().unpark();
                join_within(t, Self::STOP_WAIT)
            }
            None => true,
        }
    }
}

/// What [`StopWatcher::stop`] says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatcherStopped {
    /// The thread ended within [`StopWatcher::STOP_WAIT`].
    pub ended: bool,
    /// Why stop requests could not be read, each once (see [`StopWatcher::problems`]).
    pub problems: Vec<String>,
}

/// Logs a problem reading the stop request the first time it is seen and keeps it.
fn note_problem(problems: &Mutex<Vec<String>>, error: &Error) {
    let text = format!("a stop request could not be read and was not honoured: {error}");
    let mut problems = problems.lock().unwrap_or_else(|e| e.into_inner());
    if problems.contains(&text) {
        return;
    }
    log::error!("{text}");
    if problems.len() < StopWatcher::MAX_PROBLEMS {
        problems.push(text);
    }
}

/// Joins `thread` if it ends within `wait`; otherwise leaves it running (detached) and says
/// `false`. For shutting down a helper thread that may be stuck in I/O without hanging on it.
pub fn join_within(thread: JoinHandle<()>, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    while !thread.is_finished() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = thread.join();
    true
}

impl Drop for StopWatcher {
    fn drop(&mut self) {
        self.shutdown();
    }
}
