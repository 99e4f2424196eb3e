//! The writer thread: encodes, buffers a step, publishes it, and writes TensorBoard files.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use smdebug_core::{EndReason, Mode, Record, StringRecord, TensorRecord};

use super::queue::{Msg, Queue};
use super::shared::Shared;
use crate::error::{Error, Result};
use smdebug_format::record::{self, PayloadChecksum};
use smdebug_format::strings::{encode_string_event, text_summary_event};
use smdebug_format::tensor::{EventStamp, encode_tensor_event};
use smdebug_format::{IndexFile, IndexMeta, TensorLocation, end_marker_body, layout, tensorboard};
use smdebug_storage::Storage;

/// Tensor bytes at least this long go to storage as their own buffer, without a copy; smaller
/// ones are gathered with the framing into one buffer.
const ZERO_COPY_MIN: usize = 64 << 10;

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// One step's event file being assembled.
struct StepBuffer {
    step: u64,
    mode: Mode,
    mode_step: u64,
    parts: Vec<Bytes>,
    small: Vec<u8>,
    len: u64,
    index: Vec<TensorLocation>,
}

impl StepBuffer {
    /// A buffer whose small-record part starts with `capacity` bytes (the last step's size, so
    /// that steps of one size do not grow it again and again).
    fn new(step: u64, mode: Mode, mode_step: u64, capacity: usize) -> StepBuffer {
        StepBuffer {
            step,
            mode,
            mode_step,
            parts: Vec::new(),
            small: Vec::with_capacity(capacity),
            len: 0,
            index: Vec::new(),
        }
    }

    fn push_small(&mut self, bytes: &[u8]) {
        self.small.extend_from_slice(bytes);
        self.len += bytes.len() as u64;
    }

    fn push_large(&mut self, bytes: Vec<u8>) {
        if !self.small.is_empty() {
            self.parts
                .push(Bytes::from(std::mem::take(&mut self.small)));
        }
        self.len += bytes.len() as u64;
        self.parts.push(Bytes::from(bytes));
    }

    fn into_parts(mut self) -> (Vec<Bytes>, Vec<TensorLocation>, u64) {
        if !self.small.is_empty() {
            self.parts
                .push(Bytes::from(std::mem::take(&mut self.small)));
        }
        (self.parts, self.index, self.len)
    }
}

/// The TensorBoard file of one mode.
struct TbFile {
    path: String,
    /// Bytes written to the file so far.
    size: u64,
    /// The whole file, kept for stores that cannot append (they rewrite it).
    content: Vec<u8>,
    /// Records not yet written.
    pending: Vec<u8>,
}

impl TbFile {
    /// A new file whose first record is TensorBoard's `file_version` event.
    fn new(mode: Mode, first_step: u64, worker: &str, wall_time: f64) -> TbFile {
        let mut pending = Vec::new();
        let first = tensorboard::encode_event(&tensorboard::file_version_event(wall_time));
        record::write_record(&mut pending, &first, PayloadChecksum::Crc32c);
        TbFile {
            path: layout::tensorboard_file(mode, first_step, worker),
            size: 0,
            content: Vec::new(),
            pending,
        }
    }
}

/// What the writer thread writes, fixed when the writer is built.
pub(crate) struct Settings {
    /// The worker name in file names.
    pub worker: String,
    /// The payload checksum of event files.
    pub checksum: PayloadChecksum,
    /// Whether TensorBoard files are written.
    pub tensorboard: bool,
    /// The size at which a TensorBoard file is closed and a new one started.
    pub tb_file_bytes: u64,
    /// Told each time a step's event and index files are written.
    pub on_step_written: Option<super::shared::StepWritten>,
}

pub(crate) struct WriterThread {
    storage: Arc<dyn Storage>,
    settings: Settings,
    shared: Arc<Shared>,
    step: Option<StepBuffer>,
    /// Bytes of the last published step, capped (see [`StepBuffer::new`]).
    step_size_hint: usize,
    tb: BTreeMap<Mode, TbFile>,
    /// The last step counted in [`Shared::steps_lost`].
    lost_step: Option<u64>,
}

