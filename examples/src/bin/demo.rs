//! The main job: trains an MLP on the 8x8 digits set with capture on, writes a run directory on
//! local disk, then reads the run back and prints what it contains.
//!
//! ```sh
//! cargo run --release -p smdebug-examples --bin demo -- [--out DIR] [--epochs N]
//!     [--bug vanishing|dead-relu|exploding] [--python-compatible]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use smdebug_core::{
    Collection, Hook, Mode, Reduction, ReductionConfig, ReductionOp, SaveConfig, SaveConfigMode,
};
use smdebug_examples::digits::{self, Digits};
use smdebug_examples::{Bug, TrainConfig, train};
use smdebug_io::format::record::PayloadChecksum;
use smdebug_io::trial::Trial;
use smdebug_io::writer::Writer;
use smdebug_io::{OverflowPolicy, open_storage};

struct Args {
    out: PathBuf,
    epochs: usize,
    bug: Option<Bug>,
    python_compatible: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        out: PathBuf::from("target/smdebug-demo/run"),
        epochs: 10,
        bug: None,
        python_compatible: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--out" => args.out = PathBuf::from(value("--out")?),
            "--epochs" => {
                args.epochs = value("--epochs")?
                    .parse()
                    .map_err(|e| format!("--epochs: {e}"))?
            }
            "--bug" => args.bug = Some(value("--bug")?.parse()?),
            "--python-compatible" => args.python_compatible = true,
            "-h" | "--help" => {
                println!(
                    "demo [--out DIR] [--epochs N] [--bug vanishing|dead-relu|exploding] [--python-compatible]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument `{other}` (try --help)")),
        }
    }
    Ok(args)
}

