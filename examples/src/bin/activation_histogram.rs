//! Reads a run back with `Trial` and prints one tensor's histogram at every saved step: the
//! picture of ReLUs dying, as the share of exact zeros grows and what is left shrinks toward 0.
//!
//! ```sh
//! # trains the digits MLP with a learning rate that kills its ReLUs, then prints the histograms
//! cargo run --release -p smdebug-examples --bin activation_histogram
//! # any run and tensor
//! cargo run --release -p smdebug-examples --bin activation_histogram -- --run DIR|URL --tensor relu1.output
//! ```

#![forbid(unsafe_code)]

use std::process::ExitCode;

use smdebug::prelude::*;
use smdebug_examples::digits::{self, Digits};
use smdebug_examples::{TrainConfig, train_in_session};
use smdebug_io::OverflowPolicy;

struct Args {
    run: Option<String>,
    out: String,
    tensor: String,
    bins: usize,
    learning_rate: f32,
    epochs: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        run: None,
        out: "target/smdebug-demo/dying_relu".into(),
        tensor: "relu1.output".into(),
        bins: 24,
        learning_rate: 1.5,
        epochs: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--run" => args.run = Some(value("--run")?),
            "--out" => args.out = value("--out")?,
            "--tensor" => args.tensor = value("--tensor")?,
            "--bins" => {
                args.bins = value("--bins")?
                    .parse()
                    .map_err(|e| format!("--bins: {e}"))?
            }
            "--lr" => {
                args.learning_rate = value("--lr")?.parse().map_err(|e| format!("--lr: {e}"))?
            }
            "--epochs" => {
                args.epochs = value("--epochs")?
                    .parse()
                    .map_err(|e| format!("--epochs: {e}"))?
            }
            "-h" | "--help" => {
                println!(
                    "activation_histogram [--run DIR|URL | --out DIR --lr LR --epochs N] [--tensor NAME] [--bins N]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument `{other}` (try --help)")),
        }
    }
    if args.bins < 2 {
        return Err("--bins must be at least 2".into());
    }
    Ok(args)
}

fn main() -> ExitCode {
    // The libraries report through `log` (a storage error that disables capture is an error);
    // show errors on stderr unless RUST_LOG asks for more.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("error")).init();
    match parse_args().map_err(Into::into).and_then(run) {
        Ok(()) => ExitCode::SUCCESS,
        // `| head` closed the pipe: not an error of this program.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("activation_histogram: {e}");
            ExitCode::FAILURE
        }
    }
}

type AnyError = Box<dyn std::error::Error>;

fn run(args: Args) -> Result<(), AnyError> {
    let location = match &args.run {
        Some(run) => run.clone(),
        None => record_run(&args)?,
    };
    let trial = Trial::open(&location)?;
    let tensor = trial.tensor(&args.tensor)?;
    let steps = tensor.steps(Some(Mode::Train))?;
    if steps.is_empty() {
        return Err(format!("{} has no TRAIN steps in {location}", args.tensor).into());
    }
    // One value range for every step, so the rows compare.
    let mut values = Vec::with_capacity(steps.len());
    let mut hi = 0f64;
    let mut lo = 0f64;
    for &s in &steps {
        let v: Vec<f64> = tensor
            .value(s, Some(Mode::Train), None)?
            .iter()
            .copied()
            .filter(|x| x.is_finite())
            .collect();
        for x in &v {
            hi = hi.max(*x);
            lo = lo.min(*x);
        }
        values.push(v);
    }
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} in {location}: share of exact zeros, then a histogram of the other values over [{lo:.3}, {hi:.3}] ({} bins), then their mean",
        args.tensor, args.bins
    )?;
    for (s, v) in steps.iter().zip(&values) {
        let h = Histogram::of(v, lo, hi, args.bins);
        writeln!(
            out,
            "step {s:>5}  zeros {:>5.1}%  |{}|  mean {:.4}",
            h.zero_share * 100.0,
            h.sparkline(),
            h.nonzero_mean
        )?;
    }
    Ok(())
}

/// Trains the digits MLP with capture of its activations every 10th step.
fn record_run(args: &Args) -> Result<String, AnyError> {
    let dir = std::path::Path::new(&args.out);
    std::fs::create_dir_all(dir)?;
    let location = dir.canonicalize()?.to_string_lossy().into_owned();
    let mut session = Session::builder(&location)
        // The run an earlier start left there is replaced (its own files only: a folder that
        // holds anything else is refused).
        .overwrite(true)
        .writer_queue(1 << 14)
        .overflow(OverflowPolicy::Block)
        .save(SaveConfig::every(1))
        .collection(Collection::new("outputs").with_save_config(SaveConfig::every(10)))
        .start()?;
    // SageMaker's hook file (its `LocalPath`) may have put the run elsewhere.
    let location = session.location().to_string();
    let data = Digits::load(&digits::default_path())?;
    let (train_set, eval_set) = data.split(0.2, 1);
    let cfg = TrainConfig {
        epochs: args.epochs,
        learning_rate: args.learning_rate,
        ..TrainConfig::default()
    };
    println!(
        "training the digits MLP for {} epochs at learning rate {} into {location}",
        cfg.epochs, cfg.learning_rate
    );
    let summary = train_in_session(&cfg, &train_set, &eval_set, &mut session);
    let run = session.finish()?;
    if !run.problems.is_empty() || run.records_dropped > 0 {
        return Err(format!("the run is incomplete:\n{run}").into());
    }
    println!(
        "held-out accuracy after each epoch: {:?}",
        summary
            .eval_accuracy
            .iter()
            .map(|a| format!("{:.1}%", a * 100.0))
            .collect::<Vec<_>>()
    );
    Ok(location)
}

/// A histogram that keeps exact zeros apart: a dead ReLU's output is exactly 0.
struct Histogram {
    zero_share: f64,
    counts: Vec<u64>,
    nonzero_mean: f64,
}

impl Histogram {
    fn of(values: &[f64], lo: f64, hi: f64, bins: usize) -> Histogram {
        let mut counts = vec![0u64; bins];
        let (mut zeros, mut sum, mut n) = (0usize, 0.0, 0usize);
        let width = (hi - lo).max(f64::MIN_POSITIVE) / bins as f64;
        for &x in values {
            if x == 0.0 {
                zeros += 1;
                continue;
            }
            let b = (((x - lo) / width) as usize).min(bins - 1);
            counts[b] += 1;
            sum += x;
            n += 1;
        }
        Histogram {
            zero_share: zeros as f64 / values.len().max(1) as f64,
            counts,
            nonzero_mean: if n > 0 { sum / n as f64 } else { 0.0 },
        }
    }

    /// One character per bin, its height the bin's share of the fullest bin.
    fn sparkline(&self) -> String {
        const LEVELS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
        let max = self.counts.iter().copied().max().unwrap_or(0).max(1);
        self.counts
            .iter()
            .map(|&c| {
                if c == 0 {
                    ' '
                } else {
                    LEVELS[1 + (c * 7 / max) as usize]
                }
            })
            .collect()
    }
}
