//! CPUBottleneck and IOBottleneck: the GPU idle while the host's CPUs or I/O wait are busy.

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::profiler::details::{
    BottleneckDetails, BottleneckSample, Details, NodeBottlenecks as NodeBottleneckDetails,
};
use crate::profiler::snapshot::{NO_GPU, Snapshot, SnapshotAssembler};
use crate::rule::{Evidence, ProfilerInput, ProfilerNeeds, ProfilerRule, RuleResult};
use crate::window::{ProfilerWindow, StepRef};
use serde::{Deserialize, Serialize};
use smdebug_analysis::stats::round4;
use smdebug_analysis::time::utc;
use std::collections::{BTreeMap, VecDeque};

/// At most this many bottleneck times are kept per node for the report.
const MAX_KEPT_TIMES: usize = 1000;

/// The longest time a snapshot's readings are taken to cover: a gap in the samples longer than
/// this (a paused sampler) does not stretch one snapshot over the whole gap.
const MAX_SAMPLE_COVER_US: u64 = 60_000_000;

/// At most this many distinct phase names are attributed; spans of later names are not counted.
const MAX_PHASES: usize = 256;

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

impl Starver {
    /// The rule that watches for this starver.
    fn rule(self) -> &'static str {
        match self {
            Starver::Cpu => CPUBottleneck::NAME,
            Starver::Io => IOBottleneck::NAME,
        }
    }

    /// The rule's parameter holding the host threshold.
    fn host_parameter(self) -> &'static str {
        match self {
            Starver::Cpu => "cpu_threshold",
            Starver::Io => "io_threshold",
        }
    }

    /// What the rule needs to have something to check.
    fn requirement(self) -> &'static str {
        match self {
            Starver::Cpu => "GPU metrics (the GPU idling while the CPU is busy)",
            Starver::Io => "GPU metrics (the GPU idling while the host waits for I/O)",
        }
    }
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
    /// The time of the node's latest snapshot with GPU readings: where the next one's cover
    /// starts.
    last_time_us: Option<u64>,
    /// The first [`MAX_KEPT_TIMES`] bottleneck snapshots, in time order.
    times: Vec<BottleneckSample>,
    /// Beside each of `times`, the phases (indices into [`Bottlenecks::phase_names`]) already
    /// counted for it, so a snapshot counts once per phase however many spans it overlaps.
    counted_phases: Vec<Vec<u16>>,
    /// Per framework phase (Step spans left out), how many kept bottleneck samples overlapped
    /// one of its spans: what the loop was doing while the GPU waited.
    phases: BTreeMap<String, u64>,
}

impl NodeBottlenecks {
    /// Keeps a bottleneck sample (the first [`MAX_KEPT_TIMES`]) and counts the phases of the
    /// earlier windows' spans its time overlapped (this window's are matched in
    /// `attribute_phases`; a phase counts once per sample). With `node` set, only that node's
    /// spans count; without, every span (one node in the run).
    fn keep(
        &mut self,
        sample: BottleneckSample,
        recent_spans: &VecDeque<PhaseSpan>,
        phase_names: &[String],
        node: Option<&str>,
    ) {
        if self.times.len() >= MAX_KEPT_TIMES {
            return;
        }
        let (since_us, time_us) = (sample.since_us, sample.time_us);
        self.times.push(sample);
        self.counted_phases.push(Vec::new());
        let i = self.times.len() - 1;
        for s in recent_spans {
            if node.is_none_or(|n| s.node == n) && s.start_us <= time_us && s.end_us >= since_us {
                self.count_phase(i, s.phase, &phase_names[s.phase as usize]);
            }
        }
    }

    /// Counts kept sample `i` for `phase` unless it was counted for it already.
    fn count_phase(&mut self, i: usize, phase: u16, name: &str) {
        let counted = &mut self.counted_phases[i];
        if !counted.contains(&phase) {
            counted.push(phase);
            *self.phases.entry(name.to_owned()).or_default() += 1;
        }
    }
}