/// The capture plan: parameters and gradients every 10th training step with reductions beside
/// them, activations every 10th step, losses and metrics at every step of every mode.
fn build_hook(writer: Writer) -> smdebug_core::Result<Hook> {
    let stats = ReductionConfig {
        save_raw_tensor: true,
        reductions: ReductionConfig::parse_list("mean,std,abs_mean,l2_norm,zero_fraction")?,
        save_shape: false,
    };
    let every10 = SaveConfig::every(10).with_mode(Mode::Eval, SaveConfigMode::never());
    Hook::builder()
        .save_config(SaveConfig::every(1))
        .collection(
            Collection::new("weights")
                .with_save_config(every10.clone())
                .with_reductions(stats.clone()),
        )
        .collection(Collection::new("biases").with_save_config(every10.clone()))
        .collection(
            Collection::new("gradients")
                .with_save_config(every10.clone())
                .with_reductions(stats.clone()),
        )
        .collection(
            Collection::new("outputs")
                .with_save_config(every10.clone())
                .with_reductions(ReductionConfig {
                    save_raw_tensor: true,
                    reductions: vec![
                        Reduction::new(ReductionOp::Mean),
                        Reduction::new(ReductionOp::ZeroFraction),
                    ],
                    save_shape: false,
                }),
        )
        .collection(
            Collection::new("inputs").with_save_config(SaveConfig::new(SaveConfigMode::steps([0]))),
        )
        .export_tensorboard(true)
        .build(writer)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let data = Digits::load(&digits::default_path())?;
    let (train_set, eval_set) = data.split(0.2, 1);

    if args.out.join("training_job_end.ts").exists() || args.out.join("index").exists() {
        // A previous demo run: start afresh so the run holds one job.
        std::fs::remove_dir_all(&args.out)?;
    }
    std::fs::create_dir_all(&args.out)?;
    let location = args.out.canonicalize()?.to_string_lossy().into_owned();

    let checksum = if args.python_compatible {
        PayloadChecksum::SmdebugLegacy
    } else {
        PayloadChecksum::Crc32c
    };
    let writer = Writer::builder(open_storage(&location)?)
        .checksum(checksum)
        // This toy model trains a step in ~0.15 ms, faster than files can be created; a deep
        // queue absorbs the burst (the byte bound still caps memory) so nothing is dropped.
        .queue_capacity(1 << 16)
        .overflow(OverflowPolicy::Drop)
        .build()?;
    let status = writer.status();
    let mut hook = build_hook(writer)?;

    let cfg = TrainConfig {
        epochs: args.epochs,
        bug: args.bug,
        ..TrainConfig::default()
    };
    println!(
        "training a {}-layer MLP on {} digits ({} held out) for {} epochs{}",
        smdebug_examples::build_model(&cfg, &mut smdebug_examples::mlp::Rng::new(cfg.seed))
            .layers
            .len(),
        train_set.len(),
        eval_set.len(),
        cfg.epochs,
        match cfg.bug {
            Some(b) => format!(", with bug {b:?}"),
            None => String::new(),
        }
    );
    let started = Instant::now();
    let summary = train(&cfg, &train_set, &eval_set, Some(&mut hook));
    hook.close();
    drop(hook); // the writer publishes everything and stops its thread
    let elapsed = started.elapsed();

    for (epoch, (loss, acc)) in summary
        .eval_loss
        .iter()
        .zip(&summary.eval_accuracy)
        .enumerate()
    {
        println!(
            "  epoch {:>2}: eval loss {loss:.4}, eval accuracy {:.1}%",
            epoch + 1,
            acc * 100.0
        );
    }
    println!(
        "trained {} steps in {:.2?}; the writer wrote {} records ({} bytes) in {} steps, dropped {}{}",
        summary.steps,
        elapsed,
        status.records_written(),
        status.bytes_written(),
        status.steps_written(),
        status.dropped(),
        status
            .error()
            .map(|e| format!(", error: {e}"))
            .unwrap_or_default()
    );

    // Read the run back, as an analysis tool would.
    let trial = Trial::open(&location)?;
    trial.wait_for_steps(&[], None, Duration::from_secs(1))?;
    let info = trial.info()?;
    println!("\nrun directory: {location}");
    println!(
        "  workers {:?}, modes {:?}, {} steps ({:?}), complete: {}",
        info.workers, info.modes, info.num_steps, info.steps_per_mode, info.complete
    );
    for c in trial.collections()? {
        let names = trial.tensor_names_filtered(Some(c.name()), None)?;
        if !names.is_empty() {
            println!(
                "  collection {:<10} {} tensors: {}",
                c.name(),
                names.len(),
                names.join(", ")
            );
        }
    }
    let loss = trial.tensor("loss")?;
    let train_steps = loss.steps(Some(Mode::Train))?;
    if let (Some(first), Some(last)) = (train_steps.first(), train_steps.last()) {
        let at = |s: u64| loss.value(s, Some(Mode::Train), None).map(|v| v.sum());
        println!(
            "  loss (TRAIN): step {first}: {:.4} -> step {last}: {:.4} ({} values)",
            at(*first)?,
            at(*last)?,
            train_steps.len()
        );
    }
    let grad = trial.tensor("gradient/fc1.weight")?;
    let gsteps = grad.steps(Some(Mode::Train))?;
    if let (Some(first), Some(last)) = (gsteps.first(), gsteps.last()) {
        let mean_abs = |s: u64| {
            grad.reduction_value(
                s,
                "abs_mean".parse().expect("valid"),
                Some(Mode::Train),
                None,
            )
        };
        println!(
            "  mean |gradient| of fc1.weight: step {first}: {:.3e} -> step {last}: {:.3e}",
            mean_abs(*first)?,
            mean_abs(*last)?
        );
    }
    let act = trial
        .tensor_names_filtered(Some("outputs"), None)?
        .into_iter()
        .next();
    if let Some(act) = act {
        let t = trial.tensor(&act)?;
        let steps = t.steps(Some(Mode::Train))?;
        if let Some(last) = steps.last() {
            let zf = t.reduction_value(
                *last,
                "zero_fraction".parse().expect("valid"),
                Some(Mode::Train),
                None,
            )?;
            println!("  {act}: share of zeros at step {last}: {:.1}%", zf * 100.0);
        }
    }
    if let Some(reason) = summary.stopped {
        println!("  the job stopped early: {reason}");
    }
    println!(
        "\nlook closer:\n  cargo run -q -p smdebug-cli -- info {location}\n  cargo run -q -p smdebug-cli -- value {location} loss --all-steps --mode EVAL\n  tensorboard --logdir {location}/tensorboard"
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("demo: {e}");
            ExitCode::FAILURE
        }
    }
}
