//! Dataloader: how many data-loading processes run against the node's cores.

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::profiler::details::{
    DataloaderDetails, Details, Firing, NodeDataLoading, WorkerVerdict,
};
use crate::profiler::snapshot::is_core;
use crate::profiler::stats::Sketch;
use crate::rule::{Evidence, ProfilerInput, ProfilerNeeds, ProfilerRule, RuleResult};
use crate::window::ProfilerWindow;
use serde::{Deserialize, Serialize};
use smdebug_analysis::stats::{round_us, round4};
use smdebug_core::phase::Phase;
use smdebug_core::text::duration;
use smdebug_format::system::vocab;
use smdebug_read::profile::Span;
use std::collections::{BTreeMap, BTreeSet};

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
    /// Too few workers are reported only when the training loop spent at least this
    /// percentage of its time loading data (where step spans give the share): fewer workers
    /// than cores do not slow a loop that hardly waits for data. Default `10`. Not a SageMaker
    /// parameter.
    #[serde(deserialize_with = "lenient::f64")]
    pub min_loading_percent: f64,
}

impl Default for DataloaderParams {
    fn default() -> Self {
        DataloaderParams {
            min_threshold: 70.0,
            max_threshold: 200.0,
            min_loading_percent: 10.0,
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
    /// Whether the loader pins its batches (`pin_memory` on its data-loading spans): false
    /// once any span says false.
    pin_memory: Option<bool>,
    loaders: BTreeSet<String>,
    loads: u64,
    load_seconds: Sketch,
    load_total_us: u64,
    first_step_us: Option<u64>,
    last_step_end_us: u64,
    step_total_us: u64,
    last_load_end_us: u64,
    /// The loads counted as judged so far (the rule's datapoints).
    judged_loads: u64,
    /// When the rule fired for the node, and why.
    fired: Option<(Firing, WorkerVerdict)>,
}

impl NodeLoading {
    /// The worker count and how it was found.
    fn workers(&self) -> (u64, &'static str) {
        match self.num_workers {
            Some(n) => (n, "num_workers argument"),
            None => (self.loaders.len() as u64, "distinct loaders seen"),
        }
    }

    /// The verdict on `workers` against the node's cores, with `params`' thresholds.
    fn verdict(&self, params: &DataloaderParams) -> Option<WorkerVerdict> {
        if self.loads == 0 || self.cores.is_empty() {
            return None;
        }
        let (workers, cores) = (self.workers().0 as f64, self.cores.len() as f64);
        if workers < cores * params.min_threshold / 100.0 {
            self.loading_matters(params)
                .then_some(WorkerVerdict::TooFew)
        } else if workers > cores * params.max_threshold / 100.0 {
            Some(WorkerVerdict::TooMany)
        } else {
            None
        }
    }

    /// Whether the node's workers can be judged against its cores: it loaded data, its core
    /// count is known, and so is its worker count (the `num_workers` argument, or enough
    /// loads, or the run is over).
    fn judgeable(&self, final_window: bool) -> bool {
        self.loads > 0
            && !self.cores.is_empty()
            && (self.num_workers.is_some()
                || self.loads >= MIN_LOADS_FOR_DISTINCT_COUNT
                || final_window)
    }

    /// Whether the loop waits for data enough for too few workers to matter: its share of
    /// the loop is `min_loading_percent` % or more, or unknown (no step spans to measure it).
    fn loading_matters(&self, params: &DataloaderParams) -> bool {
        self.loop_share()
            .is_none_or(|share| share * 100.0 >= params.min_loading_percent)
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

/// A `pin_memory` argument: a boolean, or its Python spelling as a string (`"True"`).
fn pin_memory_flag(value: &serde_json::Value) -> Option<bool> {
    match value {
        serde_json::Value::Bool(b) => Some(*b),
        serde_json::Value::String(s) if s.eq_ignore_ascii_case("true") => Some(true),
        serde_json::Value::String(s) if s.eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
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
    if node.fired.is_some() {
        return None;
    }
    let verdict = node.verdict(params)?;
    let (workers, source) = node.workers();
    let cores = node.cores.len() as f64;
    let low = verdict == WorkerVerdict::TooFew;
    let at = node.last_load_end_us;
    let step_ref = window.step_ref_at(at);
    let step = step_ref.step;
    node.fired = Some((Firing { time_us: at, step }, verdict));
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
            "; a load took {} at the median, {} at p95",
            duration(p50),
            duration(p95)
        ));
    }
    if let Some(share) = node.loop_share() {
        // The share up to the firing, which can differ from the whole run's (the rule's
        // details, at its end): say what it counts, so that it can be checked against the
        // spans.
        message.push_str(&format!(
            "; up to then ({} loads), {:.0}% of the training loop was spent loading data",
            node.loads,
            share * 100.0
        ));
    }
    r.fire(message);
    r.evidence.push(
        Evidence::at(
            &format!("{name} data-loading workers"),
            step_ref,
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
/// `max_threshold` % of the cores. Too few are reported only when loading data took at least
/// `min_loading_percent` % of the training loop (this crate's condition, not SageMaker's: the
/// candle examples load each batch in microseconds, 0 % of the loop, and SageMaker's test
/// alone asks them for more workers).
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
        check.non_negative(
            "min_loading_percent",
            params.min_loading_percent,
            "a percentage",
        )?;
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

    /// The cores each node's per-core CPU metrics name (a node's core count).
    fn note_cores(&mut self, window: &ProfilerWindow<'_>) {
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
    }

    /// What the last window adds when not every node that loaded data could be judged: no
    /// data-loading spans at all, no core counts, or the nodes left unjudged for lack of one.
    fn closing_note(&self, now_us: u64) -> Option<RuleResult> {
        let loading: Vec<&String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.loads > 0)
            .map(|(name, _)| name)
            .collect();
        let coreless: Vec<&String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.loads > 0 && n.cores.is_empty())
            .map(|(name, _)| name)
            .collect();
        if self.nodes.values().all(|n| n.loads == 0) {
            let mut r = RuleResult::at_time(0, now_us);
            r.message = "no data-loading spans in this run (record them with \
                         SpanRecorder::data_loading): nothing to check"
                .into();
            return Some(r);
        } else if self
            .nodes
            .values()
            .all(|n| n.loads == 0 || n.cores.is_empty())
        {
            let mut r = RuleResult::at_time(0, now_us);
            r.message = "no per-core CPU metrics on the nodes that loaded data: the core \
                         count is unknown"
                .into();
            return Some(r);
        } else if !coreless.is_empty() {
            let mut r = RuleResult::at_time(0, now_us);
            r.message = format!(
                "judged {} of {} nodes that loaded data: no per-core CPU metrics on {}, whose \
                 core count is unknown",
                loading.len() - coreless.len(),
                loading.len(),
                coreless
                    .iter()
                    .map(|n| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            return Some(r);
        }
        None
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
        self.note_cores(window);
        let mut loads = 0;
        let mut results = Vec::new();
        for span in window.spans {
            let node = self.nodes.entry(span.node.clone()).or_default();
            if span.phase.starts_with("DataLoader")
                && let Some(n) = arg_u64(span, "num_workers")
            {
                node.num_workers = Some(n);
            }
            if is_load(span)
                && let Some(pinned) = span.args.get("pin_memory").and_then(pin_memory_flag)
            {
                node.pin_memory = Some(node.pin_memory.unwrap_or(true) && pinned);
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
                loads += 1;
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
        // A load is judged once its node's workers can be weighed against its cores: on a
        // node whose core count is unknown it stays read, not judged.
        let mut datapoints = 0;
        for node in self.nodes.values_mut() {
            if node.judgeable(window.final_window) {
                datapoints += node.loads - node.judged_loads;
                node.judged_loads = node.loads;
            }
        }
        if loads > 0 || datapoints > 0 {
            let mut r = RuleResult::at_time(window.step_at(window.now_us), window.now_us);
            r.datapoints = datapoints as usize;
            r.unjudged = (loads as usize).saturating_sub(r.datapoints);
            results.push(r);
        }
        if window.final_window
            && let Some(r) = self.closing_note(window.now_us)
        {
            results.push(r);
        }
        Ok(results)
    }

    fn details(&self) -> Option<Details> {
        let p = &self.params;
        let nodes = self
            .nodes
            .iter()
            .filter(|(_, n)| n.loads > 0 || !n.cores.is_empty())
            .map(|(name, n)| {
                let (workers, source) = n.workers();
                let cores = n.cores.len();
                let node = NodeDataLoading {
                    cores,
                    workers,
                    workers_from: source.to_string(),
                    num_workers_argument: n.num_workers,
                    pin_memory: n.pin_memory,
                    min_workers: round4(cores as f64 * p.min_threshold / 100.0),
                    max_workers: round4(cores as f64 * p.max_threshold / 100.0),
                    verdict: n.fired.as_ref().map(|f| f.1).or_else(|| n.verdict(p)),
                    fired_at: n.fired.as_ref().map(|f| f.0.clone()),
                    data_loading_spans: n.loads,
                    load_time_s: n.load_seconds.summary().map(|s| s.rounded_us()),
                    data_loading_total_s: round_us(n.load_total_us as f64 / 1e6),
                    step_total_s: round_us(n.step_total_us as f64 / 1e6),
                    training_loop_share_loading: n.loop_share().map(round4),
                };
                (name.clone(), node)
            })
            .collect();
        Some(Details::Dataloader(DataloaderDetails {
            min_threshold: p.min_threshold,
            max_threshold: p.max_threshold,
            min_loading_percent: p.min_loading_percent,
            nodes,
        }))
    }
}
