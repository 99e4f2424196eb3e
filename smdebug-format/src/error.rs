//! The format's decode errors: each names the file (relative to the run) and the byte offset
//! where its bytes stop being the format.

/// Bytes that are not smdebug's format.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A TFRecord whose framing or payload is damaged (bad CRC, bad protobuf, bad tensor).
    #[error("{path}: corrupt record at byte {offset}: {reason}")]
    CorruptRecord {
        /// The file, relative to the run.
        path: String,
        /// The record's byte offset in the file.
        offset: u64,
        /// What is wrong.
        reason: String,
    },

    /// A record that ends before its declared length: the file is still being written, or it
    /// was truncated.
    #[error(
        "{path}: record at byte {offset} is incomplete: it needs {needed} bytes, {available} are there"
    )]
    IncompleteRecord {
        /// The file, relative to the run.
        path: String,
        /// The record's byte offset in the file.
        offset: u64,
        /// Bytes the record declares.
        needed: u64,
        /// Bytes there are.
        available: u64,
    },

    /// A record whose tensor (or the record itself) is larger than the reader's budget for one
    /// tensor. Nothing of that size was allocated.
    #[error(
        "{path}: record at byte {offset}: tensor `{tensor}` ({detail}) claims {claimed} bytes, more than the reader's limit of {limit} bytes (raise it with --max-tensor-bytes, max_tensor_bytes= in Python, or TrialOptions::max_tensor_bytes)"
    )]
    TensorTooLarge {
        /// The file, relative to the run.
        path: String,
        /// The record's byte offset in the file.
        offset: u64,
        /// The tensor's name.
        tensor: String,
        /// What claims the size: the dtype and shape, or the record's length in the index.
        detail: String,
        /// The size it claims, in bytes.
        claimed: u128,
        /// The reader's limit, in bytes.
        limit: u64,
    },

    /// A string tensor (`DT_STRING`: XGBoost's `trees/*` text columns) read as numbers. Not
    /// corruption: read it as a `TensorValue` (`TrialTensor::read`).
    #[error(
        "{path}: record at byte {offset}: tensor `{tensor}` holds strings, not numbers (read it with TrialTensor::read)"
    )]
    StringTensor {
        /// The file, relative to the run.
        path: String,
        /// The record's byte offset in the file.
        offset: u64,
        /// The tensor's name.
        tensor: String,
    },

    /// The record an index entry points at holds another tensor (its tag is not the name the
    /// index lists), or the same tensor of another step.
    #[error("{path}: record at byte {offset} is not {expected}: it holds {found}")]
    WrongTensor {
        /// The file, relative to the run.
        path: String,
        /// The record's byte offset in the file.
        offset: u64,
        /// The tensor (and step) the index promised: "`loss` at step 5".
        expected: String,
        /// What the record holds: "`accuracy`", "`loss` at step 4".
        found: String,
    },

    /// An index file that is not the JSON smdebug writes.
    #[error("{path}: bad index file at byte {offset}: {reason}")]
    BadIndex {
        /// The file, relative to the run.
        path: String,
        /// Where in the file the problem is.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
}

/// `Result` with the format's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
