//! A tch-rs (libtorch) training loop on the 8x8 digits set in an smdebug session: parameters,
//! gradients, the hidden ReLU's output, the loss and accuracy every 10th training step; the
//! step, data-loading, forward, backward and optimizer spans of every step; system metrics; rules
//! in the process and the report. The run is read back with `Trial` at the end.
//!
//! ```sh
//! bash .ci/test-tch          # once: sets up libtorch 2.9.0 from PyPI and runs the tests
//! # then, with the same environment (see .ci/test-tch):
//! cargo run --release -p smdebug-tch --example tch_mlp -- [--out DIR] [--epochs N] [--overhead [--rounds N]]
//! ```
//!
//! `--overhead` trains the same model in alternating variants per round, with one libtorch
//! thread: no hook; weights, gradients, output, loss and accuracy every step and every 100th step
//! (run files in `$TMPDIR`, writer in block mode, closing included); every step into a sink that
//! drops records. It prints the time per step of each and the medians.

use std::time::Instant;

use smdebug::prelude::*;
use smdebug_core::Hook;
use smdebug_core::phase::Phase;
use smdebug_core::timeline::Timeline;
use smdebug_examples::digits::{self, Digits};
use smdebug_examples::overhead::Discard;
use smdebug_io::writer::{OverflowPolicy, Writer};
use smdebug_tch::TchHook;
use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Tensor};

type AnyError = Box<dyn std::error::Error>;

struct Split {
    x: Tensor,
    y: Tensor,
}

fn split(d: &Digits, device: Device) -> Split {
    let x: Vec<f32> = d.images.iter().copied().collect();
    let y: Vec<i64> = d.labels.iter().map(|l| *l as i64).collect();
    Split {
        x: Tensor::from_slice(&x)
            .reshape([d.len() as i64, 64])
            .to_device(device),
        y: Tensor::from_slice(&y).to_device(device),
    }
}

/// Trains for `epochs`; returns (steps, seconds in training steps, final eval accuracy).
fn run(
    epochs: usize,
    device: Device,
    train: &Split,
    eval: &Split,
    mut hook: Option<&mut TchHook>,
) -> Result<(u64, f64, f64), AnyError> {
    tch::manual_seed(42);
    let vs = nn::VarStore::new(device);
    let fc1 = nn::linear(vs.root() / "fc1", 64, 128, Default::default());
    let fc2 = nn::linear(vs.root() / "fc2", 128, 10, Default::default());
    let relu = nn::func(|x| x.relu());
    let relu1 = match hook.as_deref_mut() {
        Some(h) => nn::func_t({
            let r = h.wrap("relu1", nn::func(|x| x.relu()));
            move |x, _| r.forward(x)
        }),
        None => nn::func_t(move |x, _| relu.forward(x)),
    };
    let mut opt = nn::Adam::default().build(&vs, 1e-3)?;
    // The hook's timeline (the session's) times the phases; without a hook, one that is off.
    let timeline = hook
        .as_deref()
        .map_or_else(Timeline::off, |h| h.timeline().clone());
    let n = train.x.size()[0];
    let batch = 32i64;
    let (mut steps, mut seconds, mut accuracy) = (0u64, 0.0, 0.0);
    for _ in 0..epochs {
        if let Some(h) = hook.as_deref_mut() {
            h.set_mode(Mode::Train)?;
        }
        let order = Tensor::randperm(n, (Kind::Int64, device));
        let batches = (0..n - batch + 1).step_by(batch as usize).map(|start| {
            let idx = order.narrow(0, start, batch);
            (train.x.index_select(0, &idx), train.y.index_select(0, &idx))
        });
        let mut t0 = Instant::now();
        for (x, y) in timeline.data(batches) {
            let logits = timeline.scope(Phase::Forward, || {
                fc2.forward(&nn::ModuleT::forward_t(&relu1, &fc1.forward(&x), true))
            });
            let loss = logits.cross_entropy_for_logits(&y);
            opt.zero_grad();
            timeline.scope(Phase::Backward, || loss.backward());
            // Every variant computes the metric, so the comparison is about capture alone.
            let batch_accuracy = logits.accuracy_for_logits(&y).double_value(&[]);
            if let Some(h) = hook.as_deref_mut() {
                h.save_parameters(&vs)?;
                h.save_gradients(&vs)?;
                h.save_loss("loss", &loss)?;
                h.save_metric("accuracy", batch_accuracy);
            }
            timeline.scope(Phase::Optimizer, || opt.step());
            if let Some(h) = hook.as_deref_mut() {
                h.step()?;
            }
            seconds += t0.elapsed().as_secs_f64();
            steps += 1;
            if let Some(reason) = hook.as_deref().and_then(|h| h.stop_requested()) {
                println!("stopping: {reason}");
                return Ok((steps, seconds, accuracy));
            }
            t0 = Instant::now();
        }
        let _guard = tch::no_grad_guard();
        if let Some(h) = hook.as_deref_mut() {
            h.set_mode(Mode::Eval)?;
        }
        let logits = fc2.forward(&nn::ModuleT::forward_t(
            &relu1,
            &fc1.forward(&eval.x),
            false,
        ));
        let loss = logits.cross_entropy_for_logits(&eval.y);
        accuracy = logits.accuracy_for_logits(&eval.y).double_value(&[]);
        if let Some(h) = hook.as_deref_mut() {
            h.save_loss("loss", &loss)?;
            h.save_metric("accuracy", accuracy);
            h.step()?;
        }
    }
    Ok((steps, seconds, accuracy))
}

