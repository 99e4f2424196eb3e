//! Copies a candle tensor to the host as a [`TensorView`], once.
//!
//! On the CPU a contiguous tensor is lent straight from candle's storage (the hook then makes the
//! one copy the writer needs); elsewhere, or when the layout is strided, candle copies it out.

use candle_core::{DType as CDType, Storage, Tensor, WithDType};
use half::{bf16, f16};
use smdebug_core::{DType, Element, TensorView};

use crate::error::{CandleContext, Result};

/// The smdebug dtype a candle dtype is recorded as. The sub-byte and 8-bit float formats have no
/// smdebug (numpy) counterpart; they are widened to `f32`.
pub fn recorded_dtype(dtype: CDType) -> DType {
    match dtype {
        CDType::U8 => DType::U8,
        CDType::U32 => DType::U32,
        CDType::I16 => DType::I16,
        CDType::I32 => DType::I32,
        CDType::I64 => DType::I64,
        CDType::BF16 => DType::BF16,
        CDType::F16 => DType::F16,
        CDType::F64 => DType::F64,
        _ => DType::F32,
    }
}

/// Calls `f` with a host view of `tensor` (named `name` in errors).
pub(crate) fn with_host_view<R>(
    name: &str,
    tensor: &Tensor,
    f: impl FnOnce(&TensorView<'_>) -> R,
) -> Result<R> {
    match tensor.dtype() {
        CDType::U8 => view_as::<u8, R>(name, tensor, f),
        CDType::U32 => view_as::<u32, R>(name, tensor, f),
        CDType::I16 => view_as::<i16, R>(name, tensor, f),
        CDType::I32 => view_as::<i32, R>(name, tensor, f),
        CDType::I64 => view_as::<i64, R>(name, tensor, f),
        CDType::BF16 => view_as::<bf16, R>(name, tensor, f),
        CDType::F16 => view_as::<f16, R>(name, tensor, f),
        CDType::F32 => view_as::<f32, R>(name, tensor, f),
        CDType::F64 => view_as::<f64, R>(name, tensor, f),
        _ => {
            let wide = tensor.to_dtype(CDType::F32).context(name)?;
            view_as::<f32, R>(name, &wide, f)
        }
    }
}

fn view_as<T: WithDType + Element, R>(
    name: &str,
    tensor: &Tensor,
    f: impl FnOnce(&TensorView<'_>) -> R,
) -> Result<R> {
    let dims = tensor.dims();
    {
        let (storage, layout) = tensor.storage_and_layout();
        if let (Storage::Cpu(cpu), Some((start, end))) = (&*storage, layout.contiguous_offsets()) {
            let all = cpu.as_slice::<T>().context(name)?;
            if let Some(data) = all.get(start..end) {
                let view = TensorView::from_slice(data, dims)?;
                return Ok(f(&view));
            }
        }
    }
    let data: Vec<T> = tensor
        .flatten_all()
        .context(name)?
        .to_vec1()
        .context(name)?;
    let view = TensorView::from_slice(&data, dims)?;
    Ok(f(&view))
}