/// Signals the writer's owner when the thread ends, however it ends.
struct ExitGuard {
    queue: Arc<Queue>,
    done: SyncSender<()>,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        self.queue.consumer_gone();
        let _ = self.done.try_send(());
    }
}

impl WriterThread {
    pub fn new(storage: Arc<dyn Storage>, settings: Settings, shared: Arc<Shared>) -> WriterThread {
        WriterThread {
            storage,
            settings,
            shared,
            step: None,
            step_size_hint: 0,
            tb: BTreeMap::new(),
            lost_step: None,
        }
    }

    pub fn run(mut self, queue: Arc<Queue>, done: SyncSender<()>) {
        let _guard = ExitGuard {
            queue: queue.clone(),
            done,
        };
        let mut spent = Vec::new();
        loop {
            let msg = queue.pop(&mut spent);
            let stop = matches!(msg, Msg::Shutdown);
            // A bug here must not take the training process down, nor stop the draining.
            let outcome = catch_unwind(AssertUnwindSafe(|| self.handle(msg, &mut spent)));
            if outcome.is_err() {
                self.discard_step();
                self.shared
                    .disable("internal error: the writer thread panicked".to_string());
            }
            if stop {
                return;
            }
        }
    }

    fn disabled(&self) -> bool {
        self.shared.disabled.load(Ordering::Acquire)
    }

    /// Runs a storage operation; its first failure disables capture.
    fn io(&self, result: Result<()>) {
        if let Err(e) = result {
            self.shared.disable(e.to_string());
        }
    }

    /// Handles one message. Tensor records whose bytes were copied are put in `spent`, to be
    /// freed by the training thread that allocated them (see [`Queue::pop`]).
    fn handle(&mut self, msg: Msg, spent: &mut Vec<TensorRecord>) {
        match msg {
            Msg::Flush(ack) => {
                let _ = ack.try_send(());
            }
            Msg::Shutdown => {
                self.publish_all();
                self.shared.closed.store(true, Ordering::Release);
            }
            Msg::Record(Record::Close(reason)) => {
                self.close(&reason);
                self.shared.closed.store(true, Ordering::Release);
            }
            Msg::Record(r) if self.disabled() => {
                self.discard_step();
                match r {
                    Record::Tensor(t) => self.lose(t.key.step, 1),
                    Record::Strings(s) => self.lose(s.key.step, 1),
                    _ => {}
                }
            }
            Msg::Record(Record::Tensor(t)) => spent.extend(self.tensor(t)),
            Msg::Record(Record::Strings(s)) => self.strings(s),
            Msg::Record(Record::EndStep { step }) => {
                if self.step.as_ref().is_some_and(|b| b.step <= step) {
                    self.publish_step();
                }
                self.flush_tensorboard();
            }
            Msg::Record(Record::Collections(json)) => {
                let path = layout::collections_file(&self.settings.worker);
                let body = serde_json::to_vec(&json).unwrap_or_default();
                self.io(self
                    .storage
                    .put(&path, Bytes::from(body))
                    .map_err(Error::from));
            }
        }
    }

