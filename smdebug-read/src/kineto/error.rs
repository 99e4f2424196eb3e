//! The error type of Kineto trace ingestion.

use std::io;
use std::path::PathBuf;

/// Why a Kineto (Chrome-trace) file could not be summarized.
///
/// Every variant names the file; variants raised while reading name the byte offset into the
/// JSON text (the decompressed text for `.json.gz` files) where reading stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KinetoError {
    /// The file could not be opened or its first bytes could not be read.
    #[error("cannot open trace file {path}: {source}")]
    Open {
        /// The trace file.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },
    /// Reading or decompressing failed part-way (I/O error, corrupt or truncated gzip data).
    #[error("{path}: read failed at byte offset {offset} of the {stream}: {source}")]
    Read {
        /// The trace file.
        path: PathBuf,
        /// Bytes of JSON text successfully delivered before the failure.
        offset: u64,
        /// Which stream the offset counts: `"decompressed JSON text"` or `"JSON text"`.
        stream: &'static str,
        /// The underlying I/O or gzip error.
        #[source]
        source: io::Error,
    },
    /// The JSON text itself is malformed or ends early.
    #[error(
        "{path}: malformed JSON at byte offset {offset} (line {line}, column {column}): {message}"
    )]
    Malformed {
        /// The trace file.
        path: PathBuf,
        /// Byte offset into the JSON text where the parser stopped.
        offset: u64,
        /// 1-based line reported by the JSON parser.
        line: usize,
        /// 1-based column reported by the JSON parser.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// Well-formed JSON that is not shaped like a Chrome trace (for example a top-level number,
    /// or a `traceEvents` element that is not an object).
    #[error(
        "{path}: not a Chrome trace at byte offset {offset} (line {line}, column {column}): {message}"
    )]
    NotATrace {
        /// The trace file.
        path: PathBuf,
        /// Byte offset into the JSON text where the mismatch was found.
        offset: u64,
        /// 1-based line reported by the JSON parser.
        line: usize,
        /// 1-based column reported by the JSON parser.
        column: usize,
        /// What was expected and what was found.
        message: String,
    },
    /// A well-formed JSON object without a `traceEvents` array.
    #[error("{path}: not a Chrome trace: the top-level object has no \"traceEvents\" array")]
    MissingTraceEvents {
        /// The trace file.
        path: PathBuf,
    },
}

/// Result alias for Kineto ingestion.
pub type Result<T, E = KinetoError> = std::result::Result<T, E>;
