//! `smdebug`: inspect runs recorded by smdebug (Rust or Python) from the command line.
//!
//! Output is meant for scripts: JSON objects or one item per line on stdout, errors on stderr
//! with a non-zero exit status.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use smdebug_core::Mode;
use smdebug_io::trial::{StepSelector, Trial, TrialOptions};

#[derive(Parser)]
#[command(
    name = "smdebug",
    version,
    about = "Inspect smdebug runs: tensors, steps, values"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Summary of a run as JSON: workers, modes, number of steps, collections, completeness.
    Info {
        /// Run directory or object-store URL (s3://bucket/prefix, gs://, az://, memory://).
        run: String,
    },
    /// Tensor names, one per line.
    Tensors {
        run: String,
        /// Only tensors of this collection.
        #[arg(long)]
        collection: Option<String>,
        /// Only tensors whose names match this regex.
        #[arg(long)]
        regex: Option<String>,
    },
    /// Global steps, one per line, in order.
    Steps {
        run: String,
        /// Only steps recorded in this mode (TRAIN, EVAL, PREDICT, GLOBAL).
        #[arg(long)]
        mode: Option<Mode>,
    },
    /// A tensor's value as JSON {name, step, mode, mode_step, worker, dtype, shape, values}.
    Value(ValueArgs),
}

#[derive(Args)]
struct ValueArgs {
    run: String,
    tensor: String,
    /// Global step to read.
    #[arg(
        long,
        conflicts_with = "all_steps",
        required_unless_present = "all_steps"
    )]
    step: Option<u64>,
    /// Every step of the tensor, one JSON object per line, in step order.
    #[arg(long)]
    all_steps: bool,
    /// Only steps of this mode (with --step: the step must be of this mode).
    #[arg(long)]
    mode: Option<Mode>,
    /// Worker to read (default: the first worker that has the tensor).
    #[arg(long)]
    worker: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("smdebug: {e}");
            ExitCode::from(2)
        }
    }
}

type CliResult = Result<(), Box<dyn std::error::Error>>;

fn open(run: &str) -> Result<Trial, Box<dyn std::error::Error>> {
    Ok(Trial::open_with(run, TrialOptions::default())?)
}

fn run(cli: Cli) -> CliResult {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    match cli.command {
        Command::Info { run } => {
            let trial = open(&run)?;
            serde_json::to_writer_pretty(&mut out, &trial.info()?)?;
            writeln!(out)?;
        }
        Command::Tensors {
            run,
            collection,
            regex,
        } => {
            let trial = open(&run)?;
            let names = trial.tensor_names_filtered(collection.as_deref(), regex.as_deref())?;
            for n in names {
                writeln!(out, "{n}")?;
            }
        }
        Command::Steps { run, mode } => {
            let trial = open(&run)?;
            for s in trial.global_steps(mode)? {
                writeln!(out, "{s}")?;
            }
        }
        Command::Value(args) => {
            let trial = open(&args.run)?;
            let selector = match args.step {
                Some(s) => StepSelector::One(s),
                None => StepSelector::All,
            };
            let records =
                trial.tensor_records(&args.tensor, selector, args.mode, args.worker.as_deref())?;
            for r in records {
                serde_json::to_writer(&mut out, &r)?;
                writeln!(out)?;
            }
        }
    }
    out.flush()?;
    Ok(())
}