/// A node's bottleneck share when it passes the threshold.
#[derive(Debug, Clone, Copy)]
struct Share {
    /// Bottleneck samples, in percent of `samples`.
    percent: f64,
    /// Samples evaluated (after patience).
    samples: u64,
    /// The first bottleneck sample's time.
    first_us: u64,
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
    /// The phase names seen, at most [`MAX_PHASES`].
    phase_names: Vec<String>,
    /// Samples judged: the GPUs busy, or idle with the host's readings beside them.
    judged: u64,
}

/// A framework span's extent, phase (an index into [`Bottlenecks::phase_names`]) and node,
/// kept to match later samples.
#[derive(Debug)]
struct PhaseSpan {
    start_us: u64,
    end_us: u64,
    phase: u16,
    node: String,
}

/// How many earlier windows' phase spans [`Bottlenecks`] keeps.
const MAX_RECENT_SPANS: usize = 4096;

impl Bottlenecks {
    /// The shared state of a bottleneck rule: what starves the GPU, the rule's thresholds
    /// (`host_threshold` is the CPU's or the I/O wait's) and its patience, nothing seen yet.
    /// Fails naming the parameter that is out of range.
    fn new(
        starver: Starver,
        threshold: f64,
        gpu_threshold: f64,
        host_threshold: f64,
        patience: u64,
    ) -> Result<Bottlenecks> {
        let check = Check::new(starver.rule());
        check.percent("threshold", threshold)?;
        check.percent("gpu_threshold", gpu_threshold)?;
        check.percent(starver.host_parameter(), host_threshold)?;
        Ok(Bottlenecks {
            starver,
            threshold,
            gpu_threshold,
            host_threshold,
            patience,
            snapshots: SnapshotAssembler::default(),
            nodes: BTreeMap::new(),
            recent_spans: VecDeque::new(),
            phase_names: Vec::new(),
            judged: 0,
        })
    }

    /// What either rule reads: the system metrics, and the spans and step timeline that say
    /// which phase the GPU waited in.
    fn needs(&self) -> ProfilerNeeds {
        ProfilerNeeds::reading([
            ProfilerInput::SystemMetrics,
            ProfilerInput::Spans,
            ProfilerInput::StepTimeline,
        ])
        .requiring(self.starver.requirement())
    }

    /// Whether `snapshot` holds readings of what starves the GPU (the CPU's, the I/O wait's).
    fn has_host_readings(&self, snapshot: &Snapshot) -> bool {
        !match self.starver {
            Starver::Cpu => &snapshot.cpu,
            Starver::Io => &snapshot.io_wait,
        }
        .is_empty()
    }

