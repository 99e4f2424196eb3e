//! [`Tch`]: what smdebug-core's adapter kit needs to know about libtorch (`Framework`).

use smdebug_core::adapter::{Due, Framework, tally};
use smdebug_core::{Hook, TensorView};
use tch::Tensor;

use crate::error::{Result, TorchContext};
use crate::host::to_host;
use crate::reduce;

/// libtorch, as smdebug-core's adapter kit sees it: per tensor, nothing (no libtorch call at all
/// when nothing is due), only reductions (computed on the tensor's device; only the scalars cross
/// to the host), or the tensor itself (copied to the host with the others of the same call: one
/// transfer per element type, not one per tensor).
#[derive(Debug, Default)]
pub struct Tch;

impl Framework for Tch {
    type Tensor = Tensor;
    type Error = crate::Error;

    fn keep(tensor: &Tensor) -> Tensor {
        // Shares the storage (libtorch tensors are reference-counted) without the autograd graph.
        tensor.detach()
    }

    fn scalar(&mut self, name: &str, tensor: &Tensor) -> Result<Option<f64>> {
        if tensor.numel() != 1 {
            return Ok(None);
        }
        tensor
            .f_double_value(&[])
            .or_else(|_| tensor.f_reshape([-1]).and_then(|l| l.f_double_value(&[0])))
            .map(Some)
            .context(name)
    }

    fn record(&mut self, hook: &mut Hook, due: Vec<Due<Tensor>>) -> Result<usize> {
        let mut outcomes = Vec::with_capacity(due.len());
        let mut to_copy = Vec::new();
        let mut plans = Vec::new();
        for Due { name, due, tensor } in due {
            if due.reductions_only() {
                outcomes.push(
                    reduce::compute(&name, &tensor, &due.reductions)
                        .map(|values| hook.save_reduction_values(&name, &due, &values)),
                );
            } else {
                plans.push(due);
                to_copy.push((name, tensor));
            }
        }
        for ((host, (name, _)), due) in to_host(&to_copy).into_iter().zip(&to_copy).zip(&plans) {
            outcomes.push(host.and_then(|h| {
                let view = TensorView::from_bytes(h.dtype, &h.shape, &h.bytes)?;
                Ok(hook.save_due(name, due, &view))
            }));
        }
        tally(outcomes)
    }
}
