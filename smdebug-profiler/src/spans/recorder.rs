//! The span recorder: cheap handles for the training loop and a guard owning the writer.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use smdebug_core::Mode;

use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;

use super::event::{SpanArgs, SpanEvent};
use super::writer::{
    Counters, Message, TraceFileBuilder, WriterSettings, run_writer, writer_stopped,
};
use crate::system::{NodeId, ProfilerError, Result};
use smdebug_core::phase::Phase;
use smdebug_core::timeline::{SpanRecord, SpanSink, WindowChange};

/// Default capacity of the queue between the training loop and the writer.
pub const DEFAULT_QUEUE_CAPACITY: usize = 16_384;
/// Default size after which a trace file is closed (Python smdebug's 10 MiB).
pub const DEFAULT_MAX_FILE_BYTES: usize = 10 * 1024 * 1024;
/// Default age after which a trace file is closed (Python smdebug's 60 s).
pub const DEFAULT_CLOSE_INTERVAL: Duration = Duration::from_secs(60);

/// Who records the spans and how their files rotate.
#[derive(Clone, Debug)]
pub struct SpanConfig {
    node: NodeId,
    worker: u32,
    queue_capacity: usize,
    max_file_bytes: usize,
    close_interval: Duration,
}

impl Default for SpanConfig {
    /// Node from the host name, worker 0, a 16 384-span queue, files closed at 10 MiB or
    /// after 60 s.
    fn default() -> Self {
        Self {
            node: NodeId::from_hostname(),
            worker: 0,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            close_interval: DEFAULT_CLOSE_INTERVAL,
        }
    }
}

impl SpanConfig {
    /// The node id written into file names.
    pub fn node(mut self, node: NodeId) -> Self {
        self.node = node;
        self
    }

    /// The worker (rank) of this process.
    pub fn worker(mut self, worker: u32) -> Self {
        self.worker = worker;
        self
    }

    /// Spans that may wait for the writer; beyond that new spans are dropped and counted
    /// (1 to 16 777 216).
    pub fn queue_capacity(mut self, capacity: usize) -> Self {
        self.queue_capacity = capacity;
        self
    }

    /// Size at which a trace file is closed (at least 4 KiB).
    pub fn max_file_bytes(mut self, bytes: usize) -> Self {
        self.max_file_bytes = bytes;
        self
    }

    /// Age at which a trace file is closed (100 ms to 1 h).
    pub fn close_interval(mut self, interval: Duration) -> Self {
        self.close_interval = interval;
        self
    }

    /// The configured size at which a trace file is closed.
    pub fn max_file_size(&self) -> usize {
        self.max_file_bytes
    }

    /// The configured age at which a trace file is closed.
    pub fn file_close_interval(&self) -> Duration {
        self.close_interval
    }

    /// Checks every setting's range.
    pub fn validate(&self) -> Result<()> {
        let invalid =
            |setting, reason: String| Err(ProfilerError::InvalidConfig { setting, reason });
        if !(1..=1 << 24).contains(&self.queue_capacity) {
            return invalid(
                "queue_capacity",
                format!("{} is outside 1 ..= 16777216", self.queue_capacity),
            );
        }
        if self.max_file_bytes < 4096 {
            return invalid(
                "max_file_bytes",
                format!("{} is below 4096", self.max_file_bytes),
            );
        }
        if !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&self.close_interval)
        {
            return invalid(
                "close_interval",
                format!("{:?} is outside 100 ms ..= 1 h", self.close_interval),
            );
        }
        Ok(())
    }
}

/// Step numbers above this cannot be stored beside the mode in one atomic word.
const STEP_MASK: u64 = (1 << 60) - 1;

fn pack_step(mode: Mode, step: u64) -> u64 {
    // Mode values are 1..=4, so a packed step is never 0, which means "no step yet".
    ((mode.value() as u64) << 60) | (step & STEP_MASK)
}

fn unpack_step(packed: u64) -> Option<(Mode, u64)> {
    let mode = Mode::from_value(i32::try_from(packed >> 60).ok()?)?;
    Some((mode, packed & STEP_MASK))
}

