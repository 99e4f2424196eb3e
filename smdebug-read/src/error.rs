//! The one error type of smdebug-read: what the `Trial` and the tensor follower report.
//!
//! Every variant carries its context: the run's location and the path for I/O (the storage's
//! error as the source), the file and byte offset for corrupt data (smdebug-format's error), the
//! tensor, step and worker for a lookup.

use std::time::Duration;

use smdebug_core::Mode;

/// Why a read of a run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Storage failed: a file not found, an operation that failed (disk full, permission
    /// denied, store unreachable), a location no backend opens, or one whose backend this build
    /// leaves out.
    #[error(transparent)]
    Storage(#[from] smdebug_storage::Error),

    /// A file whose bytes are not the format (a damaged or cut-short record, a record that is
    /// not the one its index entry promises, a tensor over the reader's budget, a bad index).
    #[error(transparent)]
    Format(#[from] smdebug_format::Error),

    /// Two index entries that cannot both be true: one tensor listed twice, two index files for
    /// one step of one worker, or workers that disagree on a step's mode.
    #[error("conflicting index entries: {first} and {second}: {reason}")]
    ConflictingIndex {
        /// One of the entries.
        first: String,
        /// The entry that contradicts it.
        second: String,
        /// What is wrong.
        reason: String,
    },

    /// An index entry that locates no record (a placeholder of 1 byte, a negative or fractional
    /// number, an end past `u64::MAX`): an error for that tensor at that step only, raised when
    /// it is read; the rest of the run reads.
    #[error("{path}: tensor_payload entry {position} (`{tensor}`) locates no record: {reason}")]
    BadIndexEntry {
        /// The index file, relative to the run.
        path: String,
        /// The entry's position in the file's `tensor_payload` (0 for the first).
        position: usize,
        /// The tensor it names.
        tensor: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A collections file that is not smdebug's CollectionManager JSON.
    #[error("{path}: bad collections file: {reason}")]
    BadCollections {
        /// The file, relative to the run.
        path: String,
        /// What is wrong.
        reason: String,
    },

    /// A background thread of the reader (reading ahead, decoding ahead) could not be started.
    #[error("cannot start the {thread} thread: {source}")]
    Thread {
        /// Which thread.
        thread: &'static str,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },

    /// Waiting for data took longer than allowed.
    #[error("timed out after {waited:?} waiting for {what}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        waited: Duration,
    },

    /// Nothing of a run is at the location (no collections, index files or end marker).
    #[error("no smdebug run at `{location}`")]
    NoSuchRun {
        /// Where the run was looked for.
        location: String,
    },

    /// A regular expression in a query does not compile.
    #[error("bad regex `{pattern}`: {reason}")]
    BadRegex {
        /// The pattern as given.
        pattern: String,
        /// What is wrong.
        reason: String,
    },

    /// A collection name the run does not have.
    #[error("collection `{name}` not found (the run has: {})", .available.join(", "))]
    CollectionNotFound {
        /// The name asked for.
        name: String,
        /// The collections the run has.
        available: Vec<String>,
    },

    /// A `range_steps` whose end is not past its start.
    #[error("range_steps ({start}, {end}): the end must be past the start")]
    BadRangeSteps {
        /// The first step asked for.
        start: u64,
        /// The first step not asked for.
        end: u64,
    },

    /// Fewer collections files than the run's collections file declares workers (a trial that
    /// requires them, as Python smdebug's does). `ended`: the run wrote its end marker, so they
    /// will never come.
    #[error(
        "`{location}` has {found} collections files where {declared} workers are declared{}",
        if *.ended { "; the run has ended" } else { "" }
    )]
    MissingCollectionFiles {
        /// The run's location.
        location: String,
        /// The collections files found.
        found: usize,
        /// The workers declared (`num_workers`; 1 when no collections file was found).
        declared: usize,
        /// Whether the run has ended.
        ended: bool,
    },

    /// A mode the run recorded no step in, or a step of a mode the run does not have, asked
    /// for by name (Python smdebug's `tensor_names(step=…, mode=…)` raises `KeyError`).
    #[error(
        "`{location}` has no {}",
        .step.map_or_else(|| format!("{mode} steps"), |s| format!("step {s} of mode {mode}"))
    )]
    UnknownStep {
        /// The step asked for, if one was.
        step: Option<u64>,
        /// The mode asked for.
        mode: Mode,
        /// The run's location.
        location: String,
    },

    /// A tensor name the run never saved.
    #[error("tensor `{name}` not found in `{location}`")]
    TensorNotFound {
        /// The name asked for.
        name: String,
        /// The storage's root (`/tmp/run`, `s3://bucket/run`).
        location: String,
    },

    /// The step is complete but this tensor was not saved there (Python smdebug's
    /// `TensorUnavailableForStep`).
    #[error("tensor `{tensor}` is not available at step {step} ({mode}) in `{location}`")]
    StepNotAvailable {
        /// The tensor's name.
        tensor: String,
        /// The step (global, or within `mode` where there is one).
        step: u64,
        /// The mode asked for.
        mode: Mode,
        /// The storage's root (`/tmp/run`, `s3://bucket/run`).
        location: String,
    },

    /// A step that will never come: the run is past it, or ended without it (Python smdebug's
    /// `StepUnavailable`).
    #[error(
        "step {step} ({mode}) of `{location}` is not available: it was not saved{}",
        .tensor.as_ref().map_or_else(String::new, |t| format!(" (reading `{t}`)"))
    )]
    StepUnavailable {
        /// The tensor being read, when a read asked.
        tensor: Option<String>,
        /// The step (global, or within `mode` where there is one).
        step: u64,
        /// The mode asked for.
        mode: Mode,
        /// The run's location.
        location: String,
    },

    /// A step not written (by every worker) yet, while the run goes on (Python smdebug's
    /// `StepNotYetAvailable`).
    #[error(
        "step {step} ({mode}) of `{location}` is not yet available{}",
        .tensor.as_ref().map_or_else(String::new, |t| format!(" (reading `{t}`)"))
    )]
    StepNotYetAvailable {
        /// The tensor being read, when a read asked.
        tensor: Option<String>,
        /// The step (global, or within `mode` where there is one).
        step: u64,
        /// The mode asked for.
        mode: Mode,
        /// The run's location.
        location: String,
    },

    /// A step whose index this trial let go of (`Trial::release_steps_before`): a reader
    /// that went past it said it would not ask about it again. Not "not saved" and not "not
    /// yet": the step may hold the tensor; open the run again to read it.
    ///
    #[error(
        "step {step} ({mode}) of `{location}` was released from this trial's index (its steps \
         before global step {released_before} were let go with `release_steps_before`){}; \
         open the run again to read it",
        .tensor.as_ref().map_or_else(String::new, |t| format!(" (reading `{t}`)"))
    )]
    StepReleased {
        /// The tensor being read, when a read asked.
        tensor: Option<String>,
        /// The step (global, or within `mode` where there is one).
        step: u64,
        /// The mode asked for.
        mode: Mode,
        /// The first global step the trial still holds.
        released_before: u64,
        /// The run's location.
        location: String,
    },

    /// Waiting for a step past the last step of a run that has ended (Python smdebug's
    /// `NoMoreData`).
    #[error(
        "step {step} ({mode}) of `{location}`: the run has ended; its last step is {}",
        .last_step.map_or_else(|| "none".to_string(), |s| s.to_string())
    )]
    NoMoreData {
        /// The step waited for.
        step: u64,
        /// The mode asked for.
        mode: Mode,
        /// The run's last step in that mode, if it has any.
        last_step: Option<u64>,
        /// The run's location.
        location: String,
    },

    /// A worker that did not save the tensor at this step (Python smdebug's `InvalidWorker`).
    #[error("worker `{worker}` did not save it at step {step} (workers that did: {})", .available.join(", "))]
    WorkerNotFound {
        /// The worker asked for.
        worker: String,
        /// The step (global, or within `mode` where there is one).
        step: u64,
        /// The workers that saved the tensor (or reductions of it) at the step.
        available: Vec<String>,
    },

    /// Only reductions of this tensor were saved, not the tensor itself.
    #[error(
        "only reductions of `{tensor}` were saved (at step {step}): read them with reduction_value"
    )]
    OnlyReductionsSaved {
        /// The tensor's name.
        tensor: String,
        /// The step (global, or within `mode` where there is one).
        step: u64,
    },

    /// The reduction was not saved for this tensor at this step.
    #[error("reduction `{reduction}` of `{tensor}` was not saved at step {step}")]
    ReductionNotSaved {
        /// The tensor's name.
        tensor: String,
        /// The reduction's name (`mean`, `abs_l2`).
        reduction: String,
        /// The step (global, or within `mode` where there is one).
        step: u64,
    },
}

