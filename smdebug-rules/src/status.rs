//! Rule statuses and the summary a runner keeps (`<run>/rules/rule_job_summary.json`), and how
//! a rule that checked nothing is told apart from one that checked and found nothing.

use serde::{Deserialize, Serialize};
use smdebug_core::Mode;
use smdebug_read::trial::Trial;

use crate::error::{Error, Result};
use crate::evidence::Evidence;
use crate::profiler::Details;
use crate::recorded::{DecodeError, Parameters, RuleDetails};
use crate::registry::RuleParams;
use crate::rule::{Needs, ProfilerInput, ProfilerNeeds, RuleInput};
use crate::window::{JudgedWindow, StepRef};

pub use crate::state::Status;

/// The summary file, relative to the run.
pub const SUMMARY_FILE: &str = "rules/rule_job_summary.json";

fn debugging_kind() -> RuleInput {
    RuleInput::Tensors
}

/// A rule's status, as reported and written into the summary. Its parameters and details are
/// typed ([`Parameters`], [`RuleDetails`]); read back from a summary, those of a built-in rule
/// that do not read as this version writes them are kept as recorded, with why
/// ([`problems`](Self::problems)).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "RecordedStatus")]
pub struct RuleStatus {
    /// The rule's name.
    pub rule: String,
    /// What the rule reads, which is its kind: `debugging` (a rule over tensors) or `profiler`
    /// (over system metrics and spans), as the summary file writes it. A summary without it
    /// (written before it existed) reads as `debugging`.
    #[serde(default = "debugging_kind")]
    pub kind: RuleInput,
    /// Where the rule stands.
    pub status: Status,
    /// The parameters in force.
    pub parameters: Parameters,
    /// The configured actions' types.
    pub actions: Vec<String>,
    /// The step of the first firing. For debugging rules a global step (the step tensors are
    /// saved under). For profiler rules the latest step span that had started when the
    /// condition was seen (none when no step span came before it), in its mode's own numbering:
    /// see `first_fired_mode`.
    pub first_fired_step: Option<u64>,
    /// The step of the latest firing (for profiler rules, as `first_fired_step`).
    pub last_fired_step: Option<u64>,
    /// For a profiler rule, the mode of `first_fired_step`: step spans number each mode's
    /// steps from 0, so `TRAIN` step 9 is the tenth training step, not global step 9. `None` for
    /// a debugging rule (its steps are global steps) and for a summary written before it
    /// existed.
    #[serde(default)]
    pub first_fired_mode: Option<Mode>,
    /// The mode of `last_fired_step`, as `first_fired_mode`.
    #[serde(default)]
    pub last_fired_mode: Option<Mode>,
    /// When a profiler rule first saw its condition, microseconds since the Unix epoch.
    #[serde(default)]
    pub first_fired_time_us: Option<u64>,
    /// When a profiler rule last saw its condition, microseconds since the Unix epoch.
    #[serde(default)]
    pub last_fired_time_us: Option<u64>,
    /// Times the rule fired (steps for debugging rules; distinct findings for profiler rules).
    pub fired_count: u64,
    /// Steps (debugging rules) or windows of profiler data (profiler rules) evaluated.
    pub steps_evaluated: u64,
    /// Tensors, values, samples or spans checked; 0 means the rule found nothing to check.
    pub datapoints: u64,
    /// Debugging rules: the steps at which the rule had what it reads (the N of "judged N of
    /// M steps"): a result with something checked, or read to be judged with more to come.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub steps_judged: u64,
    /// Debugging rules: the steps the rule judges by its definition (the M of "judged N of M
    /// steps"): the steps handed to it (one it lost to an unreadable record included) but those
    /// it leaves out whatever the data (EVAL steps for WeightUpdateRatio, steps past
    /// PoorWeightInitialization's `steps`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub steps_in_scope: u64,
    /// The latest firing's message, the error, or with [`Status::NoData`] why the rule had
    /// nothing to check. A built-in profiler rule's message is its finding over
    /// [`window`](Self::window), from its [`details`](Self::details) ([`Details::finding`]):
    /// the figures the report's tables show, not those of its first firing.
    ///
    /// [`Details::finding`]: crate::profiler::Details::finding
    pub message: String,
    /// The latest firing's evidence.
    pub evidence: Vec<Evidence>,
    /// Actions that failed, with why.
    pub action_errors: Vec<String>,
    /// What the rule has found so far for reports ([`Rule::details`](crate::Rule::details)):
    /// percentiles, tables, histograms; `ProfilerReport`'s destination. Null in JSON for rules
    /// without details.
    #[serde(default)]
    pub details: RuleDetails,
    /// For a profiler rule, the profiler data its message and details cover: from the job's
    /// first record to the latest time read, and the steps in it. `None` for a debugging rule
    /// and before a profiler rule was handed any data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<JudgedWindow>,
    /// Problems with the run's data that the rule worked around, so a verdict on partial data
    /// does not pass unnoticed: for a profiler rule, the profiler data problems (a corrupt
    /// metrics line skipped, a trace file left out); for a debugging rule, each record it could
    /// not read (the tensor, the step and why; the first [`MAX_LISTED_UNREADABLE`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Records a debugging rule reads that could not be read (a checksum that does not match, a
    /// record over the reader's budget). Each was left out as a tensor not saved at its step:
    /// the rule judged that step with what it could read, and every other step. Its message
    /// says so beside the verdict; a rule that could read nothing at all ends in
    /// [`Status::Error`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unreadable_records: u64,
}

