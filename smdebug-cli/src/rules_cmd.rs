//! `smdebug rules`: evaluate debugging and profiler rules over a run, offline or following it
//! live.
//!
//! Read-only unless asked: the run is only read, its `rules/rule_job_summary.json` (the live
//! follower's) is left as it is; `--write-into-run` writes the summary there, `--out` to a file.
//! Exit status: see [`EXIT_STATUS`].

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::Args;
use smdebug_core::text::escape_controls;
use smdebug_report::ReportWriter;
use smdebug_rules::report::{PROFILER_REPORT, default_specs, is_profiler_report};
use smdebug_rules::{
    RuleInput, RuleRunner, RuleSpec, Status, Summary, all_builtin_rules, builtin_profiler_rules,
    find_builtin,
};
use smdebug_storage::{Location, Storage};

/// The exit statuses, as `--help` shows them.
pub(crate) const EXIT_STATUS: &str =
    "Exit status: 0 every rule ran and none found an issue; 1 some \
rule found issues; 2 an error: a bad rule, parameter or run, any rule that ended in Error, a \
rule asked for with --rule or --rules-file that had no data to check (NoData: no tensor matched \
its selection, no GPU metrics in the run, ...), a summary that could not be written, or \
--follow giving up after --idle-timeout. Rules of the default set that had no data (tree rules \
on a network's run, GPU rules on a CPU-only run) do not change the status. Every rule's verdict \
is printed before the exit, errors or not.

The run is only read: its rules/rule_job_summary.json (the one the live follower wrote) is left \
as it is. --write-into-run writes the summary there (and ProfilerReport's report into \
rules/ProfilerReport/profiler-output/); --out writes it to a file.";

#[derive(Args)]
#[command(after_help = EXIT_STATUS)]
pub(crate) struct RulesArgs {
    /// Run directory or object-store URL.
    #[arg(required_unless_present = "list")]
    run: Option<Location>,
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
    /// With --follow: give up (exit 2) when nothing new arrives for this many seconds, as
    /// when the writer died without writing its end marker. The default matches
    /// StalledTraining's default threshold, so that rule fires first; 0 waits forever.
    #[arg(long, value_name = "SECS", default_value_t = 1800, requires = "follow")]
    idle_timeout: u64,
    /// With --follow: print every rule's status to stderr this often, and each change of
    /// status at once (`smdebug rule VanishingGradient: InProgress -> IssuesFound at step
    /// 12: ...`); 0 prints none.
    #[arg(long, value_name = "SECS", default_value_t = 60, requires = "follow")]
    status_every: u64,
    /// Write the summary into the run (rules/rule_job_summary.json), as the live follower in
    /// the training job does, replacing the one there.
    #[arg(long)]
    write_into_run: bool,
    /// With --write-into-run, ProfilerReport's report goes into SageMaker's folder layout,
    /// `<run>/rule-output/ProfilerReport-<timestamp>/profiler-output/`, instead of
    /// `<run>/rules/ProfilerReport/profiler-output/`.
    #[arg(long, requires = "write_into_run")]
    sagemaker_layout: bool,
    /// Write the summary (the --json form) to this file.
    #[arg(long, short, value_name = "FILE")]
    out: Option<std::path::PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    /// List the built-in rules (debugging and profiler) with their parameters and defaults.
    #[arg(long)]
    list: bool,
}

pub(crate) fn run(args: RulesArgs, max_tensor_bytes: u64, storage_timeout: u64) -> ExitCode {
    match evaluate(args, max_tensor_bytes, storage_timeout) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("smdebug: {e}");
            ExitCode::from(2)
        }
    }
}

/// The rules to run, and whether the user named them (`--rule`, `--rules-file`) rather than
/// taking the default set.
fn specs(
    args: &RulesArgs,
    store: Option<&Arc<dyn Storage>>,
) -> Result<(Vec<RuleSpec>, bool), Box<dyn std::error::Error>> {
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
    let explicit = !specs.is_empty();
    if specs.is_empty() {
        // The parameter-free debugging rules; the profiler rules below, without the report.
        specs = default_specs(args.follow, false);
        if let Some(run) = &args.run
            && has_profiler_data(run, store)
        {
            specs.extend(
                builtin_profiler_rules()
                    .iter()
                    .map(|b| RuleSpec::new(b.name)),
            );
        }
    }
    Ok((specs, explicit))
}

/// The names the summary gives the rules of `specs` (`vanishing_gradient` is
/// `VanishingGradient` there).
pub(crate) fn summary_names(specs: &[RuleSpec]) -> Vec<String> {
    specs
        .iter()
        .map(|s| {
            if is_profiler_report(&s.name) {
                PROFILER_REPORT.to_string()
            } else {
                find_builtin(&s.name).map_or_else(|| s.name.clone(), |b| b.name.to_string())
            }
        })
        .collect()
}

