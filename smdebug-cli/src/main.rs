//! `smdebug`: inspect runs recorded by smdebug (Rust or Python) from the command line.
//!
//! Output is meant for scripts: JSON objects or one item per line on stdout, errors on stderr
//! with a non-zero exit status: 0 clean, 1 a rule found issues (`rules`, `report`), 2 an error.
//! No subcommand but `profile` writes into a run unless asked to.

// One function calls the allocator's C API (`tune_allocator`, documented there); nothing else
// is unsafe.
#![deny(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// mimalloc rather than glibc's malloc: `smdebug serve` reads a run on several threads, and glibc
/// keeps what each thread frees in that thread's arena. On the synthetic 1-hour run, glibc with
/// its arenas capped at two held 279 MB after a person's clicks, and spent 13 % of the load's
/// CPU time in malloc and free (BENCHMARKS.md, "The server while a person clicks"). mimalloc's
/// current major version (v3), with its arenas committed as they are used (`.cargo/config.toml`
/// sets that default at build time): on the same run it held 151–180 MB once loaded, where v2
/// held 192–216 MB and v3 with its arenas committed whole 183–189 MB.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod report_cmd;
mod rules_cmd;
mod serve_cmd;
use smdebug_core::Mode;
use smdebug_read::trial::{DEFAULT_MAX_TENSOR_BYTES, StepSelector, Trial, TrialOptions};
use smdebug_storage::Location;

/// The exit statuses of the reading subcommands, as `--help` shows them.
const READ_EXIT_STATUS: &str = "Exit status: 0 success; 2 an error (no such run, a corrupt \
or unreadable file, a bad argument). The run is only read.";

