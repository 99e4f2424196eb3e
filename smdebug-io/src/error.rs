//! The one error type of smdebug-io.
//!
//! Every variant carries its context: the storage location and path for I/O, the file and byte
//! offset for corrupt data, the tensor, step and worker for a reader's lookups.

use std::time::Duration;

use smdebug_core::Mode;

/// A boxed source error (an `std::io::Error`, an `object_store::Error`, …).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors from the format, the storage backends, the writer and the reader.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The object or file does not exist.
    #[error("{location}: `{path}` not found")]
    NotFound {
        /// The storage's root (`/tmp/run`, `s3://bucket/run`).
        location: String,
        path: String,
    },

    /// A storage operation failed (disk full, permission denied, store unreachable, …).
    #[error("{location}: {op} `{path}` failed: {source}")]
    Storage {
        location: String,
        /// What was attempted: `put`, `get`, `list`, …
        op: &'static str,
        path: String,
        #[source]
        source: BoxError,
    },

    /// A path or URL that no storage backend can open, or bad backend options.
    #[error("cannot open storage `{location}`: {reason}")]
    InvalidLocation { location: String, reason: String },

    /// A TFRecord whose framing or payload is damaged (bad CRC, bad protobuf, bad tensor).
    #[error("{path}: corrupt record at byte {offset}: {reason}")]
    CorruptRecord {
        path: String,
        offset: u64,
        reason: String,
    },

    /// A record that ends before its declared length: the file is still being written, or it
    /// was truncated.
    #[error(
        "{path}: record at byte {offset} is incomplete: it needs {needed} bytes, {available} are there"
    )]
    IncompleteRecord {
        path: String,
        offset: u64,
        needed: u64,
        available: u64,
    },

    /// A record whose tensor (or the record itself) is larger than the reader's budget for one
    /// tensor. Nothing of that size was allocated.
    #[error(
        "{path}: record at byte {offset}: tensor `{tensor}` ({detail}) claims {claimed} bytes, more than the reader's limit of {limit} bytes (raise it with TrialOptions::max_tensor_bytes)"
    )]
    TensorTooLarge {
        path: String,
        offset: u64,
        tensor: String,
        /// What claims the size: the dtype and shape, or the record's length in the index.
        detail: String,
        claimed: u128,
        limit: u64,
    },

    /// A well-formed record of a tensor whose dtype this reader cannot represent (string
    /// tensors: XGBoost's `trees/*` text columns). Not corruption: the rest of the run reads.
    #[error("{path}: record at byte {offset}: tensor `{tensor}`: {dtype} are not supported")]
    UnsupportedDtype {
        path: String,
        offset: u64,
        tensor: String,
        dtype: String,
    },

    /// The record an index entry points at holds another tensor (its tag is not the name the
    /// index lists), or the same tensor of another step.
    #[error("{path}: record at byte {offset} is not {expected}: it holds {found}")]
    WrongTensor {
        path: String,
        offset: u64,
        /// The tensor (and step) the index promised: "`loss` at step 5".
        expected: String,
        /// What the record holds: "`accuracy`", "`loss` at step 4".
        found: String,
    },

    /// Two index entries that cannot both be true: one tensor listed twice, two index files for
    /// one step of one worker, or workers that disagree on a step's mode.
    #[error("conflicting index entries: {first} and {second}: {reason}")]
    ConflictingIndex {
        first: String,
        second: String,
        reason: String,
    },

    /// An index file that is not the JSON smdebug writes.
    #[error("{path}: bad index file at byte {offset}: {reason}")]
    BadIndex {
        path: String,
        offset: u64,
        reason: String,
    },

    /// A collections file that is not smdebug's CollectionManager JSON.
    #[error("{path}: bad collections file: {reason}")]
    BadCollections { path: String, reason: String },

    /// Capture was disabled after a storage error; the message is the first error.
    #[error("capture disabled: {0}")]
    CaptureDisabled(String),

    /// A stop request (`stop_request.json`) that is not the JSON [`crate::stop`] writes.
    #[error("{location}: bad stop request (stop_request.json): {reason}")]
    BadStopRequest {
        /// The storage's root.
        location: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A background thread (the stop watcher) could not be started.
    #[error("cannot start the {thread} thread: {source}")]
    Thread {
        /// Which thread.
        thread: &'static str,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },

    /// The writer thread could not be started or has gone away.
    #[error("writer: {0}")]
    Writer(String),

    /// An error from smdebug-core (a tensor whose bytes do not match its shape, …).
    #[error(transparent)]
    Core(#[from] smdebug_core::Error),

    // ---- reader (Trial) lookups ----
    /// Nothing of a run is at the location (no collections, index files or end marker).
    #[error("no smdebug run at `{location}`")]
    NoSuchRun { location: String },

    /// A regular expression in a query does not compile.
    #[error("bad regex `{pattern}`: {reason}")]
    BadRegex { pattern: String, reason: String },

    /// A collection name the run does not have.
    #[error("collection `{name}` not found (the run has: {})", .available.join(", "))]
    CollectionNotFound {
        name: String,
        available: Vec<String>,
    },

    /// Waiting for data took longer than allowed.
    #[error("timed out after {waited:?} waiting for {what}")]
    Timeout { what: String, waited: Duration },

    /// A tensor name the run never saved.
    #[error("tensor `{name}` not found in `{location}`")]
    TensorNotFound { name: String, location: String },

    /// The tensor exists but not at this step (or not yet).
    #[error("tensor `{tensor}` is not available at step {step} ({mode}) in `{location}`")]
    StepNotAvailable {
        tensor: String,
        step: u64,
        mode: Mode,
        location: String,
    },

    /// A worker that did not write this step.
    #[error("worker `{worker}` did not write step {step} (workers there: {})", .available.join(", "))]
    WorkerNotFound {
        worker: String,
        step: u64,
        available: Vec<String>,
    },

    /// Only reductions of this tensor were saved, not the tensor itself.
    #[error(
        "only reductions of `{tensor}` were saved (at step {step}): read them with reduction_value"
    )]
    OnlyReductionsSaved { tensor: String, step: u64 },

    /// The reduction was not saved for this tensor at this step.
    #[error("reduction `{reduction}` of `{tensor}` was not saved at step {step}")]
    ReductionNotSaved {
        tensor: String,
        reduction: String,
        step: u64,
    },
}

/// `Result` with smdebug-io's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// True for [`Error::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }
}
