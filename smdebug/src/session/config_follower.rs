//! Following SageMaker's profiler configuration file while the job runs: a window opened or
//! closed in the file reaches the timeline at the next step boundary, as Python smdebug re-reads
//! the file at every step.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use smdebug_core::timeline::{Profiling, Timeline, TimelineConfig};
use smdebug_profiler::config::ProfilerConfigWatcher;

use super::profiling::SessionSink;

/// How often the file is looked at.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// A thread that polls the profiler configuration file and applies what changed.
pub(crate) struct ConfigFollower {
    done: Arc<AtomicBool>,
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
        let thread = std::thread::Builder::new()
            .name("smdebug-config".into())
            .spawn(move || {
                while !flag.load(Ordering::Acquire) {
                    std::thread::park_timeout(interval);
                    if flag.load(Ordering::Acquire) {
                        break;
                    }
                    let Some(config) = watcher.poll() else {
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
            thread: Some(thread),
        })
    }

    /// Stops following and joins the thread.
    pub(crate) fn stop(mut self) {
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

impl Drop for ConfigFollower {
    fn drop(&mut self) {
        self.shutdown();
    }
}
