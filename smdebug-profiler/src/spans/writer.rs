//! The span writer thread: turns spans into Chrome trace files in Python smdebug's
//! `pythontimeline` shape and publishes each file whole.
//!
//! A file is a JSON array (Chrome's "JSON Array Format", which Perfetto and chrome://tracing
//! open, and the only shape smdebug's trace parser iterates). It starts with the metadata
//! event carrying `start_time_since_epoch_in_micros`; every `ts` is relative to it. Each phase
//! is one `pid` row named by `process_name` metadata (repeated in every file, pids stable for
//! the writer's lifetime); the worker is the `tid`, named `worker-<rank>` by `thread_name`
//! metadata.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use smdebug_storage::Storage;

use super::event::SpanEvent;
use crate::system::ProfilerError;
use smdebug_format::trace::trace_file_key;

/// Messages to the writer thread.
pub(crate) enum Message {
    Span(SpanEvent),
    Flush(SyncSender<()>),
    Shutdown,
}

/// Counters shared by the recorder handles and the writer thread.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) recorded: AtomicU64,
    pub(crate) dropped: AtomicU64,
    /// Spans the writer thread took from the queue (into the open file).
    pub(crate) taken: AtomicU64,
    /// Spans in trace files storage acknowledged.
    pub(crate) written: AtomicU64,
    /// Spans in trace files whose publication failed.
    pub(crate) lost: AtomicU64,
    pub(crate) files: AtomicU64,
    pub(crate) write_errors: AtomicU64,
}

#[derive(Serialize)]
struct CompleteEvent<'a> {
    name: &'a str,
    pid: usize,
    tid: u32,
    ph: &'static str,
    ts: i64,
    dur: u64,
    args: EventArgs<'a>,
}

#[derive(Serialize)]
struct EventArgs<'a> {
    // smdebug's hooks write the step as a string; its readers call int() on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    step_num: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<&'a str>,
    worker: u32,
    #[serde(flatten)]
    extra: ExtraArgs<'a>,
}

/// The caller's own span arguments, as map entries; the recorder's keys win.
struct ExtraArgs<'a>(&'a [(std::borrow::Cow<'static, str>, serde_json::Value)]);

impl Serialize for ExtraArgs<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.0 {
            if !matches!(key.as_ref(), "step_num" | "mode" | "worker") {
                map.serialize_entry(key.as_ref(), value)?;
            }
        }
        map.end()
    }
}

/// Builds one trace file at a time.
pub struct TraceFileBuilder {
    base_us: u64,
    worker: u32,
    node: String,
    phase_pids: HashMap<String, usize>,
    text: Vec<u8>,
    file_pids: HashSet<usize>,
    opened_at: Option<Instant>,
    max_end_us: u64,
    last_published_end_us: u64,
}

impl TraceFileBuilder {
    /// A builder for the trace file of `worker` on `node` whose times count from `base_us`.
    pub fn new(base_us: u64, worker: u32, node: String) -> Self {
        Self {
            base_us,
            worker,
            node,
            phase_pids: HashMap::new(),
            text: Vec::new(),
            file_pids: HashSet::new(),
            opened_at: None,
            max_end_us: 0,
            last_published_end_us: 0,
        }
    }

    fn push_json(&mut self, value: &impl Serialize) {
        // Serializing these plain structures into memory cannot fail.
        if serde_json::to_writer(&mut self.text, value).is_ok() {
            self.text.extend_from_slice(b",\n");
        }
    }

    /// Appends one span, opening a file (with its metadata) if none is open.
    pub fn add(&mut self, span: &SpanEvent) {
        if self.opened_at.is_none() {
            self.opened_at = Some(Instant::now());
            self.text.extend_from_slice(b"[\n");
            self.push_json(&json!({"name": "process_name", "ph": "M", "pid": 0,
                "args": {"start_time_since_epoch_in_micros": self.base_us}}));
            self.push_json(&json!({"name": "process_sort_index", "ph": "M", "pid": 0,
                "args": {"sort_index": 0}}));
        }
        let phase = span.phase.trace_name();
        let next_pid = self.phase_pids.len();
        let pid = *self.phase_pids.entry(phase.to_string()).or_insert(next_pid);
        if self.file_pids.insert(pid) {
            self.push_json(&json!({"name": "process_name", "ph": "M", "pid": pid,
                "args": {"name": phase}}));
            self.push_json(&json!({"name": "process_sort_index", "ph": "M", "pid": pid,
                "args": {"sort_index": pid}}));
            self.push_json(&json!({"name": "thread_name", "ph": "M", "pid": pid,
                "tid": self.worker, "args": {"name": format!("worker-{}", self.worker)}}));
        }
        let start = i128::from(span.start_us) - i128::from(self.base_us);
        let event = CompleteEvent {
            name: &span.name,
            pid,
            tid: self.worker,
            ph: "X",
            ts: i64::try_from(start).unwrap_or(i64::MAX),
            dur: span.dur_us,
            args: EventArgs {
                step_num: span.step.map(|(_, step)| step.to_string()),
                mode: span.step.map(|(mode, _)| mode.name()),
                worker: self.worker,
                extra: ExtraArgs(&span.args),
            },
        };
        self.push_json(&event);
        self.max_end_us = self
            .max_end_us
            .max(span.start_us.saturating_add(span.dur_us));
    }

