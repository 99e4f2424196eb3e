//! Reductions computed on the tensor's device with burn ops; only the results are read back.
//!
//! The semantics are smdebug-core's ([`Reduction::compute`]): population variance and standard
//! deviation, NaN wins in min and max. burn accumulates in the tensor's own float dtype, so the
//! results of `f32` tensors carry `f32` rounding (the host computes in `f64`).

use burn::tensor::Tensor;
use smdebug_core::{Reduction, ReductionOp};

/// Whether burn can compute every one of `reductions` on the device. A product is left to the
/// host: burn's `prod` overflows where smdebug's `f64` product does not.
pub fn on_device(reductions: &[Reduction]) -> bool {
    reductions.iter().all(|r| r.op != ReductionOp::Prod)
}

/// The reductions of a flattened, non-empty float tensor as one device tensor of
/// `reductions.len() + 1` values: the reductions in order, then the NaN count (to let min and
/// max report NaN as the host does).
pub(crate) fn on_device_tensor(x: Tensor<1>, reductions: &[Reduction]) -> Tensor<1> {
    let n = x.dims()[0] as f64;
    let nan_count = x.clone().is_nan().float().sum();
    let abs = x.clone().abs();
    let mut parts: Vec<Tensor<1>> = Vec::with_capacity(reductions.len() + 1);
    for r in reductions {
        let base = if r.abs { abs.clone() } else { x.clone() };
        let value = match r.op {
            ReductionOp::Min => base.min(),
            ReductionOp::Max => base.max(),
            ReductionOp::Mean => base.mean(),
            ReductionOp::Sum => base.sum(),
            ReductionOp::Variance => variance(base),
            ReductionOp::Std => variance(base).sqrt(),
            ReductionOp::L1 => base.abs().sum(),
            ReductionOp::L2 => base.square().sum().sqrt(),
            ReductionOp::NanCount => nan_count.clone(),
            ReductionOp::InfCount => base.is_inf().float().sum(),
            ReductionOp::ZeroFraction => base.equal_elem(0.0).float().sum().div_scalar(n),
            // Never asked for: `on_device` sends products to the host.
            ReductionOp::Prod => base.prod(),
        };
        parts.push(value);
    }
    parts.push(nan_count);
    Tensor::cat(parts, 0)
}

/// Splits what [`on_device_tensor`] computed into the reductions' values.
pub(crate) fn finish(mut values: Vec<f64>, reductions: &[Reduction]) -> Vec<f64> {
    let has_nan = values.pop().is_some_and(|c| c > 0.0);
    for (value, r) in values.iter_mut().zip(reductions) {
        if has_nan && matches!(r.op, ReductionOp::Min | ReductionOp::Max) {
            *value = f64::NAN;
        }
    }
    values
}

/// Population variance, two passes (the mean first) for accuracy.
fn variance(x: Tensor<1>) -> Tensor<1> {
    let n = x.dims()[0];
    let mean = x.clone().mean().expand([n]);
    x.sub(mean).square().mean()
}
