//! OverallSystemUsage and OverallFrameworkMetrics: rules that never fire and collect the
//! statistics the profiling report shows.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use smdebug_analysis::time;
use smdebug_core::phase::Phase;
use smdebug_format::system::SystemSample;
use smdebug_format::system::vocab;
use smdebug_read::profile::Span;

use crate::error::Result;
use crate::rule::{ProfilerInput, ProfilerNeeds, ProfilerRule, RuleResult};

use crate::window::ProfilerWindow;

use super::details::{
    Details, FrameworkMetricsDetails, MetricUsage, OperatorTime, OperatorTotals,
    SystemUsageDetails, TimeOutside, TimeShare, TimeTotal,
};
use super::snapshot::is_core;
use super::stats::Sketch;
use smdebug_analysis::stats::{round_us, round4};

/// Parameters of [`OverallSystemUsage`]: none.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OverallSystemUsageParams {}

/// Parameters of [`OverallFrameworkMetrics`]: none.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OverallFrameworkMetricsParams {}

/// The row a sample is summarized under, and its unit. Per-core CPU series are pooled into one
/// row per dimension (a 96-core machine would otherwise give 192 rows); GPUs stay apart.
fn metric_row(s: &SystemSample) -> (String, &'static str) {
    let label = match s.metric_type.as_str() {
        vocab::TYPE_CPU if is_core(&s.name) => format!("{} (per core)", s.dimension),
        vocab::TYPE_CPU => format!("{} ({})", s.dimension, s.name),
        vocab::TYPE_GPU => format!("{} {}", s.dimension, s.name),
        vocab::TYPE_MEMORY | vocab::TYPE_IO | vocab::TYPE_NETWORK | vocab::TYPE_PROCESS
            if !s.name.is_empty() =>
        {
            s.name.clone()
        }
        other => format!("{other} {} {}", s.name, s.dimension)
            .trim()
            .to_string(),
    };
    let unit = vocab::unit(&s.metric_type, &s.name, &s.dimension);
    (label, unit)
}

struct Series {
    metric_type: String,
    unit: &'static str,
    values: Sketch,
}

/// **OverallSystemUsage** — never fires. Collects, per node and metric, the unit and the max,
/// p99, p95, p50 and min over the whole run (per-core CPU series pooled, within about 1 %).
#[derive(Default)]
pub struct OverallSystemUsage {
    params: OverallSystemUsageParams,
    series: BTreeMap<(String, String), Series>,
}

impl OverallSystemUsage {
    /// The rule's name.
    pub const NAME: &'static str = "OverallSystemUsage";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: OverallSystemUsageParams) -> Result<Self> {
        Ok(OverallSystemUsage {
            params,
            series: BTreeMap::new(),
        })
    }
}

impl ProfilerRule for OverallSystemUsage {
    crate::rule_identity!();

    fn needs(&self) -> ProfilerNeeds {
        ProfilerNeeds::reading([ProfilerInput::SystemMetrics, ProfilerInput::StepTimeline])
    }

    fn invoke_on_window(&mut self, window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
        for s in window.samples {
            let (label, unit) = metric_row(s);
            self.series
                .entry((s.node_id.clone(), label))
                .or_insert_with(|| Series {
                    metric_type: s.metric_type.clone(),
                    unit,
                    values: Sketch::default(),
                })
                .values
                .add(s.value);
        }
        let mut results = Vec::new();
        if !window.samples.is_empty() {
            let mut r = RuleResult::at_time(window.step_at(window.now_us), window.now_us);
            r.datapoints = window.samples.len();
            results.push(r);
        }
        if window.final_window && self.series.is_empty() {
            let mut r = RuleResult::at_time(0, window.now_us);
            r.message = "no system metrics in this run: nothing to summarize".into();
            results.push(r);
        }
        Ok(results)
    }

    fn details(&self) -> Option<Details> {
        let mut details = SystemUsageDetails::default();
        for ((node, label), s) in &self.series {
            let Some(values) = s.values.summary().map(|s| s.rounded()) else {
                continue;
            };
            details.nodes.entry(node.clone()).or_default().insert(
                label.clone(),
                MetricUsage {
                    metric_type: s.metric_type.clone(),
                    unit: s.unit.to_string(),
                    values,
                },
            );
        }
        Some(Details::SystemUsage(details))
    }
}

/// Where an operator span ran, from its Kineto-style `cat` argument.
fn operator_device(span: &Span) -> Option<&'static str> {
    let cat = span
        .args
        .get("cat")
        .and_then(Value::as_str)?
        .to_ascii_lowercase();
    if cat.contains("kernel") || cat.starts_with("gpu_") || cat.contains("memcpy") {
        Some("gpu")
    } else if cat.contains("cpu_op") || cat.contains("operator") {
        Some("cpu")
    } else {
        None
    }
}

/// Microseconds as seconds (exact to the microsecond).
fn seconds(us: u64) -> f64 {
    round_us(time::seconds(us))
}

#[derive(Default)]
struct Total {
    count: u64,
    total_us: u64,
}