#[derive(Parser)]
#[command(
    name = "smdebug",
    version,
    about = "Inspect smdebug runs: tensors, steps, values",
    after_help = "Exit status: 0 clean; 1 a rule found issues (rules, report); 2 an error, an \
error in any rule included, or a rule asked for with --rule that had no data to check \
(NoData); profile exits with its command's status, or 2 when the command succeeded but system \
metrics were not stored. Nothing is written into a run unless asked \
(rules --write-into-run, profile --out)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The most bytes reading one tensor may allocate: its decoded values and what the command
    /// makes of them (f64 values, JSON numbers), counted from the record's header before
    /// anything is decoded. A tensor over it is an error naming the file, the tensor and the
    /// size. Default 1 GiB.
    #[arg(long, global = true, value_name = "BYTES", default_value_t = DEFAULT_MAX_TENSOR_BYTES)]
    max_tensor_bytes: u64,
    /// How long `info`, `tensors`, `steps`, `value`, `rules` and `report` wait for an object
    /// store: one request (and its retries) that gets no answer within this many seconds is an
    /// error saying so. Local runs ignore it.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    storage_timeout: u64,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate debugging rules over a run (offline, or --follow a live one); exit 0 no
    /// issues, 1 issues found, 2 on any error or when a rule asked for had no data.
    Rules(rules_cmd::RulesArgs),
    /// Write the profiling report of a run: one self-contained HTML file (system usage, framework
    /// metrics, every rule's result, step durations, GPU sections, scalars) and one JSON result
    /// per rule beside it; --follow regenerates it while the run is written.
    Report(report_cmd::ReportArgs),
    /// Serve a live dashboard of one or more runs (system, steps, tensors, rules, Kineto) on
    /// 127.0.0.1; prints its URL on the first line and serves until interrupted.
    Serve(serve_cmd::ServeArgs),
    /// Summary of a run as JSON: workers, modes, number of steps, collections, completeness.
    #[command(after_help = READ_EXIT_STATUS)]
    Info {
        /// Run directory or object-store URL (s3://bucket/prefix, gs://, az://).
        run: Location,
    },
    /// Tensor names, one per line (control characters shown escaped, as `\u{1b}`).
    #[command(after_help = READ_EXIT_STATUS)]
    Tensors {
        run: Location,
        /// Only tensors of this collection.
        #[arg(long)]
        collection: Option<String>,
        /// Only tensors whose names match this regex.
        #[arg(long)]
        regex: Option<String>,
    },
    /// Global steps, one per line, in order: the complete ones (every worker the run declares
    /// wrote them, or the run ended), as Python smdebug's `steps()` lists them.
    #[command(after_help = READ_EXIT_STATUS)]
    Steps {
        run: Location,
        /// Only steps recorded in this mode (TRAIN, EVAL, PREDICT, GLOBAL).
        #[arg(long)]
        mode: Option<Mode>,
        /// Also steps not every worker has written yet (Python smdebug's
        /// `show_incomplete_steps`).
        #[arg(long)]
        incomplete: bool,
    },
    /// A tensor's value as JSON {name, step, mode, mode_step, worker, dtype, shape, values}.
    #[command(after_help = READ_EXIT_STATUS)]
    Value(ValueArgs),
    /// Operator and GPU-kernel breakdowns of PyTorch profiler (Kineto) traces (.json or .json.gz).
    #[command(
        after_help = "Exit status: 0 success; 2 an error (a trace that cannot be read). \
Events whose ts or end lie beyond ±2^53 µs are counted as skipped, not summed; control \
characters in names are shown escaped in the tables."
    )]
    Trace {
        /// Trace files, one per rank.
        #[arg(required = true)]
        traces: Vec<std::path::PathBuf>,
        /// Print the full breakdown as JSON instead of tables.
        #[arg(long)]
        json: bool,
        /// Rows per table in the text output.
        #[arg(long, default_value_t = 15)]
        top: usize,
    },
    /// Run a command under the system sampler (host metrics and the command's process tree);
    /// exits with the command's status.
    #[command(
        after_help = "Exit status: the command's (128 + N when signal N ended it); 2 \
when it could not be profiled at all (a bad option, an --out that cannot be a run directory or \
cannot be written, a command that cannot start), or when the command succeeded but system \
metrics were not stored (a disk that filled)."
    )]
    Profile {
        /// Sampling interval in milliseconds (100 to 60000).
        #[arg(long, default_value_t = 500)]
        interval: u64,
        /// Run directory or object-store URL the metrics go to.
        #[arg(long, default_value = "smdebug-profile")]
        out: Location,
        /// Node id written into the metrics (default: from the host name; `algo-1` style ids
        /// are what Python smdebug's readers look for).
        #[arg(long)]
        node: Option<String>,
        /// The command and its arguments (after `--`).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
}

#[derive(Args)]
struct ValueArgs {
    run: Location,
    tensor: String,
    /// Global step to read.
    #[arg(
        long,
        conflicts_with = "all_steps",
        required_unless_present = "all_steps"
    )]
    step: Option<u64>,
    /// Every complete step of the tensor, one JSON object per line, in step order.
    #[arg(long)]
    all_steps: bool,
    /// Only steps of this mode (with --step: the step must be of this mode).
    #[arg(long)]
    mode: Option<Mode>,
    /// Worker to read (default: the first worker that has the tensor).
    #[arg(long)]
    worker: Option<String>,
}

/// Shows what the libraries log on stderr, each line as `smdebug: warning: ...`: warnings and
/// errors, or what `SMDEBUG_LOG` asks for (`off`, `error`, `info`, `debug`, or per module as
/// `RUST_LOG` takes it: `smdebug_io=debug`).
fn install_logger() {
    env_logger::Builder::new()
        .filter_level(log::LevelFilter::Warn)
        .parse_env(env_logger::Env::new().filter("SMDEBUG_LOG"))
        .format(|out, record| {
            let level = match record.level() {
                log::Level::Error => "error",
                log::Level::Warn => "warning",
                log::Level::Info => "info",
                log::Level::Debug => "debug",
                log::Level::Trace => "trace",
            };
            let message = record.args().to_string();
            // Some messages name smdebug already.
            let message = message.strip_prefix("smdebug: ").unwrap_or(&message);
            writeln!(out, "smdebug: {level}: {message}")
        })
        .init();
}

