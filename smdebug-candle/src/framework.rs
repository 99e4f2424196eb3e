//! [`Candle`]: what smdebug-core's adapter kit needs to know about candle (`Framework`).

use candle_core::Tensor;
use smdebug_core::Hook;
use smdebug_core::adapter::{Due, Framework, tally};

use crate::error::{CandleContext, Error, Result};
use crate::host::with_host_view;
use crate::reduce;

/// candle, as smdebug-core's adapter kit sees it: tensors are copied off the device once (lent
/// straight from a contiguous CPU tensor's storage), and when a tensor's collections ask only
/// for reductions candle can compute, the reductions run on the device and only the scalars
/// are copied.
#[derive(Debug, Default)]
pub struct Candle;

impl Framework for Candle {
    type Tensor = Tensor;
    type Error = Error;

    fn keep(tensor: &Tensor) -> Tensor {
        // Only the values are needed; a detached handle shares the storage but lets the autograd
        // graph behind the tensor go as soon as the training loop drops it.
        tensor.detach()
    }

    fn scalar(&mut self, name: &str, tensor: &Tensor) -> Result<Option<f64>> {
        if tensor.elem_count() != 1 {
            return Ok(None);
        }
        let value = tensor
            .to_dtype(candle_core::DType::F64)
            .and_then(|l| l.flatten_all())
            .and_then(|l| l.to_vec1::<f64>())
            .context(name)?;
        Ok(value.first().copied())
    }

    fn record(&mut self, hook: &mut Hook, due: Vec<Due<Tensor>>) -> Result<usize> {
        tally(due.into_iter().map(|d| -> Result<bool> {
            if d.due.reductions_only() && reduce::on_device(&d.due.reductions) {
                let values = reduce::compute(&d.name, &d.tensor, &d.due.reductions)?;
                return Ok(hook.save_reduction_values(&d.name, &d.due, &values));
            }
            with_host_view(&d.name, &d.tensor, |view| {
                hook.save_due(&d.name, &d.due, view)
            })
        }))
    }
}