impl Total {
    fn add(&mut self, us: u64) {
        self.count += 1;
        self.total_us += us;
    }

    fn typed(&self) -> TimeTotal {
        TimeTotal {
            count: self.count,
            total_s: seconds(self.total_us),
        }
    }
}

/// **OverallFrameworkMetrics** — never fires. Collects from the framework spans: time per
/// phase, time in steps per mode against the rest of the job (initialization, finalization,
/// between steps), forward against backward, and, when the spans say where operators ran (a
/// Kineto-style `cat` argument), CPU against GPU operators with the top ten of each.
#[derive(Default)]
pub struct OverallFrameworkMetrics {
    params: OverallFrameworkMetricsParams,
    phases: BTreeMap<String, Total>,
    modes: BTreeMap<String, Total>,
    forward: Total,
    backward: Total,
    operators: BTreeMap<(&'static str, String), Total>,
    spans: u64,
    start_us: Option<u64>,
    end_us: u64,
}

impl OverallFrameworkMetrics {
    /// The rule's name.
    pub const NAME: &'static str = "OverallFrameworkMetrics";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: OverallFrameworkMetricsParams) -> Result<Self> {
        Ok(OverallFrameworkMetrics {
            params,
            ..Default::default()
        })
    }

    fn operators(&self, device: &str) -> Option<OperatorTotals> {
        let mut ops: Vec<(&String, &Total)> = self
            .operators
            .iter()
            .filter(|((d, _), _)| *d == device)
            .map(|((_, name), t)| (name, t))
            .collect();
        if ops.is_empty() {
            return None;
        }
        let total: u64 = ops.iter().map(|(_, t)| t.total_us).sum();
        ops.sort_by_key(|(_, t)| std::cmp::Reverse(t.total_us));
        let top = ops
            .iter()
            .take(10)
            .map(|(name, t)| OperatorTime {
                name: (*name).clone(),
                count: t.count,
                total_s: seconds(t.total_us),
            })
            .collect();
        Some(OperatorTotals {
            total_s: seconds(total),
            operators: ops.len(),
            top,
        })
    }
}

impl ProfilerRule for OverallFrameworkMetrics {
    crate::rule_identity!();

    fn needs(&self) -> ProfilerNeeds {
        ProfilerNeeds::reading([ProfilerInput::Spans, ProfilerInput::StepTimeline])
    }

    fn invoke_on_window(&mut self, window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
        for span in window.spans {
            let us = span.duration_us();
            self.spans += 1;
            self.phases.entry(span.phase.clone()).or_default().add(us);
            match span.phase_kind() {
                Phase::Step(mode) => self
                    .modes
                    .entry(span.mode.unwrap_or(mode).name().to_string())
                    .or_default()
                    .add(us),
                Phase::Forward => self.forward.add(us),
                Phase::Backward => self.backward.add(us),
                _ => {}
            }
            if let Some(device) = operator_device(span) {
                self.operators
                    .entry((device, span.name.clone()))
                    .or_default()
                    .add(us);
            }
        }
        self.start_us = window.start_us;
        self.end_us = self.end_us.max(window.now_us);
        let mut results = Vec::new();
        if !window.spans.is_empty() {
            let mut r = RuleResult::at_time(window.step_at(window.now_us), window.now_us);
            r.datapoints = window.spans.len();
            results.push(r);
        }
        if window.final_window && self.spans == 0 {
            let mut r = RuleResult::at_time(0, window.now_us);
            r.message = "no framework spans in this run: nothing to summarize".into();
            results.push(r);
        }
        Ok(results)
    }

    fn details(&self) -> Option<Details> {
        let job_us = self
            .start_us
            .map_or(0, |start| self.end_us.saturating_sub(start));
        let share = |us: u64| (job_us > 0).then(|| round4(us as f64 * 100.0 / job_us as f64));
        let shares = |totals: &BTreeMap<String, Total>| {
            totals
                .iter()
                .map(|(name, t)| {
                    let share = TimeShare {
                        count: t.count,
                        total_s: seconds(t.total_us),
                        percent_of_job: share(t.total_us),
                    };
                    (name.clone(), share)
                })
                .collect()
        };
        let in_steps: u64 = self.modes.values().map(|t| t.total_us).sum();
        let other_us = job_us.saturating_sub(in_steps);
        let fb = self.forward.total_us + self.backward.total_us;
        Some(Details::FrameworkMetrics(FrameworkMetricsDetails {
            job_start_us: self.start_us,
            job_end_us: (self.end_us > 0).then_some(self.end_us),
            job_duration_s: seconds(job_us),
            spans: self.spans,
            phases: shares(&self.phases),
            steps_by_mode: shares(&self.modes),
            outside_steps: TimeOutside {
                total_s: seconds(other_us),
                percent_of_job: share(other_us),
            },
            forward: self.forward.typed(),
            backward: self.backward.typed(),
            forward_percent_of_forward_backward: (fb > 0)
                .then(|| round4(self.forward.total_us as f64 * 100.0 / fb as f64)),
            cpu_operators: self.operators("cpu"),
            gpu_operators: self.operators("gpu"),
        }))
    }
}