    /// Buffers a tensor record. Returns it when it is done with it (its bytes were copied), and
    /// keeps it when its bytes go to storage without a copy.
    fn tensor(&mut self, t: TensorRecord) -> Option<TensorRecord> {
        let wall_time = now();
        if self.settings.tensorboard && (t.tb_scalar || t.tb_histogram) {
            self.tensorboard_record(&t, wall_time);
        }
        if !t.to_events {
            return Some(t);
        }
        let checksum = self.settings.checksum;
        let buf = self.step_buffer(t.key);
        let stamp = EventStamp {
            wall_time,
            step: t.key.step,
            mode: t.key.mode,
            mode_step: t.key.mode_step,
        };
        let start = buf.len;
        let (header, prefix, footer) = {
            let enc = encode_tensor_event(
                &t.name,
                t.tensor.dtype(),
                t.tensor.shape(),
                t.tensor.bytes(),
                stamp,
            );
            let footer = checksum.footer([enc.prefix.as_slice(), enc.data]);
            (record::header(enc.len() as u64), enc.prefix, footer)
        };
        buf.push_small(&header);
        buf.push_small(&prefix);
        let large = t.tensor.bytes().len() >= ZERO_COPY_MIN;
        let (name, back) = if large {
            buf.push_large(t.tensor.into_bytes());
            (t.name, None)
        } else {
            buf.push_small(t.tensor.bytes());
            (t.name.clone(), Some(t))
        };
        buf.push_small(&footer);
        buf.index.push(TensorLocation {
            tensorname: name,
            start_idx: start,
            length: buf.len - start,
        });
        back
    }

    /// The step buffer for a record of `key`'s step: the current one, or a new one after
    /// publishing a previous step that was never ended.
    fn step_buffer(&mut self, key: smdebug_core::StepKey) -> &mut StepBuffer {
        if self.step.as_ref().is_some_and(|b| b.step != key.step) {
            self.publish_step();
        }
        let hint = self.step_size_hint;
        self.step
            .get_or_insert_with(|| StepBuffer::new(key.step, key.mode, key.mode_step, hint))
    }

    /// Buffers a string tensor record, in Python smdebug's encoding (which its reader and
    /// ours read); with TensorBoard output, also a text summary.
    fn strings(&mut self, s: StringRecord) {
        let wall_time = now();
        if self.settings.tensorboard && s.tb_text {
            let event = text_summary_event(
                &tensorboard::clean_tag(&s.name),
                &s.value,
                s.key.step,
                wall_time,
            );
            self.tensorboard_events(s.key.mode, s.key.step, wall_time, vec![event]);
        }
        let stamp = EventStamp {
            wall_time,
            step: s.key.step,
            mode: s.key.mode,
            mode_step: s.key.mode_step,
        };
        let payload = encode_string_event(&s.name, &s.value, stamp);
        let checksum = self.settings.checksum;
        let buf = self.step_buffer(s.key);
        let start = buf.len;
        buf.push_small(&record::header(payload.len() as u64));
        buf.push_small(&payload);
        buf.push_small(&checksum.footer([payload.as_slice()]));
        buf.index.push(TensorLocation {
            tensorname: s.name,
            start_idx: start,
            length: buf.len - start,
        });
    }

