//! CPUBottleneck, IOBottleneck and Dataloader: is the GPU waiting for the host?

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use smdebug_profiler::reader::Span;
use smdebug_profiler::spans::Phase;
use smdebug_profiler::system::vocab;

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::rule::{Evidence, ProfilerInput, ProfilerNeeds, ProfilerRule, RuleResult};
use crate::window::ProfilerWindow;

use super::details::{
    BottleneckDetails, BottleneckSample, Details, NodeBottlenecks as NodeBottleneckDetails,
};
use super::snapshot::{NO_GPU, Snapshot, SnapshotAssembler, is_core, utc};
use super::stats::{Sketch, round4};

/// At most this many bottleneck times are kept per node for the report.
const MAX_KEPT_TIMES: usize = 1000;

/// Parameters of [`CPUBottleneck`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CPUBottleneckParams {
    /// Fires when more than this percentage of the samples are bottlenecks. Default `50`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold: f64,
    /// A GPU below this utilization (percent) is idle. Default `10`.
    #[serde(deserialize_with = "lenient::f64")]
    pub gpu_threshold: f64,
    /// A CPU (any core, or the total) above this utilization (percent) is saturated. Default
    /// `90`.
    #[serde(deserialize_with = "lenient::f64")]
    pub cpu_threshold: f64,
    /// Samples skipped per node at the start (initialization). Default `1000`.
    #[serde(deserialize_with = "lenient::u64")]
    pub patience: u64,
}

impl Default for CPUBottleneckParams {
    fn default() -> Self {
        CPUBottleneckParams {
            threshold: 50.0,
            gpu_threshold: 10.0,
            cpu_threshold: 90.0,
            patience: 1000,
        }
    }
}

/// Parameters of [`IOBottleneck`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IOBottleneckParams {
    /// Fires when more than this percentage of the samples are bottlenecks. Default `50`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold: f64,
    /// A GPU below this utilization (percent) is idle. Default `10`.
    #[serde(deserialize_with = "lenient::f64")]
    pub gpu_threshold: f64,
    /// I/O wait (any core, or the total) above this percentage is high. Default `50`.
    #[serde(deserialize_with = "lenient::f64")]
    pub io_threshold: f64,
    /// Samples skipped per node at the start (initialization). Default `1000`.
    #[serde(deserialize_with = "lenient::u64")]
    pub patience: u64,
}

impl Default for IOBottleneckParams {
    fn default() -> Self {
        IOBottleneckParams {
            threshold: 50.0,
            gpu_threshold: 10.0,
            io_threshold: 50.0,
            patience: 1000,
        }
    }
}

/// Which host resource starves the GPU.
#[derive(Clone, Copy, Debug)]
enum Starver {
    Cpu,
    Io,
}

#[derive(Debug, Default)]
struct NodeBottlenecks {
    /// Snapshots with GPU readings, patience included.
    seen: u64,
    /// Snapshots evaluated (after patience).
    counted: u64,
    bottlenecks: u64,
    low_gpu: u64,
    firing: bool,
    /// The first [`MAX_KEPT_TIMES`] bottleneck snapshots, in time order.
    times: Vec<BottleneckSample>,
    /// Per framework phase (Step spans left out), how many kept bottleneck samples fell inside
    /// one of its spans: what the loop was doing while the GPU waited.
    phases: BTreeMap<String, u64>,
}

/// The counting shared by CPUBottleneck and IOBottleneck.
#[derive(Debug)]
struct Bottlenecks {
    starver: Starver,
    threshold: f64,
    gpu_threshold: f64,
    host_threshold: f64,
    patience: u64,
    snapshots: SnapshotAssembler,
    nodes: BTreeMap<String, NodeBottlenecks>,
    /// Phase spans (Step spans left out) of earlier windows, newest last, at most
    /// [`MAX_RECENT_SPANS`]: a sample read after the span it fell in is matched against them.
    recent_spans: VecDeque<PhaseSpan>,
}

/// A framework span's extent, phase and node, kept to match later samples.
#[derive(Debug)]
struct PhaseSpan {
    start_us: u64,
    end_us: u64,
    phase: String,
    node: String,
}

