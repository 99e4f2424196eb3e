//! The dashboard API's responses for the run list (also each pushed update) and the overview,
//! as types (the series views are in [`crate::series`]): one Rust definition of what the page
//! reads (their JSON Schema, `assets/api.schema.json`, is generated from them: [`crate::api_schema`]).

use schemars::JsonSchema;
use serde::{Serialize, Serializer};

use crate::processes::ProcessView;

/// A number as JSON: finite values as numbers, NaN and ±Inf as the strings `"NaN"`,
/// `"Infinity"` and `"-Infinity"` (JSON has no such numbers; `null` would hide the value a rule
/// caught).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Num(pub f64);

impl Serialize for Num {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let x = self.0;
        if x.is_finite() {
            s.serialize_f64(x)
        } else if x.is_nan() {
            s.serialize_str("NaN")
        } else if x > 0.0 {
            s.serialize_str("Infinity")
        } else {
            s.serialize_str("-Infinity")
        }
    }
}

impl JsonSchema for Num {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Num".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A number; NaN and ±Inf as the strings \"NaN\", \"Infinity\", \"-Infinity\".",
            "oneOf": [
                { "type": "number" },
                { "type": "string", "enum": ["NaN", "Infinity", "-Infinity"] }
            ]
        })
    }
}

/// `GET /api/runs`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunList {
    /// Every run served, in order.
    pub runs: Vec<RunState>,
    /// The server's clock when this was made, seconds since the epoch.
    pub server_time: f64,
}

/// Where a run stands, as the header's pill shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Not found yet (or its location cannot be opened, or it was deleted).
    Waiting,
    /// Being written.
    Live,
    /// Not ended, but nothing advanced for a while, or its processes on another host stopped
    /// beating ([`crate::liveness`]).
    Stalled,
    /// Not ended, and a process of this host that wrote it is gone without marking its
    /// identity file finished ([`crate::liveness`]).
    Crashed,
    /// Ended by itself.
    Ended,
    /// Ended after a rule asked it to stop.
    StoppedByRule,
    /// Ended after a person (the dashboard, another tool) asked it to stop.
    StoppedByPerson,
}

/// Where a run's files stand: found or not, openable, ended, open to stop requests, asked to
/// stop. The run list and the overview both say it, from the run's data
/// ([`RunData::standing`](crate::run_data::RunData::standing)).
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunStanding {
    /// Anything of the run was found.
    pub exists: bool,
    /// Why its location cannot be opened.
    pub open_error: Option<String>,
    /// Its end marker is there.
    pub complete: bool,
    /// The end marker's reason, in its words (`completed`, `stopped: <reason>`).
    #[schemars(with = "Option<String>")]
    pub end_reason: Option<smdebug_core::EndReason>,
    /// Stop requests can be written into it.
    pub writable: bool,
    /// The reason of a stop request in the run.
    pub stop_requested: Option<String>,
    /// Why the stop request in the run cannot be read: the job does not honour it.
    pub stop_request_error: Option<String>,
}

/// One run's live state.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunState {
    /// Its index (the `{id}` of the run's routes).
    pub id: usize,
    /// Short name.
    pub name: String,
    /// Location as given.
    pub location: String,
    /// Bumped whenever anything changes.
    pub version: u64,
    /// What changed, area by area (the page refetches only the panels whose area changed).
    pub changed: Changed,
    /// Where the run stands.
    pub phase: Phase,
    /// What a phase other than live rests on: which process is gone, what was last heard.
    pub phase_note: Option<String>,
    /// When the run last advanced (its newest progress file, or new steps seen arriving),
    /// seconds since the epoch.
    pub last_advanced: Option<f64>,
    /// Seconds since then (or, when neither its files nor its arrivals say when, since this
    /// server first read it all).
    pub idle_s: Option<f64>,
    /// Stalled or crashed: since when, seconds since the epoch.
    pub stalled_since: Option<f64>,
    /// Seconds without news after which the run is stalled (a minute, or five typical steps).
    pub stalled_after_s: f64,
    /// The processes writing it, from its identity files.
    pub processes: Vec<ProcessView>,
    /// Whether it is there, has ended, can be stopped.
    #[serde(flatten)]
    pub standing: RunStanding,
    /// Deleted after it was read.
    pub gone: bool,
    /// Why its view was last cleared.
    pub identity: Option<String>,
    /// Times its view was cleared.
    pub resets: u64,
    /// When the stop request in the run was written, seconds since the epoch.
    pub stop_requested_at: Option<f64>,
    /// The rule that stopped it (the one its end marker names), or before it ended, the rule
    /// of the stop request in it.
    pub stop_rule: Option<String>,
    /// Saved steps.
    pub steps: usize,
    /// The last saved step.
    pub last_step: Option<u64>,
    /// Global steps done (the overview's `progress.steps_done`): the step tile's count, "N of
    /// the planned M", never the last step's number against a count.
    pub steps_done: Option<u64>,
    /// The global steps the job plans (the overview's `progress.planned_steps`).
    pub planned_steps: Option<u64>,
    /// System-metric samples.
    pub samples: u64,
    /// Tensor names.
    pub tensors: usize,
    /// Scalar values held.
    pub scalar_values: usize,
    /// Index files listed but not read yet.
    pub index_pending: usize,
    /// The backlog of index files being read, `index_pending` of them left: a first read of
    /// a big run says "indexing N of M files" (N = this minus `index_pending`); 0 when none.
    pub index_backlog: usize,
    /// Its location is a local folder that does not exist: since when this server has seen it
    /// missing (seconds since the epoch); the page says so and how long it has waited.
    pub missing_since: Option<f64>,
    /// Its trial is open.
    pub trial_open: bool,
    /// The stage of the report being built.
    pub report: Option<&'static str>,
    /// Framework spans.
    pub spans: usize,
    /// First time of any sample or span, seconds since the epoch.
    pub start: Option<f64>,
    /// Last time of any sample or span.
    pub end: Option<f64>,
    /// Rules in the rule runner's summary.
    pub rules: Option<usize>,
    /// Distinct issues: rules that found one, `ProfilerReport` not counted beside the profiler
    /// rules it sums up.
    pub issues: Option<usize>,
    /// Rules that had nothing to check.
    pub no_data: Option<usize>,
}

