//! Trains a small convolutional network with burn (ndarray + autodiff) on the digits resampled
//! to 28×28, in an smdebug session (tensors, framework spans, a code profile, system metrics,
//! rules in the process, the report), and measures what capture costs on a step of realistic
//! length.
//!
//! ```sh
//! cargo run --release -p smdebug-burn --example burn_cnn            # train, write the run
//! cargo run --release -p smdebug-burn --example burn_cnn -- --overhead [--rounds N]
//! cargo run --release -p smdebug-burn --example burn_cnn -- --one bare|unselected [--steps N]
//! ```
//!
//! The network: conv 5×5 (1→16) → ReLU → max-pool 2 → conv 5×5 (16→32) → ReLU → max-pool 2 →
//! linear (512→10), 18.4k parameters, batch 32. The images are the 8×8 digits set resampled to
//! 28×28 with a random rotation and shift (the demo's input pipeline), so a step does the work of
//! an MNIST-sized LeNet. The run goes to `target/smdebug-burn/cnn-run` (or `--out`, a
//! directory or an object-store URL).
//!
//! The model is registered whole (`BurnHook::layers`): each module's input and output is a
//! capture point, saved in training every 50th step, and the loss's inputs at each evaluation
//! for ClassImbalance and Confusion.
//!
//! `--overhead` times the loop without a hook; with the model registered whole and weights,
//! gradients, the modules' tensors, the loss and its inputs recorded every step and every 100th
//! step through the writer (block mode: nothing is dropped, every tensor is paid for) into
//! `$TMPDIR`; every step into a sink that drops records (the adapter's own cost); and with every
//! module registered and none of their tensors selected. The variants alternate within each
//! round.

use std::time::Instant;

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::{Device, Int, Tensor, TensorData};
use smdebug::prelude::*;
use smdebug_burn::{BurnHook, Layers};
use smdebug_core::Hook;
use smdebug_examples::digits::{AugmentedDigits, HostBatch};
use smdebug_examples::overhead::{
    Discard, One, cnn_session, losses_only, number_arg, one_arg, run_location,
};
use smdebug_io::writer::{OverflowPolicy, Writer};

type BoxError = Box<dyn std::error::Error>;

const SIDE: usize = 28;
const BATCH: usize = 32;

/// burn 0.22 deprecates the ndarray backend in favour of `flex`; this crate builds ndarray, the
/// CPU backend the workspace already uses.
#[allow(deprecated)]
fn ndarray_autodiff() -> Device {
    Device::ndarray().autodiff()
}

/// Each step of the network a module of its own, so that each is a capture point of its own
/// when the model is registered whole (`BurnHook::layers`).
#[derive(Module, Debug)]
struct Cnn {
    conv1: Conv2d,
    relu1: Relu,
    pool1: MaxPool2d,
    conv2: Conv2d,
    relu2: Relu,
    pool2: MaxPool2d,
    fc: Linear,
}

impl Cnn {
    fn new(device: &Device) -> Cnn {
        let pool = || MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init();
        Cnn {
            conv1: Conv2dConfig::new([1, 16], [5, 5]).init(device),
            relu1: Relu::new(),
            pool1: pool(),
            conv2: Conv2dConfig::new([16, 32], [5, 5]).init(device),
            relu2: Relu::new(),
            pool2: pool(),
            fc: LinearConfig::new(32 * 4 * 4, 10).init(device),
        }
    }

    /// The forward pass, each module's call through the model's registered `layers` when it
    /// has some (its input and output kept when due, its span in the detailed window).
    fn forward(&self, layers: Option<&Layers>, x: Tensor<4>) -> Tensor<2> {
        fn call<const D: usize, const E: usize>(
            layers: Option<&Layers>,
            path: &str,
            x: Tensor<D>,
            f: impl FnOnce(Tensor<D>) -> Tensor<E>,
        ) -> Tensor<E> {
            match layers {
                Some(layers) => layers.forward(path, x, f),
                None => f(x),
            }
        }
        let x = call(layers, "conv1", x, |x| self.conv1.forward(x));
        let x = call(layers, "relu1", x, |x| self.relu1.forward(x));
        let x = call(layers, "pool1", x, |x| self.pool1.forward(x));
        let x = call(layers, "conv2", x, |x| self.conv2.forward(x));
        let x = call(layers, "relu2", x, |x| self.relu2.forward(x));
        let x = call(layers, "pool2", x, |x| self.pool2.forward(x));
        call(layers, "fc", x.flatten(1, 3), |x| self.fc.forward(x))
    }
}

