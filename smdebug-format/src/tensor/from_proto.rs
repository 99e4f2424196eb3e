//! A `TensorProto` into a [`Tensor`]: its content or its typed value fields, checked against
//! the budget before anything is allocated.

use half::{bf16, f16};
use smdebug_core::{DType, Tensor};

use crate::proto::TensorProto;

use super::error::DecodeError;
use super::event::is_string_dtype;
use crate::budget::Budget;

/// `n` elements from typed values, little-endian, filled the way TensorFlow does: a shorter list
/// repeats its last value, an empty list means zeros. Written straight into the value's bytes:
/// nothing wider than the stored dtype is allocated (a `uint8` value stored in `int_val` is
/// never held as 4-byte integers).
fn fill_le<T: Copy + Default, const W: usize>(
    vals: &[T],
    n: usize,
    to: impl Fn(T) -> [u8; W],
) -> Result<Vec<u8>, String> {
    if vals.len() > n {
        return Err(format!("{} values for {n} elements", vals.len()));
    }
    let mut out = Vec::with_capacity(n * W);
    for &v in vals {
        out.extend_from_slice(&to(v));
    }
    let last = to(vals.last().copied().unwrap_or_default());
    if W == 1 {
        out.resize(n, last[0]);
    } else {
        for _ in vals.len()..n {
            out.extend_from_slice(&last);
        }
    }
    Ok(out)
}

/// Converts a `TensorProto` (raw `tensor_content` or TensorFlow's typed value fields) into a
/// [`Tensor`], refusing a shape whose read costs more than `budget` (checked before anything
/// is allocated).
pub fn tensor_from_proto(
    proto: TensorProto,
    budget: impl Into<Budget>,
) -> Result<Tensor, DecodeError> {
    tensor_from_proto_tagged(proto, "", budget.into())
}

fn tensor_from_proto_tagged(
    mut proto: TensorProto,
    tag: &str,
    budget: Budget,
) -> Result<Tensor, DecodeError> {
    let shape_proto = proto.tensor_shape.take().unwrap_or_default();
    let dims: Vec<i64> = shape_proto.dim.iter().map(|d| d.size).collect();
    let (dtype, shape, n) = checked_layout(
        proto.dtype,
        !proto.string_val.is_empty(),
        shape_proto.unknown_rank,
        &dims,
        tag,
        budget,
    )?;
    let data = if !proto.tensor_content.is_empty() || n == 0 {
        std::mem::take(&mut proto.tensor_content)
    } else {
        typed_values(dtype, &proto, n).map_err(|r| named(tag, r))?
    };
    check_content_len(tag, data.len(), n, dtype, &shape)?;
    Tensor::from_bytes(dtype, shape, data).map_err(|e| named(tag, e.to_string()))
}

/// The dtype, shape and element count a tensor's header claims, checked: a numeric dtype
/// (strings are [`DecodeError::Strings`]), a known rank, non-negative dimensions,
/// and no more than the budget: the decoded value and what the reader makes of it (checked
/// before anything is allocated).
pub(super) fn checked_layout(
    tf_dtype: i32,
    has_strings: bool,
    unknown_rank: bool,
    dims: &[i64],
    tag: &str,
    budget: Budget,
) -> Result<(DType, Vec<usize>, usize), DecodeError> {
    let dtype = DType::from_tf_datatype(tf_dtype).ok_or_else(|| {
        if is_string_dtype(tf_dtype, has_strings) {
            DecodeError::Strings {
                tag: tag.to_string(),
            }
        } else {
            named(tag, format!("unsupported TensorFlow dtype {tf_dtype}"))
        }
    })?;
    if unknown_rank {
        return Err(named(tag, "the tensor's rank is unknown".to_string()));
    }
    if let Some(d) = dims.iter().find(|&&d| d < 0) {
        return Err(named(tag, format!("bad dimension {d}")));
    }
    // Non-negative from here: each dimension is its own u64.
    let stored = claimed_bytes(dims, dtype);
    let claimed = budget.cost(dtype, stored / dtype.size() as u128);
    // No allocation can exceed isize::MAX bytes, whatever the budget says.
    if stored > isize::MAX as u128 || claimed > u128::from(budget.limit) {
        return Err(DecodeError::TooLarge {
            tag: tag.to_string(),
            detail: budget.detail(dtype, dims),
            claimed,
            limit: budget.limit,
        });
    }
    // An empty tensor claims no bytes, but ndarray still needs the product of its non-zero
    // dimensions to fit in isize.
    let extent = dims
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1u128, |acc, &d| acc.checked_mul(d as u128));
    if extent.is_none_or(|e| e > isize::MAX as u128) {
        return Err(named(
            tag,
            format!("shape {dims:?} has more elements than memory can address"),
        ));
    }
    let shape = dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| named(tag, format!("bad dimension {d}"))))
        .collect::<Result<Vec<usize>, DecodeError>>()?;
    // `stored` fits in isize, and so does the element count.
    let n = (stored / dtype.size() as u128) as usize;
    Ok((dtype, shape, n))
}

/// Bytes a tensor of `dims` and `dtype` takes, saturating at `u128::MAX` (which no budget
/// allows). A zero dimension makes it empty whatever the others say.
fn claimed_bytes(dims: &[i64], dtype: DType) -> u128 {
    if dims.contains(&0) {
        return 0;
    }
    dims.iter()
        .try_fold(dtype.size() as u128, |acc, &d| {
            acc.checked_mul(u128::try_from(d).ok()?)
        })
        .unwrap_or(u128::MAX)
}

pub(super) fn typed_values(dtype: DType, p: &TensorProto, n: usize) -> Result<Vec<u8>, String> {
    match dtype {
        DType::F32 => fill_le(&p.float_val, n, f32::to_le_bytes),
        DType::F64 => fill_le(&p.double_val, n, f64::to_le_bytes),
        DType::F16 => fill_le(&p.half_val, n, |v| f16::from_bits(v as u16).to_le_bytes()),
        DType::BF16 => fill_le(&p.half_val, n, |v| bf16::from_bits(v as u16).to_le_bytes()),
        DType::I32 => fill_le(&p.int_val, n, i32::to_le_bytes),
        DType::I16 => fill_le(&p.int_val, n, |v| (v as i16).to_le_bytes()),
        DType::I8 => fill_le(&p.int_val, n, |v| (v as i8).to_le_bytes()),
        DType::U16 => fill_le(&p.int_val, n, |v| (v as u16).to_le_bytes()),
        DType::U8 => fill_le(&p.int_val, n, |v| (v as u8).to_le_bytes()),
        DType::I64 => fill_le(&p.int64_val, n, i64::to_le_bytes),
        DType::U32 => fill_le(&p.uint32_val, n, u32::to_le_bytes),
        DType::U64 => fill_le(&p.uint64_val, n, u64::to_le_bytes),
        DType::Bool => fill_le(&p.bool_val, n, |v| [u8::from(v)]),
    }
}

/// A tensor's content must be exactly its `n` elements of `dtype`.
pub(super) fn check_content_len(
    tag: &str,
    len: usize,
    n: usize,
    dtype: DType,
    shape: &[usize],
) -> Result<(), DecodeError> {
    if len == n * dtype.size() {
        return Ok(());
    }
    let expected = n * dtype.size();
    Err(named(
        tag,
        format!("{len} content bytes for shape {shape:?} of {dtype} (expected {expected})"),
    ))
}

pub(super) fn named(tag: &str, reason: String) -> DecodeError {
    if tag.is_empty() {
        reason.into()
    } else {
        format!("tensor `{tag}`: {reason}").into()
    }
}
