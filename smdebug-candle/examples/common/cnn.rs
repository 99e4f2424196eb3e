//! The LeNet-sized network of `candle_cnn` and `session_cost`, and the digits as candle tensors.

use candle_core::{D, DType, Device, Module, Tensor};
use candle_nn::{Activation, Conv2d, Linear, VarBuilder};
use smdebug_candle::{CandleHook, Layers};
use smdebug_examples::digits::HostBatch;

/// Image side after resampling the 8×8 digits.
pub const SIDE: usize = 28;
/// Images per training step.
pub const BATCH: usize = 32;
/// The seed `candle_cnn` draws its initial weights from.
#[allow(dead_code)] // candle_cnn's
pub const SEED: u64 = 5;

/// conv 5×5 (1→16) → ReLU → max-pool 2 → conv 5×5 (16→32) → ReLU → max-pool 2 → linear
/// (512→10): 18.4k parameters.
pub struct Cnn {
    conv1: Conv2d,
    conv2: Conv2d,
    fc: Linear,
}

impl Cnn {
    pub fn new(vb: VarBuilder) -> candle_core::Result<Cnn> {
        let cfg = Default::default();
        Ok(Cnn {
            conv1: candle_nn::conv2d(1, 16, 5, cfg, vb.pp("conv1"))?,
            conv2: candle_nn::conv2d(16, 32, 5, cfg, vb.pp("conv2"))?,
            fc: candle_nn::linear(32 * 4 * 4, 10, vb.pp("fc"))?,
        })
    }

    /// The layers, for wrapping each in a module span (`CandleHook::wrap`): conv1, conv2, fc.
    #[allow(dead_code)] // session_cost's; candle_cnn registers the model whole
    pub fn into_layers(self) -> (Conv2d, Conv2d, Linear) {
        (self.conv1, self.conv2, self.fc)
    }

    /// The network registered whole with `hook` (`CandleHook::layers`), each of its eight steps
    /// a named layer whose input and output are capture points: conv1, relu1, pool1, conv2,
    /// relu2, pool2, flatten, fc. Forwards exactly as [`forward`].
    #[allow(dead_code)] // candle_cnn's and the tests'; session_cost wraps the layers
    pub fn register(self, hook: &mut CandleHook) -> smdebug_candle::Result<Layers> {
        hook.layers()
            .layer("conv1", self.conv1)
            .layer("relu1", Activation::Relu)
            .layer("pool1", |x: &Tensor| x.max_pool2d(2))
            .layer("conv2", self.conv2)
            .layer("relu2", Activation::Relu)
            .layer("pool2", |x: &Tensor| x.max_pool2d(2))
            .layer("flatten", |x: &Tensor| x.flatten_from(1))
            .layer("fc", self.fc)
            .build()
    }
}

impl Module for Cnn {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        forward(&self.conv1, &self.conv2, &self.fc, x)
    }
}

/// The network's forward pass over any three layers with its shapes (plain or wrapped).
pub fn forward(
    conv1: &impl Module,
    conv2: &impl Module,
    fc: &impl Module,
    x: &Tensor,
) -> candle_core::Result<Tensor> {
    let x = conv1.forward(x)?.relu()?.max_pool2d(2)?;
    let x = conv2.forward(&x)?.relu()?.max_pool2d(2)?;
    fc.forward(&x.flatten_from(1)?)
}

/// Images `(n, 1, 28, 28)` and labels as candle tensors.
pub fn tensors((x, y): HostBatch) -> candle_core::Result<(Tensor, Tensor)> {
    let n = y.len();
    let labels: Vec<u32> = y.iter().map(|&l| l as u32).collect();
    Ok((
        Tensor::from_vec(x, (n, 1, SIDE, SIDE), &Device::Cpu)?,
        Tensor::from_vec(labels, n, &Device::Cpu)?,
    ))
}

/// The fraction of `labels` the logits' argmax gets right.
pub fn accuracy(logits: &Tensor, labels: &Tensor) -> candle_core::Result<f64> {
    let hits = logits
        .argmax(D::Minus1)?
        .eq(labels)?
        .to_dtype(DType::F32)?
        .sum_all()?
        .to_scalar::<f32>()?;
    Ok(f64::from(hits) / labels.dim(0)? as f64)
}
