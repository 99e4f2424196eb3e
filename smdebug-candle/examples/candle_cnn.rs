//! Trains a small convolutional network with candle on the digits resampled to 28×28, with
//! smdebug capture on, and measures what capture costs on a step of realistic length.
//!
//! ```sh
//! cargo run --release -p smdebug-candle --example candle_cnn            # train, write the run
//! cargo run --release -p smdebug-candle --example candle_cnn -- --overhead [--rounds N]
//! ```
//!
//! The network: conv 5×5 (1→16) → ReLU → max-pool 2 → conv 5×5 (16→32) → ReLU → max-pool 2 →
//! linear (512→10), 18.4k parameters, batch 32. The images are the 8×8 digits set resampled to
//! 28×28 with a random rotation and shift (the demo's input pipeline), so a step does the work of
//! an MNIST-sized LeNet. The run goes to `target/smdebug-candle/cnn-run` (or `--out DIR`).
//!
//! `--overhead` times the loop without a hook; with weights, gradients and the loss recorded
//! every step and every 100th step through the writer (block mode: nothing is dropped, every
//! tensor is paid for) into `$TMPDIR`; and every step into a sink that drops records (the
//! adapter's own cost). The variants alternate within each round.

use std::time::Instant;

use candle_core::{D, DType, Device, Module, Tensor};
use candle_nn::{Conv2d, Linear, Optimizer, SGD, VarBuilder, VarMap};
use smdebug_candle::CandleHook;
use smdebug_core::{Hook, Mode, SaveConfig, SaveConfigMode};
use smdebug_examples::digits::{AugmentedDigits, HostBatch};
use smdebug_examples::overhead::{Discard, number_arg, run_dir, run_writer};
use smdebug_io::writer::{OverflowPolicy, Writer};

type BoxError = Box<dyn std::error::Error>;

const SIDE: usize = 28;
const BATCH: usize = 32;

struct Cnn {
    conv1: Conv2d,
    conv2: Conv2d,
    fc: Linear,
}

impl Cnn {
    fn new(vb: VarBuilder) -> candle_core::Result<Cnn> {
        let cfg = Default::default();
        Ok(Cnn {
            conv1: candle_nn::conv2d(1, 16, 5, cfg, vb.pp("conv1"))?,
            conv2: candle_nn::conv2d(16, 32, 5, cfg, vb.pp("conv2"))?,
            fc: candle_nn::linear(32 * 4 * 4, 10, vb.pp("fc"))?,
        })
    }

    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let x = self.conv1.forward(x)?.relu()?.max_pool2d(2)?;
        let x = self.conv2.forward(&x)?.relu()?.max_pool2d(2)?;
        self.fc.forward(&x.flatten_from(1)?)
    }
}

/// Images `(n, 1, 28, 28)` and labels as candle tensors.
fn tensors((x, y): HostBatch) -> candle_core::Result<(Tensor, Tensor)> {
    let n = y.len();
    let labels: Vec<u32> = y.iter().map(|&l| l as u32).collect();
    Ok((
        Tensor::from_vec(x, (n, 1, SIDE, SIDE), &Device::Cpu)?,
        Tensor::from_vec(labels, n, &Device::Cpu)?,
    ))
}

