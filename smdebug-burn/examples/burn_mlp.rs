//! Trains a 64-32-10 MLP with burn (ndarray backend, autodiff) on the 8x8 digits set, in an
//! smdebug session (tensors, framework spans, system metrics, rules in the process, the report).
//!
//! ```sh
//! cargo run --release -p smdebug-burn --example burn_mlp            # train, write the run
//! cargo run --release -p smdebug-burn --example burn_mlp -- --overhead [--rounds N] [--steps N]
//! ```
//!
//! Add `--python-compatible` to write the payload checksum Python smdebug 1.0.34 reads.
//!
//! The run goes to `target/smdebug-burn/run` (or `--out`, a directory or an object-store URL): weights, biases, gradients,
//! relu1's output, the loss and accuracy every 50th train step, loss and accuracy at every eval
//! step. `--overhead` times the same training loop without a hook, with weights, gradients and
//! loss recorded every step and every 100th step (run files in `$TMPDIR`), and every step into a
//! sink that drops records, variants alternating per round.

#[path = "../tests/common/model.rs"]
mod model;

use std::time::Instant;

use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::Device;
use model::{DigitsTensors, Mlp, accuracy, loss};
use smdebug::prelude::*;
use smdebug_burn::BurnHook;
use smdebug_core::Hook;
use smdebug_core::timeline::Timeline;
use smdebug_examples::overhead::{Discard, number_arg, run_location};
use smdebug_io::writer::{OverflowPolicy, Writer};

type BoxError = Box<dyn std::error::Error>;

/// burn 0.22 deprecates the ndarray backend in favour of `flex`; this crate builds ndarray, the
/// CPU backend the workspace already uses.
#[allow(deprecated)]
fn ndarray_autodiff() -> Device {
    Device::ndarray().autodiff()
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--overhead") {
        let rounds = number_arg(&args, "--rounds", 7)?;
        let steps = number_arg(&args, "--steps", 2000)?;
        return overhead(rounds, steps);
    }
    let out = run_location(&args, "smdebug-burn/run")?;
    let mut session = Session::builder(&out)
        .burn()
        .overwrite(true)
        .python_compatible(args.iter().any(|a| a == "--python-compatible"))
        .save(SaveConfig::every(50).with_mode(Mode::Eval, SaveConfigMode::every(1)))
        .rules(["VanishingGradient", "ExplodingTensor", "LossNotDecreasing"])
        .rules(["StepOutlier", "ProfilerReport"])
        .start()?;
    // SageMaker's hook file (its `LocalPath`) may have put the run elsewhere.
    let out = session.location().to_string();
    let device = ndarray_autodiff();
    let data = DigitsTensors::load(&device)?;
    let mut model = Mlp::new(&device);
    let mut optim = SgdConfig::new().init();
    let batches_per_epoch = data.n_train / 32;
    'training: for epoch in 0..10u64 {
        session.set_mode(Mode::Train)?;
        for idx in session.data(data.train_batches(32, batches_per_epoch, epoch)) {
            let x = data.train_x.clone().select(0, idx.clone());
            let y = data.train_y.clone().select(0, idx);
            // The model's forward pass is the forward span, each layer a span in the detailed
            // window.
            let (hidden, logits) = model.forward(x, session.timeline());
            let l = loss(logits.clone(), y.clone());
            let hook = session.hook();
            let grads = GradientsParams::from_grads(hook.backward(&l), &model);
            // Capture problems are reported, never allowed to stop training.
            if let Err(e) = hook
                .save_parameters(&model)
                .and_then(|_| hook.save_gradients(&model, &grads))
                .and_then(|_| hook.save_output("relu1", &hidden))
                .and_then(|_| hook.save_loss("loss", &l))
            {
                eprintln!("capture: {e}");
            }
            if hook.is_due("accuracy", &["metrics"]) {
                hook.save_metric("accuracy", accuracy(logits, y));
            }
            model = session.optimizer(|| optim.step(0.2, model, grads));
            if session.step()?.stop_requested() {
                break 'training; // a rule fired, or someone pressed Stop
            }
        }
        session.set_mode(Mode::Eval)?;
        let (_, logits) = model.forward(data.test_x.clone(), session.timeline());
        let l = loss(logits.clone(), data.test_y.clone());
        let acc = accuracy(logits, data.test_y.clone());
        session.hook().save_loss("loss", &l)?;
        session.hook().save_metric("accuracy", acc);
        session.step()?;
        let l: f32 = l.into_scalar();
        println!("epoch {epoch}: eval loss {l:.4}, accuracy {acc:.3}");
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
    mut hook: Option<&mut BurnHook>,
    steps: usize,
) -> Result<f64, BoxError> {
    let device = data.train_x.device();
    let mut model = Mlp::new(&device);
    let mut optim = SgdConfig::new().init();
    let batches = data.train_batches(32, steps, 5);
    if let Some(h) = hook.as_deref_mut() {
        h.set_mode(Mode::Train)?;
    }
    let start = Instant::now();
    for idx in batches {
        let x = data.train_x.clone().select(0, idx.clone());
        let y = data.train_y.clone().select(0, idx);
        let (_, logits) = model.forward(x, &Timeline::off());
        let l = loss(logits, y);
        let grads = GradientsParams::from_grads(l.backward(), &model);
        if let Some(h) = hook.as_deref_mut() {
            h.save_parameters(&model)?;
            h.save_gradients(&model, &grads)?;
            h.save_loss("loss", &l)?;
        }
        model = optim.step(0.1, model, grads);
        if let Some(h) = hook.as_deref_mut() {
            h.step()?;
        }
    }
    // burn may run lazily: make sure the last step's work is done before stopping the clock.
    let _ = model.fc1.weight.val().into_data();
    // Closing waits for the writer to finish: its backlog is part of the cost.
    if let Some(h) = hook {
        h.close()?;
    }
    Ok(start.elapsed().as_secs_f64() / steps as f64)
}

fn overhead(rounds: usize, steps: usize) -> Result<(), BoxError> {
    let data = DigitsTensors::load(&ndarray_autodiff())?;
    let dir = std::env::temp_dir().join(format!("smdebug-burn-overhead-{}", std::process::id()));
    let to_disk = |interval: u64, name: String| -> Result<BurnHook, BoxError> {
        // Back-pressure instead of dropping: every tensor is written and paid for.
        let writer = Writer::builder(smdebug_storage::open_storage(
            dir.join(name).to_str().ok_or("path")?,
        )?)
        .overflow(OverflowPolicy::Block)
        .build()?;
        Ok(BurnHook::new(
            Hook::builder().save_config(SaveConfig::every(interval)),
            writer,
        )?)
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
        let mut discard =
            BurnHook::new(Hook::builder().save_config(SaveConfig::every(1)), Discard)?;
        let adapter = timed_loop(&data, Some(&mut discard), steps)?;
        rows.push([base, every, hundredth, adapter]);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let title = format!(
        "per step, {steps} steps of batch 32, 64-32-10 MLP, f32, burn ndarray + autodiff, run files in {}:",
        std::env::temp_dir().display()
    );
    smdebug_examples::overhead::print_table(&title, &rows);
    Ok(())
}
