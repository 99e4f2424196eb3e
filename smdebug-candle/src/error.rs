//! The one error type of smdebug-candle.

/// Errors from capturing candle tensors. None of them stops training: the hook reports them to
/// the caller and carries on with the next tensor and the next step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A candle operation (a dtype conversion, a reduction, a copy to the host) failed.
    #[error("candle failed on tensor `{tensor}`: {source}")]
    Candle {
        /// The tensor's name.
        tensor: String,
        /// What candle said.
        #[source]
        source: candle_core::Error,
    },
    /// candle's backward pass failed (the loss is not part of a graph of variables, or an
    /// operation on the way back failed).
    #[error("candle's backward pass failed: {source}")]
    Backward {
        /// What candle said.
        #[source]
        source: candle_core::Error,
    },
    /// smdebug-core refused to build the hook or a tensor view.
    #[error("smdebug: {0}")]
    Core(#[from] smdebug_core::Error),
    /// The variable map's lock was poisoned by a panic elsewhere.
    #[error("the VarMap lock is poisoned")]
    PoisonedVarMap,
}

/// The result of a capture call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) trait CandleContext<T> {
    fn context(self, tensor: &str) -> Result<T>;
}

impl<T> CandleContext<T> for candle_core::Result<T> {
    fn context(self, tensor: &str) -> Result<T> {
        self.map_err(|source| Error::Candle {
            tensor: tensor.to_string(),
            source,
        })
    }
}