/// At most this many unreadable records are listed in a debugging rule's
/// [`warnings`](RuleStatus::warnings); [`unreadable_records`](RuleStatus::unreadable_records)
/// counts them all.
pub const MAX_LISTED_UNREADABLE: usize = 20;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl RuleStatus {
    /// The first firing's step in words: `TRAIN step 9` for a profiler rule (a step of its
    /// mode's own numbering), `step 9` for a debugging rule (a global step); `None` before one.
    pub fn first_fired_at(&self) -> Option<StepRef> {
        self.first_fired_step.map(|step| StepRef {
            step,
            mode: self.first_fired_mode,
        })
    }

    /// The parameters the rule ran with, as its parameter type (`CPUBottleneckParams`, ...;
    /// the registry ties each to its rule): an error when this is another rule's status, or
    /// when they were recorded by another version and do not read.
    pub fn params<P: RuleParams>(&self) -> std::result::Result<&P, DecodeError> {
        if self.rule != P::RULE {
            return Err(DecodeError::OtherRule {
                rule: self.rule.clone(),
                wanted: P::RULE,
            });
        }
        self.parameters.get::<P>(&self.rule)
    }

    /// A built-in profiler rule's findings: `Ok(None)` when it recorded none (or is no
    /// profiler rule), an error when they were recorded by another version and do not read.
    pub fn profiler_details(&self) -> std::result::Result<Option<&Details>, DecodeError> {
        match &self.details {
            RuleDetails::Profiler(d) => Ok(Some(d)),
            RuleDetails::Unreadable { error, .. } => Err(error.clone()),
            _ => Ok(None),
        }
    }

    /// A user rule's details as its own type `T` (what its
    /// [`TensorRule::details`](crate::TensorRule::details) wrote): `Ok(None)` when it recorded
    /// none, an error naming what does not fit when they are not `T`'s.
    pub fn custom_details<T: serde::de::DeserializeOwned>(
        &self,
    ) -> std::result::Result<Option<T>, DecodeError> {
        match &self.details {
            RuleDetails::None => Ok(None),
            RuleDetails::Unreadable { error, .. } => Err(error.clone()),
            other => T::deserialize(other.to_value())
                .map(Some)
                .map_err(|e| DecodeError::Drift {
                    rule: self.rule.clone(),
                    what: "findings",
                    reason: e.to_string(),
                }),
        }
    }

    /// What of the status does not read as this version writes it (its parameters, its
    /// findings), each with why: a reader shows these beside the verdict, never takes them for
    /// "no result".
    pub fn problems(&self) -> Vec<&DecodeError> {
        self.parameters
            .problem()
            .into_iter()
            .chain(self.details.problem())
            .collect()
    }

    /// How much of the run a debugging rule judged, when that was not all of it: `judged 1 of
    /// 300 steps` when it had what it reads at only some of the steps it judges (its message
    /// then says so beside a verdict of `NoIssuesFound`), and the records it could not read
    /// (`judged 100 of 100 steps; 1 record it reads was unreadable and left out: `fc1.weight`
    /// at step 3: …`). `None` when it judged every step it judges with every record.
    pub fn coverage(&self) -> Option<String> {
        let partial = self.steps_judged < self.steps_in_scope;
        let judged = format!(
            "judged {} of {} steps",
            self.steps_judged, self.steps_in_scope
        );
        let first = self.warnings.first().map_or("", String::as_str);
        match self.unreadable_records {
            0 if partial && self.status == Status::NoIssuesFound => Some(judged),
            0 => None,
            1 => Some(format!(
                "{judged}; 1 record it reads was unreadable and left out: {first}"
            )),
            n => Some(format!(
                "{judged}; {n} records it reads were unreadable and left out (listed in its \
                 warnings), the first: {first}"
            )),
        }
    }
}