/// How many earlier windows' phase spans [`Bottlenecks`] keeps.
const MAX_RECENT_SPANS: usize = 4096;

impl Bottlenecks {
    fn host_reading(&self, snapshot: &Snapshot) -> Option<(String, f64)> {
        let readings = match self.starver {
            Starver::Cpu => &snapshot.cpu,
            Starver::Io => &snapshot.io_wait,
        };
        readings
            .iter()
            .filter(|(_, v)| **v > self.host_threshold)
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(n, v)| (n.clone(), *v))
    }

    fn invoke(&mut self, window: &ProfilerWindow<'_>) -> Vec<RuleResult> {
        let mut results = Vec::new();
        let mut datapoints = 0;
        for snapshot in self.snapshots.feed(window) {
            if snapshot.gpu.is_empty() {
                continue;
            }
            let host = self.host_reading(&snapshot);
            let idle_gpus: Vec<(&String, &f64)> = snapshot
                .gpu
                .iter()
                .filter(|(_, v)| **v < self.gpu_threshold)
                .collect();
            let single = match self.nodes.len() {
                0 => true,
                1 => self.nodes.contains_key(&snapshot.node),
                _ => false,
            };
            let node = self.nodes.entry(snapshot.node.clone()).or_default();
            node.seen += 1;
            if node.seen <= self.patience {
                continue;
            }
            node.counted += 1;
            datapoints += 1;
            if !idle_gpus.is_empty() {
                node.low_gpu += 1;
            }
            let bottleneck = !idle_gpus.is_empty() && host.is_some();
            if bottleneck {
                node.bottlenecks += 1;
                if node.times.len() < MAX_KEPT_TIMES {
                    node.times.push(BottleneckSample {
                        time_us: snapshot.time_us,
                        step: window.step_at(snapshot.time_us),
                        host_percent: host.as_ref().map_or(f64::NAN, |h| h.1),
                        gpu_percent: idle_gpus.iter().map(|g| *g.1).fold(f64::INFINITY, f64::min),
                    });
                    // Spans of earlier windows this sample fell in (this window's are matched
                    // in `attribute_phases`, so no pair is counted twice).
                    for s in &self.recent_spans {
                        if (single || s.node == snapshot.node)
                            && (s.start_us..=s.end_us).contains(&snapshot.time_us)
                        {
                            *node.phases.entry(s.phase.clone()).or_default() += 1;
                        }
                    }
                }
            }
            let percent = node.bottlenecks as f64 * 100.0 / node.counted as f64;
            let condition = percent > self.threshold;
            if condition && !node.firing {
                let step = window.step_at(snapshot.time_us);
                let mut r = RuleResult::at_time(step, snapshot.time_us);
                let (what, cure) = match self.starver {
                    Starver::Cpu => (
                        format!("the CPU was above {}%", self.host_threshold),
                        "the host cannot prepare data fast enough: move preprocessing to the \
                         GPU or offline, use more data-loading workers, or a larger instance",
                    ),
                    Starver::Io => (
                        format!("I/O wait was above {}%", self.host_threshold),
                        "the GPU waits for storage: prefetch, cache the data set locally, \
                         read larger shards, or use faster storage",
                    ),
                };
                r.fire(format!(
                    "node {}: GPU idle (below {}%) while {what} in {:.0}% of {} samples \
                     (more than {}%), first at {} (step {step}): {cure}",
                    snapshot.node,
                    self.gpu_threshold,
                    percent,
                    node.counted,
                    self.threshold,
                    utc(node.times.first().map_or(snapshot.time_us, |t| t.time_us)),
                ));
                let label = format!("{} bottleneck share", snapshot.node);
                r.evidence.push(
                    Evidence::new(&label, step, "percent_of_samples", percent)
                        .limit(self.threshold),
                );
                if let (Some((gpu, g)), Some((name, h))) = (idle_gpus.first(), &host) {
                    r.evidence.push(
                        Evidence::new(&format!("{} {gpu}", snapshot.node), step, "gpu_util", **g)
                            .limit(self.gpu_threshold),
                    );
                    r.evidence.push(
                        Evidence::new(&format!("{} {name}", snapshot.node), step, "host", *h)
                            .limit(self.host_threshold),
                    );
                }
                results.push(r);
            }
            node.firing = condition;
        }
        self.attribute_phases(window);
        if datapoints > 0 {
            let mut r = RuleResult::at_time(window.step_at(window.now_us), window.now_us);
            r.datapoints = datapoints;
            results.push(r);
        }
        if window.final_window && self.nodes.is_empty() {
            let mut r = RuleResult::at_time(0, window.now_us);
            r.message = NO_GPU.into();
            results.push(r);
        } else if window.final_window && self.nodes.values().all(|n| n.counted == 0) {
            let mut r = RuleResult::at_time(0, window.now_us);
            let seen: u64 = self.nodes.values().map(|n| n.seen).max().unwrap_or(0);
            r.message = format!(
                "only {seen} samples with GPU readings per node, not more than patience \
                 ({}): nothing evaluated",
                self.patience
            );
            results.push(r);
        }
        results
    }

    /// Counts the kept bottleneck samples inside each of this window's spans, by the span's
    /// phase, then keeps the spans for samples still to come: each (sample, span) pair is
    /// counted once, whichever arrives first, so the verdict does not depend on how the data was
    /// cut into windows. With one node, spans count whatever node their file names (the sampler
    /// and the span writer may name a host differently).
    fn attribute_phases(&mut self, window: &ProfilerWindow<'_>) {
        let single = self.nodes.len() == 1;
        for span in window.spans {
            if span.phase.starts_with("Step") {
                continue;
            }
            if self.recent_spans.len() == MAX_RECENT_SPANS {
                self.recent_spans.pop_front();
            }
            self.recent_spans.push_back(PhaseSpan {
                start_us: span.start_us,
                end_us: span.end_us,
                phase: span.phase.clone(),
                node: span.node.clone(),
            });
            let node = if single {
                self.nodes.values_mut().next()
            } else {
                self.nodes.get_mut(&span.node)
            };
            let Some(node) = node else { continue };
            let from = node.times.partition_point(|t| t.time_us < span.start_us);
            let to = node.times.partition_point(|t| t.time_us <= span.end_us);
            if to > from {
                *node.phases.entry(span.phase.clone()).or_default() += (to - from) as u64;
            }
        }
    }

    fn details(&self) -> Option<Details> {
        let nodes = self
            .nodes
            .iter()
            .map(|(node, n)| {
                let details = NodeBottleneckDetails {
                    datapoints: n.counted,
                    skipped_for_patience: n.seen - n.counted,
                    bottlenecks: n.bottlenecks,
                    bottleneck_percent: if n.counted > 0 {
                        round4(n.bottlenecks as f64 * 100.0 / n.counted as f64)
                    } else {
                        0.0
                    },
                    low_gpu_utilization: n.low_gpu,
                    bottleneck_samples: n.times.clone(),
                    phases_during_bottlenecks: n.phases.clone(),
                };
                (node.clone(), details)
            })
            .collect();
        Some(Details::Bottlenecks(BottleneckDetails { nodes }))
    }
}