    /// What the host readings are called, for people.
    fn host_readings(&self) -> &'static str {
        match self.starver {
            Starver::Cpu => "CPU utilization",
            Starver::Io => "I/O wait",
        }
    }

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
        let mut unjudged = 0;
        for snapshot in self.snapshots.feed(window) {
            if snapshot.gpu.is_empty() {
                continue;
            }
            let host = self.host_reading(&snapshot);
            let has_host = self.has_host_readings(&snapshot);
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
            // A snapshot's readings are averages over the time since the node's previous one.
            let since_us = node
                .last_time_us
                .filter(|&t| t <= snapshot.time_us)
                .map_or(snapshot.time_us, |t| {
                    t.max(snapshot.time_us.saturating_sub(MAX_SAMPLE_COVER_US))
                });
            node.last_time_us = Some(snapshot.time_us);
            node.seen += 1;
            if node.seen <= self.patience {
                continue;
            }
            node.counted += 1;
            // An idle GPU with no host reading beside it cannot be told a bottleneck or not.
            if idle_gpus.is_empty() || has_host {
                datapoints += 1;
            } else {
                unjudged += 1;
            }
            if !idle_gpus.is_empty() {
                node.low_gpu += 1;
            }
            if !idle_gpus.is_empty() && host.is_some() {
                node.bottlenecks += 1;
                let sample = BottleneckSample {
                    since_us,
                    time_us: snapshot.time_us,
                    step: window.step_at(snapshot.time_us),
                    host_percent: host.as_ref().map_or(f64::NAN, |h| h.1),
                    gpu_percent: idle_gpus.iter().map(|g| *g.1).fold(f64::INFINITY, f64::min),
                };
                let node_name = (!single).then_some(snapshot.node.as_str());
                node.keep(sample, &self.recent_spans, &self.phase_names, node_name);
            }
            let percent = node.bottlenecks as f64 * 100.0 / node.counted as f64;
            let condition = percent > self.threshold;
            let starts_firing = condition && !node.firing;
            node.firing = condition;
            let share = Share {
                percent,
                samples: node.counted,
                first_us: node.times.first().map_or(snapshot.time_us, |t| t.time_us),
            };
            if starts_firing {
                let step = window.step_ref_at(snapshot.time_us);
                results.push(self.fired(&snapshot, step, share, idle_gpus.first(), &host));
            }
        }
        self.attribute_phases(window);
        self.judged += datapoints as u64;
        if datapoints + unjudged > 0 {
            let mut r = RuleResult::at_time(window.step_at(window.now_us), window.now_us);
            r.datapoints = datapoints;
            r.unjudged = unjudged;
            results.push(r);
        }
        if window.final_window {
            results.extend(self.nothing_judged(window.now_us));
        }
        results
    }

    /// The result of a node's bottleneck share passing the threshold at `snapshot`: what the
    /// GPU waited for, the cure, and the readings as evidence.
    fn fired(
        &self,
        snapshot: &Snapshot,
        step: StepRef,
        share: Share,
        idle_gpu: Option<&(&String, &f64)>,
        host: &Option<(String, f64)>,
    ) -> RuleResult {
        let mut r = RuleResult::at_time(step.step, snapshot.time_us);
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
             (more than {}%), first at {}, past that share at {step}: {cure}",
            snapshot.node,
            self.gpu_threshold,
            share.percent,
            share.samples,
            self.threshold,
            utc(share.first_us),
        ));
        let label = format!("{} bottleneck share", snapshot.node);
        r.evidence.push(
            Evidence::at(&label, step, "percent_of_samples", share.percent).limit(self.threshold),
        );
        if let (Some((gpu, g)), Some((name, h))) = (idle_gpu, host) {
            r.evidence.push(
                Evidence::at(&format!("{} {gpu}", snapshot.node), step, "gpu_util", **g)
                    .limit(self.gpu_threshold),
            );
            r.evidence.push(
                Evidence::at(&format!("{} {name}", snapshot.node), step, "host", *h)
                    .limit(self.host_threshold),
            );
        }
        r
    }

    /// At the last window, why nothing was judged, if nothing was: no GPU readings, too few
    /// samples past patience, or idle GPUs with no host readings beside them.
    fn nothing_judged(&self, now_us: u64) -> Option<RuleResult> {
        let message = if self.nodes.is_empty() {
            NO_GPU.to_owned()
        } else if self.nodes.values().all(|n| n.counted == 0) {
            let seen: u64 = self.nodes.values().map(|n| n.seen).max().unwrap_or(0);
            format!(
                "only {seen} samples with GPU readings per node, not more than patience \
                 ({}): nothing evaluated",
                self.patience
            )
        } else if self.judged == 0 {
            format!(
                "the GPUs were idle in every sample past patience and no {} was read beside \
                 them: nothing judged",
                self.host_readings()
            )
        } else {
            return None;
        };
        let mut r = RuleResult::at_time(0, now_us);
        r.message = message;
        Some(r)
    }

    /// Counts the kept bottleneck samples whose time overlaps each of this window's spans, by
    /// the span's phase, then keeps the spans for samples still to come: each (sample, phase)
    /// pair is counted once, whichever arrives first, so the verdict does not depend on how the
    /// data was cut into windows. A sample's time is the interval its readings average over
    /// (since the node's previous snapshot), so a phase that ran through most of that interval
    /// is found whatever instant the sampler woke at. With one node, spans count whatever node
    /// their file names (the sampler and the span writer may name a host differently).
    fn attribute_phases(&mut self, window: &ProfilerWindow<'_>) {
        let single = self.nodes.len() == 1;
        for span in window.spans {
            if span.phase.starts_with("Step") {
                continue;
            }
            let phase = match self.phase_names.iter().position(|p| *p == span.phase) {
                Some(i) => i,
                None if self.phase_names.len() < MAX_PHASES => {
                    self.phase_names.push(span.phase.clone());
                    self.phase_names.len() - 1
                }
                None => continue,
            } as u16;
            if self.recent_spans.len() == MAX_RECENT_SPANS {
                self.recent_spans.pop_front();
            }
            self.recent_spans.push_back(PhaseSpan {
                start_us: span.start_us,
                end_us: span.end_us,
                phase,
                node: span.node.clone(),
            });
            let node = if single {
                self.nodes.values_mut().next()
            } else {
                self.nodes.get_mut(&span.node)
            };
            let Some(node) = node else { continue };
            // Kept samples are in time order and their intervals follow one another, so both
            // ends are sorted.
            let from = node.times.partition_point(|t| t.time_us < span.start_us);
            let to = node.times.partition_point(|t| t.since_us <= span.end_us);
            for i in from..to.max(from) {
                node.count_phase(i, phase, &span.phase);
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

/// A bottleneck rule: [`CPUBottleneck`] or [`IOBottleneck`], told apart by their parameters.
/// Both count the same way; only what starves the GPU differs.
pub struct BottleneckRule<P> {
    params: P,
    inner: Bottlenecks,
}

/// **CPUBottleneck** — fires when, per node, more than `threshold` % of the system samples
/// (after the first `patience`) show a GPU below `gpu_threshold` % utilization while some CPU
/// (a core or the total) is above `cpu_threshold` %. Fires once each time the share crosses
/// the threshold. Without GPU metrics it checks nothing.
pub type CPUBottleneck = BottleneckRule<CPUBottleneckParams>;

impl CPUBottleneck {
    /// The rule's name.
    pub const NAME: &'static str = "CPUBottleneck";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: CPUBottleneckParams) -> Result<Self> {
        let inner = Bottlenecks::new(
            Starver::Cpu,
            params.threshold,
            params.gpu_threshold,
            params.cpu_threshold,
            params.patience,
        )?;
        Ok(BottleneckRule { params, inner })
    }
}

/// **IOBottleneck** — like [`CPUBottleneck`], with I/O wait above `io_threshold` % (on a core
/// or the total) in place of a saturated CPU: the GPU idles while the host waits for storage.
pub type IOBottleneck = BottleneckRule<IOBottleneckParams>;

impl IOBottleneck {
    /// The rule's name.
    pub const NAME: &'static str = "IOBottleneck";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: IOBottleneckParams) -> Result<Self> {
        let inner = Bottlenecks::new(
            Starver::Io,
            params.threshold,
            params.gpu_threshold,
            params.io_threshold,
            params.patience,
        )?;
        Ok(BottleneckRule { params, inner })
    }
}

impl<P: Serialize + Send> ProfilerRule for BottleneckRule<P> {
    fn name(&self) -> &str {
        self.inner.starver.rule()
    }
    fn parameters(&self) -> serde_json::Value {
        crate::params::to_json(&self.params)
    }
    fn needs(&self) -> ProfilerNeeds {
        self.inner.needs()
    }
    fn invoke_on_window(&mut self, window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
        Ok(self.inner.invoke(window))
    }
    fn details(&self) -> Option<Details> {
        self.inner.details()
    }
}