/// A [`RuleStatus`] as a summary records it: parameters and details as JSON, typed by the
/// rule's name once read ([`Parameters::decode`], [`RuleDetails::decode`]).
#[derive(Deserialize)]
struct RecordedStatus {
    rule: String,
    #[serde(default = "debugging_kind")]
    kind: RuleInput,
    status: Status,
    parameters: serde_json::Value,
    actions: Vec<String>,
    first_fired_step: Option<u64>,
    last_fired_step: Option<u64>,
    #[serde(default)]
    first_fired_mode: Option<Mode>,
    #[serde(default)]
    last_fired_mode: Option<Mode>,
    #[serde(default)]
    first_fired_time_us: Option<u64>,
    #[serde(default)]
    last_fired_time_us: Option<u64>,
    fired_count: u64,
    steps_evaluated: u64,
    datapoints: u64,
    #[serde(default)]
    steps_judged: u64,
    #[serde(default)]
    steps_in_scope: u64,
    message: String,
    evidence: Vec<Evidence>,
    action_errors: Vec<String>,
    #[serde(default)]
    details: serde_json::Value,
    #[serde(default)]
    window: Option<JudgedWindow>,
    #[serde(default)]
    warnings: Vec<String>,
    #[serde(default)]
    unreadable_records: u64,
}

impl From<RecordedStatus> for RuleStatus {
    fn from(r: RecordedStatus) -> RuleStatus {
        RuleStatus {
            parameters: Parameters::decode(&r.rule, r.parameters),
            details: RuleDetails::decode(&r.rule, r.details),
            rule: r.rule,
            kind: r.kind,
            status: r.status,
            actions: r.actions,
            first_fired_step: r.first_fired_step,
            last_fired_step: r.last_fired_step,
            first_fired_mode: r.first_fired_mode,
            last_fired_mode: r.last_fired_mode,
            first_fired_time_us: r.first_fired_time_us,
            last_fired_time_us: r.last_fired_time_us,
            fired_count: r.fired_count,
            steps_evaluated: r.steps_evaluated,
            datapoints: r.datapoints,
            steps_judged: r.steps_judged,
            steps_in_scope: r.steps_in_scope,
            message: r.message,
            evidence: r.evidence,
            action_errors: r.action_errors,
            window: r.window,
            warnings: r.warnings,
            unreadable_records: r.unreadable_records,
        }
    }
}