fn check_bottleneck(rule: &str, threshold: f64, gpu: f64, host: (&str, f64)) -> Result<()> {
    let check = Check::new(rule);
    check.percent("threshold", threshold)?;
    check.percent("gpu_threshold", gpu)?;
    check.percent(host.0, host.1)
}

/// **CPUBottleneck** — fires when, per node, more than `threshold` % of the system samples
/// (after the first `patience`) show a GPU below `gpu_threshold` % utilization while some CPU
/// (a core or the total) is above `cpu_threshold` %. Fires once each time the share crosses
/// the threshold. Without GPU metrics it checks nothing.
pub struct CPUBottleneck {
    params: CPUBottleneckParams,
    inner: Bottlenecks,
}

impl CPUBottleneck {
    /// The rule's name.
    pub const NAME: &'static str = "CPUBottleneck";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: CPUBottleneckParams) -> Result<Self> {
        check_bottleneck(
            Self::NAME,
            params.threshold,
            params.gpu_threshold,
            ("cpu_threshold", params.cpu_threshold),
        )?;
        let inner = Bottlenecks {
            starver: Starver::Cpu,
            threshold: params.threshold,
            gpu_threshold: params.gpu_threshold,
            host_threshold: params.cpu_threshold,
            patience: params.patience,
            snapshots: SnapshotAssembler::default(),
            nodes: BTreeMap::new(),
            recent_spans: VecDeque::new(),
        };
        Ok(CPUBottleneck { params, inner })
    }
}

