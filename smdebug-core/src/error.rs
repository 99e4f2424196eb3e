//! The one error type of smdebug-core.

/// Errors from building tensors, collections, save configs and the hook.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A tensor's bytes do not match its dtype and shape.
    #[error("invalid tensor: {0}")]
    InvalidTensor(String),
    /// A regular expression (Python `re` syntax) in a collection or config does not compile.
    #[error("bad regex `{pattern}` in {context}: {source}")]
    BadRegex {
        /// The pattern as given.
        pattern: String,
        /// Where it was given (a collection, a config key).
        context: String,
        /// What the regex engines said.
        #[source]
        source: crate::pyregex::PyRegexError,
    },
    /// A configuration value is missing, ill-typed or out of range.
    #[error("bad configuration: {0}")]
    Config(String),
    /// The JSON configuration does not parse.
    #[error("bad JSON configuration: {0}")]
    Json(#[from] serde_json::Error),
}

/// A result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
