//! Turns burn's [`TensorData`] (read back from the device) into smdebug [`TensorView`]s.

use burn::tensor::{BoolStore, DType as BDType, TensorData};
use smdebug_core::{DType, TensorView};

use crate::error::{Error, Result};

/// Where an entry's values land in the transaction's results: elements `offset..offset + len`
/// of result `slot`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Place {
    pub slot: usize,
    pub offset: usize,
    pub len: usize,
}

/// The smdebug dtype a burn dtype is recorded as (`None` for quantized data, which is
/// dequantized to `f32` first).
pub fn recorded_dtype(dtype: BDType) -> Option<DType> {
    Some(match dtype {
        BDType::F64 => DType::F64,
        BDType::F32 | BDType::Flex32 => DType::F32,
        BDType::F16 => DType::F16,
        BDType::BF16 => DType::BF16,
        BDType::I64 => DType::I64,
        BDType::I32 => DType::I32,
        BDType::I16 => DType::I16,
        BDType::I8 => DType::I8,
        BDType::U64 => DType::U64,
        BDType::U32 => DType::U32,
        BDType::U16 => DType::U16,
        BDType::U8 => DType::U8,
        BDType::Bool(BoolStore::Native | BoolStore::U8) => DType::Bool,
        BDType::Bool(BoolStore::U32) => DType::U32,
        BDType::QFloat(_) => return None,
    })
}

/// Calls `f` with a view of the `place` part of `data` (one entry of a read, named `name` in
/// errors) as a tensor of `shape`, borrowing its bytes when the dtype maps directly.
pub(crate) fn with_view<R>(
    name: &str,
    data: &TensorData,
    place: Place,
    shape: &[usize],
    f: impl FnOnce(&TensorView<'_>) -> R,
) -> Result<R> {
    let converted;
    let data = match recorded_dtype(data.dtype()) {
        Some(_) => data,
        None => {
            converted = data.clone().convert::<f32>();
            &converted
        }
    };
    let dtype = recorded_dtype(data.dtype()).ok_or_else(|| Error::UnsupportedDType {
        tensor: name.to_string(),
        dtype: format!("{:?}", data.dtype()),
    })?;
    let size = dtype.size();
    let bytes = data
        .as_bytes()
        .get(place.offset * size..(place.offset + place.len) * size)
        .ok_or_else(|| Error::Read {
            first: name.to_string(),
            count: 1,
            message: format!(
                "the device returned {} bytes, fewer than this tensor's place needs",
                data.as_bytes().len()
            ),
        })?;
    let view = TensorView::from_bytes(dtype, shape, bytes)?;
    Ok(f(&view))
}
