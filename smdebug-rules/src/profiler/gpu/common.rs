//! What the GPU rules share: per-GPU state, a series's rolling window, closing results.

use crate::profiler::snapshot::{NO_GPU, Snapshot, SnapshotAssembler};
use crate::profiler::stats::{RollingWindow, Sketch};
use crate::rule::{ProfilerInput, ProfilerNeeds, RuleResult};
use crate::window::ProfilerWindow;
use std::collections::BTreeMap;

/// What every GPU rule reads: the system metrics (its GPUs' readings among them) and the step
/// timeline (the step a reading falls in); `requirement` names the GPU metrics it cannot judge
/// without.
pub(super) fn gpu_needs(requirement: &str) -> ProfilerNeeds {
    ProfilerNeeds::reading([ProfilerInput::SystemMetrics, ProfilerInput::StepTimeline])
        .requiring(requirement)
}

/// The results every GPU rule ends a window with: the datapoints it evaluated, and at the end
/// of the run why it had nothing to check.
pub(super) fn closing_results(
    window: &ProfilerWindow<'_>,
    datapoints: usize,
    gpus_seen: bool,
    evaluated_any: bool,
    patience: u64,
    results: &mut Vec<RuleResult>,
) {
    if datapoints > 0 {
        let mut r = RuleResult::at_time(window.step_at(window.now_us), window.now_us);
        r.datapoints = datapoints;
        results.push(r);
    }
    if window.final_window && !gpus_seen {
        let mut r = RuleResult::at_time(0, window.now_us);
        r.message = NO_GPU.into();
        results.push(r);
    } else if window.final_window && !evaluated_any {
        let mut r = RuleResult::at_time(0, window.now_us);
        r.message = format!(
            "too few GPU samples to evaluate: none past patience ({patience}) and the window"
        );
        results.push(r);
    }
}

/// What a GPU rule made of one reading.
pub(super) enum Judged {
    /// Not evaluated (within patience, or the window is not full yet).
    Skipped,
    /// Evaluated; nothing found.
    Checked,
    /// Evaluated, and the rule fired.
    Fired(RuleResult),
}

/// One metric's readings per node and GPU, with each GPU's state `S` (created at its first
/// reading): the frame of LowGPUUtilization and GPUMemoryIncrease.
pub(super) struct PerGpu<S> {
    pub(super) snapshots: SnapshotAssembler,
    /// The snapshot's table of the metric (`gpu`, `gpu_memory`).
    pub(super) table: fn(&Snapshot) -> &BTreeMap<String, f64>,
    pub(super) gpus: BTreeMap<(String, String), S>,
}

impl<S> PerGpu<S> {
    pub(super) fn new(table: fn(&Snapshot) -> &BTreeMap<String, f64>) -> Self {
        PerGpu {
            snapshots: SnapshotAssembler::default(),
            table,
            gpus: BTreeMap::new(),
        }
    }

    /// Hands `judge` every reading `window` completes, in time order, with its GPU's state
    /// (made by `new` at the first reading); then ends the window as every GPU rule does,
    /// `evaluated` telling whether a GPU's state was ever judged.
    pub(super) fn feed(
        &mut self,
        window: &ProfilerWindow<'_>,
        patience: u64,
        new: impl Fn() -> S,
        mut judge: impl FnMut(&Snapshot, &str, f64, &mut S) -> Judged,
        evaluated: impl Fn(&S) -> bool,
    ) -> Vec<RuleResult> {
        let mut results = Vec::new();
        let mut datapoints = 0;
        for snapshot in self.snapshots.feed(window) {
            for (gpu, value) in (self.table)(&snapshot) {
                let state = self
                    .gpus
                    .entry((snapshot.node.clone(), gpu.clone()))
                    .or_insert_with(&new);
                match judge(&snapshot, gpu, *value, state) {
                    Judged::Skipped => {}
                    Judged::Checked => datapoints += 1,
                    Judged::Fired(r) => {
                        datapoints += 1;
                        results.push(r);
                    }
                }
            }
        }
        closing_results(
            window,
            datapoints,
            !self.gpus.is_empty(),
            self.gpus.values().any(evaluated),
            patience,
            &mut results,
        );
        results
    }

    /// Node → GPU → `details(state)`, for [`ProfilerRule::details`](crate::ProfilerRule::details).
    pub(super) fn details<T>(
        &self,
        details: impl Fn(&S) -> T,
    ) -> BTreeMap<String, BTreeMap<String, T>> {
        let mut nodes: BTreeMap<String, BTreeMap<String, T>> = BTreeMap::new();
        for ((node, gpu), state) in &self.gpus {
            nodes
                .entry(node.clone())
                .or_default()
                .insert(gpu.clone(), details(state));
        }
        nodes
    }
}

/// One GPU's readings of a metric: how many were seen, a sketch of all of them, and a rolling
/// window of the latest.
#[derive(Debug)]
pub(super) struct GpuSeries {
    pub(super) seen: u64,
    pub(super) window: RollingWindow,
    pub(super) all: Sketch,
}

impl GpuSeries {
    pub(super) fn new(window: u64) -> Self {
        GpuSeries {
            seen: 0,
            window: RollingWindow::new(window as usize),
            all: Sketch::default(),
        }
    }

    /// Counts `value` in (the sketch, not the window); whether more than `patience` readings
    /// were seen, so that the rule may judge.
    pub(super) fn count(&mut self, value: f64, patience: u64) -> bool {
        self.seen += 1;
        self.all.add(value);
        self.seen > patience
    }
}
