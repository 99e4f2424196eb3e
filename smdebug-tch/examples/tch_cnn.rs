//! Trains a small convolutional network with tch-rs (libtorch) on the digits resampled to 28×28,
//! in an smdebug session (tensors, framework spans, a code profile, system metrics, rules in the
//! process, the report), and measures what capture costs on a step of realistic length.
//!
//! ```sh
//! # with .ci/test-tch's environment (libtorch 2.9.0 from PyPI):
//! cargo run --release -p smdebug-tch --example tch_cnn -- [--out DIR]
//! cargo run --release -p smdebug-tch --example tch_cnn -- --overhead [--rounds N]
//! ```
//!
//! The network: conv 5×5 (1→16) → ReLU → max-pool 2 → conv 5×5 (16→32) → ReLU → max-pool 2 →
//! linear (512→10), 18.4k parameters, batch 32, SGD. The images are the 8×8 digits set resampled
//! to 28×28 with a random rotation and shift (the demo's input pipeline), so a step does the work
//! of an MNIST-sized LeNet.
//!
//! `--overhead` uses one libtorch thread and times the loop without a hook; with weights,
//! gradients and the loss recorded every step and every 100th step through the writer (block
//! mode: nothing is dropped) into `$TMPDIR`; and every step into a sink that drops records. The
//! variants alternate within each round.

use std::time::Instant;

use smdebug::prelude::*;
use smdebug_core::Hook;
use smdebug_examples::digits::{AugmentedDigits, HostBatch};
use smdebug_examples::overhead::{Discard, number_arg};
use smdebug_io::writer::{OverflowPolicy, Writer};
use smdebug_tch::TchHook;
use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Tensor};

type AnyError = Box<dyn std::error::Error>;

const SIDE: i64 = 28;
const BATCH: usize = 32;

fn cnn(root: &nn::Path) -> impl Module + use<> {
    let conv1 = nn::conv2d(root / "conv1", 1, 16, 5, Default::default());
    let conv2 = nn::conv2d(root / "conv2", 16, 32, 5, Default::default());
    let fc = nn::linear(root / "fc", 32 * 4 * 4, 10, Default::default());
    nn::func(move |x| {
        let x = x.apply(&conv1).relu().max_pool2d_default(2);
        let x = x.apply(&conv2).relu().max_pool2d_default(2);
        x.flatten(1, -1).apply(&fc)
    })
}

/// Images `(n, 1, 28, 28)` and labels as tensors.
fn tensors(x: &[f32], y: &[usize]) -> (Tensor, Tensor) {
    let n = y.len() as i64;
    let labels: Vec<i64> = y.iter().map(|&l| l as i64).collect();
    (
        Tensor::from_slice(x).view([n, 1, SIDE, SIDE]),
        Tensor::from_slice(&labels),
    )
}

fn main() -> Result<(), AnyError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    if args.iter().any(|a| a == "--overhead") {
        let rounds = number_arg(&args, "--rounds", 7)?;
        return overhead(rounds);
    }
    let out = arg("--out").unwrap_or_else(|| "target/smdebug-demo/tch_cnn".to_string());
    let mut session = Session::builder(&out)
        .tch()
        .overwrite(true)
        .save(SaveConfig::every(50).with_mode(Mode::Eval, SaveConfigMode::every(1)))
        .code_profiling(Window::steps(40, 20)) // a sampling CPU profile, steps 40-59
        .rules(["VanishingGradient", "ExplodingTensor", "LossNotDecreasing"])
        .rules(["StepOutlier", "Dataloader", "ProfilerReport"])
        .start()?;
    // SageMaker's hook file (its `LocalPath`) may have put the run elsewhere.
    let out = session.location().to_string();
    let mut data = AugmentedDigits::load(SIDE as usize)?;
    let (test_x, test_y) = {
        let (x, y) = data.test();
        tensors(&x, &y)
    };
    let vs = nn::VarStore::new(Device::Cpu);
    // The model's forward pass is the step's forward span.
    let model = session.hook().wrap_model(cnn(&vs.root()));
    let mut opt = nn::Sgd::default().build(&vs, 0.05)?;
    let steps_per_epoch = data.train_len() / BATCH;
    'training: for epoch in 0..4 {
        session.set_mode(Mode::Train)?;
        let batches = (0..steps_per_epoch).map(|_| data.batch(BATCH));
        for (x, y) in session.data(batches) {
            let (x, y) = tensors(&x, &y);
            let loss = model.forward(&x).cross_entropy_for_logits(&y);
            opt.zero_grad();
            let hook = session.hook();
            hook.backward(&loss)?; // loss.backward() as the backward span
            // Capture problems are reported, never allowed to stop training.
            if let Err(e) = hook
                .save_parameters(&vs)
                .and_then(|_| hook.save_gradients(&vs))
                .and_then(|_| hook.save_loss("loss", &loss))
            {
                eprintln!("capture: {e}");
            }
            session.optimizer(|| opt.step());
            if session.step()?.stop_requested() {
                break 'training; // a rule fired, or someone pressed Stop
            }
        }
        let _guard = tch::no_grad_guard();
        session.set_mode(Mode::Eval)?;
        let logits = model.forward(&test_x);
        let loss = logits.cross_entropy_for_logits(&test_y);
        let acc = logits.accuracy_for_logits(&test_y).double_value(&[]);
        session.hook().save_loss("loss", &loss)?;
        session.hook().save_metric("accuracy", acc);
        session.step()?;
        println!(
            "epoch {epoch}: eval loss {:.4}, accuracy {acc:.3}",
            loss.double_value(&[])
        );
    }
    let summary = session.finish()?;
    print!("{summary}");
    println!("read it with `cargo run -q -p smdebug-cli -- info {out}`");
    Ok(())
}

