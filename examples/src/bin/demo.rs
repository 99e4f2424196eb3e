//! The main job: trains an MLP on the digits set (resampled to 28×28 with on-the-fly
//! augmentation) with everything on — tensor capture, system sampling and framework spans —
//! while debugging and profiler rules follow the run in real time beside it. A rule configured
//! to stop (VanishingGradient, ExplodingTensor, DeadRelu) stops the job at its next step. At the
//! end the run is read back, the rules' verdicts are printed and the profiling report is written.
//!
//! ```sh
//! cargo run --release -p smdebug-examples --bin demo -- [--out DIR] [--epochs N]
//!     [--bug vanishing|dead-relu|exploding] [--side N] [--python-compatible]
//! ```

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use smdebug_core::{
    Collection, Hook, Mode, Reduction, ReductionConfig, ReductionOp, SaveConfig, SaveConfigMode,
};
use smdebug_examples::digits::{self, Digits};
use smdebug_examples::{Bug, TrainConfig, train_profiled};
use smdebug_io::format::record::PayloadChecksum;
use smdebug_io::trial::Trial;
use smdebug_io::writer::Writer;
use smdebug_io::{OverflowPolicy, open_storage};
use smdebug_profiler::spans::{SpanConfig, SpanRecorder};
use smdebug_profiler::system::{SamplerConfig, SystemSampler};
use smdebug_report::ReportWriter;
use smdebug_rules::{ActionConfig, RuleRunner, RuleSpec};

