//! The dashboard API's series views as types: time series, spans, steps, scalars, system
//! timelines and the heatmap, tensors over steps and at one step.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use smdebug_format::system::vocab;

use crate::views::PhaseTotal;

/// A finite number, or `null` (a chart's gap).
pub fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Time-stamped points of one series, downsampled: `t` seconds since the epoch, `v` values.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TimeSeries {
    /// Times.
    pub t: Vec<Option<f64>>,
    /// Values (`null` where not finite).
    pub v: Vec<Option<f64>>,
    /// Points in the whole series.
    pub total: usize,
}

/// `GET /api/runs/{id}/spans`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SpanList {
    /// Spans in the window.
    pub count: usize,
    /// The rows asked for, in time order.
    pub spans: Vec<SpanRow>,
    /// Fewer rows than spans.
    pub truncated: bool,
    /// Rows skipped.
    pub offset: usize,
    /// Counted from the window's end.
    pub from_end: bool,
    /// The column the rows are sorted by (`None`: time order).
    pub sort: Option<SpanSort>,
    /// Sorted largest first.
    pub descending: bool,
    /// Time per phase in the window.
    pub totals: Vec<PhaseTotal>,
}

/// One span.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SpanRow {
    /// Its phase (`Step:ModeKeys.TRAIN`, `DataLoading`, …).
    pub phase: String,
    /// Its name.
    pub name: String,
    /// Start, seconds since the epoch.
    pub start: f64,
    /// End.
    pub end: f64,
    /// Node.
    pub node: String,
    /// Worker.
    pub worker: Option<u32>,
    /// Step.
    pub step: Option<u64>,
}

/// `GET /api/runs/{id}/steps`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Steps {
    /// Step durations per mode, node and worker.
    pub series: Vec<StepSeries>,
    /// The durations of the steps that start in the window, in log-spaced bins.
    pub histogram: Option<Histogram>,
    /// Time per phase in the window's last steps.
    pub phases: StepPhases,
    /// The window's slowest steps (of any mode, node, worker), slowest first, each with its
    /// time per phase: the step spans that start in the window, at most `slowest` of them.
    pub slowest: Vec<StepRow>,
    /// Step spans that start in the window.
    pub window_steps: usize,
    /// Why StepOutlier's findings in the rules summary do not read (a summary written by
    /// another version): no outlier is marked, and the page says why rather than "no verdict
    /// yet". `null` when they read, or there are none.
    pub outliers_unread: Option<String>,
}

/// One mode's, node's and worker's step durations.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StepSeries {
    /// Mode.
    pub mode: String,
    /// Node.
    pub node: String,
    /// Worker.
    pub worker: Option<u32>,
    /// Steps.
    pub count: usize,
    /// Median duration, seconds.
    pub p50: Option<f64>,
    /// Mean.
    pub mean: Option<f64>,
    /// Mean + 3σ (StepOutlier's limit).
    pub outlier_limit: Option<f64>,
    /// Durations over time.
    pub data: TimeSeries,
    /// The global step of each point of `data` (the comparison of runs draws durations over
    /// steps).
    pub step: Vec<Option<u64>>,
    /// Steps above the limit (at most 200).
    pub outliers: Vec<Outlier>,
}

/// A step above the outlier limit.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Outlier {
    /// The step.
    pub step: u64,
    /// Its start, seconds since the epoch.
    pub t: f64,
    /// Its duration, seconds.
    pub duration: f64,
}

/// Step durations in bins of equal width on a log axis (each bin's end a fixed multiple of
/// its start), from the shortest step to the longest.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Histogram {
    /// The bins' edges, seconds, one more than `counts`: bin `i` holds the durations `d` with
    /// `edges[i] <= d < edges[i + 1]` (the last bin its end too).
    pub edges: Vec<f64>,
    /// Steps per bin.
    pub counts: Vec<u64>,
}

/// Time per phase within each of the window's last steps.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct StepPhases {
    /// One row per step.
    pub steps: Vec<StepRow>,
    /// The phases seen, in a step's order: data loading, forward, backward, optimizer, then
    /// the others by name.
    pub phases: Vec<String>,
}

/// One step's time per phase: the spans of its node and worker that lie within its step span
/// (of its step, when both carry a step number), added up by phase (their trace rows' names: `DataLoaderIter`, `Forward`, …).
#[derive(Debug, Serialize, JsonSchema)]
pub struct StepRow {
    /// The step.
    pub step: Option<u64>,
    /// Its mode.
    pub mode: Option<&'static str>,
    /// Its node.
    pub node: String,
    /// Its worker.
    pub worker: Option<u32>,
    /// Its start, seconds since the epoch.
    pub start: f64,
    /// Its duration, seconds.
    pub duration: f64,
    /// Seconds per phase.
    pub phases: std::collections::BTreeMap<String, f64>,
    /// The rest of the step: its duration less the phases' time (0 when they add up to more,
    /// as nested or overlapping spans can).
    pub other: f64,
}

