//! Trains a small transformer encoder on the 8x8 digits set with candle, records the attention of
//! its first layer through an `include_regex` collection, then reads the run back with `Trial` and
//! draws each head's attention as a heat map.
//!
//! ```sh
//! cargo run --release -p smdebug-candle --example candle_transformer -- [--out DIR] [--steps N]
//! ```
//!
//! Each image is a sequence of its 8 pixel rows (tokens of 8 features); two pre-norm encoder
//! layers of 4-head self-attention (d_model 32) and a feed-forward block, mean pooling, a linear
//! head, cross-entropy and AdamW. Every layer has probes on its query and key projections and its
//! attention scores (`layer<i>/attn/{query,key,scores}`); the custom collection `attention`
//! selects layer 0's with `include_regex` and saves them every `steps / 8` training steps and at
//! the last one. Weights, biases, gradients, the loss and the accuracy are recorded as in the MLP
//! example, and loss and accuracy on the held-out images at every evaluation.
//!
//! Output under DIR (default `target/smdebug-candle/transformer`): the run in `run/`, and in
//! `heatmaps/` one PNG per head for the first and the last saved step: the batch mean of the
//! attention scores (`layer0_scores_step<S>_head<H>.png`) and of the scaled query·key products
//! they are the softmax of (`layer0_qk_step<S>_head<H>.png`). Rows are the attending (query)
//! tokens, columns the attended (key) tokens, both numbered from the top image row 0; the bar on
//! the right is the colour scale, shared by all pictures of a kind, with its ends written beside it.

// Shared with the tests, which use parts the example does not (the MLP, the pixel reader).
#[allow(dead_code)]
#[path = "../tests/common/heatmap.rs"]
mod heatmap;
#[allow(dead_code)]
#[path = "../tests/common/model.rs"]
mod model;
#[allow(dead_code)]
#[path = "../tests/common/transformer.rs"]
mod transformer;

use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{DType, Device};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use heatmap::Grid;
use model::{DigitsTensors, accuracy, loss, varmap};
use smdebug::prelude::*;
use smdebug_candle::CandleHook;
use transformer::{Config, Transformer};

type BoxError = Box<dyn std::error::Error>;

const CONFIG: Config = Config {
    d_model: 32,
    heads: 4,
    layers: 2,
    ffn: 64,
};
const BATCH: usize = 64;
/// The layer whose attention is recorded, as the collection's regex names it.
const PATTERN: &str = r"^layer0/attn/(scores|query|key)$";
const SCORES: &str = "layer0/attn/scores";
/// Pixels per heat-map cell.
const CELL: u32 = 32;

struct Args {
    out: PathBuf,
    steps: u64,
}

fn args() -> Result<Args, BoxError> {
    let mut out = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("the crate sits in the workspace")?
        .join("target/smdebug-candle/transformer");
    let mut steps = 400;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--out" => out = it.next().ok_or("--out needs a directory")?.into(),
            "--steps" => {
                steps = it.next().ok_or("--steps needs a number")?.parse()?;
                if steps == 0 {
                    return Err("--steps must be at least 1".into());
                }
            }
            other => {
                return Err(format!("unknown argument `{other}`; use --out DIR, --steps N").into());
            }
        }
    }
    Ok(Args { out, steps })
}

/// Loss and accuracy of the model on the held-out images, recorded as one EVAL step.
fn evaluate(
    session: &mut Session<CandleHook>,
    model: &Transformer,
    data: &DigitsTensors,
) -> Result<(f32, f64), BoxError> {
    session.set_mode(Mode::Eval)?;
    let logits = session.forward(|| model.forward(&data.test_x))?.logits;
    let l = loss(&logits, &data.test_y)?;
    let acc = accuracy(&logits, &data.test_y)?;
    session.hook().save_loss("loss", &l)?;
    session.hook().save_metric("accuracy", acc);
    session.step()?;
    session.set_mode(Mode::Train)?;
    Ok((l.to_scalar::<f32>()?, acc))
}

