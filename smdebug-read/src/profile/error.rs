//! What can go wrong reading a run's profiler data back.

/// An error reading system metrics, framework traces or code profiles.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// Opening the run's storage, or fetching or listing a file, failed; smdebug-storage's
    /// error names the storage, the operation and the path.
    #[error(transparent)]
    Storage(#[from] smdebug_storage::Error),
    /// A line of a system-metrics file is not a valid metric record.
    #[error("{key}: line {line}: malformed system metric: {message}")]
    MalformedSystemLine {
        /// The file's key.
        key: String,
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it (the JSON decoder's message, or the misplaced timestamp).
        message: String,
    },
    /// A framework trace file is not a valid Chrome trace.
    #[error("{key}: malformed trace file at line {line}, column {column}: {message}")]
    MalformedTrace {
        /// The file's key.
        key: String,
        /// The 1-based line of the error (0 when not positional).
        line: usize,
        /// The 1-based column of the error (0 when not positional).
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A code-profile file is damaged or too large.
    #[error("{key}: malformed code profile: {message}")]
    MalformedCodeProfile {
        /// The file's key.
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// `Result` with [`ProfileError`].
pub type Result<T, E = ProfileError> = std::result::Result<T, E>;