/// `GET /api/runs/{id}/scalars`: one page of the matching scalars.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ScalarPage {
    /// Where the next page starts, if there is one.
    pub next_offset: Option<usize>,
    /// The scalars on this page.
    pub scalars: Vec<ScalarSeries>,
    /// Scalars matching the filter.
    pub series_total: usize,
    /// This page's first.
    pub offset: usize,
    /// Every tensor name of the run.
    pub tensors: Vec<String>,
    /// The earliest wall time of any scalar value of the run, seconds since the epoch: where
    /// the relative time axis starts.
    pub first_wall_time: Option<f64>,
    /// The smoothing weight the `smoothed` lines were computed with (0: none sent).
    pub smoothing: f64,
}

/// One scalar, per mode.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ScalarSeries {
    /// Its name.
    pub name: String,
    /// Its modes, in name order.
    pub modes: Vec<ModeSeries>,
}

/// One scalar's values in one mode, each at its own steps.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ModeSeries {
    /// `TRAIN`, `EVAL`, …
    pub mode: &'static str,
    /// Values in the whole series.
    pub total: usize,
    /// Steps kept (downsampled).
    pub steps: Vec<u64>,
    /// Values there (`null` where not finite).
    pub values: Vec<Option<f64>>,
    /// Each value's wall time, its event record's, seconds since the epoch.
    pub wall_times: Vec<Option<f64>>,
    /// With a smoothing weight: TensorBoard's debiased exponential moving average over the
    /// summary's buckets and the values read, by the same slices as `steps`
    /// (`crate::downsample::draw`).
    pub smoothed: Option<SmoothedLine>,
    /// Where its values in the window were NaN or ±Inf (the line breaks there; the chart marks
    /// these steps).
    pub non_finite: Vec<crate::non_finite::NonFiniteSteps>,
}

/// A scalar's smoothed line in one mode: each bucket's lowest and highest point of it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SmoothedLine {
    /// Steps kept.
    pub steps: Vec<u64>,
    /// The average there (`null` where the value is not finite).
    pub values: Vec<Option<f64>>,
    /// The wall times of those steps' values, as `ModeSeries::wall_times`.
    pub wall_times: Vec<Option<f64>>,
}

/// `GET /api/runs/{id}/scalars/values`: every value of the scalars the filter matches as the
/// run's files hold them, at every step of every mode (not downsampled: the Scalars tab's CSV
/// and JSON downloads).
#[derive(Debug, Serialize, JsonSchema)]
pub struct EveryValue {
    /// The scalars, in name order.
    pub scalars: Vec<ScalarValues>,
    /// Values in all.
    pub values: usize,
}

/// Every value of one scalar.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ScalarValues {
    /// The scalar.
    pub name: String,
    /// Its modes, in name order.
    pub modes: Vec<ScalarModeValues>,
}

/// Every value of a scalar in one mode, in step order.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ScalarModeValues {
    /// `TRAIN`, `EVAL`, …
    pub mode: &'static str,
    /// Every step with a value.
    pub steps: Vec<u64>,
    /// The value at each (NaN and ±Inf as strings).
    pub values: Vec<crate::views::Num>,
    /// Each value's wall time, its event record's, seconds since the epoch.
    pub wall_times: Vec<Option<f64>>,
}

/// `GET /api/runs/{id}/system`: one page of timelines and the heatmap.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SystemPage {
    /// Where the next page starts, if there is one.
    pub next_offset: Option<usize>,
    /// The timelines on this page.
    pub series: Vec<SystemSeries>,
    /// Timelines in all.
    pub series_total: usize,
    /// This page's first.
    pub offset: usize,
    /// Per-core and per-GPU utilization.
    pub heatmap: Heatmap,
}

/// Whether a metric is drawn as a timeline: per-core utilization goes to the heatmap instead,
/// capacities are not drawn; totals and the rest are timelines (the pushes carry their new
/// samples).
pub(crate) fn is_timeline(metric_type: &str, name: &str, dimension: &str) -> bool {
    let per_core = metric_type == vocab::TYPE_CPU && name != vocab::CPU_TOTAL;
    let capacity = name.ends_with("TotalBytes") || dimension.ends_with("TotalBytes");
    !(per_core || capacity)
}

/// One system timeline.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SystemSeries {
    /// Node.
    pub node: String,
    /// Type (`cpu`, `gpu`, `memory`, `network`, `io`).
    pub r#type: String,
    /// Name.
    pub name: String,
    /// Dimension.
    pub dimension: String,
    /// Unit.
    pub unit: &'static str,
    /// Points.
    pub data: TimeSeries,
}

/// Rows of per-core / per-GPU utilization over the window's columns.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct Heatmap {
    /// One row per core or GPU (or band of neighbours).
    pub rows: Vec<HeatmapRow>,
    /// Columns.
    pub columns: usize,
    /// Window start, seconds since the epoch.
    pub from: Option<f64>,
    /// Window end.
    pub to: Option<f64>,
    /// Cores and GPUs in all.
    pub row_total: usize,
    /// Rows averaged into each band.
    pub band: usize,
}

