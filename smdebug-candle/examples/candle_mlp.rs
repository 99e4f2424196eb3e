//! Trains a 64-32-10 MLP with candle on the 8x8 digits set, in an smdebug session (tensors,
//! framework spans, system metrics, rules in the process, the report).
//!
//! ```sh
//! cargo run --release -p smdebug-candle --example candle_mlp            # train, write the run
//! cargo run --release -p smdebug-candle --example candle_mlp -- --overhead [--rounds N] [--steps N]
//! ```
//!
//! Add `--python-compatible` to write the payload checksum Python smdebug 1.0.34 reads.
//!
//! The run goes to `target/smdebug-candle/run` (or `--out`, a directory or an object-store URL):
//! weights, biases, gradients, relu1's output, the loss and accuracy every 50th train step, loss
//! and accuracy at every eval step. `--overhead` times the same training loop without a hook,
//! with weights, gradients and loss recorded every step and every 100th step (run files in
//! `$TMPDIR`), and every step into a sink that drops records, variants alternating per round.

#[path = "../tests/common/model.rs"]
mod model;

use std::time::Instant;

use candle_core::{DType, Device};
use candle_nn::{Optimizer, SGD};
use model::{DigitsTensors, Mlp, accuracy, loss, varmap};
use smdebug::prelude::*;
use smdebug_candle::CandleHook;
use smdebug_core::{Hook, MemorySink};
use smdebug_examples::overhead::{Discard, number_arg, run_location};
use smdebug_io::writer::{OverflowPolicy, Writer};

type BoxError = Box<dyn std::error::Error>;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--overhead") {
        let rounds = number_arg(&args, "--rounds", 7)?;
        let steps = number_arg(&args, "--steps", 2000)?;
        return overhead(rounds, steps);
    }
    let out = run_location(&args, "smdebug-candle/run")?;
    let mut session = Session::builder(&out)
        .candle()
        .overwrite(true)
        .python_compatible(args.iter().any(|a| a == "--python-compatible"))
        .save(SaveConfig::every(50).with_mode(Mode::Eval, SaveConfigMode::every(1)))
        .rules(["VanishingGradient", "ExplodingTensor", "LossNotDecreasing"])
        .rules(["StepOutlier", "ProfilerReport"])
        .start()?;
    // SageMaker's hook file (its `LocalPath`) may have put the run elsewhere.
    let out = session.location().to_string();
    let dev = Device::Cpu;
    let data = DigitsTensors::load(DType::F32, &dev)?;
    let (vm, vb) = varmap(DType::F32, &dev);
    let model = Mlp::new(vb, session.hook())?; // relu1's output is recorded when due
    model::reseed(&vm, 7)?; // the same weights at every run
    let mut sgd = SGD::new(vm.all_vars(), 0.2)?;
    let batches_per_epoch = data.train_y.dim(0)? / 32;
    'training: for epoch in 0..10u64 {
        session.set_mode(Mode::Train)?;
        let batches = data.train_batches(32, batches_per_epoch, epoch)?;
        for idx in session.data(batches) {
            let x = data.train_x.index_select(&idx, 0)?;
            let y = data.train_y.index_select(&idx, 0)?;
            let (_, logits) = session.forward(|| model.forward(&x))?;
            let l = loss(&logits, &y)?;
            let hook = session.hook();
            let grads = hook.backward(&l)?;
            // Capture problems are reported, never allowed to stop training.
            if let Err(e) = hook
                .save_parameters(&vm)
                .and_then(|_| hook.save_gradients(&vm, &grads))
                .and_then(|_| hook.save_loss("loss", &l))
            {
                eprintln!("capture: {e}");
            }
            hook.save_metric("accuracy", accuracy(&logits, &y)?);
            session.optimizer(|| sgd.step(&grads))?;
            if session.step()?.stop_requested() {
                break 'training; // a rule fired, or someone pressed Stop
            }
        }
        session.set_mode(Mode::Eval)?;
        let (_, logits) = session.forward(|| model.forward(&data.test_x))?;
        let l = loss(&logits, &data.test_y)?;
        let acc = accuracy(&logits, &data.test_y)?;
        session.hook().save_loss("loss", &l)?;
        session.hook().save_metric("accuracy", acc);
        session.step()?;
        println!(
            "epoch {epoch}: eval loss {:.4}, accuracy {:.3}",
            l.to_scalar::<f32>()?,
            acc
        );
    }
    let summary = session.finish()?;
    print!("{summary}");
    println!("read it with `cargo run -q -p smdebug-cli -- info {out}`");
    Ok(())
}

