//! The one error type of smdebug-burn.

/// Errors from capturing burn tensors. None of them stops training: the hook reports them to the
/// caller and carries on with the next step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading tensors back from the device failed (burn's `Transaction`).
    #[error("reading {count} tensor(s) from the device failed (first: `{first}`): {message}")]
    Read {
        first: String,
        count: usize,
        message: String,
    },
    /// The device handed back data of a dtype smdebug cannot record.
    #[error("tensor `{tensor}` has dtype {dtype}, which smdebug cannot record")]
    UnsupportedDType { tensor: String, dtype: String },
    /// smdebug-core refused to build the hook or a tensor view.
    #[error("smdebug: {0}")]
    Core(#[from] smdebug_core::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
