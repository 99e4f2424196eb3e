//! The background writer: the [`Sink`] that turns the hook's records into a run directory.
//!
//! The training thread only enqueues owned records ([`Writer::send`] never waits on I/O with
//! the default [`OverflowPolicy::Drop`]). A writer thread encodes each tensor as a TFRecord
//! (checksums over the tensor's bytes in place, no copy), gathers a step's records, and on
//! [`Record::EndStep`] writes the step's event file and then its index file, each atomically, so
//! a reader never sees an index entry whose event file is not complete. It also writes the
//! collections file, TensorBoard scalars, histograms and text (string tensors), and on
//! [`Record::Close`] the end marker.
//!
//! When storage fails (disk full, store unreachable), capture is disabled with one message
//! logged at error level (the `log` facade); [`WriterStatus::error`] keeps it. The thread goes on draining the queue without
//! writing, so the training loop is never blocked or crashed by storage. Every count is of what
//! storage acknowledged: a record is written once its step's event and index files were stored;
//! what could not be stored is counted as discarded, by record and by step
//! ([`WriterStatus::discarded`], [`WriterStatus::steps_lost`]), and
//! [`WriterStatus::end_marker_written`] says whether the run's end was stored.
//!
//! ```
//! use smdebug_core::{Hook, SaveConfig, TensorView};
//! use smdebug_storage::open_storage;
//! use smdebug_io::writer::Writer;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let writer = Writer::builder(open_storage(dir.path().to_str().unwrap()).unwrap())
//!     .worker_rank(0)
//!     .build()
//!     .unwrap();
//! let status = writer.status();
//! let mut hook = Hook::builder().save_config(SaveConfig::every(1)).build(writer).unwrap();
//! for step in 0..3 {
//!     hook.save_scalar("loss", 1.0 / (step as f64 + 1.0), &["losses"]);
//!     hook.step();
//! }
//! hook.close();
//! drop(hook); // dropping the writer flushes and joins its thread
//! assert_eq!(status.steps_written(), 3);
//! assert!(dir.path().join("training_job_end.ts").exists());
//! assert!(dir.path().join("index/000000000/000000000002_worker_0.json").exists());
//! ```

mod queue;
mod shared;
mod thread;

use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use smdebug_core::{Record, Sink};

use crate::error::{Error, Result};
use queue::{Msg, Queue};
use shared::Shared;
pub use shared::{OverflowPolicy, StepWritten};
use smdebug_format::layout;
use smdebug_format::record::PayloadChecksum;
use smdebug_storage::{Storage, open_storage};

/// A cheap, cloneable view of a writer's state, for the hook's owner or a monitoring thread.
#[derive(Clone, Debug)]
pub struct WriterStatus(Arc<Shared>);

impl WriterStatus {
    /// Tensor records dropped because the queue was full (or the writer had stopped).
    pub fn dropped(&self) -> u64 {
        self.0.dropped.load(Ordering::Relaxed)
    }

    /// Tensor records not written because capture was disabled: those of the step whose write
    /// failed and every one received after.
    pub fn discarded(&self) -> u64 {
        self.0.discarded.load(Ordering::Relaxed)
    }

    /// Steps some of whose records were not stored: the step whose write failed and every
    /// later step that had records to save.
    pub fn steps_lost(&self) -> u64 {
        self.0.steps_lost.load(Ordering::Relaxed)
    }

    /// Whether the end marker (`training_job_end.ts`) was stored.
    pub fn end_marker_written(&self) -> bool {
        self.0.end_marker.load(Ordering::Acquire)
    }

    /// Waits until the writer thread has handled the run's close (the hook's `close`): the
    /// last step and the end marker stored, or failed. False when `deadline` came first (the
    /// thread is still waiting on storage).
    pub fn wait_closed(&self, deadline: Instant) -> bool {
        loop {
            if self.0.closed.load(Ordering::Acquire) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            std::thread::sleep((deadline - now).min(Duration::from_millis(10)));
        }
    }

    /// Dropping the writer waits for its thread until `deadline` at the latest (and never
    /// longer than its shutdown timeout): an owner with a deadline of its own (a session's
    /// `finish`) sets it before the hook is dropped.
    pub fn shutdown_by(&self, deadline: Instant) {
        *self.0.shutdown_by.lock().unwrap_or_else(|p| p.into_inner()) = Some(deadline);
    }