/// Every `every` train steps, nothing in eval.
fn every_n(every: u64) -> SaveConfig {
    SaveConfig::every(every).with_mode(Mode::Eval, SaveConfigMode::never())
}

/// The collections saved: parameters, gradients and outputs (besides losses and metrics).
const COLLECTIONS: [&str; 4] = ["weights", "biases", "gradients", "outputs"];

/// Parameters, gradients, outputs, loss and metrics every `every` train steps, nothing in eval.
fn builder(every: u64) -> smdebug_core::HookBuilder {
    COLLECTIONS
        .iter()
        .fold(Hook::builder().save_config(every_n(every)), |b, name| {
            b.collection(Collection::new(*name).with_save_config(every_n(every)))
        })
}

fn hook_for(dir: &str, every: u64, overflow: OverflowPolicy) -> Result<TchHook, AnyError> {
    let writer = Writer::builder(smdebug_storage::open_storage(dir)?)
        .overflow(overflow)
        .build()?;
    Ok(TchHook::new(builder(every), writer)?)
}

fn main() -> Result<(), AnyError> {
    let mut out = "target/smdebug-demo/tch_mlp".to_string();
    let mut epochs = 10;
    let mut overhead = false;
    let mut rounds = 7;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out = args.next().ok_or("--out needs a value")?,
            "--epochs" => epochs = args.next().ok_or("--epochs needs a value")?.parse()?,
            "--overhead" => overhead = true,
            "--rounds" => rounds = args.next().ok_or("--rounds needs a value")?.parse()?,
            other => return Err(format!("unknown argument `{other}`").into()),
        }
    }
    let device = Device::cuda_if_available();
    let data = Digits::load(&digits::default_path())?;
    let (tr, ev) = data.split(0.2, 1);
    let (train, eval) = (split(&tr, device), split(&ev, device));
    println!(
        "tch {device:?}: training a 64-128-10 MLP on {} digits",
        tr.len()
    );

    if overhead {
        // libtorch's OpenMP workers spin while they wait for work; on a 2-core machine they
        // would take the core the capture writer runs on. One intra-op thread leaves it free.
        tch::set_num_threads(1);
        let base_dir =
            std::env::temp_dir().join(format!("smdebug-tch-overhead-{}", std::process::id()));
        // Variants alternate within each round, so a slow moment of the machine does not fall
        // on one variant only. Closing (waiting for the writer) counts as part of the cost.
        let timed = |hook: Option<TchHook>| -> Result<f64, AnyError> {
            match hook {
                None => {
                    let (steps, secs, _) = run(epochs, device, &train, &eval, None)?;
                    Ok(secs / steps as f64)
                }
                Some(mut h) => {
                    let (steps, secs, _) = run(epochs, device, &train, &eval, Some(&mut h))?;
                    let t0 = Instant::now();
                    h.close()?;
                    Ok((secs + t0.elapsed().as_secs_f64()) / steps as f64)
                }
            }
        };
        let mut rows = Vec::new();
        for round in 0..rounds {
            let to_disk = |every: u64| -> Result<TchHook, AnyError> {
                let dir = base_dir.join(format!("every{every}-{round}"));
                hook_for(dir.to_str().ok_or("path")?, every, OverflowPolicy::Block)
            };
            let base = timed(None)?;
            let every = timed(Some(to_disk(1)?))?;
            let hundredth = timed(Some(to_disk(100)?))?;
            let adapter = timed(Some(TchHook::new(builder(1), Discard)?))?;
            rows.push([base, every, hundredth, adapter]);
        }
        let _ = std::fs::remove_dir_all(&base_dir);
        let title = format!(
            "per step, {epochs} epochs of batch 32, 64-128-10 MLP with Adam, f32, libtorch CPU (1 thread), run files in {}:",
            std::env::temp_dir().display()
        );
        smdebug_examples::overhead::print_table(&title, &rows);
        return Ok(());
    }

    let mut session = COLLECTIONS
        .iter()
        .fold(Session::builder(&out).tch(), |b, name| {
            b.collection(Collection::new(*name).with_save_config(every_n(10)))
        })
        .overwrite(true)
        .save(every_n(10))
        .rules(["VanishingGradient", "ExplodingTensor", "LossNotDecreasing"])
        .rules(["StepOutlier", "Dataloader", "ProfilerReport"])
        .start()?;
    // SageMaker's hook file (its `LocalPath`) may have put the run elsewhere.
    let out = session.location().to_string();
    let (steps, secs, acc) = run(epochs, device, &train, &eval, Some(session.hook()))?;
    print!("{}", session.finish()?);
    println!(
        "{steps} steps in {secs:.2} s, held-out accuracy {:.1}%",
        acc * 100.0
    );
    let trial = Trial::open(&out)?;
    println!(
        "run {out}: {} tensors, TRAIN steps saved {}, EVAL steps {}",
        trial.tensor_names()?.len(),
        trial.steps(Some(Mode::Train))?.len(),
        trial.steps(Some(Mode::Eval))?.len()
    );
    Ok(())
}