/// Every rule's status and where the run stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The run's location.
    pub run: String,
    /// Whether the run had written its end marker when the summary was made.
    pub run_complete: bool,
    /// Why the run ended, as its end marker says, if it has one. Written into the summary file
    /// as its words (`"completed"`, `"stopped: <reason>"`); the rule and step of a rule's stop
    /// are in the end marker, and in a summary made from it, not in the file.
    pub end_reason: Option<smdebug_core::EndReason>,
    /// The last global step evaluated.
    pub last_step: Option<u64>,
    /// Whether the runner has finished (no more updates will come).
    pub finished: bool,
    /// When the summary was written, seconds since the Unix epoch.
    pub updated_at: f64,
    /// Every rule's status.
    pub rules: Vec<RuleStatus>,
    /// Why the runner stopped following before the run ended (nothing new arrived within the
    /// idle time-out); the rules that had not fired are still `InProgress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gave_up: Option<String>,
    /// The latest failure to write the summary into the run. Evaluation goes on without it:
    /// a run the runner cannot write to is still checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_error: Option<String>,
}

impl Summary {
    /// True when some rule fired.
    pub fn issues_found(&self) -> bool {
        self.rules.iter().any(|r| r.status == Status::IssuesFound)
    }

    /// True when some rule failed.
    pub fn has_errors(&self) -> bool {
        self.rules.iter().any(|r| r.status == Status::Error)
    }

    /// The rules that failed.
    pub fn errors(&self) -> impl Iterator<Item = &RuleStatus> {
        self.rules.iter().filter(|r| r.status == Status::Error)
    }

    /// The rules that checked nothing ([`Status::NoData`]).
    pub fn no_data(&self) -> impl Iterator<Item = &RuleStatus> {
        self.rules.iter().filter(|r| r.status == Status::NoData)
    }

    /// The status of the rule called `name`.
    pub fn rule(&self, name: &str) -> Option<&RuleStatus> {
        self.rules.iter().find(|r| r.rule == name)
    }
}

/// Reads the summary a runner wrote into the run at `location`: text (a path or a URL), a
/// `Path` (always local) or a parsed `Location`.
pub fn read_summary(location: impl smdebug_storage::IntoLocation) -> Result<Option<Summary>> {
    let location = location.into_location().map_err(Error::unparsed_location)?;
    let storage = smdebug_storage::open_storage(&location).map_err(|e| Error::OpenRun {
        location: location.to_string(),
        source: Box::new(e.into()),
    })?;
    read_summary_from(storage.as_ref())
}

/// Reads the summary a runner wrote into the run `storage` holds: `None` when there is none, an
/// error when it cannot be read or is not a summary.
pub fn read_summary_from(storage: &dyn smdebug_storage::Storage) -> Result<Option<Summary>> {
    let location = storage.describe().to_string();
    match storage.get(SUMMARY_FILE) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::BadFile {
                path: format!("{location}/{SUMMARY_FILE}"),
                reason: e.to_string(),
            }),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(Error::Store {
            location,
            op: "get",
            path: SUMMARY_FILE.into(),
            source: Box::new(e.into()),
        }),
    }
}