/// mimalloc v3's `mi_option_purge_delay` (index 15 of its `mi_option_e`; libmimalloc-sys names
/// no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc v3's default purge delay, ms: what `MI_OPTION_PURGE_DELAY` reads when it is that
/// option and nothing set it.
const MI_DEFAULT_PURGE_DELAY_MS: std::os::raw::c_long = 1000;

/// Memory freed is given back to the system after this long, ms.
const PURGE_DELAY_MS: std::os::raw::c_long = 100;

/// Has mimalloc give freed memory back to the system after 100 ms instead of its default 1 s.
/// `smdebug serve` reads a run in bursts (a whole run at start, a report, a zoom); with the
/// default, the pages a burst freed stay counted in the server's resident memory for a second.
/// On the synthetic 1-hour run, RSS when everything is served was 145–159 MB with 1 s and
/// 106–111 MB with 100 ms, for under 0.1 s more CPU (BENCHMARKS.md). A `MIMALLOC_PURGE_DELAY`
/// in the environment is left to win, and nothing is set unless the option reads mimalloc v3's
/// default (so a library with another option layout is left alone).
#[allow(unsafe_code)]
fn tune_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: mimalloc's option calls take a plain integer option and value and touch only
    // its option table, which is not synchronized: this runs first thing in `main`, before
    // the command starts any other thread.
    unsafe {
        if libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) == MI_DEFAULT_PURGE_DELAY_MS {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
        }
    }
}

fn main() -> ExitCode {
    tune_allocator();
    install_logger();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("smdebug: {e}");
            ExitCode::from(2)
        }
    }
}

type CliResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// The run, its warnings on stderr as the reader logs them (once each, when first seen).
fn open(
    run: &Location,
    max_tensor_bytes: u64,
    storage_timeout: u64,
) -> Result<Trial, Box<dyn std::error::Error>> {
    let options = TrialOptions {
        max_tensor_bytes,
        ..TrialOptions::default()
    };
    match object_store(run, storage_timeout)? {
        Some(storage) => Ok(Trial::from_storage(&run.to_string(), storage, options)?),
        None => Ok(Trial::open_with(run, options)?),
    }
}

/// The storage of `run` when it is an object store, given `storage_timeout` seconds a request,
/// retries included; `None` for a local run.
pub(crate) fn object_store(
    run: &Location,
    storage_timeout: u64,
) -> Result<Option<std::sync::Arc<dyn smdebug_storage::Storage>>, smdebug_storage::Error> {
    if run.is_local() {
        return Ok(None);
    }
    let timeout = std::time::Duration::from_secs(storage_timeout);
    let options = smdebug_storage::StorageOptions {
        connect_timeout: timeout.min(smdebug_storage::StorageOptions::default().connect_timeout),
        request_timeout: timeout,
        retry_timeout: timeout,
        ..smdebug_storage::StorageOptions::default()
    };
    smdebug_storage::open_storage_with(run, &options).map(Some)
}