fn main() -> Result<(), BoxError> {
    let Args { out, steps } = args()?;
    let run = out.join("run");
    let pictures = out.join("heatmaps");
    // The session replaces the run an earlier start left (`overwrite`, its own files only);
    // of the pictures folder only this example's pictures go, the rest of it is left alone.
    std::fs::create_dir_all(&pictures)?;
    for entry in std::fs::read_dir(&pictures)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type()?.is_file() && name.starts_with("layer0_") && name.ends_with(".png") {
            std::fs::remove_file(entry.path())?;
        }
    }
    let run_str = run.to_str().ok_or("non-UTF-8 path")?;

    // The attention collection: every `interval`-th training step and the last one, never in
    // EVAL (the pictures are of training batches). Everything else every `interval` training steps
    // and at every evaluation.
    let interval = (steps / 8).max(1);
    let train = SaveConfigMode {
        save_steps: [steps - 1].into(),
        ..SaveConfigMode::every(interval)
    };
    let attention = SaveConfig::new(train.clone()).with_mode(Mode::Eval, SaveConfigMode::never());
    let mut session = Session::builder(run_str)
        .candle()
        .overwrite(true)
        .save(SaveConfig::new(train).with_mode(Mode::Eval, SaveConfigMode::every(1)))
        .collection(
            Collection::new("attention")
                .with_save_config(attention)
                .with_regex(PATTERN)?,
        )
        .rules(["VanishingGradient", "ExplodingTensor", "StepOutlier"])
        .start()?;
    // SageMaker's hook file (its `LocalPath`) may have put the run elsewhere.
    let run_str = session.location().to_string();

    let dev = Device::Cpu;
    let data = DigitsTensors::load(DType::F32, &dev)?;
    let (vm, vb) = varmap(DType::F32, &dev);
    let model = Transformer::new(CONFIG, vb, session.hook())?;
    // The same weights at every run: the example's verdicts (Overfit judged, nothing firing)
    // are checked by a test, and unseeded weights made them vary.
    model::reseed(&vm, 7)?;
    let mut opt = AdamW::new(
        vm.all_vars(),
        ParamsAdamW {
            lr: 3e-3,
            // At 1e-4 the model memorised its training images (training loss 0.006, validation
            // turning up from 0.24 to 0.27) and Overfit said so; at 0.5 validation keeps gaining.
            weight_decay: 0.5,
            ..Default::default()
        },
    )?;
    let batches = data.train_batches(BATCH, steps as usize, 11)?;
    let evaluate_every = (steps / 4).max(1);
    println!(
        "training a {}-layer, {}-head, d_model {} transformer on {} digit images ({} held out), {steps} steps of {BATCH}",
        CONFIG.layers,
        CONFIG.heads,
        CONFIG.d_model,
        data.train_y.dim(0)?,
        data.test_y.dim(0)?
    );
    let start = Instant::now();
    session.set_mode(Mode::Train)?;
    let mut recent: Vec<f64> = Vec::new();
    let mut final_eval = (f32::NAN, f64::NAN);
    for (step, idx) in session.data(&batches).enumerate() {
        let step = step as u64;
        let x = data.train_x.index_select(idx, 0)?;
        let y = data.train_y.index_select(idx, 0)?;
        let logits = session.forward(|| model.forward(&x))?.logits;
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
        let acc = accuracy(&logits, &y)?;
        hook.save_metric("accuracy", acc);
        recent.push(acc);
        session.optimizer(|| opt.step(&grads))?;
        if session.step()?.stop_requested() {
            println!("stopping: a rule fired, or someone pressed Stop");
            break;
        }
        if (step + 1).is_multiple_of(evaluate_every) || step + 1 == steps {
            let train_acc = recent.iter().sum::<f64>() / recent.len() as f64;
            recent.clear();
            final_eval = evaluate(&mut session, &model, &data)?;
            println!(
                "step {:>4}: train loss {:.4}, train accuracy (last {} batches) {:.3}, eval loss {:.4}, eval accuracy {:.3}",
                step + 1,
                l.to_scalar::<f32>()?,
                evaluate_every.min(step + 1),
                train_acc,
                final_eval.0,
                final_eval.1
            );
        }
    }
    let train_secs = start.elapsed().as_secs_f64();
    // The run ends here; the pass over the whole training set below is not recorded.
    print!("{}", session.finish()?);
    let full = model.forward(&data.train_x)?.logits;
    println!(
        "trained in {train_secs:.1} s; accuracy on all training images {:.3}, on held-out images {:.3}",
        accuracy(&full, &data.train_y)?,
        final_eval.1
    );

    draw(&run_str, &pictures)?;
    Ok(())
}