    /// Counts `records` of `step` as not stored, and the step as lost (once).
    fn lose(&mut self, step: u64, records: u64) {
        if records == 0 {
            return;
        }
        self.shared.discarded.fetch_add(records, Ordering::Relaxed);
        if self.lost_step != Some(step) {
            self.lost_step = Some(step);
            self.shared.steps_lost.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Forgets the buffered step, counting its tensors as discarded.
    fn discard_step(&mut self) {
        if let Some(buf) = self.step.take() {
            self.lose(buf.step, buf.index.len() as u64);
        }
    }

    /// Writes the buffered step: the event file, then (only if that worked) the index file.
    fn publish_step(&mut self) {
        if self.disabled() {
            self.discard_step();
            return;
        }
        let Some(buf) = self.step.take() else {
            return;
        };
        if buf.index.is_empty() {
            return;
        }
        let (step, mode, mode_step) = (buf.step, buf.mode, buf.mode_step);
        let records = buf.index.len() as u64;
        let (parts, index, len) = buf.into_parts();
        self.step_size_hint = (len as usize).min(ZERO_COPY_MIN * 16);
        let event_file = layout::event_file(step, &self.settings.worker);
        if let Err(e) = self.storage.put_parts(&event_file, parts) {
            self.shared.disable(e.to_string());
            self.lose(step, records);
            return;
        }
        let index = IndexFile {
            meta: IndexMeta {
                mode,
                mode_step,
                event_file_name: Some(event_file),
            },
            tensor_payload: index,
            shape_payload: Vec::new(),
            unusable_entries: Vec::new(),
        };
        let index_path = layout::index_file(step, &self.settings.worker);
        if let Err(e) = self
            .storage
            .put(&index_path, Bytes::from(index.to_json_bytes()))
        {
            self.shared.disable(e.to_string());
            self.lose(step, records);
            return;
        }
        self.shared.steps_written.fetch_add(1, Ordering::Relaxed);
        self.shared
            .records_written
            .fetch_add(records, Ordering::Relaxed);
        self.shared.bytes_written.fetch_add(len, Ordering::Relaxed);
        if let Some(told) = &self.settings.on_step_written {
            (told.0)(step);
        }
    }

    fn tensorboard_record(&mut self, t: &TensorRecord, wall_time: f64) {
        let step = t.key.step;
        let mut events = Vec::new();
        if t.tb_scalar && t.tensor.len() == 1 {
            let v = t.tensor.view().get_f64(0);
            events.push(tensorboard::scalar_event(
                &t.name, v as f32, step, wall_time,
            ));
        }
        if t.tb_histogram
            && let Some(h) = tensorboard::histogram(t.tensor.view().iter_f64())
        {
            events.push(tensorboard::histogram_event(&t.name, h, step, wall_time));
        }
        self.tensorboard_events(t.key.mode, step, wall_time, events);
    }

    /// Appends `events` to the TensorBoard file of `mode` (written at the step's end).
    fn tensorboard_events(
        &mut self,
        mode: Mode,
        step: u64,
        wall_time: f64,
        events: Vec<smdebug_format::proto::Event>,
    ) {
        if events.is_empty() {
            return;
        }
        let tb_file_bytes = self.settings.tb_file_bytes;
        let worker = &self.settings.worker;
        let file = self
            .tb
            .entry(mode)
            .or_insert_with(|| TbFile::new(mode, step, worker, wall_time));
        if file.size >= tb_file_bytes {
            // Start the next file; its name (first step) sorts after the previous one's.
            // Everything pending was written with the previous file at the last step's end.
            let carried = std::mem::take(&mut file.pending);
            *file = TbFile::new(mode, step, worker, wall_time);
            file.pending.extend_from_slice(&carried);
        }
        for ev in events {
            let payload = tensorboard::encode_event(&ev);
            // TensorBoard reads only records with the real CRC.
            record::write_record(&mut file.pending, &payload, PayloadChecksum::Crc32c);
        }
    }

    fn flush_tensorboard(&mut self) {
        if self.disabled() {
            return;
        }
        let append = self.storage.supports_append();
        let mut failure = None;
        for file in self.tb.values_mut() {
            if file.pending.is_empty() {
                continue;
            }
            let pending = std::mem::take(&mut file.pending);
            let result = if append {
                self.storage.append(&file.path, &pending)
            } else {
                file.content.extend_from_slice(&pending);
                self.storage
                    .put(&file.path, Bytes::copy_from_slice(&file.content))
            };
            file.size += pending.len() as u64;
            if let Err(e) = result {
                failure = Some(e);
                break;
            }
        }
        if let Some(e) = failure {
            self.io(Err(e.into()));
        }
    }

    fn publish_all(&mut self) {
        if self.disabled() {
            return;
        }
        self.publish_step();
        self.flush_tensorboard();
    }

    fn close(&mut self, reason: &EndReason) {
        self.publish_all();
        if self.disabled() {
            return;
        }
        let body = end_marker_body(reason, now());
        match self.storage.put(layout::END_MARKER, Bytes::from(body)) {
            Ok(()) => self.shared.end_marker.store(true, Ordering::Release),
            Err(e) => self.shared.disable(e.to_string()),
        }
    }
}