fn loss(logits: Tensor<2>, labels: Tensor<1, Int>) -> Tensor<1> {
    CrossEntropyLossConfig::new()
        .init(&logits.device())
        .forward(logits, labels)
}

fn accuracy(logits: Tensor<2>, labels: Tensor<1, Int>) -> f64 {
    let n = labels.dims()[0];
    let predicted: Tensor<1, Int> = logits.argmax(1).reshape([n]);
    let hits: i64 = predicted.equal(labels).int().sum().into_scalar();
    hits as f64 / n as f64
}

/// Images `(n, 1, 28, 28)` and labels as burn tensors.
fn tensors((x, y): HostBatch, device: &Device) -> (Tensor<4>, Tensor<1, Int>) {
    let n = y.len();
    let x = Tensor::from_data(TensorData::new(x, [n, 1, SIDE, SIDE]), device);
    let labels: Vec<i64> = y.iter().map(|&l| l as i64).collect();
    (x, Tensor::from_data(TensorData::new(labels, [n]), device))
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--overhead") {
        let rounds = number_arg(&args, "--rounds", 5)?;
        return overhead(rounds);
    }
    if let Some(one) = one_arg(&args)? {
        return one_variant(one, number_arg(&args, "--steps", 20)?);
    }
    let out = run_location(&args, "smdebug-burn/cnn-run")?;
    let mut session = cnn_session(
        &out,
        &args,
        &["StepOutlier", "Dataloader", "ProfilerReport"],
    )
    .burn()
    .start()?;
    // SageMaker's hook file (its `LocalPath`) may have put the run elsewhere.
    let out = session.location().to_string();
    let device = ndarray_autodiff();
    let mut data = AugmentedDigits::load(SIDE)?;
    let test = tensors(data.test(), &device);
    let mut model = Cnn::new(&device);
    // Every module of the model registered whole, found by its path (conv1, relu1, ..., fc).
    let layers = session.hook().layers(&model);
    let mut optim = SgdConfig::new().init();
    let steps_per_epoch = data.train_len() / BATCH;
    'training: for epoch in 0..4u64 {
        session.set_mode(Mode::Train)?;
        let batches = (0..steps_per_epoch).map(|_| tensors(data.batch(BATCH), &device));
        for (x, y) in session.data(batches) {
            let l = loss(session.forward(|| model.forward(Some(&layers), x)), y);
            let hook = session.hook();
            let grads = GradientsParams::from_grads(hook.backward(&l), &model);
            // Capture problems are reported, never allowed to stop training.
            if let Err(e) = hook
                .save_parameters(&model)
                .and_then(|_| hook.save_gradients(&model, &grads))
                .and_then(|_| hook.save_loss("loss", &l))
            {
                eprintln!("capture: {e}");
            }
            model = session.optimizer(|| optim.step(0.05, model, grads));
            if session.step()?.stop_requested() {
                break 'training; // a rule fired, or someone pressed Stop
            }
        }
        session.set_mode(Mode::Eval)?;
        let (x, y) = test.clone();
        let logits = session.forward(|| model.forward(Some(&layers), x));
        let l = loss(logits.clone(), y.clone());
        session.hook().save_loss("loss", &l)?;
        // The loss's inputs on held-out data: what ClassImbalance and Confusion judge.
        session.hook().save_loss_inputs("loss", &logits, &y)?;
        let acc = accuracy(logits, y);
        session.hook().save_metric("accuracy", acc);
        session.step()?;
        let value: f32 = l.into_scalar();
        println!("epoch {epoch}: eval loss {value:.4}, accuracy {acc:.3}");
    }
    let summary = session.finish()?;
    print!("{summary}");
    println!("read it with `cargo run -q -p smdebug-cli -- info {out}`");
    Ok(())
}

