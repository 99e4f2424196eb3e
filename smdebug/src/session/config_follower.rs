//! Following SageMaker's profiler configuration file while the job runs: a window opened or
//! closed in the file reaches the timeline at the next step boundary, as Python smdebug re-reads
//! the file at every step.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use smdebug_core::timeline::{Profiling, Timeline, TimelineConfig};
use smdebug_profiler::config::ProfilerConfigWatcher;

use super::profiling::SessionSink;

/// How often the file is looked at.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How long [`ConfigFollower::stop`] waits for its thread (in a read of the file, itself
/// bounded by smdebug-io's `CONFIG_READ_TIMEOUT`) before leaving it behind.
pub(crate) const STOP_WAIT: Duration = Duration::from_secs(5);

/// A thread that polls the profiler configuration file and applies what changed.
pub(crate) struct ConfigFollower {
    done: Arc<AtomicBool>,
    /// The watcher's problems (a broken edit, a FIFO in the file's place), as of its last poll.
    problems: Arc<Mutex<Vec<String>>>,
    thread: Option<JoinHandle<()>>,
}

impl ConfigFollower {
    /// Follows `watcher`'s file; `code` are the windows set in code, which the file's
    /// sub-configs replace.
    pub(crate) fn spawn(
        mut watcher: ProfilerConfigWatcher,
        code: TimelineConfig,
        timeline: Timeline,
        sink: Option<Arc<SessionSink>>,
        interval: Duration,
    ) -> std::io::Result<ConfigFollower> {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let problems = Arc::new(Mutex::new(Vec::new()));
        let seen = problems.clone();
        let thread = std::thread::Builder::new()
            .name("smdebug-config".into())
            .spawn(move || {
                while !flag.load(Ordering::Acquire) {
                    std::thread::park_timeout(interval);
                    if flag.load(Ordering::Acquire) {
                        break;
                    }
                    let polled = watcher.poll();
                    let known = watcher.problems();
                    let mut shared = seen.lock().unwrap_or_else(|e| e.into_inner());
                    if shared.len() != known.len() {
                        *shared = known.to_vec();
                    }
                    drop(shared);
                    let Some(config) = polled else {
                        continue;
                    };
                    let windows = config.windows_over(&code);
                    if let Some(in_force) = timeline.windows() {
                        for p in Profiling::ALL {
                            // Only a window the file changed is replaced: an unrelated edit does
                            // not restart one that is open.
                            if windows.window(p) != in_force.window(p) {
                                log::info!(
                                    "{}: {} profiling now {}",
                                    watcher.path().display(),
                                    p.name(),
                                    windows.window(p)
                                );
                                if p == Profiling::Code
                                    && windows.window(p).is_enabled()
                                    && let Some(sink) = &sink
                                {
                                    sink.warm_up_code_profiler();
                                }
                                timeline.set_window(p, windows.window(p).clone());
                            }
                        }
                    }
                    if let Some(sink) = &sink {
                        sink.set_dataloader_metrics(config.dataloader_metrics().cloned());
                    }
                }
            })?;
        Ok(ConfigFollower {
            done,
            problems,
            thread: Some(thread),
        })
    }

    /// Stops following: what went wrong with the file while it was followed, and, when the
    /// thread had not ended within [`STOP_WAIT`], a problem saying it was left behind.
    pub(crate) fn stop(mut self) -> Vec<String> {
        let ended = self.shutdown();
        let mut problems =
            std::mem::take(&mut *self.problems.lock().unwrap_or_else(|e| e.into_inner()));
        if !ended {
            problems.push(format!(
                "the profiler configuration follower had not stopped {} s after it was asked \
                 (a read of the file hanging); it was left behind",
                STOP_WAIT.as_secs()
            ));
        }
        problems
    }

    fn shutdown(&mut self) -> bool {
        self.done.store(true, Ordering::Release);
        match self.thread.take() {
            Some(t) => {
                t.thread().unpark();
                smdebug_io::stop::join_within(t, STOP_WAIT)
            }
            None => true,
        }
    }
}

impl Drop for ConfigFollower {
    fn drop(&mut self) {
        self.shutdown();
    }
}
