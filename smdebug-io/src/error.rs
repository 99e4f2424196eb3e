//! The one error type of smdebug-io.
//!
//! Every variant carries its context: the storage location and path for I/O, the file and byte
//! offset for corrupt data, the tensor, step and worker for a reader's lookups.

use std::time::Duration;

/// Errors from the format, the storage backends, the writer and the reader.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Storage failed: a file not found, an operation that failed (disk full, permission
    /// denied, store unreachable), a location no backend opens, or one whose backend this build
    /// leaves out.
    #[error(transparent)]
    Storage(#[from] smdebug_storage::Error),

    /// The location cannot take a new run: it holds files that are not a run's, a run that
    /// was not to be replaced, or a run another process still writes (see
    /// [`crate::run_folder::claim`]).
    #[error("{location} {refusal}")]
    Refused {
        /// The storage's root.
        location: String,
        /// Why.
        refusal: Box<crate::run_folder::refusal::Refusal>,
    },

    /// A file whose bytes are not the format (a damaged or cut-short record, a record that is
    /// not the one its index entry promises, a tensor over the reader's budget, a bad index).
    #[error(transparent)]
    Format(#[from] smdebug_format::Error),

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

    /// A progress file (`progress/<worker>.json`) that is not the JSON [`crate::progress`]
    /// writes, or larger than a progress file may be.
    #[error("{location}: bad progress file {path}: {reason}")]
    BadProgressFile {
        /// The storage's root.
        location: String,
        /// The file, relative to the run.
        path: String,
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

    /// A configuration file (SageMaker's hook config) that does not parse: the source names
    /// the key and the value.
    #[error("{path}: {source}")]
    BadConfigFile {
        /// The file.
        path: String,
        /// What is wrong, with the section and key.
        #[source]
        source: smdebug_core::Error,
    },

    /// A configuration file that exists but cannot be read (a directory, no permission, not
    /// UTF-8).
    #[error("cannot read the configuration file {path}: {source}")]
    UnreadableConfigFile {
        /// The file.
        path: String,
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

    /// Waiting for data took longer than allowed.
    #[error("timed out after {waited:?} waiting for {what}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        waited: Duration,
    },
}

/// `Result` with smdebug-io's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// True for storage's [`NotFound`](smdebug_storage::Error::NotFound).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Storage(e) if e.is_not_found())
    }
}
