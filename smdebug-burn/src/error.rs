//! The one error type of smdebug-burn.

/// Errors from capturing burn tensors. None of them stops training: the hook reports them to the
/// caller and carries on with the next step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading tensors back from the device failed (burn's `Transaction`).
    #[error("reading {count} tensor(s) from the device failed (first: `{first}`): {message}")]
    Read {
        /// The name of the first tensor of the read.
        first: String,
        /// How many reads the transaction held.
        count: usize,
        /// What burn said.
        message: String,
    },
    /// The device handed back data of a dtype smdebug cannot record.
    #[error("tensor `{tensor}` has dtype {dtype}, which smdebug cannot record")]
    UnsupportedDType {
        /// The tensor's name.
        tensor: String,
        /// burn's name for the dtype.
        dtype: String,
    },
    /// smdebug-core refused to build the hook or a tensor view.
    #[error("smdebug: {0}")]
    Core(#[from] smdebug_core::Error),
}

/// The result of a capture call.
pub type Result<T, E = Error> = std::result::Result<T, E>;
