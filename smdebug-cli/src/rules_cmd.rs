//! `smdebug rules`: evaluate debugging and profiler rules over a run, offline or following it
//! live.
//!
//! Exit status: 0 when no rule found an issue, 1 when some rule did, 2 on an error (bad rule,
//! bad parameter, missing run, or a rule that failed while evaluating).

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

use clap::Args;
use smdebug_rules::report::default_specs;
use smdebug_rules::{
    RuleRunner, RuleSpec, Status, Summary, all_builtin_rules, builtin_profiler_rules,
};

#[derive(Args)]
pub struct RulesArgs {
    /// Run directory or object-store URL.
    #[arg(required_unless_present = "list")]
    run: Option<String>,
    /// A rule, `NAME` or `NAME:param=value,...` (repeatable). Default: every built-in debugging
    /// rule that needs no parameter, and every profiler rule when the run has profiler data.
    #[arg(long = "rule")]
    rules: Vec<String>,
    /// A JSON file with a list of rule specs `{"name", "parameters", "actions"}`.
    #[arg(long)]
    rules_file: Option<std::path::PathBuf>,
    /// Follow a live run until it ends (waits up to 10 minutes for it to appear).
    #[arg(long)]
    follow: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    /// List the built-in rules (debugging and profiler) with their parameters and defaults.
    #[arg(long)]
    list: bool,
}

pub fn run(args: RulesArgs) -> ExitCode {
    match evaluate(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("smdebug: {e}");
            ExitCode::from(2)
        }
    }
}

fn specs(args: &RulesArgs) -> Result<Vec<RuleSpec>, Box<dyn std::error::Error>> {
    let mut specs = Vec::new();
    for r in &args.rules {
        specs.push(RuleSpec::parse(r)?);
    }
    if let Some(path) = &args.rules_file {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let list: Vec<RuleSpec> =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        specs.extend(list);
    }
    if specs.is_empty() {
        // The parameter-free debugging rules; the profiler rules below, without the report.
        specs = default_specs(args.follow, false);
        if let Some(run) = &args.run
            && has_profiler_data(run)
        {
            specs.extend(
                builtin_profiler_rules()
                    .iter()
                    .map(|b| RuleSpec::new(b.name)),
            );
        }
    }
    Ok(specs)
}

/// Whether the run holds system metrics or framework spans (an unreadable run holds none; the
/// runner reports why it cannot open it).
fn has_profiler_data(run: &str) -> bool {
    smdebug_profiler::reader::ProfilerReader::open(run).is_ok_and(|r| {
        r.system_files().is_ok_and(|f| !f.is_empty())
            || r.trace_files().is_ok_and(|f| !f.is_empty())
    })
}

fn evaluate(args: RulesArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.list {
        let rules = all_builtin_rules();
        if args.json {
            serde_json::to_writer_pretty(&mut out, &rules)?;
            writeln!(out)?;
        } else {
            for r in rules {
                writeln!(
                    out,
                    "{:28} {:9} fires when {}",
                    r.name, r.kind, r.fires_when
                )?;
                writeln!(out, "{:28} {:9} parameters: {}", "", "", r.defaults)?;
                if !r.recommendation.is_empty() {
                    writeln!(
                        out,
                        "{:28} {:9} recommendation: {}",
                        "", "", r.recommendation
                    )?;
                }
            }
        }
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let run = args.run.clone().unwrap_or_default();
    let mut builder = RuleRunner::builder(&run);
    for spec in specs(&args)? {
        builder = builder.spec(spec);
    }
    if args.follow {
        builder = builder.open_timeout(std::time::Duration::from_secs(600));
    }
    let mut runner = builder.build()?;
    let summary = if args.follow {
        runner.follow(&AtomicBool::new(false))?
    } else {
        runner.run_offline()?
    };
    print_summary(&mut out, &summary, args.json)?;
    out.flush()?;
    Ok(if summary.has_errors() {
        ExitCode::from(2)
    } else if summary.issues_found() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_summary(out: &mut impl Write, s: &Summary, json: bool) -> std::io::Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, s)?;
        return writeln!(out);
    }
    for r in &s.rules {
        let status = match r.status {
            Status::InProgress => "InProgress",
            Status::NoIssuesFound => "NoIssuesFound",
            Status::IssuesFound => "IssuesFound",
            Status::Error => "Error",
        };
        let fired = match (r.first_fired_step, r.last_fired_step, r.first_fired_time_us) {
            (_, _, Some(t)) if r.kind == "profiler" => {
                format!(
                    " first at {} ({} times)",
                    smdebug_rules::profiler::utc(t),
                    r.fired_count
                )
            }
            (Some(f), Some(l), _) => format!(" steps {f}..{l} ({} times)", r.fired_count),
            _ => String::new(),
        };
        writeln!(out, "{:28} {status}{fired}", r.rule)?;
        if !r.message.is_empty() {
            writeln!(out, "{:28} {}", "", r.message)?;
        }
        for e in &r.action_errors {
            writeln!(out, "{:28} action failed: {e}", "")?;
        }
        for w in &r.warnings {
            writeln!(out, "{:28} data warning: {w}", "")?;
        }
    }
    Ok(())
}
