//! The run's progress file (`progress/<worker>.json`, smdebug-io's [`Progress`]): planned
//! steps, the last step, what the tensor and span writers wrote and dropped.
//!
//! Two step paths feed it: [`Session::step`](super::Session::step) (the exact global step) and
//! the session's span sink, which sees every step span the timeline records when the hook's
//! own `step()` ends a step (loops that call the hook directly, like the examples). Each
//! reads a few counters and, at most once per interval, leaves a snapshot in a one-value slot
//! (replacing one a slow write has not taken yet) and wakes a thread of its own, which writes
//! the latest snapshot through the run's storage. Training never waits on that write, and a
//! failed write is counted and logged, never an error of the loop.
//! [`ProgressReporter::finish`] writes the final counts once more, on the caller's thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use smdebug_format::progress::Progress;
use smdebug_io::progress::write_progress;
use smdebug_io::writer::WriterStatus;
use smdebug_profiler::spans::SpanRecorder;
use smdebug_storage::Storage;

/// The progress file's default interval: at most one write a second.
pub(crate) const DEFAULT_PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// Failed writes: how many, and the last error.
#[derive(Default)]
struct Failures {
    count: u64,
    last: Option<String>,
}

/// What the step paths update.
struct State {
    progress: Progress,
    /// Step spans seen (each ends one global step).
    step_spans: u64,
    /// The writer's dropped count at the last step.
    dropped_seen: u64,
    last_sent: Option<Instant>,
}

/// What the session and its span sink share: the state and the counters it reads.
pub(crate) struct ProgressShared {
    state: Mutex<State>,
    /// The latest snapshot not written yet.
    pending: Mutex<Option<Progress>>,
    /// The writer thread, woken when a snapshot is left.
    thread: OnceLock<Thread>,
    /// Set when the session finishes: the thread writes what is pending and ends.
    done: AtomicBool,
    writer: WriterStatus,
    spans: Option<SpanRecorder>,
    interval: Duration,
    failures: Arc<Mutex<Failures>>,
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn note_failure(failures: &Mutex<Failures>, worker: &str, error: String) {
    let mut f = failures.lock().unwrap_or_else(|p| p.into_inner());
    if f.count == 0 {
        log::warn!("smdebug: the progress file of {worker} was not written: {error}");
    }
    f.count += 1;
    f.last = Some(error);
}

impl ProgressShared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The loop ended global step `step`, its `steps`-th (from [`Session::step`]).
    pub(crate) fn step_ended(&self, step: u64, steps: u64) {
        let mut s = self.state();
        self.advance(&mut s, step, steps);
    }

    /// The job now plans `steps` global steps (written with the next snapshot).
    pub(crate) fn set_planned_steps(&self, steps: u64) {
        self.state().progress.planned_steps = Some(steps);
    }

    /// The timeline recorded a step span: one more global step ended.
    pub(crate) fn step_span_ended(&self) {
        let mut s = self.state();
        s.step_spans += 1;
        let steps = s.step_spans;
        self.advance(&mut s, steps - 1, steps);
    }

    fn advance(&self, s: &mut State, step: u64, steps: u64) {
        let dropped = self.writer.dropped();
        if dropped > s.dropped_seen {
            s.dropped_seen = dropped;
            s.progress.steps_with_drops += 1;
        }
        s.progress.last_step = Some(s.progress.last_step.map_or(step, |l| l.max(step)));
        s.progress.steps = s.progress.steps.max(steps);
        if s.last_sent.is_none_or(|at| at.elapsed() >= self.interval) {
            self.send(s);
        }
    }

    fn snapshot(&self, p: &mut Progress) {
        p.records_written = self.writer.records_written();
        p.records_dropped = self.writer.dropped();
        if let Some(spans) = &self.spans {
            p.spans_written = spans.written();
            p.spans_dropped = spans.dropped();
        }
        p.wall_time = now();
    }

    fn send(&self, s: &mut State) {
        self.snapshot(&mut s.progress);
        s.last_sent = Some(Instant::now());
        *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some(s.progress.clone());
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }

