//! Element types a captured tensor can have, and how they map to numpy and TensorFlow names.

use serde::{Deserialize, Serialize};

/// The element type of a tensor.
///
/// The set matches what training frameworks hand out (half and brain-float included) and what
/// smdebug's TensorProto can carry. Names follow numpy (`float32`, `int64`, `bool`), which is also
/// what the CLI prints and what Python readers see.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// IEEE half precision (`float16`).
    F16,
    /// bfloat16 (`bfloat16`).
    BF16,
    /// `float32`.
    F32,
    /// `float64`.
    F64,
    /// `int8`.
    I8,
    /// `int16`.
    I16,
    /// `int32`.
    I32,
    /// `int64`.
    I64,
    /// `uint8`.
    U8,
    /// `uint16`.
    U16,
    /// `uint32`.
    U32,
    /// `uint64`.
    U64,
    /// `bool`, one byte per element.
    Bool,
}

impl DType {
    /// Every supported dtype, in a stable order.
    pub const ALL: [DType; 13] = [
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::Bool,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// The numpy name of the dtype (`bfloat16` for brain-float, as ml_dtypes spells it).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::Bool => "bool",
        }
    }

    /// Parses a numpy name (`float32`) or a short name (`f32`).
    pub fn from_name(name: &str) -> Option<DType> {
        let lower = name.to_ascii_lowercase();
        DType::ALL
            .into_iter()
            .find(|d| d.name() == lower || d.short_name() == lower)
    }

    /// Rust-style short name (`f32`, `bf16`, `bool`).
    pub const fn short_name(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::Bool => "bool",
        }
    }

    /// True for the floating-point dtypes (the only ones that can hold NaN or Inf).
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// TensorFlow's `DataType` enum value, as stored in `TensorProto.dtype`.
    pub const fn tf_datatype(self) -> i32 {
        match self {
            DType::F32 => 1,
            DType::F64 => 2,
            DType::I32 => 3,
            DType::U8 => 4,
            DType::I16 => 5,
            DType::I8 => 6,
            DType::I64 => 9,
            DType::Bool => 10,
            DType::BF16 => 14,
            DType::U16 => 17,
            DType::F16 => 19,
            DType::U32 => 22,
            DType::U64 => 23,
        }
    }

    /// The dtype for a TensorFlow `DataType` value, if it is one we support.
    pub fn from_tf_datatype(value: i32) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.tf_datatype() == value)
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_for_every_dtype() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
            assert_eq!(DType::from_name(d.short_name()), Some(d));
            assert_eq!(DType::from_tf_datatype(d.tf_datatype()), Some(d));
        }
        assert_eq!(DType::from_name("complex64"), None);
        assert_eq!(
            DType::from_tf_datatype(7),
            None,
            "DT_STRING is not a numeric dtype"
        );
    }
}
