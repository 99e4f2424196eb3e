//! A saved value as a read gives it: numbers in their stored dtype, or strings. Both the reads
//! ([`records`](super::records)) and the files that keep values taken out of them
//! ([`source`](super::source)) hold them.

use bytes::Bytes;

use smdebug_core::{DType, StringTensor, Tensor};

/// A saved value in the dtype it was saved in. When the record holds its bytes raw (smdebug
/// always does), `data` is a slice of the event file as read or mapped, not a copy (values of at
/// most 256 bytes are copied instead, so that a kept scalar does not keep its whole file), or,
/// for a value decoded ahead of a value-by-value reader (see
/// [`TrialOptions::read_files_ahead`](super::TrialOptions::read_files_ahead)), bytes of its own,
/// copied out of the file once.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorBytes {
    /// The element type the value was saved in.
    pub dtype: DType,
    /// The dimensions, outermost first (empty for a scalar).
    pub shape: Vec<usize>,
    /// Little-endian, row-major; exactly as many bytes as dtype and shape need (checked).
    pub data: Bytes,
}

impl TensorBytes {
    /// The value as a [`Tensor`] (one copy of the bytes).
    pub fn to_tensor(&self) -> Tensor {
        Tensor::from_bytes(self.dtype, self.shape.clone(), self.data.to_vec())
            .expect("dtype, shape and length were checked when the record was decoded")
    }
}

/// A saved value: numbers (see [`TensorBytes`]), or strings
/// (`DT_STRING`: XGBoost's `trees/*` text columns, any numpy `str` array smdebug saved).
#[derive(Clone, Debug, PartialEq)]
pub enum TensorValue {
    /// A numeric tensor.
    Numbers(TensorBytes),
    /// A string tensor.
    Strings(StringTensor),
}

impl TensorValue {
    /// The bytes the value holds: its numbers, or its strings' bytes.
    pub(crate) fn held_bytes(&self) -> u64 {
        match self {
            TensorValue::Numbers(bytes) => bytes.data.len() as u64,
            TensorValue::Strings(strings) => strings.values().iter().map(|v| v.len() as u64).sum(),
        }
    }

    /// Asks the processor to load the numbers' shape into its cache, ahead of the caller who
    /// takes this value next. A value decoded ahead was made on another thread, long before:
    /// its shape (the one part of it a caller reads, besides what the value holds inline) is
    /// rarely in this core's cache, and a caller that meets the miss when it takes the value
    /// waits ~100 ns a value for it (a tenth of the Python binding's `value(step)`, measured).
    /// A hint only: nothing is read, and elsewhere than on x86-64 it does nothing.
    pub(crate) fn prefetch_shape(&self) {
        #[cfg(target_arch = "x86_64")]
        if let TensorValue::Numbers(bytes) = self {
            let at = bytes.shape.as_ptr().cast::<i8>();
            // SAFETY: a prefetch loads nothing the program sees and never faults, whatever the
            // address (an empty shape's is dangling but never dereferenced).
            #[allow(unsafe_code)]
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at);
            }
        }
    }
}
