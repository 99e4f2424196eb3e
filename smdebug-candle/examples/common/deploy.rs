//! What the deployment examples (`candle_saliency`, `candle_drift`) share: a small CNN on the
//! native 8×8 digits, initialised from a seeded generator, trained in an smdebug session.
//!
//! Everything is seeded: the weights are drawn by [`seeded_init`] (candle's CPU generator
//! cannot be seeded), the 80/20 split is `Digits::split(0.2, 7)` and the batch order comes from
//! [`SEED`]; two trainings on the same machine give the same weights.

use candle_core::{D, DType, Device, Module, Tensor};
use candle_nn::{AdamW, Conv2d, Conv2dConfig, Linear, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use smdebug::prelude::*;
use smdebug_candle::CandleHook;
use smdebug_examples::digits::{Digits, default_path};
use smdebug_examples::mlp::Rng;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Where an example writes: `--out DIR`, else `target/smdebug-candle/<name>` in the workspace.
pub fn out_dir(name: &str) -> std::result::Result<std::path::PathBuf, BoxError> {
    let mut out = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("the crate sits in the workspace")?
        .join("target/smdebug-candle")
        .join(name);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--out" => out = it.next().ok_or("--out needs a directory")?.into(),
            other => return Err(format!("unknown argument `{other}`; use --out DIR").into()),
        }
    }
    Ok(out)
}
pub type Result<T> = std::result::Result<T, BoxError>;

/// Image side: the digits at their own resolution.
pub const SIDE: usize = 8;
/// Images per training step.
pub const BATCH: usize = 32;
/// Passes over the training images.
pub const EPOCHS: usize = 4;
/// The seed of the weights and of the batch order.
pub const SEED: u64 = 41;
/// Number of classes.
pub const CLASSES: usize = 10;

/// The digits split 80/20 (seed 7, as every example splits them), as candle tensors: images
/// `(n, 1, 8, 8)` in [0, 1] and labels `(n,)` u32.
pub struct Data {
    pub train_x: Tensor,
    pub train_y: Tensor,
    pub test_x: Tensor,
    pub test_y: Tensor,
}

impl Data {
    pub fn load() -> Result<Data> {
        let (train, test) = Digits::load(&default_path())?.split(0.2, 7);
        let to_tensors = |d: &Digits| -> candle_core::Result<(Tensor, Tensor)> {
            let pixels: Vec<f32> = d.images.iter().copied().collect();
            let labels: Vec<u32> = d.labels.iter().map(|&l| l as u32).collect();
            Ok((
                Tensor::from_vec(pixels, (d.len(), 1, SIDE, SIDE), &Device::Cpu)?,
                Tensor::from_vec(labels, d.len(), &Device::Cpu)?,
            ))
        };
        let (train_x, train_y) = to_tensors(&train)?;
        let (test_x, test_y) = to_tensors(&test)?;
        Ok(Data {
            train_x,
            train_y,
            test_x,
            test_y,
        })
    }
}

/// conv 3×3 pad 1 (1→16) → ReLU → conv 3×3 pad 1 (16→32) → ReLU → max-pool 2 → linear
/// (512→10): 9.9k parameters.
pub struct DigitsCnn {
    conv1: Conv2d,
    conv2: Conv2d,
    fc: Linear,
}

impl DigitsCnn {
    pub fn new(vb: VarBuilder) -> candle_core::Result<DigitsCnn> {
        let same = Conv2dConfig {
            padding: 1,
            ..Default::default()
        };
        Ok(DigitsCnn {
            conv1: candle_nn::conv2d(1, 16, 3, same, vb.pp("conv1"))?,
            conv2: candle_nn::conv2d(16, 32, 3, same, vb.pp("conv2"))?,
            fc: candle_nn::linear(32 * (SIDE / 2) * (SIDE / 2), CLASSES, vb.pp("fc"))?,
        })
    }
}

impl Module for DigitsCnn {
    /// Logits `(n, 10)` of images `(n, 1, 8, 8)`.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let x = self.conv1.forward(x)?.relu()?;
        let x = self.conv2.forward(&x)?.relu()?.max_pool2d(2)?;
        self.fc.forward(&x.flatten_from(1)?)
    }
}

