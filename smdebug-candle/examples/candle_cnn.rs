//! Trains a small convolutional network with candle on the digits resampled to 28×28, in an
//! smdebug session: tensors, framework spans (per module in a detailed window), a code profile,
//! system metrics, rules in the process and the profiling report, with no timing code in the loop.
//! `--overhead` measures what capture alone costs on a step of realistic length.
//!
//! ```sh
//! cargo run --release -p smdebug-candle --example candle_cnn            # train, write the run
//! cargo run --release -p smdebug-candle --example candle_cnn -- --out s3://bucket/cnn
//! cargo run --release -p smdebug-candle --example candle_cnn -- --overhead [--rounds N]
//! cargo run --release -p smdebug-candle --example candle_cnn -- --one bare|unselected [--steps N]
//! ```
//!
//! The network (`common/cnn.rs`): conv 5×5 (1→16) → ReLU → max-pool 2 → conv 5×5 (16→32) → ReLU
//! → max-pool 2 → linear (512→10), 18.4k parameters, batch 32. The images are the 8×8 digits set
//! resampled to 28×28 with a random rotation and shift (the demo's input pipeline), so a step does
//! the work of an MNIST-sized LeNet. The weights are drawn from a seeded generator (candle's own
//! cannot be seeded) and the pipeline is seeded, so every run trains the same model. The run
//! goes to `target/smdebug-candle/cnn-run` (or `--out`, a directory or an object-store URL).
//!
//! `--overhead` times the loop without a hook; with the model registered whole (every layer's
//! input and output a capture point) and weights, gradients, the layers' tensors, the loss and
//! its inputs recorded every step and every 100th step through the writer (block mode: nothing
//! is dropped, every tensor is paid for) into `$TMPDIR`; every step into a sink that drops
//! records (the adapter's own cost); and with every layer registered and none of their tensors
//! selected. The variants alternate within each round. What a whole session costs is
//! measured by the `session_cost` example.

use std::time::Instant;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Optimizer, SGD, VarBuilder, VarMap};
use smdebug::prelude::*;
use smdebug_candle::CandleHook;
use smdebug_core::Hook;
use smdebug_examples::digits::AugmentedDigits;
use smdebug_examples::overhead::{
    Discard, One, cnn_session, losses_only, number_arg, one_arg, run_location,
};
use smdebug_io::writer::{OverflowPolicy, Writer};

#[path = "common/cnn.rs"]
mod cnn;
#[allow(dead_code)] // its reseed only
#[path = "../tests/common/model.rs"]
mod model;
use cnn::{BATCH, Cnn, SIDE};

type BoxError = Box<dyn std::error::Error>;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--overhead") {
        let rounds = number_arg(&args, "--rounds", 7)?;
        return overhead(rounds);
    }
    if let Some(one) = one_arg(&args)? {
        return one_variant(one, number_arg(&args, "--steps", 20)?);
    }
    let out = run_location(&args, "smdebug-candle/cnn-run")?;
    let mut session = cnn_session(
        &out,
        &args,
        &[
            "StepOutlier",
            "Dataloader",
            "LowGPUUtilization",
            "ProfilerReport",
        ],
    )
    .candle()
    .start()?;
    // SageMaker's hook file (its `LocalPath`) may have put the run elsewhere.
    let out = session.location().to_string();
    let mut data = AugmentedDigits::load(SIDE)?;
    let (test_x, test_y) = cnn::tensors(data.test())?;
    let vm = VarMap::new();
    // The model registered whole: each layer's input and output is recorded when due (DeadRelu
    // asks for the ReLU outputs, the `outputs` collection below for every layer's output), and
    // each layer is a span of its own in the detailed window; its forward pass is the step's.
    // Seeded (the data pipeline is too), so every run trains the same model.
    let model = Cnn::new(VarBuilder::from_varmap(&vm, DType::F32, &Device::Cpu))?;
    model::reseed(&vm, cnn::SEED)?;
    let model = model.register(session.hook())?;
    let mut sgd = SGD::new(vm.all_vars(), 0.05)?;
    let steps_per_epoch = data.train_len() / BATCH;
    'training: for epoch in 0..4u64 {
        session.set_mode(Mode::Train)?;
        let batches = (0..steps_per_epoch).map(|_| cnn::tensors(data.batch(BATCH)));
        for batch in session.data(batches) {
            let (x, y) = batch?;
            let logits = model.forward(&x)?;
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
            session.optimizer(|| sgd.step(&grads))?;
            if session.step()?.stop_requested() {
                break 'training; // a rule fired, or someone pressed Stop
            }
        }
        session.set_mode(Mode::Eval)?;
        let logits = model.forward(&test_x)?;
        let loss = candle_nn::loss::cross_entropy(&logits, &test_y)?;
        let acc = cnn::accuracy(&logits, &test_y)?;
        session.hook().save_loss("loss", &loss)?;
        // The loss's inputs on held-out data (`loss.predictions`, `loss.labels`): what
        // ClassImbalance and Confusion judge the model by.
        session.hook().save_loss_inputs("loss", &logits, &test_y)?;
        session.hook().save_metric("accuracy", acc);
        session.step()?;
        println!(
            "epoch {epoch}: eval loss {:.4}, accuracy {acc:.3}",
            loss.to_scalar::<f32>()?
        );
    }
    let summary = session.finish()?;
    print!("{summary}");
    println!("read it with `cargo run -q -p smdebug-cli -- info {out}`");
    Ok(())
}

