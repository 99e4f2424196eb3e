//! The writer's state shared by the training thread's [`Writer`](super::Writer), the writer
//! thread, the queue and [`WriterStatus`](super::WriterStatus) handles, and the policy for a
//! full queue.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// What `Writer::send` ([`Sink::send`](smdebug_core::Sink::send)) does with a tensor when the queue is full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OverflowPolicy {
    /// Drop the tensor and count it
    /// ([`WriterStatus::dropped`](super::WriterStatus::dropped)); never wait. The default.
    #[default]
    Drop,
    /// Wait until the writer thread has made room (back-pressure on the training loop).
    Block,
}

/// Counters and the error state shared by the writer thread and
/// [`WriterStatus`](super::WriterStatus) handles.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub dropped: AtomicU64,
    pub discarded: AtomicU64,
    /// Steps some of whose records were not stored (discarded after a storage error).
    pub steps_lost: AtomicU64,
    pub steps_written: AtomicU64,
    pub records_written: AtomicU64,
    pub bytes_written: AtomicU64,
    pub disabled: AtomicBool,
    /// The end marker was stored.
    pub end_marker: AtomicBool,
    /// The writer thread has handled the run's close (stored the end marker or failed to).
    pub closed: AtomicBool,
    /// The latest time dropping the writer waits for its thread (the owner's deadline).
    pub shutdown_by: Mutex<Option<Instant>>,
    pub error: Mutex<Option<String>>,
}

impl Shared {
    /// Disables capture with its first error (logged once, at error level, through `log`).
    pub fn disable(&self, message: String) {
        let mut err = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if err.is_none() {
            log::error!("smdebug: capture disabled: {message}");
            *err = Some(message);
        }
        self.disabled.store(true, Ordering::Release);
    }
}

/// What the writer thread calls each time a step's event and index files are in storage, with
/// the step ([`WriterBuilder::on_step_written`](super::WriterBuilder::on_step_written)): a
/// reader in the same process (a session's rule runner) looks then, instead of polling
/// storage for steps that are not there yet.
#[derive(Clone)]
pub struct StepWritten(pub std::sync::Arc<dyn Fn(u64) + Send + Sync>);

impl std::fmt::Debug for StepWritten {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StepWritten(..)")
    }
}
