//! What a session did, returned by [`Session::finish`](super::Session::finish).

use std::fmt;
use std::path::Path;
use std::time::Duration;

use smdebug_core::StopCause;
use smdebug_core::config_keys::UnappliedKey;

/// The configuration files a session applied at start, and their keys it did not apply.
#[derive(Debug, Default)]
pub(crate) struct AppliedFiles {
    pub files: Vec<String>,
    pub warnings: Vec<String>,
}

impl AppliedFiles {
    /// The file at `path` was applied; `unapplied` are its keys that were not.
    pub fn add<'k>(&mut self, path: &Path, unapplied: impl IntoIterator<Item = &'k UnappliedKey>) {
        let path = path.display().to_string();
        self.warnings
            .extend(unapplied.into_iter().map(|k| format!("{path}: {k}")));
        self.files.push(path);
    }

    /// Says each key not applied on stderr, whether or not the program logs.
    pub fn warn(&self) {
        for w in &self.warnings {
            eprintln!("smdebug: warning: {w}");
        }
    }
}

/// What happened during a session: steps, what capture and profiling wrote and dropped, the
/// rules' verdicts, why the job stopped, and where the report and the dashboard are.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct SessionSummary {
    /// The run's location.
    pub location: String,
    /// Global steps the loop ended.
    pub steps: u64,
    /// Tensor records written.
    pub records_written: u64,
    /// Tensor records dropped because the writer's queue was full.
    pub records_dropped: u64,
    /// Tensor records not stored because storage failed: those of the step whose write failed
    /// and every one after.
    pub records_lost: u64,
    /// Steps some of whose tensor records were not stored.
    pub steps_lost: u64,
    /// Whether the end marker (`training_job_end.ts`) was stored.
    pub end_marker_written: bool,
    /// Bytes of event files written.
    pub bytes_written: u64,
    /// Framework spans in trace files storage acknowledged.
    pub spans_written: u64,
    /// Framework spans not stored: their trace file's publication failed, or the span writer
    /// had not finished within the storage timeout.
    pub spans_lost: u64,
    /// Framework spans dropped (queue full or writer stopped).
    pub spans_dropped: u64,
    /// Trace files the spans were published in.
    pub span_files: u64,
    /// System samples taken by this process (0 where another process samples the host).
    pub system_samples: u64,
    /// System-metric records in files storage acknowledged (one per metric per sample).
    pub system_records: u64,
    /// Code-profile windows written (`<run>/framework/code/`).
    pub code_profiles: u64,
    /// Why the job was asked to stop (a rule, the dashboard, another job): the reason, and the
    /// rule and step when a rule asked, as the end marker records them; `None`: it ran to its
    /// end.
    pub stopped: Option<StopCause>,
    /// Every rule's final status (rank 0; other workers run no rules).
    #[cfg(feature = "rules")]
    pub rules: Vec<smdebug_rules::RuleStatus>,
    /// Where the profiling report was written.
    pub report: Option<String>,
    /// The dashboard's URL, when the session served one.
    pub dashboard: Option<String>,
    /// SageMaker's configuration files applied at start (the hook config, the profiler
    /// config), by path; empty when neither exists.
    pub config_files: Vec<String>,
    /// Their keys that were not applied, each naming its file and key: SageMaker's keys not
    /// supported here, and unknown keys with the key they most resemble (`…/debughookconfig.json:
    /// `LocalPth`: unknown key, did you mean `LocalPath`?`). Printed on stderr at start too.
    pub config_warnings: Vec<String>,
    /// How long the session ran, from start to the end of `finish`.
    pub duration: Duration,
    /// What went wrong on the way (capture disabled by a storage error, a span file that could
    /// not be published, rules that did not finish).
    pub problems: Vec<String>,
    /// What was not stored because storage failed, one item each (`12 tensor records of 3
    /// steps`, `the end marker (training_job_end.ts)`); empty when everything was.
    /// [`Session::finish`](super::Session::finish) fails when it is not empty.
    pub lost: Vec<String>,
}

impl SessionSummary {
    /// Whether some rule found issues.
    #[cfg(feature = "rules")]
    pub fn issues_found(&self) -> bool {
        self.rules
            .iter()
            .any(|r| r.status == smdebug_rules::Status::IssuesFound)
    }
}

impl fmt::Display for SessionSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "run {}: {} steps in {:.1} s; {} records written ({} bytes), {} dropped; {} spans \
             written, {} dropped; {} system samples; {} code profiles",
            self.location,
            self.steps,
            self.duration.as_secs_f64(),
            self.records_written,
            self.bytes_written,
            self.records_dropped,
            self.spans_written,
            self.spans_dropped,
            self.system_samples,
            self.code_profiles
        )?;
        if !self.config_files.is_empty() {
            writeln!(f, "configured by {}", self.config_files.join(", "))?;
        }
        for w in &self.config_warnings {
            writeln!(f, "configuration warning: {w}")?;
        }
        match &self.stopped {
            Some(reason) => writeln!(f, "stopped early: {reason}")?,
            None => writeln!(f, "ran to its end")?,
        }
        #[cfg(feature = "rules")]
        for r in &self.rules {
            write!(f, "  {:<26} {}", r.rule, r.status.name())?;
            if !r.message.is_empty() {
                write!(f, ": {}", first_line(&r.message, 160))?;
            }
            writeln!(f)?;
        }
        if let Some(report) = &self.report {
            writeln!(f, "report: {report}")?;
        }
        if let Some(url) = &self.dashboard {
            writeln!(f, "dashboard: {url}")?;
        }
        for p in &self.problems {
            writeln!(f, "problem: {p}")?;
        }
        if !self.lost.is_empty() {
            writeln!(f, "not stored: {}", self.lost.join("; "))?;
        }
        Ok(())
    }
}

/// The first line of `text`, at most `n` characters, with an ellipsis when cut.
#[cfg(feature = "rules")]
fn first_line(text: &str, n: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    match line.char_indices().nth(n) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None if line.len() < text.len() => format!("{line}…"),
        None => line.to_string(),
    }
}