/// Times `steps` training steps on pre-made batches, recording weights, gradients and the loss
/// through `hook` (none without one), the model registered whole with the hook when there is
/// one. Returns seconds per step, closing the hook included.
fn timed_loop(batches: &[(Tensor, Tensor)], mut hook: Option<CandleHook>) -> Result<f64, BoxError> {
    let vm = VarMap::new();
    let cnn = Cnn::new(VarBuilder::from_varmap(&vm, DType::F32, &Device::Cpu))?;
    let model: Box<dyn Module> = match hook.as_mut() {
        Some(h) => Box::new(cnn.register(h)?),
        None => Box::new(cnn),
    };
    let mut sgd = SGD::new(vm.all_vars(), 0.05)?;
    if let Some(h) = hook.as_mut() {
        h.set_mode(Mode::Train)?;
    }
    let start = Instant::now();
    for (x, y) in batches {
        let logits = model.forward(x)?;
        let l = candle_nn::loss::cross_entropy(&logits, y)?;
        let grads = l.backward()?;
        if let Some(h) = hook.as_mut() {
            h.save_parameters(&vm)?;
            h.save_gradients(&vm, &grads)?;
            h.save_loss("loss", &l)?;
            h.save_loss_inputs("loss", &logits, y)?;
        }
        sgd.step(&grads)?;
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
    let batches: Vec<(Tensor, Tensor)> = (0..steps)
        .map(|_| cnn::tensors(data.batch(BATCH)))
        .collect::<Result<_, _>>()?;
    let hook = match one {
        One::Bare => None,
        One::Unselected => Some(CandleHook::new(losses_only(), Discard)?),
    };
    let seconds = timed_loop(&batches, hook)?;
    println!("{one:?}: {steps} steps, {:.1} µs a step", seconds * 1e6);
    Ok(())
}

fn overhead(rounds: usize) -> Result<(), BoxError> {
    let mut data = AugmentedDigits::load(SIDE)?;
    let steps = 100;
    let batches: Vec<(Tensor, Tensor)> = (0..steps)
        .map(|_| cnn::tensors(data.batch(BATCH)))
        .collect::<Result<_, _>>()?;
    let dir = std::env::temp_dir().join(format!("smdebug-candle-cnn-{}", std::process::id()));
    let to_disk = |interval: u64, name: String| -> Result<CandleHook, BoxError> {
        let writer = Writer::builder(smdebug_storage::open_storage(
            dir.join(name).to_str().ok_or("path")?,
        )?)
        .overflow(OverflowPolicy::Block)
        .build()?;
        Ok(CandleHook::new(
            Hook::builder().save_config(SaveConfig::every(interval)),
            writer,
        )?)
    };
    timed_loop(&batches[..30], None)?;
    let mut rows: Vec<[f64; 4]> = Vec::new();
    let mut registered: Vec<[f64; 2]> = Vec::new();
    for round in 0..rounds {
        let base = timed_loop(&batches, None)?;
        let every = timed_loop(&batches, Some(to_disk(1, format!("every1-{round}"))?))?;
        let hundredth = timed_loop(&batches, Some(to_disk(100, format!("every100-{round}"))?))?;
        let discard = CandleHook::new(Hook::builder().save_config(SaveConfig::every(1)), Discard)?;
        let adapter = timed_loop(&batches, Some(discard))?;
        rows.push([base, every, hundredth, adapter]);
        // Every layer registered, none of its tensors selected: only the loss is saved.
        let unselected = timed_loop(&batches, Some(CandleHook::new(losses_only(), Discard)?))?;
        registered.push([base, unselected]);
    }
    let _ = std::fs::remove_dir_all(&dir);
    smdebug_examples::overhead::print_table(
        &format!(
            "per step, {steps} steps of batch {BATCH}, 28x28 CNN (18.4k parameters), f32, candle CPU, run files in {}:",
            std::env::temp_dir().display()
        ),
        &rows,
    );
    smdebug_examples::overhead::print_registered(&registered);
    Ok(())
}