/// `Result` with smdebug-read's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// True for storage's [`NotFound`](smdebug_storage::Error::NotFound).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Storage(e) if e.is_not_found())
    }

    /// True when one record could not be read while the rest of the run can: its bytes are
    /// damaged (a checksum that does not match, a payload that does not decode), cut short, not
    /// the record its index entry promises, located by no usable index entry, or over the
    /// reader's budget for one tensor. A reader that judges step by step (the rule runner)
    /// leaves that tensor at that step out and goes on; storage and listing failures are not
    /// of this kind.
    pub fn is_unreadable_record(&self) -> bool {
        matches!(
            self,
            Error::Format(smdebug_format::Error::CorruptRecord { .. })
                | Error::Format(smdebug_format::Error::IncompleteRecord { .. })
                | Error::Format(smdebug_format::Error::TensorTooLarge { .. })
                | Error::Format(smdebug_format::Error::WrongTensor { .. })
                | Error::BadIndexEntry { .. }
        )
    }

    /// The exception Python smdebug 1.0.34 raises in this case: a class of `smdebug.exceptions`
    /// (`StepUnavailable`, `TensorUnavailableForStep`, …) or a Python builtin (`KeyError`,
    /// `AssertionError`, …); `SMDebugRuntimeError` for what smdebug has no class of its own
    /// for. `smdebug_rs` raises this class; the differential scenarios compare with it.
    pub fn smdebug_exception(&self) -> &'static str {
        match self {
            Error::TensorNotFound { .. } => "TensorUnavailable",
            Error::StepNotAvailable { .. }
            | Error::OnlyReductionsSaved { .. }
            | Error::ReductionNotSaved { .. } => "TensorUnavailableForStep",
            Error::StepUnavailable { .. } => "StepUnavailable",
            Error::StepNotYetAvailable { .. } => "StepNotYetAvailable",
            Error::NoMoreData { .. } => "NoMoreData",
            Error::WorkerNotFound { .. } => "InvalidWorker",
            Error::MissingCollectionFiles { .. } => "MissingCollectionFiles",
            // Python smdebug fails deep in its record reader (`struct.error`); smdebug's own
            // class for a bad index file names the entry.
            Error::BadIndexEntry { .. } => "IndexReaderException",
            // smdebug asserts its range_steps; it looks collections and steps up in dicts.
            Error::BadRangeSteps { .. } => "AssertionError",
            Error::UnknownStep { .. } | Error::CollectionNotFound { .. } => "KeyError",
            Error::BadRegex { .. } => "ValueError",
            Error::Timeout { .. } => "TimeoutError",
            _ => "SMDebugRuntimeError",
        }
    }
}
