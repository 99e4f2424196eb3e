//! Trains a 64-32-10 MLP with burn (ndarray backend, autodiff) on the 8x8 digits set, with
//! smdebug capture on.
//!
//! ```sh
//! cargo run --release -p smdebug-burn --example burn_mlp            # train, write the run
//! cargo run --release -p smdebug-burn --example burn_mlp -- --overhead
//! ```
//!
//! Add `--python-compatible` to write the payload checksum Python smdebug 1.0.34 reads.
//!
//! The run goes to `target/smdebug-burn/run` (or `--out DIR`): weights, biases, gradients,
//! relu1's output, the loss and accuracy every 50th train step, loss and accuracy at every eval
//! step. `--overhead` times the same training loop without a hook, with weights, gradients and
//! loss recorded every step, and every 100th step, in one process.

#[path = "../tests/common/model.rs"]
mod model;

use std::time::Instant;

use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::Device;
use model::{DigitsTensors, Mlp, accuracy, loss};
use smdebug_burn::BurnHook;
use smdebug_core::{Hook, MemorySink, Mode, SaveConfig, SaveConfigMode};
use smdebug_io::format::record::PayloadChecksum;
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
        return overhead();
    }
    let out = match args.iter().position(|a| a == "--out") {
        Some(i) => args.get(i + 1).cloned().ok_or("--out needs a directory")?,
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .ok_or("the crate sits in the workspace")?
            .join("target/smdebug-burn/run")
            .to_str()
            .ok_or("non-UTF-8 path")?
            .to_string(),
    };
    let _ = std::fs::remove_dir_all(&out);
    let schedule = SaveConfig::every(50).with_mode(Mode::Eval, SaveConfigMode::every(1));
    let mut hook = BurnHook::new(Hook::builder().save_config(schedule), {
        // smdebug 1.0.34's reader accepts only its legacy constant payload checksum.
        let checksum = if args.iter().any(|a| a == "--python-compatible") {
            PayloadChecksum::SmdebugLegacy
        } else {
            PayloadChecksum::Crc32c
        };
        Writer::builder(smdebug_io::open_storage(&out)?)
            .checksum(checksum)
            .build()?
    })?;
    let device = ndarray_autodiff();
    let data = DigitsTensors::load(&device)?;
    let mut model = Mlp::new(&device);
    let mut optim = SgdConfig::new().init();
    let batches_per_epoch = data.n_train / 32;
    for epoch in 0..10u64 {
        hook.set_mode(Mode::Train);
        for idx in data.train_batches(32, batches_per_epoch, epoch) {
            if let Some(reason) = hook.stop_requested() {
                println!("stopping: {reason}");
                hook.close();
                return Ok(());
            }
            let x = data.train_x.clone().select(0, idx.clone());
            let y = data.train_y.clone().select(0, idx);
            let (hidden, logits) = model.forward(x);
            let l = loss(logits.clone(), y.clone());
            let grads = GradientsParams::from_grads(l.backward(), &model);
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
            model = optim.step(0.2, model, grads);
            hook.step();
        }
        hook.set_mode(Mode::Eval);
        let (_, logits) = model.forward(data.test_x.clone());
        let l = loss(logits.clone(), data.test_y.clone());
        let acc = accuracy(logits, data.test_y.clone());
        hook.save_loss("loss", &l)?;
        hook.save_metric("accuracy", acc);
        hook.step();
        let l: f32 = l.into_scalar();
        println!("epoch {epoch}: eval loss {l:.4}, accuracy {acc:.3}");
    }
    hook.close();
    let steps = hook.hook().global_step();
    drop(hook);
    println!(
        "wrote {out} ({steps} steps); read it with `cargo run -q -p smdebug-cli -- info {out}`"
    );
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
        h.set_mode(Mode::Train);
    }
    let start = Instant::now();
    for idx in batches {
        let x = data.train_x.clone().select(0, idx.clone());
        let y = data.train_y.clone().select(0, idx);
        let (_, logits) = model.forward(x);
        let l = loss(logits, y);
        let grads = GradientsParams::from_grads(l.backward(), &model);
        if let Some(h) = hook.as_deref_mut() {
            h.save_parameters(&model)?;
            h.save_gradients(&model, &grads)?;
            h.save_loss("loss", &l)?;
        }
        model = optim.step(0.1, model, grads);
        if let Some(h) = hook.as_deref_mut() {
            h.step();
        }
    }
    // burn may run lazily: make sure the last step's work is done before stopping the clock.
    let _ = model.fc1.weight.val().into_data();
    let elapsed = start.elapsed().as_secs_f64();
    if let Some(h) = hook {
        h.close();
    }
    Ok(elapsed / steps as f64)
}

fn overhead() -> Result<(), BoxError> {
    let data = DigitsTensors::load(&ndarray_autodiff())?;
    let steps = 2000;
    let dir = std::env::temp_dir().join(format!("smdebug-burn-overhead-{}", std::process::id()));
    let mut results = Vec::new();
    // Warm up once, then alternate the three variants so that drift hits them alike.
    timed_loop(&data, None, 200)?;
    for round in 0..3 {
        let base = timed_loop(&data, None, steps)?;
        let mut every = Vec::new();
        for interval in [1u64, 100] {
            let run = dir.join(format!("every{interval}-{round}"));
            let mut hook = BurnHook::new(
                Hook::builder().save_config(SaveConfig::every(interval)),
                // Back-pressure instead of dropping: every tensor is written and paid for.
                Writer::builder(smdebug_io::open_storage(run.to_str().ok_or("path")?)?)
                    .overflow(OverflowPolicy::Block)
                    .build()?,
            )?;
            let t = timed_loop(&data, Some(&mut hook), steps)?;
            drop(hook);
            every.push(t);
        }
        // The adapter and hook alone: every step, into memory instead of the writer.
        let mut in_memory = BurnHook::new(
            Hook::builder().save_config(SaveConfig::every(1)),
            MemorySink::default(),
        )?;
        let memory = timed_loop(&data, Some(&mut in_memory), steps)?;
        results.push((base, every[0], every[1], memory));
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("per step, {steps} steps of batch 32, 64-32-10 MLP, f32, burn ndarray + autodiff:");
    println!("round   no hook     every step          every 100th step    every step, MemorySink");
    for (i, (base, e1, e100, mem)) in results.iter().enumerate() {
        let pct = |t: f64| (t / base - 1.0) * 100.0;
        println!(
            "{i}    {:8.1} µs  {:8.1} µs ({:+5.1}%)  {:8.1} µs ({:+5.1}%)  {:8.1} µs ({:+5.1}%)",
            base * 1e6,
            e1 * 1e6,
            pct(*e1),
            e100 * 1e6,
            pct(*e100),
            mem * 1e6,
            pct(*mem)
        );
    }
    Ok(())
}
