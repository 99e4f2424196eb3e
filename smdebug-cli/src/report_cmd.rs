//! `smdebug report`: the profiling report of a run (one self-contained HTML file, and one JSON
//! file per rule when `--rule-json` names a folder), offline or regenerated while the run is
//! being written.
//!
//! The rules are evaluated as `smdebug rules` evaluates them (the default set, or `--rule`), plus
//! `ProfilerReport` (every profiler rule); nothing is written into the run (unless `-o` points
//! there). Exit status: see [`EXIT_STATUS`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::Args;
use smdebug_core::text::escape_controls;
use smdebug_report::{LoadOptions, ReportInput, ReportWriter, offline_runner, write_report_to};
use smdebug_rules::report::{PROFILER_REPORT, REPORT_FILE, default_specs, is_profiler_report};
use smdebug_rules::{RuleRunner, RuleSpec, Status, Summary};
use smdebug_storage::Location;

/// The exit statuses, as `--help` shows them.
pub(crate) const EXIT_STATUS: &str = "Exit status: 0 the report was written and no rule found an \
issue; 1 it was written and some rule found issues; 2 an error: the report could not be \
written, a --trace could not be read (the page is still written, without it), a bad rule or \
run, any rule that ended in Error (the page shows it), a rule asked for with --rule that had no \
data to check (NoData), or --follow giving up after --idle-timeout. The run is only read.";

#[derive(Args)]
#[command(after_help = EXIT_STATUS)]
pub(crate) struct ReportArgs {
    /// Run directory or object-store URL. May be left out when `--trace` is given: the report
    /// then shows the traces' operator breakdowns only.
    #[arg(required_unless_present = "traces")]
    run: Option<Location>,
    /// The HTML file to write. Beside it go only files named after it: its notebook
    /// (`<name>.ipynb`, to rerun the analysis with the Python package smdebug_rs) and the
    /// rules' summary the notebook reads (`<name>.rules.json`). An existing directory gets
    /// `profiler-report.html` inside it.
    #[arg(short, long)]
    out: PathBuf,
    /// A folder for the rules' results, one `<RuleName>.json` each (created when missing).
    #[arg(long, value_name = "DIR")]
    rule_json: Option<PathBuf>,
    /// Follow a live run: regenerate the report every `--interval` seconds until the run ends
    /// (waits up to 10 minutes for the run to appear).
    #[arg(long)]
    follow: bool,
    /// Seconds between regenerations with `--follow`.
    #[arg(long, default_value_t = 10)]
    interval: u64,
    /// With --follow: give up (exit 2, the report as it stands written) when nothing new
    /// arrives for this many seconds, as when the writer died without writing its end marker;
    /// 0 waits forever.
    #[arg(long, value_name = "SECS", default_value_t = 1800, requires = "follow")]
    idle_timeout: u64,
    /// A PyTorch profiler (Kineto) trace to include, .json or .json.gz (repeatable).
    #[arg(long = "trace")]
    traces: Vec<PathBuf>,
    /// A rule, `NAME` or `NAME:param=value,...` (repeatable). Default: every debugging rule that
    /// needs no parameter; ProfilerReport (every profiler rule) is always added.
    #[arg(long = "rule")]
    rules: Vec<String>,
}

pub(crate) fn run(args: ReportArgs, max_tensor_bytes: u64, storage_timeout: u64) -> ExitCode {
    match report(args, max_tensor_bytes, storage_timeout) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("smdebug: {e}");
            ExitCode::from(2)
        }
    }
}

/// Where the page goes: `out`, or `profiler-report.html` in it when it is a directory.
fn html_path(out: &Path) -> PathBuf {
    if out.is_dir() {
        out.join(REPORT_FILE)
    } else {
        out.to_path_buf()
    }
}

