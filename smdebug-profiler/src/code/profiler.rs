//! The code profiler: cheap `begin`/`end` calls for the training thread, and two background
//! threads: one owns pprof-rs's process-wide sampler and only installs and removes its timer,
//! the other symbolizes each closed window and writes it.
//!
//! `begin` and `end` flip two atomics and put one message on a channel: no lock, no I/O, no
//! wait. Installing the `SIGPROF` timer and stopping it happen on the control thread, which
//! does nothing slower, so a window is sampled while it is open even when the last one is
//! still being written; resolving symbols, drawing the flame graph, encoding the profile and
//! storing the files happen on the writer thread. Outside a window no timer and no signal
//! handler is installed, but for an instant when the first profiler of a process starts (see
//! [`CodeProfiler::wait_ready`]). The threads are `sampler.rs`; what a profiler did is
//! `counters.rs`.

use std::sync::Arc;

use smdebug_core::Mode;
use smdebug_storage::Storage;

use super::config::CodeProfileConfig;
use super::counters::CodeProfileReport;
#[cfg(all(feature = "code-profile", target_os = "linux"))]
use super::sampler;
use crate::system::{ProfilerError, Result};

/// Samples CPU stacks of the whole process over windows, and writes each window into the run
/// (see the [module docs](super) for the files).
///
/// Only one window samples at a time in a process: pprof-rs's sampler is a process-wide
/// `SIGPROF` timer. A `begin` while any window is open (of this profiler or of another one in
/// the process) is [`ProfilerError::CodeProfileBusy`], and opens nothing.
///
/// `begin` and `end` never block and never panic: they return errors. A window that fails on
/// the background thread (the timer could not be installed, a file could not be stored) is
/// counted in [`CodeProfileReport::failed`] with its reason, and [`CodeProfiler::finish`]
/// returns [`ProfilerError::CodeProfileFailed`]. Dropping the profiler ends an open window,
/// writes what is pending and waits at most [`CodeProfileConfig::finish_timeout`].
///
/// Needs the `code-profile` feature on Linux; elsewhere [`CodeProfiler::start`] returns
/// [`ProfilerError::CodeProfileUnsupported`].
pub struct CodeProfiler {
    #[cfg(all(feature = "code-profile", target_os = "linux"))]
    inner: sampler::Inner,
    #[cfg(not(all(feature = "code-profile", target_os = "linux")))]
    never: std::convert::Infallible,
}

impl std::fmt::Debug for CodeProfiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeProfiler")
            .field("report", &self.report())
            .finish_non_exhaustive()
    }
}

/// Which code-profile support this build has: `Ok(())`, or why [`CodeProfiler::start`] fails.
pub fn code_profile_support() -> Result<()> {
    if cfg!(not(target_os = "linux")) {
        Err(ProfilerError::CodeProfileUnsupported {
            reason: "code profiles are sampled on Linux only",
        })
    } else if cfg!(not(feature = "code-profile")) {
        Err(ProfilerError::CodeProfileUnsupported {
            reason: "smdebug-profiler was built without its `code-profile` feature",
        })
    } else {
        Ok(())
    }
}

#[cfg(not(all(feature = "code-profile", target_os = "linux")))]
impl CodeProfiler {
    /// Starts the writer thread; see [`code_profile_support`] for this build.
    pub fn start(config: CodeProfileConfig, storage: Arc<dyn Storage>) -> Result<CodeProfiler> {
        config.validate()?;
        let _ = storage;
        Err(code_profile_support()
            .err()
            .unwrap_or(ProfilerError::CodeProfileUnsupported {
                reason: "this build has no sampler",
            }))
    }

    /// Opens a window.
    pub fn begin(&self, start: Option<(Mode, u64)>) -> Result<()> {
        let _ = start;
        match self.never {}
    }

    /// Closes the open window.
    pub fn end(&self, last: Option<(Mode, u64)>) -> Result<()> {
        let _ = last;
        match self.never {}
    }

    /// Whether a window is open.
    pub fn in_window(&self) -> bool {
        match self.never {}
    }

    /// Readies the sampler in the background.
    pub fn warm_up(&self) -> Result<()> {
        match self.never {}
    }

    /// Waits until a window begun now would be sampled at once.
    pub fn wait_ready(&self, timeout: std::time::Duration) -> bool {
        let _ = timeout;
        match self.never {}
    }

    /// Whether the sampling timer is installed now.
    pub fn is_sampling(&self) -> bool {
        match self.never {}
    }