/// Why a debugging rule that checked nothing over a finished run had nothing to check. `trial`
/// is `None` when the run holds no tensor data; `status` is the rule's, with the steps the
/// runner handed it and those at which it read something it never judged.
pub(crate) fn tensor_no_data_reason(
    rule: &str,
    needs: &Needs,
    trial: Option<&Trial>,
    status: &RuleStatus,
) -> String {
    let Some(trial) = trial else {
        return "no tensor data in this run (no steps under index/): nothing to check".into();
    };
    if status.steps_evaluated == 0 {
        return "no step of this run was complete on every worker: nothing to check".into();
    }
    if needs.reads.is_empty() {
        return match &needs.requires {
            Some(what) => format!("nothing to check: the rule needs {what}"),
            None => "nothing to check in this run's steps".into(),
        };
    }
    let selection = needs.describe();
    let needed = needs
        .requires
        .as_deref()
        .map_or(String::new(), |w| format!(": it needs {w}"));
    match needs.tensor_names(rule, trial) {
        Ok(names) if names.is_empty() => {
            format!("no tensor of this run matched the rule's selection ({selection})")
        }
        Ok(names) if status.steps_judged > 0 => format!(
            "read {} at {} of {} steps but never had enough to judge{needed}",
            shown(&names),
            status.steps_judged,
            status.steps_in_scope
        ),
        Ok(names) => format!(
            "{} tensor(s) matched the rule's selection ({selection}): {}, but none was saved \
             where the rule could check it{needed}",
            names.len(),
            shown(&names)
        ),
        Err(e) => format!(
            "nothing was checked, and listing the tensors of its selection ({selection}) \
             failed: {e}"
        ),
    }
}

/// The first few of `names`, quoted, and how many more there are.
fn shown(names: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut shown = names
        .iter()
        .take(SHOWN)
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        shown.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    shown
}

/// Which kinds of profiler data a run held, as far as the runner read it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ProfilerSeen {
    /// Some system sample.
    pub samples: bool,
    /// Some framework span.
    pub spans: bool,
}

impl ProfilerSeen {
    fn any(self) -> bool {
        self.samples || self.spans
    }

    /// Whether the run held data of kind `input` (the step timeline comes from spans).
    fn has(self, input: ProfilerInput) -> bool {
        match input {
            ProfilerInput::SystemMetrics => self.samples,
            ProfilerInput::Spans | ProfilerInput::StepTimeline => self.spans,
        }
    }
}

/// Why a profiler rule that checked nothing over a finished run had nothing to check: that the
/// run has no profiler data at all, else the rule's own last word (`no GPU metrics in this
/// run`), else that the run has none of the data its `needs` declares, else what it needs.
/// With `warnings` (the data warnings of the run's profiler files: a file skipped, lines left
/// out), each of those is said of what could be read, not of the run: the data left out may
/// have held what the rule needed.
pub(crate) fn profiler_no_data_reason(
    message: &str,
    seen: ProfilerSeen,
    needs: &ProfilerNeeds,
    warnings: usize,
) -> String {
    let reason = profiler_reason(message, seen, needs);
    match warnings {
        0 => reason,
        n => format!(
            "{reason}; that is of what could be read: {n} data warning{} name{} profiler data \
             left out, which may hold what the rule needs",
            if n == 1 { "" } else { "s" },
            if n == 1 { "s" } else { "" },
        ),
    }
}

/// [`profiler_no_data_reason`] of a run whose profiler files were all read.
fn profiler_reason(message: &str, seen: ProfilerSeen, needs: &ProfilerNeeds) -> String {
    if !seen.any() {
        return "no profiler data in this run (no system metrics under system/ and no framework \
                spans under framework/pevents/): nothing to check"
            .into();
    }
    if !message.is_empty() {
        return message.to_string();
    }
    if !needs.reads.iter().any(|i| seen.has(*i)) {
        let whereabouts = |i: &ProfilerInput| match i {
            ProfilerInput::SystemMetrics => "no system metrics under system/",
            ProfilerInput::Spans | ProfilerInput::StepTimeline => {
                "no framework spans under framework/pevents/"
            }
        };
        let mut missing: Vec<&str> = needs.reads.iter().map(whereabouts).collect();
        missing.dedup();
        return format!(
            "nothing to check: the rule reads {} and this run has none ({})",
            needs.describe(),
            missing.join(", ")
        );
    }
    match &needs.requires {
        Some(what) => format!("nothing to check: the rule needs {what}"),
        None => "nothing in this run's profiler data for this rule to check".into(),
    }
}
