//! The one error type of smdebug-tch.

/// Errors from capturing tch tensors. None of them stops training: the hook reports them to the
/// caller and carries on with the next tensor and the next step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A libtorch operation (a dtype conversion, a reduction, a copy to the host) failed.
    #[error("libtorch failed on tensor `{tensor}`: {source}")]
    Torch {
        /// The tensor's name.
        tensor: String,
        /// What libtorch said.
        #[source]
        source: tch::TchError,
    },
    /// The tensor's element type has no smdebug dtype (complex or quantized tensors).
    #[error("tensor `{tensor}` has element type {kind:?}, which smdebug cannot record")]
    UnsupportedKind {
        /// The tensor's name.
        tensor: String,
        /// Its element type.
        kind: tch::Kind,
    },
    /// libtorch's backward pass failed (the loss needs no gradient, or its graph was freed by an
    /// earlier backward).
    #[error("libtorch's backward pass failed: {source}")]
    Backward {
        /// What libtorch said.
        #[source]
        source: tch::TchError,
    },
    /// smdebug-core refused to build the hook or a tensor view.
    #[error("smdebug: {0}")]
    Core(#[from] smdebug_core::Error),
}

/// The result of a capture call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) trait TorchContext<T> {
    fn context(self, tensor: &str) -> Result<T>;
}

impl<T> TorchContext<T> for std::result::Result<T, tch::TchError> {
    fn context(self, tensor: &str) -> Result<T> {
        self.map_err(|source| Error::Torch {
            tensor: tensor.to_string(),
            source,
        })
    }
}