struct Args {
    out: PathBuf,
    epochs: usize,
    bug: Option<Bug>,
    side: usize,
    python_compatible: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        out: PathBuf::from("target/smdebug-demo/run"),
        epochs: 10,
        bug: None,
        side: 28,
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
            "--side" => {
                args.side = value("--side")?
                    .parse()
                    .map_err(|e| format!("--side: {e}"))?;
                if args.side == 0 {
                    return Err("--side must be at least 1 (8 is the original resolution)".into());
                }
            }
            "--python-compatible" => args.python_compatible = true,
            "-h" | "--help" => {
                println!(
                    "demo [--out DIR] [--epochs N] [--bug vanishing|dead-relu|exploding] [--side N] [--python-compatible]"
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
    let report_path = args
        .out
        .canonicalize()?
        .join("report")
        .join("profiler-report.html");

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

    // Hardware and the loop's phases: the sampler (every 100 ms, republished every second so
    // the profiler rules see it live) and framework spans (files closed every second).
    // With --python-compatible the node is SageMaker's `algo-1`, the only node id Python
    // smdebug's system-metrics reader lists.
    let mut sampler_config = SamplerConfig::default()
        .interval(Duration::from_millis(100))
        .publish_interval(Duration::from_secs(1));
    let mut span_config = SpanConfig::default().close_interval(Duration::from_secs(1));
    if args.python_compatible {
        sampler_config = sampler_config.python_compatible(0);
        span_config = span_config.python_compatible(0);
    }
    let sampler = SystemSampler::start_local(sampler_config, &args.out)?;
    let (spans, span_writer) = SpanRecorder::start_local(span_config, &args.out)?;

    // The rules, following the run on their own thread as it is written. Those that mean the
    // job is broken stop it (the hook sees the request at its next step); ProfilerReport runs
    // every profiler rule, with patience and windows sized for a job of seconds, and writes the
    // report when the run ends.
    let stop = || ActionConfig::StopTraining;
    let runner = RuleRunner::builder(&location)
        .spec(RuleSpec::parse("VanishingGradient")?.action(stop()))
        .spec(RuleSpec::parse("ExplodingTensor")?.action(stop()))
        .spec(RuleSpec::parse("DeadRelu")?.action(stop()))
        .spec(RuleSpec::parse("PoorWeightInitialization")?)
        .spec(RuleSpec::parse("WeightUpdateRatio")?)
        .spec(RuleSpec::parse("Overfit")?)
        .spec(RuleSpec::parse(
            "ProfilerReport:CPUBottleneck_patience=5,IOBottleneck_patience=5,\
             LowGPUUtilization_patience=5,LowGPUUtilization_window=20,BatchSize_patience=5,\
             BatchSize_window=20,GPUMemoryIncrease_patience=5,LoadBalancing_patience=5,\
             StepOutlier_n_outliers=5",
        )?)
        .stop_signal(hook.stop_signal())
        .poll_interval(Duration::from_millis(20))
        .reporter(ReportWriter::to_file(&report_path))
        .open_timeout(Duration::from_secs(60))
        .spawn()?;

    let cfg = TrainConfig {
        epochs: args.epochs,
        bug: args.bug,
        input_side: (args.side != 8).then_some(args.side),
        ..TrainConfig::default()
    };
    println!(
        "training a {}-layer MLP on {} digits at {side}x{side} ({} held out) for {} epochs{}",
        smdebug_examples::build_model(&cfg, &mut smdebug_examples::mlp::Rng::new(cfg.seed))
            .layers
            .len(),
        train_set.len(),
        eval_set.len(),
        cfg.epochs,
        match cfg.bug {
            Some(b) => format!(", with bug {b:?}"),
            None => String::new(),
        },
        side = args.side,
    );
    println!("capture, system sampling, spans and rules on; run directory {location}");
    let started = Instant::now();
    let summary = train_profiled(&cfg, &train_set, &eval_set, Some(&mut hook), Some(&spans));
    let elapsed = started.elapsed();
    // Publish the profiler data first, then end the run: the end marker tells the rules that
    // everything is in.
    let span_report = span_writer.finish()?;
    let sampler_report = sampler.stop()?;
    hook.close();
    drop(hook); // the writer publishes everything and stops its thread
    let rules = runner.join()?;

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
    println!(
        "  profiler: {} system samples ({} records), {} spans in {} trace files",
        sampler_report.samples, sampler_report.records, span_report.written, span_report.files
    );

    println!("\nrules (followed the run while it trained):");
    for r in &rules.rules {
        let when = match (r.first_fired_step, r.first_fired_time_us) {
            (Some(step), _) if r.kind == "debugging" => format!(" first at step {step}"),
            (_, Some(_)) | (Some(_), None) => format!(
                " first during step {}",
                r.first_fired_step.unwrap_or_default()
            ),
            _ => String::new(),
        };
        println!(
            "  {:<26} {:<13}{when}{}",
            r.rule,
            format!("{:?}", r.status),
            if r.message.is_empty() {
                String::new()
            } else {
                format!("\n  {:<26} {}", "", truncate(&r.message, 150))
            }
        );
    }
    match &summary.stopped {
        Some(reason) => println!(
            "\nthe job STOPPED EARLY after {} of {} planned training steps: {reason}",
            summary.steps,
            planned_steps(&cfg, train_set.len())
        ),
        None => println!("\nthe job ran to the end: no rule asked it to stop"),
    }
    println!("profiling report: {}", report_path.display());
    println!(
        "\nlook closer:\n  open {} in a browser\n  cargo run -q -p smdebug-cli -- info {location}\n  cargo run -q -p smdebug-cli -- value {location} loss --all-steps --mode EVAL\n  tensorboard --logdir {location}/tensorboard",
        report_path.display()
    );
    // Last line: the dashboard of this run (live while a run is written, here after it ended).
    println!("\nthe dashboard of this run:\n  cargo run -q -p smdebug-cli -- serve {location}");
    Ok(())
}

fn main() -> ExitCode {
    // The libraries report through `log` (a storage error that disables capture is an error);
    // show errors on stderr unless RUST_LOG asks for more.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("error")).init();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("demo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// At most `n` characters of `text`, with an ellipsis when cut.
fn truncate(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// Training steps the configuration plans (every epoch's batches).
fn planned_steps(cfg: &TrainConfig, examples: usize) -> u64 {
    (cfg.epochs * examples.div_ceil(cfg.batch_size)) as u64
}
