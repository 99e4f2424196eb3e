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

use std::process::ExitCode;
use std::time::{Duration, Instant};

use smdebug::prelude::*;
use smdebug::profiler::spans::SpanConfig;
use smdebug::profiler::system::SamplerConfig;
use smdebug_examples::digits::{self, Digits};
use smdebug_examples::{Bug, TrainConfig, train_in_session};

struct Args {
    /// A directory, or an object-store URL (`s3://bucket/run`, with `AWS_*` in the environment).
    out: String,
    epochs: usize,
    bug: Option<Bug>,
    side: usize,
    python_compatible: bool,
    /// The report in SageMaker's folder layout inside the run instead of `report/`.
    sagemaker_layout: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        out: "target/smdebug-demo/run".to_string(),
        epochs: 10,
        bug: None,
        side: 28,
        python_compatible: false,
        sagemaker_layout: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--out" => args.out = value("--out")?,
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
            "--sagemaker-layout" => args.sagemaker_layout = true,
            "-h" | "--help" => {
                println!(
                    "demo [--out DIR] [--epochs N] [--bug vanishing|dead-relu|exploding] [--side N] [--python-compatible] [--sagemaker-layout]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument `{other}` (try --help)")),
        }
    }
    Ok(args)
}

/// The capture plan: parameters and gradients every 10th training step with reductions beside
/// them, activations every 10th step, losses and metrics at every step of every mode, the
/// loss's inputs at every evaluation step.
fn capture_plan(session: SessionBuilder) -> smdebug_core::Result<SessionBuilder> {
    let stats = ReductionConfig {
        save_raw_tensor: true,
        reductions: ReductionConfig::parse_list("mean,std,abs_mean,l2_norm,zero_fraction")?,
        save_shape: false,
    };
    let every10 = SaveConfig::every(10).with_mode(Mode::Eval, SaveConfigMode::never());
    let eval_only =
        SaveConfig::new(SaveConfigMode::never()).with_mode(Mode::Eval, SaveConfigMode::every(1));
    Ok(session
        .save(SaveConfig::every(1))
        .collection(
            Collection::new("weights")
                .with_save_config(every10.clone())
                .with_reductions(stats.clone()),
        )
        .collection(Collection::new("biases").with_save_config(every10.clone()))
        .collection(
            Collection::new("gradients")
                .with_save_config(every10.clone())
                .with_reductions(stats),
        )
        .collection(
            Collection::new("outputs")
                .with_save_config(every10)
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
        // The loss's inputs (logits and labels) at every evaluation step: the model's
        // predictions on held-out images, which ClassImbalance and Confusion judge.
        .collection(Collection::new("labels").with_save_config(eval_only.clone()))
        .collection(Collection::new("predictions").with_save_config(eval_only))
        .tensorboard(true))
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let data = Digits::load(&digits::default_path())?;
    let (train_set, eval_set) = data.split(0.2, 1);

    let location = smdebug_examples::overhead::prepared_location(&args.out)?;

    // Everything beside the loop, in one session: capture (this toy model trains a step in
    // ~0.15 ms and saves ~20 MB a second, faster than files can be created on a busy machine:
    // the writer's queue holds at most 65,536 records and 256 MiB, about ten seconds of its
    // saving, a bound however long it trains; what does not fit is dropped and counted below,
    // never waited for), system sampling every 100 ms, the loop's phases, and the rules following the run as it is
    // written. Those that mean the job is broken stop it at its next step; ProfilerReport runs
    // every profiler rule, with patience and windows sized for a job of seconds, and writes the
    // report when the run ends. With --python-compatible the files are the ones Python
    // smdebug 1.0.34 reads (legacy checksums, SageMaker's `algo-1` node id).
    let cfg = TrainConfig {
        epochs: args.epochs,
        bug: args.bug,
        input_side: (args.side != 8).then_some(args.side),
        ..TrainConfig::default()
    };
    let stop = || ActionConfig::StopTraining;
    let session = capture_plan(Session::builder(&location))?
        // A previous demo run there is replaced: the run holds one job.
        .overwrite(true)
        // Every epoch's training and evaluation batches: the dashboard's ETA.
        .planned_steps(
            planned_steps(&cfg, train_set.len())
                + (cfg.epochs * eval_set.len().div_ceil(cfg.batch_size)) as u64,
        )
        .writer_queue(1 << 16)
        .writer_queue_bytes(256 << 20)
        // SageMaker's detailed profiling for 5 steps from step 50: a span per layer (`fc1`,
        // `relu1`, `fc2`) in the framework trace and the dashboard's timeline.
        .detailed_profiling(Window::steps(50, 5))
        .python_compatible(args.python_compatible)
        .system(
            SamplerConfig::default()
                .interval(Duration::from_millis(100))
                .publish_interval(Duration::from_secs(1)),
        )
        .spans(SpanConfig::default().close_interval(Duration::from_secs(1)))
        .rule_spec(RuleSpec::parse("VanishingGradient")?.action(stop()))
        .rule_spec(RuleSpec::parse("ExplodingTensor")?.action(stop()))
        .rule_spec(RuleSpec::parse("DeadRelu")?.action(stop()))
        .rules([
            "PoorWeightInitialization",
            "WeightUpdateRatio",
            "Overfit",
            "ClassImbalance",
        ])
        .rule(
            "ProfilerReport:CPUBottleneck_patience=5,IOBottleneck_patience=5,\
             LowGPUUtilization_patience=5,LowGPUUtilization_window=20,BatchSize_patience=5,\
             BatchSize_window=20,GPUMemoryIncrease_patience=5,LoadBalancing_patience=5,\
             StepOutlier_n_outliers=5",
        )
        .rules_poll_interval(Duration::from_millis(20))
        // The report (the page, its notebook and the rules' results) goes into the run's
        // `report/` folder, where the README says, wherever the run is; with
        // --sagemaker-layout into `rule-output/ProfilerReport-<timestamp>/profiler-output/`.
        .report(if args.sagemaker_layout {
            ReportTarget::SageMakerLayout
        } else {
            ReportTarget::RunFolder("report".into())
        });
    let mut session = session.start()?;
    // SageMaker's hook file (its `LocalPath`) may have put the run elsewhere: from here on, the
    // run is where the session writes it.
    let location = session.location().to_string();

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
    println!("capture, system sampling, spans and rules on; run {location}");
    let started = Instant::now();
    let summary = train_in_session(&cfg, &train_set, &eval_set, &mut session);
    let elapsed = started.elapsed();
    // Spans, system metrics, the end marker, then the rules' last look and the report.
    let done = session.finish()?;

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
        "trained {} steps in {:.2?}; the writer wrote {} records ({} bytes), dropped {}",
        summary.steps, elapsed, done.records_written, done.bytes_written, done.records_dropped,
    );
    for problem in &done.problems {
        println!("  problem: {problem}");
    }
    // SageMaker's files, when the environment names them (SMDEBUG_CONFIG_FILE_PATH,
    // SMPROFILER_CONFIG_PATH) or they are at SageMaker's paths.
    if !done.config_files.is_empty() {
        println!("  configured by {}", done.config_files.join(", "));
    }
    for warning in &done.config_warnings {
        println!("  configuration warning: {warning}");
    }

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
        "  profiler: {} system samples ({} records), {} spans in {} trace files ({} dropped)",
        done.system_samples,
        done.system_records,
        done.spans_written,
        done.span_files,
        done.spans_dropped
    );

    println!("\nrules (followed the run while it trained):");
    for r in &done.rules {
        let when = match r.first_fired_at() {
            Some(step) if r.kind == smdebug_rules::RuleInput::Tensors => {
                format!(" first at {step}")
            }
            Some(step) => format!(" first during {step}"),
            None if r.first_fired_time_us.is_some() => " first before the first step".into(),
            None => String::new(),
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
    if let Some(report) = &done.report {
        println!("profiling report: {report}");
    }
    println!(
        "\nlook closer:\n  open {} in a browser\n  cargo run -q -p smdebug-cli -- info {location}\n  cargo run -q -p smdebug-cli -- value {location} loss --all-steps --mode EVAL\n  tensorboard --logdir {location}/tensorboard",
        done.report.as_deref().unwrap_or("the report")
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