/// Times training steps on pre-made host batches, recording weights, gradients and the loss
/// through `hook` (none without one). Returns seconds per step, closing the hook included.
fn timed_loop(batches: &[HostBatch], mut hook: Option<TchHook>) -> Result<f64, AnyError> {
    tch::manual_seed(42);
    let vs = nn::VarStore::new(Device::Cpu);
    let model = cnn(&vs.root());
    let mut opt = nn::Sgd::default().build(&vs, 0.05)?;
    if let Some(h) = hook.as_mut() {
        h.set_mode(Mode::Train)?;
    }
    let start = Instant::now();
    for (x, y) in batches {
        let (x, y) = tensors(x, y);
        let loss = model.forward(&x).cross_entropy_for_logits(&y);
        opt.zero_grad();
        loss.backward();
        if let Some(h) = hook.as_mut() {
            h.save_parameters(&vs)?;
            h.save_gradients(&vs)?;
            h.save_loss("loss", &loss)?;
        }
        opt.step();
        if let Some(h) = hook.as_mut() {
            h.step()?;
        }
    }
    // libtorch runs CPU ops eagerly; reading one value makes sure the last step is done.
    let _ = vs.trainable_variables()[0]
        .sum(Kind::Float)
        .double_value(&[]);
    if let Some(mut h) = hook {
        h.close()?;
    }
    Ok(start.elapsed().as_secs_f64() / batches.len() as f64)
}

fn overhead(rounds: usize) -> Result<(), AnyError> {
    // libtorch's OpenMP workers spin while they wait for work; on a 2-core machine they would
    // take the core the capture writer runs on. One intra-op thread leaves it free.
    tch::set_num_threads(1);
    let mut data = AugmentedDigits::load(SIDE as usize)?;
    let steps = 200;
    let batches: Vec<HostBatch> = (0..steps).map(|_| data.batch(BATCH)).collect();
    let dir = std::env::temp_dir().join(format!("smdebug-tch-cnn-{}", std::process::id()));
    let to_disk = |interval: u64, name: String| -> Result<TchHook, AnyError> {
        let path = dir.join(name);
        let writer = Writer::builder(smdebug_storage::open_storage(path.to_str().ok_or("path")?)?)
            .overflow(OverflowPolicy::Block)
            .build()?;
        Ok(TchHook::new(
            Hook::builder().save_config(SaveConfig::every(interval)),
            writer,
        )?)
    };
    timed_loop(&batches[..20], None)?;
    let mut rows: Vec<[f64; 4]> = Vec::new();
    for round in 0..rounds {
        let base = timed_loop(&batches, None)?;
        let every = timed_loop(&batches, Some(to_disk(1, format!("every1-{round}"))?))?;
        let hundredth = timed_loop(&batches, Some(to_disk(100, format!("every100-{round}"))?))?;
        let discard = TchHook::new(Hook::builder().save_config(SaveConfig::every(1)), Discard)?;
        let adapter = timed_loop(&batches, Some(discard))?;
        rows.push([base, every, hundredth, adapter]);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let title = format!(
        "per step, {steps} steps of batch {BATCH}, 28x28 CNN (18.4k parameters), f32, libtorch CPU (1 thread), run files in {}:",
        std::env::temp_dir().display()
    );
    smdebug_examples::overhead::print_table(&title, &rows);
    Ok(())
}