/// The values of `name` at training step `step`, read from the run, with their shape.
fn read(trial: &Trial, name: &str, step: u64) -> Result<(Vec<usize>, Vec<f64>), BoxError> {
    let t = trial.tensor(name)?.raw(step, Some(Mode::Train), None)?;
    Ok((t.shape().to_vec(), t.to_f64_vec()))
}

/// Reads layer 0's attention back from the run and writes the heat maps.
fn draw(run: &str, pictures: &Path) -> Result<(), BoxError> {
    let trial = Trial::open(run)?;
    let selected: Vec<String> = trial
        .collections()?
        .iter()
        .find(|c| c.name() == "attention")
        .map(|c| c.tensor_names().iter().cloned().collect())
        .unwrap_or_default();
    println!("collection `attention` ({PATTERN}) holds {selected:?}");
    let steps = trial.tensor(SCORES)?.steps(Some(Mode::Train))?;
    println!("{SCORES} saved at training steps {steps:?}");
    let (Some(&first), Some(&last)) = (steps.first(), steps.last()) else {
        return Err(format!("{run} holds no {SCORES}").into());
    };
    let chosen: Vec<u64> = if first == last {
        vec![first]
    } else {
        vec![first, last]
    };
    // Per chosen step: the heads' mean attention and mean scaled q·k.
    let mut scores: Vec<(u64, Vec<Grid>)> = Vec::new();
    let mut logits: Vec<(u64, Vec<Grid>)> = Vec::new();
    for &step in &chosen {
        let (shape, values) = read(&trial, SCORES, step)?;
        println!(
            "step {step}: {SCORES} has shape {shape:?} (batch, heads, query token, key token)"
        );
        scores.push((step, heatmap::head_means(&shape, &values)?));
        let (qshape, query) = read(&trial, "layer0/attn/query", step)?;
        let (_, key) = read(&trial, "layer0/attn/key", step)?;
        logits.push((
            step,
            heatmap::head_logits(&qshape, &query, &key, CONFIG.heads)?,
        ));
    }
    for (kind, what, maps) in [
        ("scores", "attention scores (softmax)", &scores),
        ("qk", "scaled query·key", &logits),
    ] {
        let range = heatmap::common_range(maps.iter().flat_map(|(_, g)| g))
            .ok_or("no finite values to draw")?;
        println!(
            "{what}, batch mean per head: colour scale from {:.4} (dark blue) to {:.4} (yellow)",
            range.0, range.1
        );
        for (step, grids) in maps {
            for (head, grid) in grids.iter().enumerate() {
                let path = pictures.join(format!("layer0_{kind}_step{step}_head{head}.png"));
                let (w, h) = heatmap::write_png(&path, grid, range, CELL)?;
                let (lo, hi) = grid.range().unwrap_or((f64::NAN, f64::NAN));
                println!(
                    "  {} ({w}x{h}; step {step}, head {head}: {lo:.4} .. {hi:.4})",
                    path.display()
                );
            }
        }
    }
    // A number to read off besides the pictures: how much each head's attention moved from uniform.
    let uniform = |g: &Grid| 1.0 / g.cols as f64;
    for (step, grids) in &scores {
        let spread: Vec<String> = grids
            .iter()
            .map(|g| {
                let u = uniform(g);
                let dev =
                    g.values.iter().map(|v| (v - u).abs()).sum::<f64>() / g.values.len() as f64;
                format!("{dev:.4}")
            })
            .collect();
        println!(
            "step {step}: mean |attention - uniform| per head: {}",
            spread.join(", ")
        );
    }
    Ok(())
}