    /// What was done so far.
    pub fn report(&self) -> CodeProfileReport {
        match self.never {}
    }

    /// Waits until every window ended so far is written.
    pub fn flush(&self) -> Result<()> {
        match self.never {}
    }

    /// Ends an open window, writes what is pending, stops the writer and reports.
    pub fn finish(self) -> Result<CodeProfileReport> {
        match self.never {}
    }
}

#[cfg(all(feature = "code-profile", target_os = "linux"))]
impl CodeProfiler {
    /// Starts the writer thread. No sampling happens until [`begin`](Self::begin); the windows'
    /// files go to the run `storage` (local disk or an object store).
    pub fn start(config: CodeProfileConfig, storage: Arc<dyn Storage>) -> Result<CodeProfiler> {
        config.validate()?;
        Ok(CodeProfiler {
            inner: sampler::Inner::start(config, storage)?,
        })
    }

    /// Opens a window that starts at `start` (a step boundary; `None` for a window opened by
    /// time). Sampling begins as soon as the background thread has installed the timer (the
    /// first window of a process also loads the sampler's tables there, a fraction of a
    /// second). Errors: a window is already open in the process
    /// ([`ProfilerError::CodeProfileBusy`]), earlier windows are still being written
    /// ([`ProfilerError::CodeProfileBacklog`]), or the profiler has stopped.
    pub fn begin(&self, start: Option<(Mode, u64)>) -> Result<()> {
        self.inner.begin(start)
    }

    /// Closes the open window; `last` is the last step it covered (`None` for a window closed
    /// by time). Its files are written by the background thread.
    /// [`ProfilerError::CodeProfileNoWindow`] when no window is open.
    pub fn end(&self, last: Option<(Mode, u64)>) -> Result<()> {
        self.inner.end(last)
    }

    /// Whether a window is open (between `begin` and `end`).
    pub fn in_window(&self) -> bool {
        self.inner.in_window()
    }

    /// Readies pprof-rs's sampler on the control thread, without waiting: what a profiler
    /// started with [`CodeProfileConfig::warm_up`]`(false)` does before a window it knows is
    /// coming (a tenth of a second or more; it allocates the sampler's table, 45 MB or more the
    /// process keeps, and installs the timer for an instant at 1 Hz, so no sample is taken).
    /// Nothing happens when the sampler is ready already.
    pub fn warm_up(&self) -> Result<()> {
        self.inner.warm_up()
    }

    /// Waits up to `timeout` until a window begun now would be sampled at once: a profiler
    /// readies pprof-rs's sampler on its control thread when it starts (unless configured not
    /// to), when [`warm_up`](Self::warm_up) asks, or at its first window. Whether it is ready.
    /// For a caller whose first window opens right away.
    pub fn wait_ready(&self, timeout: std::time::Duration) -> bool {
        self.inner.wait_ready(timeout)
    }

    /// Whether the sampling timer is installed now (the background thread's state: it is
    /// installed shortly after `begin` and removed shortly after `end`).
    pub fn is_sampling(&self) -> bool {
        self.inner.is_sampling()
    }

    /// What was done so far.
    pub fn report(&self) -> CodeProfileReport {
        self.inner.report()
    }

    /// Waits until every window ended before this call is written (at most
    /// [`CodeProfileConfig::finish_timeout`]). Blocks: for tests and the end of a phase.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// Ends an open window, writes every pending window, stops the writer thread and reports.
    /// [`ProfilerError::CodeProfileFailed`] when any window failed (with the counts and the
    /// last failure),
    /// [`ProfilerError::CodeProfileTimeout`] when the writer did not finish in time.
    pub fn finish(mut self) -> Result<CodeProfileReport> {
        let report = self.inner.stop()?;
        if report.failed > 0 {
            return Err(ProfilerError::CodeProfileFailed {
                failed: report.failed,
                windows: report.windows,
                written: report.written,
                last_error: report
                    .last_error
                    .unwrap_or_else(|| "no error recorded".to_owned()),
            });
        }
        Ok(report)
    }
}

#[cfg(all(feature = "code-profile", target_os = "linux"))]
impl Drop for CodeProfiler {
    fn drop(&mut self) {
        if !self.inner.running() {
            return;
        }
        if let Err(e) = self.inner.stop() {
            log::warn!("smdebug-profiler: code profiler stopped on drop: {e}");
        }
    }
}