impl ProfilerRule for CPUBottleneck {
    crate::rule_identity!();

    fn needs(&self) -> ProfilerNeeds {
        ProfilerNeeds::reading([
            ProfilerInput::SystemMetrics,
            ProfilerInput::Spans,
            ProfilerInput::StepTimeline,
        ])
        .requiring("GPU metrics (the GPU idling while the CPU is busy)")
    }
    fn invoke_on_window(&mut self, window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
        Ok(self.inner.invoke(window))
    }
    fn details(&self) -> Option<Details> {
        self.inner.details()
    }
}

/// **IOBottleneck** — like [`CPUBottleneck`], with I/O wait above `io_threshold` % (on a core
/// or the total) in place of a saturated CPU: the GPU idles while the host waits for storage.
pub struct IOBottleneck {
    params: IOBottleneckParams,
    inner: Bottlenecks,
}

impl IOBottleneck {
    /// The rule's name.
    pub const NAME: &'static str = "IOBottleneck";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: IOBottleneckParams) -> Result<Self> {
        check_bottleneck(
            Self::NAME,
            params.threshold,
            params.gpu_threshold,
            ("io_threshold", params.io_threshold),
        )?;
        let inner = Bottlenecks {
            starver: Starver::Io,
            threshold: params.threshold,
            gpu_threshold: params.gpu_threshold,
            host_threshold: params.io_threshold,
            patience: params.patience,
            snapshots: SnapshotAssembler::default(),
            nodes: BTreeMap::new(),
            recent_spans: VecDeque::new(),
        };
        Ok(IOBottleneck { params, inner })
    }
}

impl ProfilerRule for IOBottleneck {
    crate::rule_identity!();

    fn needs(&self) -> ProfilerNeeds {
        ProfilerNeeds::reading([
            ProfilerInput::SystemMetrics,
            ProfilerInput::Spans,
            ProfilerInput::StepTimeline,
        ])
        .requiring("GPU metrics (the GPU idling while the host waits for I/O)")
    }
    fn invoke_on_window(&mut self, window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
        Ok(self.inner.invoke(window))
    }
    fn details(&self) -> Option<Details> {
        self.inner.details()
    }
}

/// Parameters of [`Dataloader`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DataloaderParams {
    /// Fires when the data-loading workers are fewer than this percentage of the cores.
    /// Default `70`.
    #[serde(deserialize_with = "lenient::f64")]
    pub min_threshold: f64,
    /// Fires when the data-loading workers are more than this percentage of the cores.
    /// Default `200`.
    #[serde(deserialize_with = "lenient::f64")]
    pub max_threshold: f64,
}

impl Default for DataloaderParams {
    fn default() -> Self {
        DataloaderParams {
            min_threshold: 70.0,
            max_threshold: 200.0,
        }
    }
}

/// Data-loading spans seen before the worker count is judged from distinct loaders alone (no
/// `num_workers` argument): fewer could miss workers that have not loaded yet.
const MIN_LOADS_FOR_DISTINCT_COUNT: u64 = 10;

#[derive(Debug, Default)]
struct NodeLoading {
    cores: BTreeSet<String>,
    num_workers: Option<u64>,
    loaders: BTreeSet<String>,
    loads: u64,
    load_seconds: Sketch,
    load_total_us: u64,
    first_step_us: Option<u64>,
    last_step_end_us: u64,
    step_total_us: u64,
    last_load_end_us: u64,
    fired: bool,
}

impl NodeLoading {
    /// The worker count and how it was found.
    fn workers(&self) -> (u64, &'static str) {
        match self.num_workers {
            Some(n) => (n, "num_workers argument"),
            None => (self.loaders.len() as u64, "distinct loaders seen"),
        }
    }