/// Times `steps` training steps, recording weights, gradients and the loss through `hook`
/// (none without one). Returns seconds per step.
fn timed_loop(
    data: &DigitsTensors,
    mut hook: Option<&mut CandleHook>,
    steps: usize,
) -> Result<f64, BoxError> {
    let dev = Device::Cpu;
    let (vm, vb) = varmap(DType::F32, &dev);
    // Without a hook the wrapper around relu1 stays (never armed: one atomic load per forward).
    let never = SaveConfig::new(SaveConfigMode::never());
    let mut scratch = CandleHook::new(Hook::builder().save_config(never), MemorySink::default())?;
    let model = Mlp::new(vb, hook.as_deref_mut().unwrap_or(&mut scratch))?;
    let mut sgd = SGD::new(vm.all_vars(), 0.1)?;
    let batches = data.train_batches(32, steps, 5)?;
    if let Some(h) = hook.as_deref_mut() {
        h.set_mode(Mode::Train)?;
    }
    let start = Instant::now();
    for idx in &batches {
        let x = data.train_x.index_select(idx, 0)?;
        let y = data.train_y.index_select(idx, 0)?;
        let (_, logits) = model.forward(&x)?;
        let l = loss(&logits, &y)?;
        let grads = l.backward()?;
        if let Some(h) = hook.as_deref_mut() {
            h.save_parameters(&vm)?;
            h.save_gradients(&vm, &grads)?;
            h.save_loss("loss", &l)?;
        }
        sgd.step(&grads)?;
        if let Some(h) = hook.as_deref_mut() {
            h.step()?;
        }
    }
    if let Some(h) = hook {
        h.close()?;
    }
    Ok(start.elapsed().as_secs_f64() / steps as f64)
}

fn overhead(rounds: usize, steps: usize) -> Result<(), BoxError> {
    let data = DigitsTensors::load(DType::F32, &Device::Cpu)?;
    let dir = std::env::temp_dir().join(format!("smdebug-candle-overhead-{}", std::process::id()));
    // Weights, gradients and the loss; relu1's output is left out.
    let builder = |interval: u64| {
        Hook::builder()
            .save_config(SaveConfig::every(interval))
            .collection(
                Collection::new("outputs")
                    .with_save_config(SaveConfig::new(SaveConfigMode::never())),
            )
    };
    let to_disk = |interval: u64, name: String| -> Result<CandleHook, BoxError> {
        // Back-pressure instead of dropping: every tensor is written and paid for.
        let writer = Writer::builder(smdebug_storage::open_storage(
            dir.join(name).to_str().ok_or("path")?,
        )?)
        .overflow(OverflowPolicy::Block)
        .build()?;
        Ok(CandleHook::new(builder(interval), writer)?)
    };
    // Warm up once, then alternate the variants so that drift hits them alike.
    timed_loop(&data, None, 200)?;
    let mut rows = Vec::new();
    for round in 0..rounds {
        let base = timed_loop(&data, None, steps)?;
        let every = timed_loop(
            &data,
            Some(&mut to_disk(1, format!("every1-{round}"))?),
            steps,
        )?;
        let hundredth = timed_loop(
            &data,
            Some(&mut to_disk(100, format!("every100-{round}"))?),
            steps,
        )?;
        let mut discard = CandleHook::new(builder(1), Discard)?;
        let adapter = timed_loop(&data, Some(&mut discard), steps)?;
        rows.push([base, every, hundredth, adapter]);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let title = format!(
        "per step, {steps} steps of batch 32, 64-32-10 MLP, f32, candle CPU, run files in {}:",
        std::env::temp_dir().display()
    );
    smdebug_examples::overhead::print_table(&title, &rows);
    Ok(())
}