/// `GET /api/runs/{id}/overview`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Overview {
    /// The run's index.
    pub id: usize,
    /// The run data's version, as in the run list: a page shows the newer of the two's counts.
    pub version: u64,
    /// Short name.
    pub name: String,
    /// Location.
    pub location: String,
    /// Whether it is there, has ended, can be stopped.
    #[serde(flatten)]
    pub standing: RunStanding,
    /// First time, seconds since the epoch.
    pub start: Option<f64>,
    /// Last time.
    pub end: Option<f64>,
    /// Saved steps.
    pub steps: usize,
    /// Last saved step.
    pub last_step: Option<u64>,
    /// Samples.
    pub samples: u64,
    /// Spans.
    pub spans: usize,
    /// Tensor names.
    pub tensors: usize,
    /// Initialization, training loop, finalization.
    pub phases: Option<JobPhases>,
    /// Per-node statistics.
    pub nodes: Vec<NodeStats>,
    /// Rule statuses, in the order to list them (`rank`).
    pub rules: Vec<RuleView>,
    /// Distinct issues (as the run list's `issues`).
    pub issues: usize,
    /// The run's health in one sentence, and its full text.
    pub health: Health,
    /// The most time-consuming span phases.
    pub top_phases: Vec<PhaseTotal>,
    /// The rule runner wrote its summary.
    pub rules_written: bool,
    /// Problems with the data that were worked around.
    pub warnings: Vec<String>,
    /// How far along and how fast.
    pub progress: Progress,
    /// The last loss (a scalar named like `loss`; its course: `/headlines`).
    pub loss: Option<Headline>,
    /// The last accuracy (a scalar named like `acc`).
    pub accuracy: Option<Headline>,
}

/// The job's phases, seconds.
#[derive(Debug, Serialize, JsonSchema)]
pub struct JobPhases {
    /// Before the first step span.
    pub initialization: f64,
    /// From the first step span to the end of the last.
    pub training_loop: f64,
    /// After the last step span.
    pub finalization: f64,
    /// Start of the first step span, seconds since the epoch.
    pub loop_start: f64,
    /// End of the last.
    pub loop_end: f64,
}

/// One node's statistics table.
#[derive(Debug, Serialize, JsonSchema)]
pub struct NodeStats {
    /// The node.
    pub node: String,
    /// Its rows.
    pub rows: Vec<StatRow>,
}

/// One row: a metric's distribution over the run.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StatRow {
    /// What (`CPU utilization`).
    pub metric: String,
    /// Unit (`%`, `B/s`).
    pub unit: &'static str,
    /// Minimum.
    pub min: Num,
    /// Maximum.
    pub max: Num,
    /// 99th percentile.
    pub p99: Num,
    /// 90th percentile.
    pub p90: Num,
    /// Median.
    pub p50: Num,
    /// A note on what the figure includes (the network rows count this dashboard's own
    /// loopback traffic: the sampler adds up every interface).
    pub note: Option<&'static str>,
}