    fn loop_share(&self) -> Option<f64> {
        let first = self.first_step_us?;
        let length = self.last_step_end_us.saturating_sub(first);
        (length > 0).then(|| (self.load_total_us as f64 / length as f64).min(1.0))
    }
}

/// Whether a span is a data-loading span (ours: `DataLoaderIter`; PyTorch's smdebug hook also
/// writes `DataLoaderWorker`).
fn is_load(span: &Span) -> bool {
    span.phase_kind() == Phase::DataLoading || span.phase == "DataLoaderWorker"
}

fn loader_id(span: &Span) -> String {
    for key in ["worker_id", "thread", "tid", "pid"] {
        if let Some(v) = span.args.get(key) {
            return format!("{key}={v}");
        }
    }
    format!("worker={}", span.worker.map_or(-1, i64::from))
}

fn arg_u64(span: &Span, key: &str) -> Option<u64> {
    let v = span.args.get(key)?;
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// Compares a node's data-loading workers with its cores; a fired result the first time they
/// are too few or too many.
fn judge(
    params: &DataloaderParams,
    name: &str,
    node: &mut NodeLoading,
    window: &ProfilerWindow<'_>,
) -> Option<RuleResult> {
    if node.fired || node.loads == 0 || node.cores.is_empty() {
        return None;
    }
    let (workers, source) = node.workers();
    let cores = node.cores.len() as f64;
    let low = (workers as f64) < cores * params.min_threshold / 100.0;
    let high = (workers as f64) > cores * params.max_threshold / 100.0;
    if !(low || high) {
        return None;
    }
    node.fired = true;
    let at = node.last_load_end_us;
    let step = window.step_at(at);
    let mut r = RuleResult::at_time(step, at);
    let advice = if low {
        format!(
            "fewer than {}% of the cores: raise the worker count to about {}",
            params.min_threshold,
            node.cores.len()
        )
    } else {
        format!(
            "more than {}% of the cores: lower the worker count to about {}",
            params.max_threshold,
            node.cores.len()
        )
    };
    let mut message = format!(
        "node {name}: {workers} data-loading workers ({source}) on {} cores, {advice}",
        node.cores.len()
    );
    if let (Some(p50), Some(p95)) = (
        node.load_seconds.quantile(0.5),
        node.load_seconds.quantile(0.95),
    ) {
        message.push_str(&format!(
            "; a load took {:.1} ms at the median, {:.1} ms at p95",
            p50 * 1e3,
            p95 * 1e3
        ));
    }
    if let Some(share) = node.loop_share() {
        message.push_str(&format!(
            "; {:.0}% of the training loop was spent loading data",
            share * 100.0
        ));
    }
    r.fire(message);
    r.evidence.push(
        Evidence::new(
            &format!("{name} data-loading workers"),
            step,
            "workers",
            workers as f64,
        )
        .limit(
            cores
                * if low {
                    params.min_threshold
                } else {
                    params.max_threshold
                }
                / 100.0,
        ),
    );
    Some(r)
}

/// **Dataloader** — per node, compares the number of data-loading workers with the number of
/// CPU cores; fires when the workers are fewer than `min_threshold` % or more than
/// `max_threshold` % of the cores.
///
/// The worker count is the `num_workers` argument of data-loading spans when the loop records
/// it (`spans.data_loading().arg("num_workers", 8)`), else the number of distinct loaders
/// (`worker_id`, `thread`, `tid` or `pid` argument, else the span's worker) that recorded
/// data-loading spans, judged once at least ten were seen or at the end. The cores are the
/// node's `cpuN` series. Its details hold the load-time percentiles and the share of the
/// training loop spent loading data.
pub struct Dataloader {
    params: DataloaderParams,
    nodes: BTreeMap<String, NodeLoading>,
}

impl Dataloader {
    /// The rule's name.
    pub const NAME: &'static str = "Dataloader";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: DataloaderParams) -> Result<Self> {
        let check = Check::new(Self::NAME);
        check.non_negative("min_threshold", params.min_threshold, "a percentage")?;
        check.non_negative("max_threshold", params.max_threshold, "a percentage")?;
        check.that(
            params.max_threshold >= params.min_threshold,
            "max_threshold",
            || {
                format!(
                    "{} is below min_threshold {}",
                    params.max_threshold, params.min_threshold
                )
            },
        )?;
        Ok(Dataloader {
            params,
            nodes: BTreeMap::new(),
        })
    }
}

