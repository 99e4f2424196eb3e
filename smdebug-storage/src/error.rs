//! The storage's error: what every backend reports the same way.

/// A boxed source error (an `std::io::Error`, an `object_store::Error`, …).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a storage operation or opening a location can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The object or file does not exist.
    #[error("{location}: `{path}` not found")]
    NotFound {
        /// The storage's root (`/tmp/run`, `s3://bucket/run`).
        location: String,
        /// The file, relative to the run.
        path: String,
    },

    /// A storage operation failed (disk full, permission denied, store unreachable, …).
    #[error("{location}: {op} `{path}` failed: {source}")]
    Failed {
        /// The storage's root (`/tmp/run`, `s3://bucket/run`).
        location: String,
        /// What was attempted: `put`, `get`, `list`, …
        op: &'static str,
        /// The file, relative to the run.
        path: String,
        /// The backend's error.
        #[source]
        source: BoxError,
    },

    /// A path or URL that no storage backend can open, or bad backend options.
    #[error("cannot open storage `{location}`: {reason}")]
    InvalidLocation {
        /// The location as given.
        location: String,
        /// Why it cannot be opened.
        reason: String,
    },

    /// A location whose object-store backend this build leaves out: a cargo feature (see
    /// [`Backend`](crate::Backend)) brings it in. smdebug-io forwards these features under the
    /// same names; the `smdebug` facade names its own in its error.
    #[error(
        "cannot open storage `{location}`: {backend} needs smdebug-storage's `{feature}` feature, which this build leaves out (enable it: smdebug-storage = {{ features = [\"{feature}\"] }})"
    )]
    BackendNotCompiled {
        /// The location as given.
        location: String,
        /// The backend's name (`Amazon S3`).
        backend: &'static str,
        /// The cargo feature to enable (`aws`).
        feature: &'static str,
    },
}

impl Error {
    /// True for [`Error::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