/// A rule's status as the page lists it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RuleView {
    /// Rule name.
    pub name: String,
    /// `debugging` or `profiler`.
    pub kind: smdebug_rules::RuleInput,
    /// `IssuesFound`, `NoIssuesFound`, `NoData`, `InProgress`, `Error`.
    pub status: smdebug_rules::Status,
    /// What the rule checks.
    pub description: String,
    /// What to do about it.
    pub recommendation: String,
    /// The rule's message (for `NoData`, why nothing was checked).
    pub message: String,
    /// Times it fired.
    pub triggered: u64,
    /// Data points evaluated.
    pub datapoints: u64,
    /// Parameters in force.
    pub parameters: serde_json::Value,
    /// First firing step: a global step for a debugging rule, a step of `first_fired_mode`'s
    /// own numbering for a profiler rule.
    pub first_fired_step: Option<u64>,
    /// For a profiler rule, the mode whose step `first_fired_step` is (`TRAIN`, `EVAL`, ...).
    pub first_fired_mode: Option<smdebug_core::Mode>,
    /// For a profiler rule, the data its message and details cover, in words (`the whole run:
    /// 0.000 to 312.400 s after its first record, 1500 step spans`); `null` otherwise.
    pub window: Option<String>,
    /// What it measured at its latest firing (values NaN and ±Inf as strings).
    pub evidence: Vec<EvidenceView>,
    /// The rule's own findings as its summary records them (smdebug-rules' `RuleDetails`: a
    /// built-in profiler rule's `Details`, ProfilerReport's destination, a user rule's own),
    /// the evidence the report's sections draw from too; `null` when it has none.
    pub details: serde_json::Value,
    /// What of its recorded status does not read as this version writes it (its parameters,
    /// its findings: a summary written by another version), each with why; empty when all
    /// of it reads.
    pub problems: Vec<String>,
    /// The message in a few words (at most 90 characters: "NaN in loss and 10 gradients"),
    /// the whole of it in `message`.
    pub short: String,
    /// How much its verdict weighs.
    pub severity: Severity,
    /// Its stop request ended the job (the one the end marker names).
    pub stopped_job: bool,
    /// It is `ProfilerReport`, summing up the profiler rules listed beside it: its finding is
    /// theirs, not counted again among the issues.
    pub sums_up: bool,
    /// Where it is listed, lowest first: the rule that stopped the job, then by severity, then
    /// by status.
    pub rank: u32,
}

/// One measurement behind a rule's verdict.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EvidenceView {
    /// The tensor.
    pub tensor: String,
    /// The step: a global step, or for a profiler rule a step of `mode`'s own numbering.
    pub step: u64,
    /// For a profiler rule, the mode whose step `step` is (`TRAIN`, `EVAL`, ...).
    pub mode: Option<smdebug_core::Mode>,
    /// What was measured.
    pub measure: String,
    /// The value (`"NaN"`, `"Infinity"`, `"-Infinity"` when not finite).
    pub value: Num,
    /// The limit it was compared with.
    pub limit: Option<Num>,
}

/// Time in one span phase.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PhaseTotal {
    /// The phase.
    pub phase: String,
    /// Total seconds.
    pub total_s: f64,
    /// Spans.
    pub count: u64,
}

/// How far along and how fast.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Progress {
    /// Steps per second (every mode's steps: the plan counts them all) over the last two
    /// minutes after the first five steps (warm-up), or for an ended run over the whole run
    /// after them; none before enough of them.
    pub step_rate: Option<f64>,
    /// The steps the rate is measured over.
    pub rate_steps: usize,
    /// The wall time they took, seconds.
    pub rate_window_s: f64,
    /// The two halves of that window ran at rates within a third of each other: only then is
    /// there an ETA.
    pub rate_steady: bool,
    /// The rate is the whole run's average after the warm-up (an ended run's), not its last
    /// two minutes'.
    pub rate_over_run: bool,
    /// What the rate is measured from: `step spans`, or `progress files` (the steps the job's
    /// progress files counted as this server read them) when the run has no step spans.
    pub rate_source: &'static str,
    /// The global steps the job plans, from its progress files (`progress/<worker>.json`)
    /// when the job said how many.
    pub planned_steps: Option<u64>,
    /// Global steps done: the most any worker's progress file or the index files show.
    pub steps_done: Option<u64>,
    /// Seconds left at the current rate, when the planned steps are known, the run advances
    /// and its rate is steady.
    pub eta_s: Option<f64>,
    /// Why there is no estimate, when there is none.
    pub eta_note: Option<&'static str>,
    /// What the job's writers dropped, summed over its workers' progress files; `None` when
    /// the run has no progress file.
    pub drops: Option<WriterDrops>,
    /// Why the drops are not shown, when they are not.
    pub drops_note: Option<&'static str>,
}