/// Sets every variable of `vm` from a generator seeded with `seed`, in name order: PyTorch's
/// default for convolutions and linear layers, uniform in ±1/√fan_in for a weight and for the
/// bias beside it (fan_in: the weight's elements per output unit).
pub fn seeded_init(vm: &VarMap, seed: u64) -> Result<()> {
    let data = vm
        .data()
        .lock()
        .map_err(|_| "the VarMap's lock is poisoned")?;
    let mut names: Vec<&String> = data.keys().collect();
    names.sort();
    let mut rng = Rng::new(seed);
    for name in names {
        let var = &data[name];
        let weight = match name.strip_suffix(".bias") {
            Some(layer) => data
                .get(&format!("{layer}.weight"))
                .ok_or_else(|| format!("{name} has no weight beside it"))?,
            None => var,
        };
        let dims = weight.dims();
        let fan_in = weight.elem_count() / dims.first().copied().unwrap_or(1).max(1);
        let bound = 1.0 / (fan_in.max(1) as f32).sqrt();
        let values: Vec<f32> = (0..var.elem_count())
            .map(|_| (rng.uniform() * 2.0 - 1.0) * bound)
            .collect();
        var.set(&Tensor::from_vec(values, var.dims(), var.device())?)?;
    }
    Ok(())
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

/// The training session both examples start at `location` (a run an earlier start left there is
/// replaced): parameters and gradients every 25th TRAIN step, the loss at every TRAIN step (so
/// that LossNotDecreasing has windows to compare), everything at every EVAL step and nothing at
/// PREDICT steps unless a collection of the example's own asks for it; three debugging rules in
/// the process.
pub fn training_session(location: &str) -> SessionBuilder<CandleHook> {
    Session::builder(location)
        .candle()
        .overwrite(true)
        .save(
            SaveConfig::every(25)
                .with_mode(Mode::Eval, SaveConfigMode::every(1))
                .with_mode(Mode::Predict, SaveConfigMode::never()),
        )
        .collection(Collection::new("losses").with_save_config(
            SaveConfig::every(1).with_mode(Mode::Predict, SaveConfigMode::never()),
        ))
        .rules(["VanishingGradient", "ExplodingTensor", "LossNotDecreasing"])
}

/// A trained model and its parameters.
pub struct Trained {
    pub vm: VarMap,
    pub model: DigitsCnn,
    /// Accuracy on the held-out images after the last epoch.
    pub test_accuracy: f64,
}

/// Trains a fresh, seeded [`DigitsCnn`] for [`EPOCHS`] in `session`: TRAIN steps with the
/// parameters, gradients and loss offered to the hook (saved as the session's save config says),
/// and an EVAL step after each epoch with the held-out loss and accuracy. Returns the model,
/// with the session left in EVAL mode.
pub fn train(session: &mut Session<CandleHook>, data: &Data) -> Result<Trained> {
    let vm = VarMap::new();
    let model = DigitsCnn::new(VarBuilder::from_varmap(&vm, DType::F32, &Device::Cpu))?;
    seeded_init(&vm, SEED)?;
    let mut opt = AdamW::new(
        vm.all_vars(),
        ParamsAdamW {
            lr: 3e-3,
            weight_decay: 1e-4,
            ..Default::default()
        },
    )?;
    let n = data.train_y.dim(0)?;
    let mut rng = Rng::new(SEED);
    let mut test_accuracy = 0.0;
    for epoch in 0..EPOCHS {
        session.set_mode(Mode::Train)?;
        let order = rng.permutation(n);
        for chunk in order.chunks_exact(BATCH) {
            let idx: Vec<u32> = chunk.iter().map(|&i| i as u32).collect();
            let idx = Tensor::new(idx, &Device::Cpu)?;
            let x = data.train_x.index_select(&idx, 0)?;
            let y = data.train_y.index_select(&idx, 0)?;
            let logits = session.forward(|| model.forward(&x))?;
            let loss = candle_nn::loss::cross_entropy(&logits, &y)?;
            let hook = session.hook();
            let grads = hook.backward(&loss)?;
            // Capture problems are reported, never allowed to stop training.
            if let Err(e) = hook
                .save_parameters(&vm)
                .and_then(|_| hook.save_gradients(&vm, &grads))
                .and_then(|_| hook.save_loss("loss", &loss))
            {
                eprintln!("capture: {e}");
            }
            session.optimizer(|| opt.step(&grads))?;
            session.step()?;
        }
        session.set_mode(Mode::Eval)?;
        let logits = session.forward(|| model.forward(&data.test_x))?;
        let loss = candle_nn::loss::cross_entropy(&logits, &data.test_y)?;
        test_accuracy = accuracy(&logits, &data.test_y)?;
        session.hook().save_loss("loss", &loss)?;
        session.hook().save_metric("accuracy", test_accuracy);
        session.step()?;
        println!(
            "epoch {epoch}: held-out loss {:.4}, accuracy {test_accuracy:.3}",
            loss.to_scalar::<f32>()?
        );
    }
    Ok(Trained {
        vm,
        model,
        test_accuracy,
    })
}