    pub(crate) fn size(&self) -> usize {
        self.text.len()
    }

    pub(crate) fn open_for(&self) -> Option<Duration> {
        self.opened_at.map(|t| t.elapsed())
    }

    /// Closes the open file: its key and complete text. `None` when no file is open.
    pub fn close(&mut self) -> Option<(String, Vec<u8>)> {
        self.opened_at.take()?;
        if self.text.ends_with(b",\n") {
            self.text.truncate(self.text.len() - 2);
        }
        self.text.extend_from_slice(b"\n]\n");
        // The name carries the last end time; two files must never share one, or the later
        // would replace the earlier.
        let end_us = self.max_end_us.max(self.last_published_end_us + 1);
        self.last_published_end_us = end_us;
        self.max_end_us = 0;
        self.file_pids.clear();
        let key = trace_file_key(end_us, self.worker, &self.node);
        Some((key, std::mem::take(&mut self.text)))
    }
}

/// Settings of the writer thread.
pub(crate) struct WriterSettings {
    pub(crate) max_file_bytes: usize,
    pub(crate) close_interval: Duration,
}

/// How long the writer rests after taking the queued spans (at most the close interval), so
/// that a loop's spans wake it about once a second rather than at each span: every wake-up of
/// another thread takes a core from the training loop's compute threads, and the spans taken
/// only go into the open file, which is published when it closes (every minute by default).
/// A flush, the shutdown or a queue half full (8,192 spans by default: a loop recording more
/// in a second) wakes it early.
pub(crate) const BATCH_INTERVAL: Duration = Duration::from_secs(1);

/// The writer thread's body: returns the last publication error, if any.
pub(crate) fn run_writer(
    rx: Receiver<Message>,
    mut builder: TraceFileBuilder,
    storage: Arc<dyn Storage>,
    settings: WriterSettings,
    counters: Arc<Counters>,
) -> Option<String> {
    let mut last_error = None;
    // Spans in the open file: counted as written once storage acknowledged their file.
    let mut in_file = 0u64;
    let publish =
        |builder: &mut TraceFileBuilder, last_error: &mut Option<String>, in_file: &mut u64| {
            let Some((key, text)) = builder.close() else {
                return;
            };
            let spans = std::mem::take(in_file);
            match storage.put(&key, text.into()) {
                Ok(()) => {
                    counters.files.fetch_add(1, Ordering::Relaxed);
                    counters.written.fetch_add(spans, Ordering::Relaxed);
                }
                Err(e) => {
                    counters.lost.fetch_add(spans, Ordering::Relaxed);
                    if counters.write_errors.fetch_add(1, Ordering::Relaxed) == 0 {
                        log::warn!("smdebug-profiler: trace file not written: {e}");
                    }
                    *last_error = Some(e.to_string());
                }
            }
        };
    let add = |builder: &mut TraceFileBuilder,
               last_error: &mut Option<String>,
               in_file: &mut u64,
               span| {
        builder.add(&span);
        *in_file += 1;
        counters.taken.fetch_add(1, Ordering::Relaxed);
        if builder.size() >= settings.max_file_bytes {
            publish(builder, last_error, in_file);
        }
    };
    let tick = settings.close_interval.min(Duration::from_secs(1));
    loop {
        let mut next = Some(rx.recv_timeout(tick));
        if builder
            .open_for()
            .is_some_and(|open| open >= settings.close_interval)
        {
            publish(&mut builder, &mut last_error, &mut in_file);
        }
        let mut took_spans = false;
        // Everything queued is handled in one go; then the thread rests.
        while let Some(message) = next.take() {
            match message {
                Ok(Message::Span(span)) => {
                    add(&mut builder, &mut last_error, &mut in_file, span);
                    took_spans = true;
                }
                Ok(Message::Flush(ack)) => {
                    publish(&mut builder, &mut last_error, &mut in_file);
                    let _ = ack.send(());
                }
                Ok(Message::Shutdown) | Err(RecvTimeoutError::Disconnected) => {
                    // Spans queued before the shutdown still go out.
                    while let Ok(message) = rx.try_recv() {
                        if let Message::Span(span) = message {
                            add(&mut builder, &mut last_error, &mut in_file, span);
                        }
                    }
                    publish(&mut builder, &mut last_error, &mut in_file);
                    return last_error;
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            next = match rx.try_recv() {
                Ok(message) => Some(Ok(message)),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => Some(Err(RecvTimeoutError::Disconnected)),
            };
        }
        if took_spans {
            std::thread::park_timeout(BATCH_INTERVAL.min(settings.close_interval));
        }
    }
}

/// Maps a stopped writer to its error.
pub(crate) fn writer_stopped() -> ProfilerError {
    ProfilerError::WriterStopped {
        writer: "span trace",
    }
}