/// What the training job's writers wrote and dropped (every worker's progress file).
#[derive(Debug, Serialize, JsonSchema)]
pub struct WriterDrops {
    /// Tensor records dropped (the writer's queue was full).
    pub records_dropped: u64,
    /// Tensor records written.
    pub records_written: u64,
    /// The dropped share of the records, 0–1 (none before any record).
    pub records_share: Option<f64>,
    /// Steps during which some record was dropped.
    pub steps_with_drops: u64,
    /// The share of the steps that lost records, 0–1 (none before any step).
    pub steps_share: Option<f64>,
    /// Framework spans dropped.
    pub spans_dropped: u64,
    /// Framework spans written.
    pub spans_written: u64,
    /// Workers whose progress files these are.
    pub workers: usize,
    /// Whether every worker's file has its final counts (the job finished).
    pub finished: bool,
    /// When the newest file was written, seconds since the epoch.
    pub wall_time: f64,
}

/// A headline scalar: which it is and its last value.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Headline {
    /// The scalar's name.
    pub name: String,
    /// The mode shown (TRAIN when it has values).
    pub mode: &'static str,
    /// The last step.
    pub last_step: u64,
    /// The value there.
    pub last_value: Num,
}

/// `GET /api/runs/{id}/headlines`: the summary's loss and accuracy charts.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Headlines {
    /// The loss (the overview's `loss`).
    pub loss: Option<HeadlineChart>,
    /// The accuracy.
    pub accuracy: Option<HeadlineChart>,
}

/// A headline scalar's course over all its steps, downsampled as the Scalars tab's are
/// (`crate::downsample::draw`: each slice's lowest and highest value).
#[derive(Debug, Serialize, JsonSchema)]
pub struct HeadlineChart {
    /// Which scalar and its last value.
    #[serde(flatten)]
    pub headline: Headline,
    /// Its values in all.
    pub total: usize,
    /// The buckets' width in steps (0: every value is kept). A page that holds the chart
    /// drawn with this width asks for it again with `<chart>_width` and `<chart>_since`.
    pub width: u64,
    /// When set, only the points from this step on are sent (the start of the bucket the
    /// page's last point was in, as it asked: the buckets before are unchanged); the page
    /// keeps what it holds before it. `null`: the whole chart.
    pub since: Option<u64>,
    /// Steps kept.
    pub steps: Vec<u64>,
    /// Values there (`null` where not finite).
    pub values: Vec<Option<f64>>,
    /// Where its values were NaN or ±Inf (over the whole run): marked on the chart.
    pub non_finite: Vec<crate::non_finite::NonFiniteSteps>,
    /// The same scalar's EVAL values when the chart is its TRAIN ones (TRAIN when it is
    /// another mode's), drawn beside them: the whole run, downsampled alike.
    pub other: Option<HeadlineLine>,
}

/// Another mode's line of a headline chart.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HeadlineLine {
    /// `EVAL`, `TRAIN`, …
    pub mode: &'static str,
    /// Its values in all.
    pub total: usize,
    /// Steps kept.
    pub steps: Vec<u64>,
    /// Values there (`null` where not finite).
    pub values: Vec<Option<f64>>,
    /// Where its values were NaN or ±Inf.
    pub non_finite: Vec<crate::non_finite::NonFiniteSteps>,
}

/// Counters bumped when an area of a run's data changes (the version, split by panel).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, JsonSchema)]
pub(crate) struct Changed {
    /// System metrics, spans and step spans (the system and steps panels).
    pub profile: u64,
    /// Tensor steps, names and scalar values (the scalars and tensors panels).
    pub tensors: u64,
    /// Rule statuses (the rules list and the issue count).
    pub rules: u64,
}

/// How much a rule's verdict weighs, most first (the order the page lists findings in).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// It stopped the job, or fired with the action to stop it.
    StopsJob,
    /// A debugging rule (over tensors) found an issue with what the model learns.
    ModelQuality,
    /// A profiler rule found time or resources to win back.
    PerformanceHint,
    /// Nothing wrong found (or still checking, or the rule failed: its status says which).
    None,
    /// Nothing to check in this run.
    NotApplicable,
}

/// The run's health in one sentence, and its full text.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Health {
    /// One sentence: "Stopped at step 30 by ExplodingTensor (fired at step 3): NaN in loss and
    /// 10 gradients", "Live at step 120 · 2 issues: Overfit, Dataloader".
    pub sentence: String,
    /// Everything behind it, for whoever asks: the end marker's reason, the stop request, the
    /// stopping rule's whole message.
    pub details: String,
    /// The weight of the worst finding (the sentence's colour).
    pub severity: Severity,
}