fn epoch_us(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

struct Shared {
    tx: SyncSender<Message>,
    /// The writer thread, woken early when the queue is half full (it rests between batches).
    writer: Thread,
    /// Half the queue's capacity.
    wake_at: u64,
    counters: Arc<Counters>,
    current_step: AtomicU64,
    clock: SpanClock,
}

/// Span times on one clock: the monotonic clock, anchored to the epoch once. Reading the wall
/// clock for starts and the monotonic clock for durations, each truncated to microseconds on
/// its own, could put a nested span's end a microsecond past its parent's; with one clock and
/// one truncation, a span that ends inside another is recorded inside it.
struct SpanClock {
    base: Instant,
    base_epoch_us: u64,
}

impl SpanClock {
    fn now() -> SpanClock {
        SpanClock {
            base: Instant::now(),
            base_epoch_us: epoch_us(SystemTime::now()),
        }
    }

    /// Microseconds since the Unix epoch at `at`.
    fn epoch_us(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.base).as_micros();
        self.base_epoch_us
            .saturating_add(u64::try_from(since).unwrap_or(u64::MAX))
    }
}

/// Records framework spans from the training loop.
///
/// Cloning is cheap and every clone feeds the same writer. Opening and closing a span reads
/// the clock and, on close, tries to put the span on a bounded queue: no I/O, no lock, no
/// waiting. When the queue is full the span is dropped and counted ([`SpanRecorder::dropped`]).
///
/// ```
/// use smdebug_core::Mode;
/// use smdebug_profiler::spans::{SpanConfig, SpanRecorder};
/// use smdebug_profiler::system::NodeId;
///
/// let run = tempfile::tempdir()?;
/// let (spans, writer) = SpanRecorder::start_local(
///     SpanConfig::default().node(NodeId::algo(1)).worker(0),
///     run.path(),
/// )?;
/// for step in 0..3 {
///     let _step = spans.step(Mode::Train, step);
///     { let _load = spans.data_loading(); }
///     { let _fwd = spans.forward(); }
///     { let _bwd = spans.backward(); }
///     { let _opt = spans.optimizer(); }
/// }
/// let report = writer.finish()?;
/// assert_eq!(report.written, 15);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct SpanRecorder {
    shared: Arc<Shared>,
}

/// An open span that is not tied to a scope: end it with [`SpanRecorder::end_span`].
#[derive(Debug)]
#[must_use = "a span is recorded only when ended"]
pub struct OpenSpan {
    phase: Phase,
    name: Cow<'static, str>,
    started: Instant,
    step: Option<(Mode, u64)>,
    args: SpanArgs,
}

impl OpenSpan {
    /// Adds an argument to the span's `args` in the trace (`step_num`, `mode` and `worker` are
    /// the recorder's and cannot be replaced). Rules read some of them: a data-loading span's
    /// `num_workers` tells the Dataloader rule how many workers load data.
    pub fn arg(
        mut self,
        key: impl Into<Cow<'static, str>>,
        value: impl Into<serde_json::Value>,
    ) -> Self {
        self.args.push((key.into(), value.into()));
        self
    }

    /// Replaces the event name (the phase's default otherwise).
    pub fn named(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets the step this span belongs to (the recorder's current step otherwise).
    pub fn at_step(mut self, mode: Mode, step: u64) -> Self {
        self.step = Some((mode, step));
        self
    }
}

/// A span that ends when dropped.
#[must_use = "the span ends when this guard is dropped"]
pub struct SpanGuard<'a> {
    recorder: &'a SpanRecorder,
    open: Option<OpenSpan>,
}

impl SpanGuard<'_> {
    /// Replaces the event name (the phase's default otherwise).
    pub fn named(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.open = self.open.take().map(|open| open.named(name));
        self
    }

    /// Adds an argument to the span's `args` (see [`OpenSpan::arg`]):
    /// `spans.data_loading().arg("num_workers", 8)`.
    pub fn arg(
        mut self,
        key: impl Into<Cow<'static, str>>,
        value: impl Into<serde_json::Value>,
    ) -> Self {
        self.open = self.open.take().map(|open| open.arg(key, value));
        self
    }

    /// Ends the span now.
    pub fn end(self) {}
}

impl Drop for SpanGuard<'_> {
    fn drop(&mut self) {
        if let Some(open) = self.open.take() {
            self.recorder.end_span(open);
        }
    }
}

