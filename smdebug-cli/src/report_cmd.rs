//! `smdebug report`: the profiling report of a run (one self-contained HTML file, one JSON file
//! per rule beside it), offline or regenerated while the run is being written.
//!
//! The rules are evaluated as `smdebug rules` evaluates them (the default set, or `--rule`), plus
//! `ProfilerReport` (every profiler rule); the run's own `rules/rule_job_summary.json` is left
//! alone. Exit status: 0 when the report was written, 2 when it could not be (no such run, a bad
//! rule, an unwritable output).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::Args;
use smdebug_profiler::report::{LoadOptions, ReportInput, write_report};
use smdebug_rules::report::{PROFILER_REPORT, default_specs, is_profiler_report};
use smdebug_rules::{RuleRunner, RuleSpec, Status, Summary};

#[derive(Args)]
pub struct ReportArgs {
    /// Run directory or object-store URL. May be left out when `--trace` is given: the report
    /// then shows the traces' operator breakdowns only.
    #[arg(required_unless_present = "traces")]
    run: Option<String>,
    /// The HTML file to write; the rules' JSON results go beside it.
    #[arg(short, long)]
    out: PathBuf,
    /// Follow a live run: regenerate the report every `--interval` seconds until the run ends
    /// (waits up to 10 minutes for the run to appear).
    #[arg(long)]
    follow: bool,
    /// Seconds between regenerations with `--follow`.
    #[arg(long, default_value_t = 10)]
    interval: u64,
    /// A PyTorch profiler (Kineto) trace to include, .json or .json.gz (repeatable).
    #[arg(long = "trace")]
    traces: Vec<PathBuf>,
    /// A rule, `NAME` or `NAME:param=value,...` (repeatable). Default: every debugging rule that
    /// needs no parameter; ProfilerReport (every profiler rule) is always added.
    #[arg(long = "rule")]
    rules: Vec<String>,
}

pub fn run(args: ReportArgs) -> ExitCode {
    match report(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("smdebug: {e}");
            ExitCode::from(2)
        }
    }
}

fn report(args: ReportArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
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
        let written = write_report(&input, &args.out)?;
        println!("report: {}", written.html.display());
        return Ok(ExitCode::SUCCESS);
    };
    let mut specs = Vec::new();
    for r in &args.rules {
        specs.push(RuleSpec::parse(r)?);
    }
    if specs.is_empty() {
        specs = default_specs(args.follow, true);
    } else if !specs.iter().any(|s| is_profiler_report(&s.name)) {
        specs.push(RuleSpec::new(PROFILER_REPORT));
    }
    let mut builder = RuleRunner::builder(&run)
        .write_summary(false)
        .report(&args.out)
        .report_traces(args.traces.clone());
    for s in specs {
        builder = builder.spec(s);
    }
    let summary = if args.follow {
        let mut runner = builder
            .open_timeout(Duration::from_secs(600))
            .report_every(Duration::from_secs(args.interval.max(1)))
            .build()?;
        eprintln!(
            "following {run}; the report at {} is regenerated every {} s until the run ends",
            args.out.display(),
            args.interval.max(1)
        );
        runner.follow(&AtomicBool::new(false))?
    } else {
        builder.build()?.run_offline()?
    };
    print_outcome(&summary, &args.out)
}

fn print_outcome(
    summary: &Summary,
    out: &std::path::Path,
) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let report = summary
        .rules
        .iter()
        .find(|r| is_profiler_report(&r.rule))
        .ok_or("the runner ran without ProfilerReport")?;
    if report.status == Status::Error {
        return Err(report.message.clone().into());
    }
    let fired: Vec<&str> = summary
        .rules
        .iter()
        .filter(|r| r.status == Status::IssuesFound)
        .map(|r| r.rule.as_str())
        .collect();
    println!("report: {}", out.display());
    println!(
        "rules: {} evaluated, {} found issues{}",
        summary.rules.len() - 1,
        fired.len(),
        if fired.is_empty() {
            String::new()
        } else {
            format!(" ({})", fired.join(", "))
        }
    );
    Ok(ExitCode::SUCCESS)
}