fn report(
    args: ReportArgs,
    max_tensor_bytes: u64,
    storage_timeout: u64,
) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let out = html_path(&args.out);
    let Some(run) = args.run.clone() else {
        // Traces only: no rules, every run section says its data is missing.
        let input = ReportInput::load(
            "",
            &LoadOptions {
                traces: args.traces.clone(),
                tensors: false,
                ..LoadOptions::default()
            },
        );
        let written = write_report_to(&input, &out)?;
        println!("report: {}", written.html);
        let failures = input.trace_failures();
        for f in &failures {
            eprintln!("smdebug: {}", escape_controls(f));
        }
        return Ok(if failures.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(2)
        });
    };
    let mut specs = Vec::new();
    for r in &args.rules {
        specs.push(RuleSpec::parse(r)?);
    }
    let asked_for = crate::rules_cmd::summary_names(&specs);
    if specs.is_empty() {
        specs = default_specs(args.follow, true);
    } else if !specs.iter().any(|s| is_profiler_report(&s.name)) {
        specs.push(RuleSpec::new(PROFILER_REPORT));
    }
    let store = crate::object_store(&run, storage_timeout)?;
    let mut writer = ReportWriter::to_file(&out).traces(args.traces.clone());
    if let Some(dir) = &args.rule_json {
        writer = writer.rule_files_to(dir);
    }
    let mut builder = RuleRunner::builder(&run)
        .max_tensor_bytes(max_tensor_bytes)
        .write_into_run(false);
    for s in specs {
        builder = builder.spec(s);
    }
    builder = if args.follow {
        if let Some(store) = store {
            builder = builder.storage(store);
        }
        builder.reporter(writer)
    } else {
        // The report's scalar curves are read on a second thread while the rules evaluate the
        // run (taken only when that read is the finished run's whole), through the source the
        // rules' trial reads through: each tensor file of the run is read once.
        match store.map_or_else(|| smdebug_storage::open_storage(&run), Ok) {
            Ok(storage) => offline_runner(builder, writer, storage),
            // The runner opens the run itself, and says why it cannot.
            Err(_) => builder.reporter(writer),
        }
    };
    let summary = if args.follow {
        builder = builder
            .open_timeout(Duration::from_secs(600))
            .report_every(Duration::from_secs(args.interval.max(1)));
        if args.idle_timeout > 0 {
            builder = builder.idle_timeout(Duration::from_secs(args.idle_timeout));
        }
        let mut runner = builder.build()?;
        eprintln!(
            "following {run}; the report at {} is regenerated every {} s until the run ends",
            out.display(),
            args.interval.max(1)
        );
        runner.follow(&AtomicBool::new(false))?
    } else {
        builder.build()?.run_offline()?
    };
    print_outcome(&summary, &asked_for)
}

/// Prints where the report went and what the rules found; the exit status counts every rule,
/// `ProfilerReport`'s own slot (the report's writing, the traces) included.
fn print_outcome(
    summary: &Summary,
    asked_for: &[String],
) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let report = summary
        .rules
        .iter()
        .find(|r| is_profiler_report(&r.rule))
        .ok_or("the runner ran without ProfilerReport")?;
    if let smdebug_rules::RuleDetails::Report(written) = &report.details {
        println!("report: {}", written.report);
    }
    let rules = || summary.rules.iter().filter(|r| r.rule != PROFILER_REPORT);
    let named = |status: Status| {
        let names: Vec<&str> = rules()
            .filter(|r| r.status == status)
            .map(|r| r.rule.as_str())
            .collect();
        if names.is_empty() {
            String::new()
        } else {
            format!(" ({})", names.join(", "))
        }
    };
    let count = |status: Status| rules().filter(|r| r.status == status).count();
    println!(
        "rules: {} evaluated, {} found issues{}, {} failed{}, {} had no data{}",
        rules().count(),
        count(Status::IssuesFound),
        named(Status::IssuesFound),
        count(Status::Error),
        named(Status::Error),
        count(Status::NoData),
        named(Status::NoData),
    );
    Ok(crate::rules_cmd::exit_status(summary, false, asked_for))
}