    /// Steps whose event and index files were written.
    pub fn steps_written(&self) -> u64 {
        self.0.steps_written.load(Ordering::Relaxed)
    }

    /// Tensor records written to event files.
    pub fn records_written(&self) -> u64 {
        self.0.records_written.load(Ordering::Relaxed)
    }

    /// Bytes of event files written.
    pub fn bytes_written(&self) -> u64 {
        self.0.bytes_written.load(Ordering::Relaxed)
    }

    /// True once a storage error has disabled capture.
    pub fn is_disabled(&self) -> bool {
        self.0.disabled.load(Ordering::Acquire)
    }

    /// The error that disabled capture, if any.
    pub fn error(&self) -> Option<String> {
        self.0
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Bytes of tensor data a writer's queue holds by default before new tensors are dropped and
/// counted: 64 MiB. The queue absorbs the burst of a step that saves more than the writer
/// stores in one step's time; a writer that stays behind drops whatever the bound, so a larger
/// one only delays the drops while the training process's memory climbs. 64 MiB is a few
/// saves of a mid-sized model's reduced and sampled tensors, and 512 MiB for the eight
/// processes of an 8-GPU node. A job that saves more per step raises it
/// ([`WriterBuilder::max_queued_bytes`]) or blocks ([`OverflowPolicy::Block`]).
pub const DEFAULT_MAX_QUEUED_BYTES: usize = 64 << 20;

/// Builds a [`Writer`]. Every setting has a documented default.
#[derive(Clone, Debug)]
pub struct WriterBuilder {
    storage: Arc<dyn Storage>,
    worker: String,
    queue_capacity: usize,
    max_queued_bytes: usize,
    overflow: OverflowPolicy,
    checksum: PayloadChecksum,
    tensorboard: bool,
    tensorboard_file_bytes: u64,
    shutdown_timeout: Duration,
    on_step_written: Option<StepWritten>,
}

impl WriterBuilder {
    /// The worker name in file names. Default: `worker_0`.
    pub fn worker(mut self, name: impl Into<String>) -> Self {
        self.worker = name.into();
        self
    }

    /// Sets the worker name to `worker_<rank>`.
    pub fn worker_rank(self, rank: usize) -> Self {
        self.worker(layout::worker_name(rank))
    }

    /// Tensor records the queue holds before the overflow policy applies. Default: 1024.
    pub fn queue_capacity(mut self, records: usize) -> Self {
        self.queue_capacity = records.max(1);
        self
    }

    /// Bytes of tensor data the queue holds before the overflow policy applies, each record
    /// counted with its name and its slot in the queue (one tensor is always accepted into an
    /// empty queue, however large). Default:
    /// [`DEFAULT_MAX_QUEUED_BYTES`] (64 MiB).
    pub fn max_queued_bytes(mut self, bytes: usize) -> Self {
        self.max_queued_bytes = bytes;
        self
    }

    /// What a full queue does to a new tensor. Default: [`OverflowPolicy::Drop`].
    pub fn overflow(mut self, policy: OverflowPolicy) -> Self {
        self.overflow = policy;
        self
    }

    /// The payload checksum of event files. Default: [`PayloadChecksum::Crc32c`] (TensorBoard
    /// and TFRecord readers accept it); [`PayloadChecksum::SmdebugLegacy`] for Python
    /// smdebug 1.0.34's `Trial`. TensorBoard files always carry the real CRC.
    pub fn checksum(mut self, checksum: PayloadChecksum) -> Self {
        self.checksum = checksum;
        self
    }

    /// Write TensorBoard scalars and histograms for records flagged `tb_scalar` /
    /// `tb_histogram`, under `tensorboard/<MODE>/`. Default: true.
    pub fn tensorboard(mut self, enabled: bool) -> Self {
        self.tensorboard = enabled;
        self
    }

    /// A TensorBoard file is closed and a new one started once it passes this size (object
    /// stores rewrite the current file at each step, so this bounds that cost). Default: 4 MiB.
    pub fn tensorboard_file_bytes(mut self, bytes: u64) -> Self {
        self.tensorboard_file_bytes = bytes.max(1);
        self
    }

    /// Calls `told` on the writer thread each time a step's event and index files are written
    /// (after both are in storage), with the step. It runs between the writer's own work, so
    /// it should only wake someone (a rule runner in the process). Default: none.
    pub fn on_step_written(mut self, told: impl Fn(u64) + Send + Sync + 'static) -> Self {
        self.on_step_written = Some(StepWritten(Arc::new(told)));
        self
    }

    /// How long dropping the writer waits for the thread to write what is queued. Default: 60 s.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Starts the writer thread.
    pub fn build(self) -> Result<Writer> {
        let shared = Arc::new(Shared::default());
        let queue = Arc::new(Queue::new(
            self.queue_capacity,
            self.max_queued_bytes,
            shared.clone(),
        ));
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        let settings = thread::Settings {
            worker: self.worker,
            checksum: self.checksum,
            tensorboard: self.tensorboard,
            tb_file_bytes: self.tensorboard_file_bytes,
            on_step_written: self.on_step_written,
        };
        let worker = thread::WriterThread::new(self.storage, settings, shared.clone());
        let q = queue.clone();
        let handle = std::thread::Builder::new()
            .name("smdebug-writer".to_string())
            .spawn(move || worker.run(q, done_tx))
            .map_err(|e| Error::Writer(format!("cannot start the writer thread: {e}")))?;
        Ok(Writer {
            queue,
            shared,
            overflow: self.overflow,
            shutdown_timeout: self.shutdown_timeout,
            handle: Some(handle),
            done: done_rx,
        })
    }
}

/// The background writer. Implements [`Sink`]: give it to a [`smdebug_core::Hook`]. Dropping
/// it publishes what is buffered (a step that was not ended included) and stops its thread,
/// waiting at most the shutdown timeout.
pub struct Writer {
    queue: Arc<Queue>,
    shared: Arc<Shared>,
    overflow: OverflowPolicy,
    shutdown_timeout: Duration,
    handle: Option<JoinHandle<()>>,
    done: mpsc::Receiver<()>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("overflow", &self.overflow)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

impl Writer {
    /// A builder writing to `storage`, with the defaults documented on [`WriterBuilder`].
    pub fn builder(storage: Arc<dyn Storage>) -> WriterBuilder {
        WriterBuilder {
            storage,
            worker: layout::worker_name(0),
            queue_capacity: 1024,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
            overflow: OverflowPolicy::Drop,
            checksum: PayloadChecksum::Crc32c,
            tensorboard: true,
            tensorboard_file_bytes: 4 << 20,
            shutdown_timeout: Duration::from_secs(60),
            on_step_written: None,
        }
    }

    /// A writer with default settings for the run at `location` (path or URL, see
    /// [`open_storage`]).
    pub fn open(location: impl smdebug_storage::IntoLocation) -> Result<Writer> {
        Writer::builder(open_storage(location)?).build()
    }

    /// A handle on the writer's counters and error state that outlives the writer.
    pub fn status(&self) -> WriterStatus {
        WriterStatus(self.shared.clone())
    }

    /// Waits until every record sent before has been processed (a step not yet ended stays
    /// buffered). Fails when capture is disabled or the wait exceeds `timeout`.
    pub fn flush(&self, timeout: Duration) -> Result<()> {
        let (tx, rx) = mpsc::sync_channel(1);
        if !self.queue.push_control(Msg::Flush(tx)) {
            return Err(Error::Writer("the writer thread has stopped".to_string()));
        }
        rx.recv_timeout(timeout).map_err(|_| Error::Timeout {
            what: "the writer to flush".to_string(),
            waited: timeout,
        })?;
        match self.status().error() {
            Some(e) => Err(Error::CaptureDisabled(e)),
            None => Ok(()),
        }
    }
}

impl Sink for Writer {
    fn send(&mut self, record: Record) {
        match record {
            Record::Tensor(t) => {
                let size = t.tensor.bytes().len() + t.name.len();
                self.queue
                    .push_tensor(Record::Tensor(t), size, self.overflow);
            }
            Record::Strings(s) => {
                let size = s.value.held_bytes() as usize + s.name.len();
                self.queue
                    .push_tensor(Record::Strings(s), size, self.overflow);
            }
            other => {
                self.queue.push_control(Msg::Record(other));
            }
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let by = *self
            .shared
            .shutdown_by
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let wait = by.map_or(self.shutdown_timeout, |d| {
            d.saturating_duration_since(Instant::now())
                .min(self.shutdown_timeout)
        });
        if self.queue.push_control(Msg::Shutdown) && self.done.recv_timeout(wait).is_err() {
            log::warn!("smdebug: the writer did not finish within {wait:?}; leaving it behind");
            return;
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