    /// The writer thread: writes the latest snapshot each time it is woken, until `done`.
    fn write_loop(&self, storage: &dyn Storage) {
        loop {
            let next = self
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            match next {
                Some(progress) => {
                    if let Err(e) = write_progress(storage, &progress) {
                        note_failure(&self.failures, &progress.worker, e.to_string());
                    }
                }
                None if self.done.load(Ordering::Acquire) => return,
                None => std::thread::park(),
            }
        }
    }
}

/// Keeps `progress/<worker>.json` current; owned by the session.
pub(crate) struct ProgressReporter {
    shared: Arc<ProgressShared>,
    storage: Arc<dyn Storage>,
    thread: Option<JoinHandle<()>>,
}

impl ProgressReporter {
    /// Starts the writer thread and hands it the first snapshot (nothing done yet, the plan).
    /// A thread that cannot be started is noted; the final write still happens.
    pub(crate) fn start(
        storage: Arc<dyn Storage>,
        worker: String,
        planned_steps: Option<u64>,
        interval: Duration,
        writer: WriterStatus,
        spans: Option<SpanRecorder>,
    ) -> ProgressReporter {
        let mut progress = Progress::new(worker);
        progress.planned_steps = planned_steps;
        let shared = Arc::new(ProgressShared {
            state: Mutex::new(State {
                progress,
                step_spans: 0,
                dropped_seen: 0,
                last_sent: None,
            }),
            pending: Mutex::new(None),
            thread: OnceLock::new(),
            done: AtomicBool::new(false),
            writer,
            spans,
            interval,
            failures: Arc::new(Mutex::new(Failures::default())),
        });
        let thread = {
            let shared = Arc::clone(&shared);
            let storage = Arc::clone(&storage);
            std::thread::Builder::new()
                .name("smdebug-progress".into())
                .spawn(move || shared.write_loop(storage.as_ref()))
        };
        let thread = match thread {
            Ok(t) => {
                let _ = shared.thread.set(t.thread().clone());
                Some(t)
            }
            Err(e) => {
                let worker = shared.state().progress.worker.clone();
                note_failure(
                    &shared.failures,
                    &worker,
                    format!("cannot start its writer thread: {e}"),
                );
                None
            }
        };
        shared.send(&mut shared.state());
        ProgressReporter {
            shared,
            storage,
            thread,
        }
    }

    /// What the step paths call.
    pub(crate) fn shared(&self) -> &Arc<ProgressShared> {
        &self.shared
    }

    /// Stops the thread and writes the final file: the loop's last step and the writers'
    /// final counts (`spans`: written and dropped, from the span writer's report). Returns
    /// what went wrong, for the session's problems.
    pub(crate) fn finish(
        mut self,
        last_step: Option<u64>,
        steps: u64,
        spans: Option<(u64, u64)>,
    ) -> Option<String> {
        self.stop_thread();
        let mut progress = {
            let mut s = self.shared.state();
            // A drop during the last step counts too.
            if self.shared.writer.dropped() > s.dropped_seen {
                s.dropped_seen = self.shared.writer.dropped();
                s.progress.steps_with_drops += 1;
            }
            s.progress.clone()
        };
        let worker = progress.worker.clone();
        self.shared.snapshot(&mut progress);
        progress.last_step = last_step.or(progress.last_step);
        progress.steps = steps.max(progress.steps);
        if let Some((written, dropped)) = spans {
            progress.spans_written = written;
            progress.spans_dropped = dropped;
        }
        progress.finished = true;
        if let Err(e) = write_progress(self.storage.as_ref(), &progress) {
            note_failure(&self.shared.failures, &worker, e.to_string());
        }
        let f = self
            .shared
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        f.last.as_ref().map(|last| {
            format!(
                "progress file: {} write{} failed, the last: {last}",
                f.count,
                if f.count == 1 { "" } else { "s" }
            )
        })
    }
}

impl ProgressReporter {
    /// Lets the thread write what is pending and waits for it to end.
    fn stop_thread(&mut self) {
        self.shared.done.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            if thread.join().is_err() {
                let worker = self.shared.state().progress.worker.clone();
                note_failure(
                    &self.shared.failures,
                    &worker,
                    "its writer thread panicked".into(),
                );
            }
        }
    }
}

impl Drop for ProgressReporter {
    /// A reporter dropped without `finish` (a session that did not start) ends its thread.
    fn drop(&mut self) {
        self.stop_thread();
    }
}