impl ProfilerRule for Dataloader {
    crate::rule_identity!();

    fn needs(&self) -> ProfilerNeeds {
        ProfilerNeeds::reading([
            ProfilerInput::SystemMetrics,
            ProfilerInput::Spans,
            ProfilerInput::StepTimeline,
        ])
        .requiring("data-loading spans")
    }

    fn invoke_on_window(&mut self, window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
        for s in window.samples {
            if s.metric_type == vocab::TYPE_CPU
                && s.dimension == vocab::CPU_UTILIZATION
                && is_core(&s.name)
            {
                let node = self.nodes.entry(s.node_id.clone()).or_default();
                if !node.cores.contains(&s.name) {
                    node.cores.insert(s.name.clone());
                }
            }
        }
        let mut datapoints = 0;
        let mut results = Vec::new();
        for span in window.spans {
            let node = self.nodes.entry(span.node.clone()).or_default();
            if span.phase.starts_with("DataLoader")
                && let Some(n) = arg_u64(span, "num_workers")
            {
                node.num_workers = Some(n);
            }
            if let Phase::Step(_) = span.phase_kind() {
                node.first_step_us = Some(
                    node.first_step_us
                        .map_or(span.start_us, |f| f.min(span.start_us)),
                );
                node.last_step_end_us = node.last_step_end_us.max(span.end_us);
                node.step_total_us += span.duration_us();
            }
            if is_load(span) {
                datapoints += 1;
                node.loads += 1;
                node.loaders.insert(loader_id(span));
                node.load_seconds.add(span.duration_us() as f64 / 1e6);
                node.load_total_us += span.duration_us();
                node.last_load_end_us = node.last_load_end_us.max(span.end_us);
                // Judged at each load once the count is known, so the verdict and its time do
                // not depend on how the data was cut into windows.
                if (node.num_workers.is_some() || node.loads >= MIN_LOADS_FOR_DISTINCT_COUNT)
                    && let Some(r) = judge(&self.params, &span.node, node, window)
                {
                    results.push(r);
                }
            }
        }
        if window.final_window {
            for (name, node) in &mut self.nodes {
                if let Some(r) = judge(&self.params, name, node, window) {
                    results.push(r);
                }
            }
        }
        if datapoints > 0 {
            let mut r = RuleResult::at_time(window.step_at(window.now_us), window.now_us);
            r.datapoints = datapoints;
            results.push(r);
        }
        if window.final_window && self.nodes.values().all(|n| n.loads == 0) {
            let mut r = RuleResult::at_time(0, window.now_us);
            r.message = "no data-loading spans in this run (record them with \
                         SpanRecorder::data_loading): nothing to check"
                .into();
            results.push(r);
        } else if window.final_window
            && self
                .nodes
                .values()
                .all(|n| n.loads == 0 || n.cores.is_empty())
        {
            let mut r = RuleResult::at_time(0, window.now_us);
            r.message = "no per-core CPU metrics on the nodes that loaded data: the core \
                         count is unknown"
                .into();
            results.push(r);
        }
        Ok(results)
    }

    fn details(&self) -> Option<Details> {
        Some(Details::Json({
            let nodes: serde_json::Map<String, Value> = self
                .nodes
                .iter()
                .filter(|(_, n)| n.loads > 0 || !n.cores.is_empty())
                .map(|(name, n)| {
                    let (workers, source) = n.workers();
                    (
                        name.clone(),
                        json!({
                            "cores": n.cores.len(),
                            "workers": workers,
                            "workers_from": source,
                            "num_workers_argument": n.num_workers,
                            "data_loading_spans": n.loads,
                            "load_time_s": n.load_seconds.summary(),
                            "data_loading_total_s": round4(n.load_total_us as f64 / 1e6),
                            "step_total_s": round4(n.step_total_us as f64 / 1e6),
                            "training_loop_share_loading": n.loop_share().map(round4),
                        }),
                    )
                })
                .collect();
            json!({ "nodes": nodes })
        }))
    }
}