impl SpanRecorder {
    /// Starts the writer thread. Spans go to the run `storage` (local disk or an object store)
    /// until the returned guard is finished or dropped; after that, spans are dropped and
    /// counted.
    pub fn start(
        config: SpanConfig,
        storage: Arc<dyn Storage>,
    ) -> Result<(SpanRecorder, SpanWriterGuard)> {
        config.validate()?;
        let (tx, rx) = mpsc::sync_channel(config.queue_capacity);
        let counters = Arc::new(Counters::default());
        let builder = TraceFileBuilder::new(
            epoch_us(SystemTime::now()),
            config.worker,
            config.node.as_str().to_owned(),
        );
        let settings = WriterSettings {
            max_file_bytes: config.max_file_bytes,
            close_interval: config.close_interval,
        };
        let thread_counters = Arc::clone(&counters);
        let thread = std::thread::Builder::new()
            .name("smdebug-spans".to_owned())
            .spawn(move || run_writer(rx, builder, storage, settings, thread_counters))
            .map_err(|source| ProfilerError::Thread {
                thread: "span writer",
                source,
            })?;
        let recorder = SpanRecorder {
            shared: Arc::new(Shared {
                tx: tx.clone(),
                writer: thread.thread().clone(),
                wake_at: (config.queue_capacity as u64 / 2).max(1),
                counters: Arc::clone(&counters),
                current_step: AtomicU64::new(0),
                clock: SpanClock::now(),
            }),
        };
        let guard = SpanWriterGuard {
            tx,
            thread: Some(thread),
            counters,
        };
        Ok((recorder, guard))
    }

    /// Starts recording into the run directory `run_dir` on local disk.
    pub fn start_local(
        config: SpanConfig,
        run_dir: impl Into<std::path::PathBuf>,
    ) -> Result<(SpanRecorder, SpanWriterGuard)> {
        Self::start(config, Arc::new(LocalStorage::new(run_dir)?))
    }

    /// Sets the current step: spans opened from now on belong to it.
    pub fn set_step(&self, mode: Mode, step: u64) {
        self.shared
            .current_step
            .store(pack_step(mode, step), Ordering::Relaxed);
    }

    /// The current step, if one was set.
    pub fn current_step(&self) -> Option<(Mode, u64)> {
        unpack_step(self.shared.current_step.load(Ordering::Relaxed))
    }

