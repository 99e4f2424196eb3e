//! Threads: the follow loop ([`RuleRunner::follow`]), a runner on a thread of its own
//! ([`RuleRunner::spawn`], [`RunnerBuilder::spawn`](super::RunnerBuilder::spawn)) and the
//! [`RunnerHandle`] that reads its statuses, waits for it or cancels it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use smdebug_read::run::EndMarker;

use super::engine::RuleRunner;
use crate::error::{Error, Result};
use crate::status::Summary;

/// Steps evaluated in one pass from which a following runner is catching up.
const CATCHING_UP: usize = 1000;

/// How often a following runner stores its summary when no status changed.
const REWRITE_EVERY: Duration = Duration::from_secs(2);

fn wall_clock_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl RuleRunner {
    /// Follows the run until it writes its end marker (then evaluates the rest and finishes),
    /// or until `cancel` is set. Never blocks the training job: it only reads.
    ///
    /// With an [idle time-out](super::RunnerBuilder::idle_timeout), also stops when nothing
    /// new arrived for that long, and says so in [`Summary::gave_up`].
    pub fn follow(&mut self, cancel: &AtomicBool) -> Result<Summary> {
        self.follow_woken(cancel, &AtomicBool::new(false))
    }

    /// [`follow`](Self::follow), looking again before the poll interval has passed once
    /// `woken` is set ([`RunnerWaker::wake`]). A flag and not only the thread's park token:
    /// a wait inside a look (a channel, a lock) may take the token, the flag stays.
    pub(super) fn follow_woken(
        &mut self,
        cancel: &AtomicBool,
        woken: &AtomicBool,
    ) -> Result<Summary> {
        let mut last_progress = Instant::now();
        let mut last_written = Instant::now();
        self.run.last_arrival = Instant::now();
        self.publish();
        loop {
            // A run folder deleted under the runner (before or while it is read) is said to
            // be gone, not waited for.
            let gone = self.run.folder_gone();
            let refreshed = if gone { Ok(()) } else { self.refresh_run() };
            if gone || (refreshed.is_err() && self.run.folder_gone()) {
                self.rules.gave_up = Some(format!(
                    "the run folder {} was deleted while it was followed; stopped following",
                    self.run.location
                ));
                return self.finish();
            }
            refreshed?;
            let complete = self.run.complete;
            let (processed, mut changed) = self.rules.process_available(&mut self.run, complete)?;
            changed |= self.feed_profiler(complete, (!complete).then(wall_clock_us));
            if complete {
                return self.finish();
            }
            self.out.follow_reporter();
            if processed > 0 {
                last_progress = Instant::now();
            } else {
                self.idle(last_progress.elapsed());
            }
            if changed || last_written.elapsed() >= REWRITE_EVERY {
                self.publish();
                last_written = Instant::now();
            }
            // After the idle rules had their look, so StalledTraining can fire first.
            if let Some(limit) = self.following.idle_timeout
                && self.run.last_arrival.elapsed() >= limit
            {
                self.rules.gave_up = Some(format!(
                    "nothing new arrived for {} s and the run has no end marker \
                     ({}): its writer seems to have stopped; stopped following",
                    limit.as_secs_f64(),
                    EndMarker::PATH
                ));
                return self.finish();
            }
            if self.out.report_due() {
                self.write_report();
            }
            if cancel.load(Ordering::Acquire) {
                return self.finish();
            }
            // A runner catching up with a long run (a batch of a thousand steps or more, where
            // a runner keeping up evaluates a few a poll) looks again at once: the steps just
            // evaluated let its trial, which reads ahead of the rules, read the next stretch.
            if processed >= CATCHING_UP {
                continue;
            }
            rest(self.following.poll_interval, cancel, woken);
            if cancel.load(Ordering::Acquire) {
                return self.finish();
            }
        }
    }

    /// Follows the run on a thread of its own.
    pub fn spawn(mut self) -> Result<RunnerHandle> {
        let shared = self.out.shared.clone();
        start(shared, move |cancel, woken| {
            self.follow_woken(cancel, woken)
        })
    }
}

/// Waits until `interval` has passed, the runner is woken or cancelled.
fn rest(interval: Duration, cancel: &AtomicBool, woken: &AtomicBool) {
    let deadline = Instant::now() + interval;
    while !woken.swap(false, Ordering::AcqRel) && !cancel.load(Ordering::Acquire) {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        std::thread::park_timeout(deadline - now);
    }
}

/// Starts the runner's thread: `work` gets the cancel flag and publishes into `shared`.
pub(super) fn start(
    shared: Arc<Mutex<Option<Summary>>>,
    work: impl FnOnce(&AtomicBool, &AtomicBool) -> Result<Summary> + Send + 'static,
) -> Result<RunnerHandle> {
    let cancel = Arc::new(AtomicBool::new(false));
    let woken = Arc::new(AtomicBool::new(false));
    let (flag, wake_flag) = (cancel.clone(), woken.clone());
    let thread = std::thread::Builder::new()
        .name("smdebug-rules".into())
        .spawn(move || work(&flag, &wake_flag))
        .map_err(Error::RunnerThread)?;
    Ok(RunnerHandle {
        cancel,
        woken,
        shared,
        thread: Some(thread),
    })
}

/// A runner following a run on its own thread.
pub struct RunnerHandle {
    cancel: Arc<AtomicBool>,
    /// Set by a [`RunnerWaker`]: look again now.
    woken: Arc<AtomicBool>,
    shared: Arc<Mutex<Option<Summary>>>,
    thread: Option<JoinHandle<Result<Summary>>>,
}

impl RunnerHandle {
    /// The latest published statuses (`None` before the first publication).
    pub fn summary(&self) -> Option<Summary> {
        self.shared.lock().ok().and_then(|s| s.clone())
    }

    /// What wakes the runner for a look now, rather than at its next poll: for a writer in
    /// the same process to call once it has written a step, so that the runner can poll
    /// seldom and still evaluate each step as soon as it is in storage.
    pub fn waker(&self) -> RunnerWaker {
        RunnerWaker {
            woken: self.woken.clone(),
            thread: self.thread.as_ref().map(|t| t.thread().clone()),
        }
    }

    /// Whether the runner has finished (the run ended, or it was cancelled, or it failed).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Waits for the run to end and returns the final statuses.
    pub fn join(mut self) -> Result<Summary> {
        self.wait()
    }

    /// Stops following now (evaluating what is already there) and returns the final statuses.
    pub fn cancel(mut self) -> Result<Summary> {
        self.cancel.store(true, Ordering::Release);
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
        self.wait()
    }

    fn wait(&mut self) -> Result<Summary> {
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| Error::RunnerPanicked)?,
            None => Err(Error::RunnerJoined),
        }
    }
}

/// Wakes a following runner for a look now ([`RunnerHandle::waker`]). Waking a runner that is
/// looking already makes it look once more when it is done; waking one that has ended does
/// nothing.
#[derive(Clone, Debug)]
pub struct RunnerWaker {
    woken: Arc<AtomicBool>,
    thread: Option<std::thread::Thread>,
}

impl RunnerWaker {
    /// Wakes the runner.
    pub fn wake(&self) {
        self.woken.store(true, Ordering::Release);
        if let Some(thread) = &self.thread {
            thread.unpark();
        }
    }
}

impl Drop for RunnerHandle {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
