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

/// The host's value of a reduction of an empty tensor.
pub(crate) fn empty_value(op: ReductionOp) -> f64 {
    match op {
        ReductionOp::Min
        | ReductionOp::Max
        | ReductionOp::Mean
        | ReductionOp::Std
        | ReductionOp::Variance => f64::NAN,
        ReductionOp::Prod => 1.0,
        ReductionOp::Sum
        | ReductionOp::L1
        | ReductionOp::L2
        | ReductionOp::NanCount
        | ReductionOp::InfCount
        | ReductionOp::ZeroFraction => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, TensorData};
    use smdebug_core::TensorView;

    // burn 0.22 deprecates the ndarray backend in favour of `flex`; the tests use ndarray, the
    // CPU backend the workspace builds (the adapter itself is backend-free).
    #[allow(deprecated)]
    fn ndarray_device() -> Device {
        Device::ndarray()
    }

    fn every_device_reduction() -> Vec<Reduction> {
        ReductionOp::ALL
            .into_iter()
            .filter(|op| *op != ReductionOp::Prod)
            .flat_map(|op| [Reduction::new(op), Reduction::abs(op)])
            .collect()
    }

    fn device_values(values: &[f32], reductions: &[Reduction]) -> Vec<f64> {
        let x: Tensor<1> = Tensor::from_data(
            TensorData::new(values.to_vec(), [values.len()]),
            &ndarray_device(),
        );
        let data = on_device_tensor(x, reductions).into_data();
        finish(data.iter::<f64>().collect(), reductions)
    }

    #[test]
    fn device_reductions_equal_the_host_ones_with_nan_inf_and_zeros() {
        let values = [1.5f32, -2.0, 0.0, f32::NAN, f32::INFINITY, -3.25, 0.0];
        let host = TensorView::from_slice(&values, &[values.len()]).unwrap();
        let rs = every_device_reduction();
        for (r, got) in rs.iter().zip(device_values(&values, &rs)) {
            let want = r.compute(&host);
            if want.is_nan() {
                assert!(got.is_nan(), "{r}: {got} vs NaN");
            } else {
                // Computed in f32 on the device.
                assert!(
                    (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                    "{r}: {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn device_reductions_of_finite_values_match_to_f32_precision() {
        let values: Vec<f32> = (0..500)
            .map(|i| ((i * 37) % 101) as f32 * 0.25 - 12.0)
            .collect();
        let host = TensorView::from_slice(&values, &[values.len()]).unwrap();
        let rs = every_device_reduction();
        for (r, got) in rs.iter().zip(device_values(&values, &rs)) {
            let want = r.compute(&host);
            assert!(
                (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                "{r}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn empty_tensors_and_products_are_left_to_known_values_and_the_host() {
        let empty: [f32; 0] = [];
        let host = TensorView::from_slice(&empty, &[0]).unwrap();
        for op in ReductionOp::ALL {
            let want = Reduction::new(op).compute(&host);
            let got = empty_value(op);
            assert!(got == want || (got.is_nan() && want.is_nan()), "{op:?}");
        }
        assert!(!on_device(&[Reduction::new(ReductionOp::Prod)]));
        assert!(on_device(&[Reduction::abs(ReductionOp::L2)]));
    }
}
