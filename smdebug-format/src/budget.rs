//! The allocation budget of one tensor read: the bytes a reader allocates for one value, counted
//! before anything is allocated.
//!
//! A record of a few bytes may claim a tensor of any shape (TensorFlow's typed value fields
//! repeat their last value to fill it), and a reader rarely stops at the decoded value: it
//! converts it to `f64` (8 bytes an element, whatever the stored dtype), to JSON numbers, or
//! copies it into a numpy array. A `uint8` tensor whose stored size is within a 1 GiB budget
//! costs 9 GiB as `f64`. So the budget counts the decoded value *and* what the reader makes of
//! it, per element, from the record's header alone: a read over it is refused before the value
//! is decoded.

use smdebug_core::DType;

/// What a reader makes of a decoded tensor, beyond the decoded value itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Conversion {
    /// Nothing: the value in its own dtype (`TrialTensor::raw`, `raw_bytes`).
    #[default]
    Stored,
    /// Converted to `f64`, 8 bytes an element (`TrialTensor::value`, the rules).
    F64,
    /// Converted to `f64`, then to JSON numbers (the CLI's `value`: a copy of the value, the
    /// `f64`s and one JSON element each, all held at once).
    Json,
    /// Copied into a new array of the dtype's own element size (what `smdebug_rs` does to hand a
    /// value to numpy): `bool` goes through a copy and an array of its own (2 bytes an element),
    /// `bfloat16` through `f64` and `f32` (14), float16 through a copy (2).
    Array,
}

impl Conversion {
    /// Bytes a reader allocates per element of `dtype` beyond the decoded value.
    pub fn extra_bytes(self, dtype: DType) -> u64 {
        let own = dtype.size() as u64;
        match self {
            Conversion::Stored => 0,
            Conversion::F64 => 8,
            Conversion::Json => own + 8 + JSON_ELEMENT_BYTES,
            Conversion::Array => match dtype {
                DType::Bool => 2,
                DType::BF16 => 2 + 8 + 4,
                _ => own,
            },
        }
    }

    /// What the conversion is, for an error message.
    fn describe(self) -> &'static str {
        match self {
            Conversion::Stored => "decoded",
            Conversion::F64 => "decoded and converted to f64",
            Conversion::Json => "decoded and converted to JSON numbers",
            Conversion::Array => "decoded and copied into an array",
        }
    }
}

/// Bytes of one JSON element of the CLI's output (`trial::JsonElement`), counted generously.
const JSON_ELEMENT_BYTES: u64 = 32;

/// The most bytes one read may allocate for one tensor, and what the reader makes of the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The limit, in bytes (`TrialOptions::max_tensor_bytes`).
    pub limit: u64,
    /// What the reader does with the value after decoding it.
    pub conversion: Conversion,
}

impl Budget {
    /// A budget of `limit` bytes for a read that converts the value as `conversion` says.
    pub fn new(limit: u64, conversion: Conversion) -> Budget {
        Budget { limit, conversion }
    }

    /// Bytes a read of `elements` elements of `dtype` allocates: the decoded value and its
    /// conversion, saturating.
    pub fn cost(&self, dtype: DType, elements: u128) -> u128 {
        elements.saturating_mul(u128::from(
            dtype.size() as u64 + self.conversion.extra_bytes(dtype),
        ))
    }

    /// The description of a claim for [`super::tensor::DecodeError::TooLarge`]: the dtype, the
    /// shape and, when the reader converts the value, how many bytes each element costs.
    pub fn detail(&self, dtype: DType, dims: &[i64]) -> String {
        let extra = self.conversion.extra_bytes(dtype);
        if extra == 0 {
            format!("{dtype}, shape {dims:?}")
        } else {
            format!(
                "{dtype}, shape {dims:?}, {} {}: {} bytes an element",
                self.conversion.describe(),
                if self.conversion == Conversion::Json {
                    "(a copy, f64 and a JSON element each)"
                } else {
                    "by the reader"
                },
                dtype.size() as u64 + extra
            )
        }
    }
}

impl From<u64> for Budget {
    /// A budget for the decoded value alone.
    fn from(limit: u64) -> Budget {
        Budget::new(limit, Conversion::Stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversion_counts_every_buffer_held_at_once() {
        let f64s = Budget::new(1 << 30, Conversion::F64);
        // 2^30 uint8 values: 1 GiB stored, 9 GiB with their f64 copies.
        assert_eq!(f64s.cost(DType::U8, 1 << 30), 9 << 30);
        assert_eq!(Budget::from(1 << 30).cost(DType::U8, 1 << 30), 1 << 30);
        let array = Budget::new(1 << 30, Conversion::Array);
        assert_eq!(array.cost(DType::Bool, 10), 30);
        assert_eq!(array.cost(DType::F32, 10), 80);
        assert_eq!(array.cost(DType::BF16, 10), 160);
        assert_eq!(f64s.cost(DType::F64, u128::MAX), u128::MAX, "saturates");
        assert!(
            f64s.detail(DType::U8, &[4])
                .contains("converted to f64 by the reader: 9 bytes an element")
        );
        assert_eq!(Budget::from(1).detail(DType::U8, &[4]), "uint8, shape [4]");
    }
}