fn run(cli: Cli) -> CliResult {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    match cli.command {
        Command::Rules(args) => {
            return Ok(rules_cmd::run(
                args,
                cli.max_tensor_bytes,
                cli.storage_timeout,
            ));
        }
        Command::Report(args) => {
            return Ok(report_cmd::run(
                args,
                cli.max_tensor_bytes,
                cli.storage_timeout,
            ));
        }
        Command::Serve(args) => return Ok(serve_cmd::run(args, cli.max_tensor_bytes)),
        Command::Info { run } => {
            let trial = open(&run, cli.max_tensor_bytes, cli.storage_timeout)?;
            serde_json::to_writer_pretty(&mut out, &trial.info()?)?;
            writeln!(out)?;
        }
        Command::Tensors {
            run,
            collection,
            regex,
        } => {
            let trial = open(&run, cli.max_tensor_bytes, cli.storage_timeout)?;
            let names = trial.tensor_names_filtered(collection.as_deref(), regex.as_deref())?;
            for n in names {
                writeln!(out, "{}", smdebug_core::text::escape_controls(&n))?;
            }
        }
        Command::Steps {
            run,
            mode,
            incomplete,
        } => {
            let trial = open(&run, cli.max_tensor_bytes, cli.storage_timeout)?;
            let steps = if incomplete {
                trial.all_global_steps(mode)?
            } else {
                trial.global_steps(mode)?
            };
            for s in steps {
                writeln!(out, "{s}")?;
            }
        }
        Command::Value(args) => {
            let trial = open(&args.run, cli.max_tensor_bytes, cli.storage_timeout)?;
            let selector = match args.step {
                Some(s) => StepSelector::One(s),
                None => StepSelector::All,
            };
            // One value read, printed and dropped at a time.
            let records = trial.tensor_records_iter(
                &args.tensor,
                selector,
                args.mode,
                args.worker.as_deref(),
            )?;
            for r in records {
                serde_json::to_writer(&mut out, &r?)?;
                writeln!(out)?;
            }
        }
        Command::Trace { traces, json, top } => {
            let report = smdebug_read::summarize_traces(&traces)?;
            if json {
                serde_json::to_writer(&mut out, &report)?;
                writeln!(out)?;
            } else {
                write!(out, "{}", smdebug_read::render_text(&report, top))?;
            }
        }
        Command::Profile {
            interval,
            out: run_dir,
            node,
            command,
        } => return Ok(profile(interval, &run_dir, node.as_deref(), &command)),
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `smdebug profile`: the exit status is the command's (128 + signal when a signal ended it), or
/// 2 when the command could not be profiled at all.
fn profile(interval_ms: u64, out: &Location, node: Option<&str>, command: &[String]) -> ExitCode {
    use smdebug_profiler::system::{NodeId, SamplerConfig};
    let setup = || -> Result<_, Box<dyn std::error::Error>> {
        let mut config =
            SamplerConfig::default().interval(std::time::Duration::from_millis(interval_ms));
        if let Some(n) = node {
            config = config.node(NodeId::new(n)?);
        }
        config.validate()?;
        if let Some(dir) = out.local_path() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("--out {out}: cannot create the run directory: {e}"))?;
        }
        let store = smdebug_storage::open_storage(out)?;
        // A location that takes no writes is refused before the command runs.
        smdebug_io::run_folder::probe_write(store.as_ref(), "profile")
            .map_err(|e| format!("--out {out} cannot be written: {e}"))?;
        Ok((config, store))
    };
    let (config, store) = match setup() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("smdebug: {e}");
            return ExitCode::from(2);
        }
    };
    let mut cmd = std::process::Command::new(&command[0]);
    cmd.args(&command[1..]);
    match smdebug_profiler::profile_command(cmd, config, store) {
        Ok(done) => {
            eprintln!(
                "smdebug: {} samples ({} records) in {out}/system/incremental; sampler CPU {}",
                done.sampler.samples,
                done.sampler.records,
                done.sampler
                    .cpu_share()
                    .map(|s| format!("{:.2}% of one core", s * 100.0))
                    .unwrap_or_else(|| "unknown".into())
            );
            if let Some(e) = &done.sampler.last_write_error {
                eprintln!("smdebug: some metrics could not be written: {e}");
            }
            if done.sampler.records_lost > 0 {
                eprintln!(
                    "smdebug: {} records were not stored",
                    done.sampler.records_lost
                );
                if done.status.success() {
                    return ExitCode::from(2);
                }
            }
            exit_code_of(done.status)
        }
        Err(e) => {
            eprintln!("smdebug: {e}");
            ExitCode::from(2)
        }
    }
}

fn exit_code_of(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(code.clamp(0, 255) as u8),
        (None, Some(sig)) => ExitCode::from((128 + sig).clamp(0, 255) as u8),
        _ => ExitCode::FAILURE,
    }
}
