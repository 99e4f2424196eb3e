//! Reductions computed on the tensor's device with candle ops, so that only a few scalars cross
//! to the host when a collection saves reductions and not the tensor itself.
//!
//! The semantics are smdebug-core's ([`Reduction::compute`]): population variance and standard
//! deviation, NaN wins in min and max, empty tensors give NaN for the statistics and 0 for sums,
//! counts and the zero fraction.

use candle_core::{DType as CDType, Tensor};
use smdebug_core::{Reduction, ReductionOp};

use crate::error::{CandleContext, Result};

/// Whether candle can compute every one of `reductions` on the device. A product has no candle
/// reduction; a tensor that needs one is copied and reduced on the host instead.
pub fn on_device(reductions: &[Reduction]) -> bool {
    reductions.iter().all(|r| r.op != ReductionOp::Prod)
}

/// Computes `reductions` of `tensor` (named `name` in errors) on its device and copies back only
/// the results, in the order asked. Accumulates in `f64` on the CPU and in `f32` on accelerators
/// (some have no `f64`).
pub fn compute(name: &str, tensor: &Tensor, reductions: &[Reduction]) -> Result<Vec<f64>> {
    let n = tensor.elem_count();
    if n == 0 {
        return Ok(reductions.iter().map(|r| r.op.empty_value()).collect());
    }
    let acc = if tensor.device().is_cpu() {
        CDType::F64
    } else {
        CDType::F32
    };
    let x = tensor
        .detach()
        .flatten_all()
        .and_then(|t| t.to_dtype(acc))
        .context(name)?;
    let mut abs: Option<Tensor> = None;
    let mut nan_count: Option<Tensor> = None;
    let count = |mask: Tensor| mask.to_dtype(acc)?.sum_all();
    let mut results: Vec<Tensor> = Vec::with_capacity(reductions.len() + 1);
    let needs_nan = reductions.iter().any(|r| {
        matches!(
            r.op,
            ReductionOp::Min | ReductionOp::Max | ReductionOp::NanCount | ReductionOp::InfCount
        )
    });
    if needs_nan {
        nan_count = Some(x.ne(&x).and_then(count).context(name)?);
    }
    for r in reductions {
        let base = if r.abs {
            if abs.is_none() {
                abs = Some(x.abs().context(name)?);
            }
            abs.as_ref().unwrap_or(&x)
        } else {
            &x
        };
        let value = match r.op {
            ReductionOp::Min => base.min_all(),
            ReductionOp::Max => base.max_all(),
            ReductionOp::Mean => base.mean_all(),
            ReductionOp::Sum => base.sum_all(),
            ReductionOp::Variance => variance(base),
            ReductionOp::Std => variance(base).and_then(|v| v.sqrt()),
            ReductionOp::L1 => base.abs().and_then(|a| a.sum_all()),
            ReductionOp::L2 => base.sqr().and_then(|s| s.sum_all()).and_then(|s| s.sqrt()),
            ReductionOp::NanCount => Ok(nan_count.clone().unwrap_or(x.zeros_like().context(name)?)),
            // x - x is NaN exactly where x is NaN or infinite.
            ReductionOp::InfCount => base
                .sub(base)
                .and_then(|d| d.ne(&d))
                .and_then(count)
                .and_then(|naninf| match &nan_count {
                    Some(nans) => naninf.sub(nans),
                    None => Ok(naninf),
                }),
            ReductionOp::ZeroFraction => base
                .zeros_like()
                .and_then(|zeros| base.eq(&zeros))
                .and_then(count)
                .and_then(|z| z.affine(1.0 / n as f64, 0.0)),
            ReductionOp::Prod => Err(candle_core::Error::Msg(
                "candle has no product reduction".to_string(),
            )),
        }
        .context(name)?;
        results.push(value);
    }
    if let Some(nans) = &nan_count {
        results.push(nans.clone());
    }
    let mut values: Vec<f64> = Tensor::stack(&results, 0)
        .and_then(|t| t.to_dtype(CDType::F64))
        .and_then(|t| t.to_vec1())
        .context(name)?;
    let has_nan = nan_count.is_some() && values.pop().is_some_and(|c| c > 0.0);
    for (value, r) in values.iter_mut().zip(reductions) {
        if has_nan && matches!(r.op, ReductionOp::Min | ReductionOp::Max) {
            *value = f64::NAN;
        }
    }
    Ok(values)
}

/// Population variance, two passes (the mean first) for accuracy.
fn variance(x: &Tensor) -> candle_core::Result<Tensor> {
    let mean = x.mean_all()?;
    x.broadcast_sub(&mean)?.sqr()?.mean_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_are_left_to_the_host() {
        assert!(!on_device(&[Reduction::new(ReductionOp::Prod)]));
        assert!(on_device(&[Reduction::abs(ReductionOp::L2)]));
    }
}
