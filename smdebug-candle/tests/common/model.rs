//! The model the tests and the example train: a 64-32-10 MLP on the 8x8 digits set, with the
//! ReLU wrapped so that its output is recorded.

use candle_core::{D, DType, Device, Module, Result, Tensor};
use candle_nn::{Activation, Linear, VarBuilder, VarMap};
use smdebug_candle::{CandleHook, Recorded};
use smdebug_examples::digits::{Digits, default_path};
use smdebug_examples::mlp::Rng;

/// The digits as candle tensors: images `(n, 64)` in the model's dtype, labels `(n,)` u32.
pub struct DigitsTensors {
    pub train_x: Tensor,
    pub train_y: Tensor,
    pub test_x: Tensor,
    pub test_y: Tensor,
}

impl DigitsTensors {
    pub fn load(dtype: DType, dev: &Device) -> Result<DigitsTensors> {
        let all = Digits::load(&default_path()).map_err(candle_core::Error::wrap)?;
        let (train, test) = all.split(0.2, 7);
        let to_tensors = |d: &Digits| -> Result<(Tensor, Tensor)> {
            let pixels: Vec<f32> = d.images.iter().copied().collect();
            let x = Tensor::from_vec(pixels, (d.len(), 64), dev)?.to_dtype(dtype)?;
            let labels: Vec<u32> = d.labels.iter().map(|&l| l as u32).collect();
            let y = Tensor::from_vec(labels, d.len(), dev)?;
            Ok((x, y))
        };
        let (train_x, train_y) = to_tensors(&train)?;
        let (test_x, test_y) = to_tensors(&test)?;
        Ok(DigitsTensors {
            train_x,
            train_y,
            test_x,
            test_y,
        })
    }

    /// Shuffled mini-batches of the training rows, `count` of them, as index tensors.
    pub fn train_batches(&self, batch: usize, count: usize, seed: u64) -> Result<Vec<Tensor>> {
        let n = self.train_y.dim(0)?;
        let mut rng = Rng::new(seed);
        let mut out = Vec::with_capacity(count);
        let mut order: Vec<usize> = Vec::new();
        while out.len() < count {
            if order.len() < batch {
                order = rng.permutation(n);
            }
            let idx: Vec<u32> = order.drain(..batch).map(|i| i as u32).collect();
            out.push(Tensor::new(idx, self.train_x.device())?);
        }
        Ok(out)
    }
}

pub struct Mlp {
    pub fc1: Linear,
    pub relu1: Recorded<Activation>,
    pub fc2: Linear,
}

impl Mlp {
    pub fn new(vb: VarBuilder, hook: &mut CandleHook) -> Result<Mlp> {
        Ok(Mlp {
            fc1: candle_nn::linear(64, 32, vb.pp("fc1"))?,
            relu1: hook.wrap("relu1", Activation::Relu),
            fc2: candle_nn::linear(32, 10, vb.pp("fc2"))?,
        })
    }

    /// The hidden activation (relu1's output) and the logits.
    pub fn forward(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        let hidden = self.relu1.forward(&self.fc1.forward(x)?)?;
        let logits = self.fc2.forward(&hidden)?;
        Ok((hidden, logits))
    }
}

/// Cross-entropy computed in f32 whatever the model's dtype, so half-precision runs stay finite.
pub fn loss(logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
    candle_nn::loss::cross_entropy(&logits.to_dtype(DType::F32)?, labels)
}

pub fn accuracy(logits: &Tensor, labels: &Tensor) -> Result<f64> {
    let hits = logits
        .argmax(D::Minus1)?
        .eq(labels)?
        .to_dtype(DType::F32)?
        .sum_all()?
        .to_scalar::<f32>()?;
    Ok(f64::from(hits) / labels.dim(0)? as f64)
}

/// A fresh parameter store and builder in `dtype`.
pub fn varmap(dtype: DType, dev: &Device) -> (VarMap, VarBuilder<'static>) {
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, dtype, dev);
    (varmap, vb)
}

/// Draws every variable of `varmap` again from a generator seeded with `seed`, so that a run
/// trains the same way each time (candle's CPU generator cannot be seeded: `set_seed` fails).
/// Each variable is drawn as candle_nn initialized it, from its name and shape alone (never
/// from the unseeded values): a constant one (layer norms' ones and zeros) stays; a `bias` is
/// uniform within ±1/√fan_in of its layer's `weight` (`candle_nn::linear`, `conv2d`); a
/// `position.weight` is normal with standard deviation 0.1 (the transformer's); any other
/// `weight` Kaiming-normal for ReLU, √2/√fan_in. Variables are drawn in name order.
#[allow(dead_code)] // not every binary that includes this module seeds
pub fn reseed(varmap: &VarMap, seed: u64) -> Result<()> {
    let vars = varmap.data().lock().expect("the variable map's lock");
    let mut names: Vec<&String> = vars.keys().collect();
    names.sort();
    let fan_in = |name: &str| -> Option<f64> {
        let dims = vars.get(name)?.as_tensor().dims().to_vec();
        let out = *dims.first()?;
        Some((dims.iter().product::<usize>() / out.max(1)) as f64)
    };
    let mut rng = Rng::new(seed);
    for name in names {
        let var = &vars[name];
        let t = var.as_tensor();
        let values: Vec<f32> = t.flatten_all()?.to_dtype(DType::F32)?.to_vec1()?;
        if values.iter().all(|&v| v == values[0]) {
            continue;
        }
        let draw: Box<dyn Fn(&mut Rng) -> f64> = if let Some(layer) = name.strip_suffix("bias") {
            let bound = 1.0 / fan_in(&format!("{layer}weight")).unwrap_or(1.0).sqrt();
            Box::new(move |r: &mut Rng| (2.0 * f64::from(r.uniform()) - 1.0) * bound)
        } else if name.ends_with("position.weight") {
            Box::new(|r: &mut Rng| 0.1 * f64::from(r.normal()))
        } else {
            let std = 2f64.sqrt() / fan_in(name).unwrap_or(1.0).sqrt();
            Box::new(move |r: &mut Rng| std * f64::from(r.normal()))
        };
        let drawn: Vec<f32> = (0..values.len()).map(|_| draw(&mut rng) as f32).collect();
        let fresh = Tensor::from_vec(drawn, t.shape(), t.device())?.to_dtype(t.dtype())?;
        var.set(&fresh)?;
    }
    Ok(())
}