/// Whether the run holds system metrics or framework spans (an unreadable run holds none; the
/// runner reports why it cannot open it).
fn has_profiler_data(run: &Location, store: Option<&Arc<dyn Storage>>) -> bool {
    use smdebug_read::profile::ProfilerReader;
    let reader = match store {
        Some(s) => Ok(ProfilerReader::new(s.clone())),
        None => ProfilerReader::open(run),
    };
    reader.is_ok_and(|r| {
        r.system_files().is_ok_and(|f| !f.is_empty())
            || r.trace_files().is_ok_and(|f| !f.is_empty())
    })
}

fn evaluate(
    args: RulesArgs,
    max_tensor_bytes: u64,
    storage_timeout: u64,
) -> Result<ExitCode, Box<dyn std::error::Error>> {
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
    let run = args
        .run
        .clone()
        .ok_or("a run location is needed (only --list goes without)")?;
    let store = crate::object_store(&run, storage_timeout)?;
    let mut builder = RuleRunner::builder(&run)
        .max_tensor_bytes(max_tensor_bytes)
        .write_into_run(args.write_into_run);
    if let Some(store) = &store {
        builder = builder.storage(store.clone());
    }
    let (specs, explicit) = specs(&args, store.as_ref())?;
    let asked_for = if explicit {
        summary_names(&specs)
    } else {
        Vec::new()
    };
    for spec in specs {
        if is_profiler_report(&spec.name) {
            builder = builder.reporter(if args.sagemaker_layout {
                ReportWriter::sagemaker_layout()
            } else {
                ReportWriter::into_run()
            });
        }
        builder = builder.spec(spec);
    }
    if args.follow {
        builder = builder.open_timeout(Duration::from_secs(600));
        if args.idle_timeout > 0 {
            builder = builder.idle_timeout(Duration::from_secs(args.idle_timeout));
        }
        if args.status_every > 0 {
            builder = builder.status_lines(smdebug_rules::runner::StatusLines::to_stderr(
                Duration::from_secs(args.status_every),
            ));
        }
    }
    let mut runner = builder.build()?;
    let summary = if args.follow {
        runner.follow(&AtomicBool::new(false))?
    } else {
        runner.run_offline()?
    };
    print_summary(&mut out, &summary, args.json)?;
    out.flush()?;
    let mut failed = false;
    if let Some(path) = &args.out {
        let written = serde_json::to_vec_pretty(&summary)
            .map_err(std::io::Error::other)
            .and_then(|json| std::fs::write(path, json));
        if let Err(e) = written {
            eprintln!("smdebug: --out {}: {e}", path.display());
            failed = true;
        }
    }
    Ok(exit_status(&summary, failed, &asked_for))
}

/// 2 for any error (a rule's, the runner's, `failed` outside it, or a rule of `asked_for` that
/// had no data to check), else 1 when a rule found issues, else 0. Says on stderr what the
/// error was.
pub(crate) fn exit_status(summary: &Summary, failed: bool, asked_for: &[String]) -> ExitCode {
    let mut error = failed;
    for r in summary.no_data().filter(|r| asked_for.contains(&r.rule)) {
        eprintln!(
            "smdebug: rule {} had no data to check: {}",
            r.rule,
            escape_controls(&r.message)
        );
        error = true;
    }
    for r in summary.errors() {
        eprintln!(
            "smdebug: rule {} failed: {}",
            r.rule,
            escape_controls(&r.message)
        );
        error = true;
    }
    for problem in [&summary.write_error, &summary.gave_up]
        .into_iter()
        .flatten()
    {
        eprintln!("smdebug: {}", escape_controls(problem));
        error = true;
    }
    if error {
        ExitCode::from(2)
    } else if summary.issues_found() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn print_summary(out: &mut impl Write, s: &Summary, json: bool) -> std::io::Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, s)?;
        return writeln!(out);
    }
    for r in &s.rules {
        let status = match r.status {
            Status::NoData => "NoData (not checked)",
            other => other.name(),
        };
        let fired = match (r.first_fired_step, r.last_fired_step, r.first_fired_time_us) {
            (_, _, Some(t)) if r.kind == RuleInput::Profiler => {
                let during = r
                    .first_fired_at()
                    .map_or(String::new(), |step| format!(", during {step}"));
                format!(
                    " first at {}{during} ({} times)",
                    smdebug_analysis::time::utc(t),
                    r.fired_count
                )
            }
            (Some(f), Some(l), _) => format!(" steps {f}..{l} ({} times)", r.fired_count),
            _ => String::new(),
        };
        writeln!(out, "{:28} {status}{fired}", r.rule)?;
        if !r.message.is_empty() {
            writeln!(out, "{:28} {}", "", escape_controls(&r.message))?;
        }
        for e in &r.action_errors {
            writeln!(out, "{:28} action failed: {}", "", escape_controls(e))?;
        }
        for w in &r.warnings {
            writeln!(out, "{:28} data warning: {}", "", escape_controls(w))?;
        }
    }
    Ok(())
}