/// One heatmap row.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HeatmapRow {
    /// What it shows.
    pub label: String,
    /// Mean utilization per column (`null` where no sample fell).
    pub values: Vec<Option<f64>>,
}

/// Quantiles drawn as TensorBoard's distribution bands.
pub const BANDS: [f64; 9] = [0.0, 6.68, 15.87, 30.85, 50.0, 69.15, 84.13, 93.32, 100.0];

/// `GET /api/runs/{id}/tensor`: reductions and a distribution over steps.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TensorSteps {
    /// The tensor.
    pub name: String,
    /// Its shape (empty for a scalar).
    pub shape: Vec<usize>,
    /// Its steps in all.
    pub total_steps: usize,
    /// The steps shown.
    pub steps: Vec<TensorStep>,
    /// The percentiles of `bands`.
    pub band_percentiles: [f64; 9],
}

/// A tensor's reductions at one step.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TensorStep {
    /// The step.
    pub step: u64,
    /// Minimum.
    pub min: Option<f64>,
    /// Maximum.
    pub max: Option<f64>,
    /// Mean.
    pub mean: Option<f64>,
    /// Standard deviation.
    pub std: Option<f64>,
    /// L2 norm.
    pub l2: Option<f64>,
    /// The [`BANDS`] percentiles.
    pub bands: Vec<Option<f64>>,
}

/// `GET /api/runs/{id}/tensor_histograms`: a tensor's values at each of (at most `steps`
/// evenly chosen) steps counted into the same `bins` equal bins, spanning the lowest to the
/// highest finite value of every step shown (TensorBoard's Histograms dashboard, one row a
/// step).
#[derive(Debug, Serialize, JsonSchema)]
pub struct TensorHistograms {
    /// The tensor.
    pub name: String,
    /// Its shape at the last step shown (empty for a scalar).
    pub shape: Vec<usize>,
    /// Its steps in all.
    pub total_steps: usize,
    /// The bins' edges, one more than bins (`null` when no step shown has a finite value).
    pub edges: Option<Vec<f64>>,
    /// The steps shown, in step order.
    pub steps: Vec<HistogramStep>,
}

/// A tensor's values at one step, counted into [`TensorHistograms::edges`]'s bins (the last
/// bin holds its upper edge).
#[derive(Debug, Serialize, JsonSchema)]
pub struct HistogramStep {
    /// The step.
    pub step: u64,
    /// Finite values per bin.
    pub counts: Vec<u64>,
    /// Values that are NaN or ±Inf (in no bin).
    pub non_finite: u64,
}

/// `GET /api/runs/{id}/tensor2d`: one step as a grid (no list of the tensor's steps: the
/// page has it from `/tensor`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct TensorGrid {
    /// The tensor.
    pub name: String,
    /// The step.
    pub step: u64,
    /// Its steps in all.
    pub total_steps: usize,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Rows of the value (all but the last dimension).
    pub rows: usize,
    /// Its last dimension.
    pub cols: usize,
    /// Cell means, at most `side` × `side` (`null` where nothing finite fell).
    pub cells: Vec<Vec<Option<f64>>>,
}

/// `GET /api/kineto`: the `--trace` files' summaries, one per rank.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Kineto<'a> {
    /// One per rank.
    pub ranks: Vec<KinetoRank<'a>>,
}

/// One rank's trace: its span, GPU busy and idle time, and its top kernels and operators.
#[derive(Debug, Serialize, JsonSchema)]
pub struct KinetoRank<'a> {
    /// The rank.
    pub rank: u32,
    /// The trace file.
    pub file: &'a str,
    /// The trace's span, µs.
    pub span_us: f64,
    /// GPU busy, µs.
    pub gpu_busy_us: f64,
    /// GPU idle, µs.
    pub gpu_idle_us: f64,
    /// The 20 kernels with the most time.
    pub gpu_kernels: &'a [smdebug_read::kineto::OpStats],
    /// The 20 CPU operators with the most time.
    pub cpu_operators: &'a [smdebug_read::kineto::OpStats],
    /// Time in all kernels, µs.
    pub gpu_kernel_total_us: f64,
}

/// An error answer: `{"error": "…"}`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ApiError {
    /// What went wrong, for people.
    pub error: String,
}

/// The answer to a stop request: the job will stop.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StopWritten {
    /// Always `true`.
    pub requested: bool,
    /// The reason of a stop request the run held already, which the job stops for (this one
    /// was not written over it); `None` when this request was written.
    pub already: Option<String>,
}

/// A column the span list can be sorted by.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SpanSort {
    /// Phase, then start.
    Phase,
    /// Name, then start.
    Name,
    /// Step (spans without one first), then start.
    Step,
    /// Node, then start.
    Node,
    /// Start.
    Start,
    /// Duration, then start.
    Duration,
}