fn accuracy(logits: &Tensor, labels: &Tensor) -> candle_core::Result<f64> {
    let hits = logits
        .argmax(D::Minus1)?
        .eq(labels)?
        .to_dtype(DType::F32)?
        .sum_all()?
        .to_scalar::<f32>()?;
    Ok(f64::from(hits) / labels.dim(0)? as f64)
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--overhead") {
        let rounds = number_arg(&args, "--rounds", 7)?;
        return overhead(rounds);
    }
    let out = run_dir(&args, "smdebug-candle/cnn-run")?;
    let schedule = SaveConfig::every(50).with_mode(Mode::Eval, SaveConfigMode::every(1));
    let writer = run_writer(&args, &out)?;
    let mut hook = CandleHook::new(Hook::builder().save_config(schedule), writer)?;
    let mut data = AugmentedDigits::load(SIDE)?;
    let (test_x, test_y) = tensors(data.test())?;
    let vm = VarMap::new();
    let model = Cnn::new(VarBuilder::from_varmap(&vm, DType::F32, &Device::Cpu))?;
    let mut sgd = SGD::new(vm.all_vars(), 0.05)?;
    for epoch in 0..4u64 {
        hook.set_mode(Mode::Train)?;
        for _ in 0..data.train_len() / BATCH {
            if let Some(reason) = hook.stop_requested() {
                println!("stopping: {reason}");
                break;
            }
            let (x, y) = tensors(data.batch(BATCH))?;
            let logits = model.forward(&x)?;
            let l = candle_nn::loss::cross_entropy(&logits, &y)?;
            let grads = l.backward()?;
            // Capture problems are reported, never allowed to stop training.
            if let Err(e) = hook
                .save_parameters(&vm)
                .and_then(|_| hook.save_gradients(&vm, &grads))
                .and_then(|_| hook.save_loss("loss", &l))
            {
                eprintln!("capture: {e}");
            }
            sgd.step(&grads)?;
            hook.step()?;
        }
        hook.set_mode(Mode::Eval)?;
        let logits = model.forward(&test_x)?;
        let l = candle_nn::loss::cross_entropy(&logits, &test_y)?;
        let acc = accuracy(&logits, &test_y)?;
        hook.save_loss("loss", &l)?;
        hook.save_metric("accuracy", acc);
        hook.step()?;
        println!(
            "epoch {epoch}: eval loss {:.4}, accuracy {acc:.3}",
            l.to_scalar::<f32>()?
        );
    }
    hook.close()?;
    println!("wrote {out}; read it with `cargo run -q -p smdebug-cli -- info {out}`");
    Ok(())
}

/// Times `steps` training steps on pre-made batches, recording weights, gradients and the loss
/// through `hook` (none without one). Returns seconds per step, closing the hook included.
fn timed_loop(batches: &[(Tensor, Tensor)], mut hook: Option<CandleHook>) -> Result<f64, BoxError> {
    let vm = VarMap::new();
    let model = Cnn::new(VarBuilder::from_varmap(&vm, DType::F32, &Device::Cpu))?;
    let mut sgd = SGD::new(vm.all_vars(), 0.05)?;
    if let Some(h) = hook.as_mut() {
        h.set_mode(Mode::Train)?;
    }
    let start = Instant::now();
    for (x, y) in batches {
        let l = candle_nn::loss::cross_entropy(&model.forward(x)?, y)?;
        let grads = l.backward()?;
        if let Some(h) = hook.as_mut() {
            h.save_parameters(&vm)?;
            h.save_gradients(&vm, &grads)?;
            h.save_loss("loss", &l)?;
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

fn overhead(rounds: usize) -> Result<(), BoxError> {
    let mut data = AugmentedDigits::load(SIDE)?;
    let steps = 100;
    let batches: Vec<(Tensor, Tensor)> = (0..steps)
        .map(|_| tensors(data.batch(BATCH)))
        .collect::<Result<_, _>>()?;
    let dir = std::env::temp_dir().join(format!("smdebug-candle-cnn-{}", std::process::id()));
    let to_disk = |interval: u64, name: String| -> Result<CandleHook, BoxError> {
        let writer = Writer::builder(smdebug_io::open_storage(
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
    for round in 0..rounds {
        let base = timed_loop(&batches, None)?;
        let every = timed_loop(&batches, Some(to_disk(1, format!("every1-{round}"))?))?;
        let hundredth = timed_loop(&batches, Some(to_disk(100, format!("every100-{round}"))?))?;
        let discard = CandleHook::new(Hook::builder().save_config(SaveConfig::every(1)), Discard)?;
        let adapter = timed_loop(&batches, Some(discard))?;
        rows.push([base, every, hundredth, adapter]);
    }
    let _ = std::fs::remove_dir_all(&dir);
    smdebug_examples::overhead::print_table(
        &format!(
            "per step, {steps} steps of batch {BATCH}, 28x28 CNN (18.4k parameters), f32, candle CPU, run files in {}:",
            std::env::temp_dir().display()
        ),
        &rows,
    );
    Ok(())
}