/// Times training steps on pre-made batches, recording weights, gradients and the loss through
/// `hook` (none without one). Returns seconds per step, closing the hook included. Each step
/// makes its input tensors afresh from host data, as a data loader does.
fn timed_loop(batches: &[HostBatch], mut hook: Option<BurnHook>) -> Result<f64, BoxError> {
    let device = ndarray_autodiff();
    let mut model = Cnn::new(&device);
    // Registered whole with the hook when there is one.
    let layers = hook.as_mut().map(|h| h.layers(&model));
    let mut optim = SgdConfig::new().init();
    if let Some(h) = hook.as_mut() {
        h.set_mode(Mode::Train)?;
    }
    let start = Instant::now();
    for batch in batches {
        let (x, y) = tensors(batch.clone(), &device);
        let logits = model.forward(layers.as_ref(), x);
        let l = loss(logits.clone(), y.clone());
        let grads = GradientsParams::from_grads(l.backward(), &model);
        if let Some(h) = hook.as_mut() {
            h.save_parameters(&model)?;
            h.save_gradients(&model, &grads)?;
            h.save_loss("loss", &l)?;
            h.save_loss_inputs("loss", &logits, &y)?;
        }
        model = optim.step(0.05, model, grads);
        if let Some(h) = hook.as_mut() {
            h.step()?;
        }
    }
    if let Some(mut h) = hook {
        h.close()?;
    }
    Ok(start.elapsed().as_secs_f64() / batches.len() as f64)
}

/// `--one VARIANT --steps N`: the loop once, for instruction counts (see
/// `smdebug_examples::overhead::One`).
fn one_variant(one: One, steps: usize) -> Result<(), BoxError> {
    let mut data = AugmentedDigits::load(SIDE)?;
    let batches: Vec<HostBatch> = (0..steps).map(|_| data.batch(BATCH)).collect();
    let hook = match one {
        One::Bare => None,
        One::Unselected => Some(BurnHook::new(losses_only(), Discard)?),
    };
    let seconds = timed_loop(&batches, hook)?;
    println!("{one:?}: {steps} steps, {:.1} µs a step", seconds * 1e6);
    Ok(())
}

fn overhead(rounds: usize) -> Result<(), BoxError> {
    let mut data = AugmentedDigits::load(SIDE)?;
    let steps = 100;
    let batches: Vec<HostBatch> = (0..steps).map(|_| data.batch(BATCH)).collect();
    let dir = std::env::temp_dir().join(format!("smdebug-burn-cnn-{}", std::process::id()));
    let to_disk = |interval: u64, name: String| -> Result<BurnHook, BoxError> {
        let path = dir.join(name);
        let writer = Writer::builder(smdebug_storage::open_storage(path.to_str().ok_or("path")?)?)
            .overflow(OverflowPolicy::Block)
            .build()?;
        let builder = Hook::builder().save_config(SaveConfig::every(interval));
        Ok(BurnHook::new(builder, writer)?)
    };
    timed_loop(&batches[..10], None)?;
    let mut rows: Vec<[f64; 4]> = Vec::new();
    let mut registered: Vec<[f64; 2]> = Vec::new();
    for round in 0..rounds {
        let base = timed_loop(&batches, None)?;
        let every = timed_loop(&batches, Some(to_disk(1, format!("every1-{round}"))?))?;
        let hundredth = timed_loop(&batches, Some(to_disk(100, format!("every100-{round}"))?))?;
        let discard = BurnHook::new(Hook::builder().save_config(SaveConfig::every(1)), Discard)?;
        let adapter = timed_loop(&batches, Some(discard))?;
        rows.push([base, every, hundredth, adapter]);
        // Every module registered, none of its tensors selected: only the loss is saved.
        let unselected = timed_loop(&batches, Some(BurnHook::new(losses_only(), Discard)?))?;
        registered.push([base, unselected]);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let title = format!(
        "per step, {steps} steps of batch {BATCH}, 28x28 CNN (18.4k parameters), f32, burn ndarray + autodiff, run files in {}:",
        std::env::temp_dir().display()
    );
    smdebug_examples::overhead::print_table(&title, &rows);
    smdebug_examples::overhead::print_registered(&registered);
    Ok(())
}
