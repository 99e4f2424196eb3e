//! Reductions computed with libtorch ops on the tensor's device, so that only a few scalars cross
//! to the host when a collection saves reductions and not the tensor itself.
//!
//! The semantics are smdebug-core's ([`Reduction::compute`](smdebug_core::Reduction::compute)):
//! population variance and standard deviation, NaN wins in min and max, empty tensors give NaN
//! for the statistics, 1 for the product and 0 for sums, counts and the zero fraction.

use smdebug_core::{Reduction, ReductionOp};
use tch::{Device, Kind, Tensor};

use crate::error::{Result, TorchContext};

/// Computes `reductions` of `tensor` (named `name` in errors) on its device and copies back only
/// the results (one transfer), in the order asked. Accumulates in `f64` on the CPU and in `f32`
/// on accelerators.
pub fn compute(name: &str, tensor: &Tensor, reductions: &[Reduction]) -> Result<Vec<f64>> {
    let n = tensor.numel();
    if n == 0 {
        return Ok(reductions.iter().map(|r| r.op.empty_value()).collect());
    }
    let acc = if tensor.device() == Device::Cpu {
        Kind::Double
    } else {
        Kind::Float
    };
    let run = || -> std::result::Result<Vec<f64>, tch::TchError> {
        let x = tensor.detach().f_reshape([-1])?.f_to_kind(acc)?;
        let mut abs: Option<Tensor> = None;
        let mut results = Vec::with_capacity(reductions.len());
        for r in reductions {
            let base = if r.abs {
                if abs.is_none() {
                    abs = Some(x.f_abs()?);
                }
                abs.as_ref().unwrap_or(&x)
            } else {
                &x
            };
            let value = match r.op {
                ReductionOp::Min => base.f_min()?,
                ReductionOp::Max => base.f_max()?,
                ReductionOp::Mean => base.f_mean(acc)?,
                ReductionOp::Sum => base.f_sum(acc)?,
                ReductionOp::Prod => base.f_prod(acc)?,
                ReductionOp::Variance => base.f_var(false)?,
                ReductionOp::Std => base.f_std(false)?,
                ReductionOp::L1 => base.f_abs()?.f_sum(acc)?,
                ReductionOp::L2 => base.f_square()?.f_sum(acc)?.f_sqrt()?,
                ReductionOp::NanCount => base.f_isnan()?.f_sum(acc)?,
                ReductionOp::InfCount => base.f_isinf()?.f_sum(acc)?,
                ReductionOp::ZeroFraction => base.f_eq(0.0)?.f_sum(acc)?.f_div_scalar(n as f64)?,
            };
            results.push(value);
        }
        let host = Tensor::f_stack(&results, 0)?
            .f_to_kind(Kind::Double)?
            .f_to_device(Device::Cpu)?;
        let mut values = vec![0f64; results.len()];
        host.f_copy_data(&mut values, results.len())?;
        Ok(values)
    };
    run().context(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use smdebug_core::TensorView;

    fn every_reduction() -> Vec<Reduction> {
        ReductionOp::ALL
            .into_iter()
            .flat_map(|op| [Reduction::new(op), Reduction::abs(op)])
            .collect()
    }

    fn assert_same(got: f64, want: f64, what: &str) {
        if want.is_nan() {
            assert!(got.is_nan(), "{what}: {got} vs NaN");
        } else if want.is_infinite() {
            assert_eq!(got, want, "{what}");
        } else {
            let tol = 1e-9 * want.abs().max(1.0);
            assert!((got - want).abs() <= tol, "{what}: {got} vs {want}");
        }
    }

    #[test]
    fn finite_and_integer_tensors_reduce_like_the_host() {
        let values: Vec<f64> = (0..50).map(|i| (i as f64 - 20.0) * 0.37).collect();
        let t = Tensor::from_slice(&values).f_reshape([5, 10]).unwrap();
        let host = TensorView::from_slice(&values, &[5, 10]).unwrap();
        let rs = every_reduction();
        for (r, g) in rs.iter().zip(compute("f", &t, &rs).unwrap()) {
            assert_same(g, r.compute(&host), &format!("f64 {r}"));
        }
        let ints: Vec<i64> = (0..12).map(|i| i * i - 30).collect();
        let t = Tensor::from_slice(&ints);
        let host = TensorView::from_slice(&ints, &[12]).unwrap();
        for (r, g) in rs.iter().zip(compute("i", &t, &rs).unwrap()) {
            assert_same(g, r.compute(&host), &format!("i64 {r}"));
        }
    }
}