    /// Sets the current step and opens its `Step:ModeKeys.<MODE>` span.
    pub fn step(&self, mode: Mode, step: u64) -> SpanGuard<'_> {
        self.set_step(mode, step);
        self.span(Phase::Step(mode))
    }

    /// Opens a data-loading span.
    pub fn data_loading(&self) -> SpanGuard<'_> {
        self.span(Phase::DataLoading)
    }

    /// Opens a forward-pass span.
    pub fn forward(&self) -> SpanGuard<'_> {
        self.span(Phase::Forward)
    }

    /// Opens a backward-pass span.
    pub fn backward(&self) -> SpanGuard<'_> {
        self.span(Phase::Backward)
    }

    /// Opens an optimizer span.
    pub fn optimizer(&self) -> SpanGuard<'_> {
        self.span(Phase::Optimizer)
    }

    /// Opens a span in a phase of the caller's own (its own row in the trace).
    pub fn custom(&self, phase: impl Into<Cow<'static, str>>) -> SpanGuard<'_> {
        self.span(Phase::Custom(phase.into()))
    }

    /// Opens a span in `phase`, ended when the guard drops.
    pub fn span(&self, phase: Phase) -> SpanGuard<'_> {
        SpanGuard {
            recorder: self,
            open: Some(self.start_span(phase)),
        }
    }

    /// Opens a span in `phase` that ends when passed to [`SpanRecorder::end_span`].
    pub fn start_span(&self, phase: Phase) -> OpenSpan {
        OpenSpan {
            name: phase.default_event_name(),
            phase,
            started: Instant::now(),
            step: self.current_step(),
            args: Vec::new(),
        }
    }

    /// Ends `span` (its duration is measured on the monotonic clock). Returns whether it was
    /// queued; `false` means the queue was full or the writer stopped, and it was counted as
    /// dropped.
    pub fn end_span(&self, span: OpenSpan) -> bool {
        self.enqueue_measured(SpanRecord {
            phase: span.phase,
            name: span.name,
            start: span.started,
            end: Instant::now(),
            step: span.step,
            args: span.args,
        })
    }

    /// Records a span measured elsewhere. `name` defaults to the phase's; `step` to none.
    pub fn record(
        &self,
        phase: Phase,
        name: Option<Cow<'static, str>>,
        start: SystemTime,
        duration: Duration,
        step: Option<(Mode, u64)>,
    ) -> bool {
        self.enqueue(SpanEvent {
            name: name.unwrap_or_else(|| phase.default_event_name()),
            phase,
            start_us: epoch_us(start),
            dur_us: u64::try_from(duration.as_micros()).unwrap_or(u64::MAX),
            step,
            args: Vec::new(),
        })
    }

    /// Queues a span measured on the monotonic clock (an end before its start gives a span of
    /// no duration), placed in time by the recorder's clock.
    fn enqueue_measured(&self, span: SpanRecord) -> bool {
        let clock = &self.shared.clock;
        let start_us = clock.epoch_us(span.start);
        let end_us = clock.epoch_us(span.end).max(start_us);
        self.enqueue(SpanEvent {
            phase: span.phase,
            name: span.name,
            start_us,
            dur_us: end_us - start_us,
            step: span.step,
            args: span.args,
        })
    }

    fn enqueue(&self, span: SpanEvent) -> bool {
        let counters = &self.shared.counters;
        counters.recorded.fetch_add(1, Ordering::Relaxed);
        match self.shared.tx.try_send(Message::Span(span)) {
            Ok(()) => {
                // The writer rests between batches; a queue half full calls it early.
                let queued = counters
                    .recorded
                    .load(Ordering::Relaxed)
                    .saturating_sub(counters.taken.load(Ordering::Relaxed))
                    .saturating_sub(counters.dropped.load(Ordering::Relaxed));
                if queued >= self.shared.wake_at {
                    self.shared.writer.unpark();
                }
                true
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                counters.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Spans dropped so far because the queue was full or the writer had stopped.
    pub fn dropped(&self) -> u64 {
        self.shared.counters.dropped.load(Ordering::Relaxed)
    }

    /// Spans in trace files storage has acknowledged so far (the open file's not yet).
    pub fn written(&self) -> u64 {
        self.shared.counters.written.load(Ordering::Relaxed)
    }

    /// Spans ended by the training loop so far.
    pub fn recorded(&self) -> u64 {
        self.shared.counters.recorded.load(Ordering::Relaxed)
    }

    /// Spans in trace files whose publication failed so far.
    pub fn lost(&self) -> u64 {
        self.shared.counters.lost.load(Ordering::Relaxed)
    }

    /// Waits until every span queued so far is in a published file (the open file is closed
    /// early). Blocks; meant for tests and for the end of a phase, not for every step.
    pub fn flush(&self) -> Result<()> {
        let (ack_tx, ack_rx) = mpsc::sync_channel(1);
        self.shared
            .tx
            .send(Message::Flush(ack_tx))
            .map_err(|_| writer_stopped())?;
        self.shared.writer.unpark();
        ack_rx.recv().map_err(|_| writer_stopped())
    }
}

/// The recorder is the sink of smdebug-core's [`Timeline`](smdebug_core::timeline::Timeline):
/// a hook built with `Timeline::new(config, Arc::new(recorder))` has its step, phase,
/// data-loading and module spans written by this recorder's writer. The recorder runs no
/// windowed profiler of its own, so window changes need nothing from it.
impl SpanSink for SpanRecorder {
    fn record(&self, span: SpanRecord) {
        self.enqueue_measured(span);
    }

    fn window_changed(&self, _change: WindowChange) {}
}

/// What the span writer did, returned by [`SpanWriterGuard::finish`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpanWriterReport {
    /// Spans ended by the training loop.
    pub recorded: u64,
    /// Spans dropped because the queue was full or the writer had stopped.
    pub dropped: u64,
    /// Spans in trace files storage acknowledged.
    pub written: u64,
    /// Spans in trace files whose publication failed: not stored.
    pub lost: u64,
    /// Trace files published.
    pub files: u64,
    /// Failed publications (their spans are lost).
    pub write_errors: u64,
    /// The last publication error, if any.
    pub last_write_error: Option<String>,
}

/// Owns the writer thread. Dropping it (or calling [`SpanWriterGuard::finish`]) writes every
/// queued span and publishes the open file.
pub struct SpanWriterGuard {
    tx: SyncSender<Message>,
    thread: Option<JoinHandle<Option<String>>>,
    counters: Arc<Counters>,
}

impl SpanWriterGuard {
    /// Stops the writer after it has written every queued span, and reports.
    pub fn finish(mut self) -> Result<SpanWriterReport> {
        self.stop()
    }

    fn stop(&mut self) -> Result<SpanWriterReport> {
        let Some(thread) = self.thread.take() else {
            return Err(writer_stopped());
        };
        // Blocking is right here: this is the end of the run, and the writer drains the queue.
        let _ = self.tx.send(Message::Shutdown);
        thread.thread().unpark();
        let last_write_error = thread.join().map_err(|_| ProfilerError::ThreadPanicked {
            thread: "span writer",
        })?;
        let c = &self.counters;
        Ok(SpanWriterReport {
            recorded: c.recorded.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            written: c.written.load(Ordering::Relaxed),
            lost: c.lost.load(Ordering::Relaxed),
            files: c.files.load(Ordering::Relaxed),
            write_errors: c.write_errors.load(Ordering::Relaxed),
            last_write_error,
        })
    }
}

impl Drop for SpanWriterGuard {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.stop();
        }
    }
}
