//! A profiler rule's finding in words, from its typed [`Details`]: the sentence its status
//! carries as its message, so that the verdict quotes the very figures the report's tables and
//! the dashboard show beside it (the same window, the same numbers, formatted alike: times in
//! milliseconds with three decimals, shares with one, percentages of utilization with one).
//!
//! A rule's firing keeps its own message for its actions (a webhook, an e-mail said what was
//! seen then); the status, which lasts, says what the details say now.

use smdebug_analysis::time::duration;

use super::{
    BatchSizeDetails, BottleneckDetails, DataloaderDetails, Details, GpuMemoryDetails,
    GpuUsageState, GpuUtilizationDetails, InitializationDetails, LoadBalancingDetails,
    StepOutlierDetails, WorkerVerdict,
};

/// The most clauses (nodes, GPUs) a finding words; the others are counted. A job of thousands
/// of GPUs keeps a message of a few lines.
const MAX_CLAUSES: usize = 8;

/// Seconds as milliseconds with three decimals, as the report's tables write them.
fn ms(seconds: f64) -> String {
    format!("{:.3} ms", seconds * 1e3)
}

/// A share (0–1) as a percentage with one decimal, as the report's tables write it.
fn share(s: f64) -> String {
    format!("{:.1}%", s * 100.0)
}

/// A percentage (0–100) with one decimal.
fn percent(p: f64) -> String {
    format!("{p:.1}%")
}

impl Details {
    /// What the details say, one clause per node (or GPU) judged, with the figures the report
    /// shows for them; `None` when they hold nothing judged (no node, no GPU, no step yet), and
    /// for OverallSystemUsage and OverallFrameworkMetrics, which judge nothing. `rule` is the
    /// rule's name (CPUBottleneck and IOBottleneck share their kind of details).
    pub fn finding(&self, rule: &str) -> Option<String> {
        let clauses = match self {
            Details::Bottlenecks(d) => bottlenecks(d, rule),
            Details::StepOutliers(d) => step_outliers(d),
            Details::LoadBalancing(d) => load_balancing(d),
            Details::GpuUtilization(d) => gpu_utilization(d),
            Details::BatchSize(d) => batch_size(d),
            Details::GpuMemory(d) => gpu_memory(d),
            Details::Dataloader(d) => dataloader(d),
            Details::Initialization(d) => initialization(d),
            Details::SystemUsage(_) | Details::FrameworkMetrics(_) => Vec::new(),
        };
        let mut clauses = clauses;
        if clauses.len() > MAX_CLAUSES {
            let more = clauses.len() - MAX_CLAUSES;
            clauses.truncate(MAX_CLAUSES);
            clauses.push(format!("and {more} more in the rule's details"));
        }
        (!clauses.is_empty()).then(|| clauses.join("; "))
    }
}

fn bottlenecks(d: &BottleneckDetails, rule: &str) -> Vec<String> {
    let busy = if rule.eq_ignore_ascii_case("IOBottleneck") {
        "I/O wait was high"
    } else {
        "the CPU was busy"
    };
    d.nodes
        .iter()
        .filter(|(_, n)| n.datapoints > 0)
        .map(|(node, n)| {
            format!(
                "node {node}: GPU idle while {busy} in {} of {} judged snapshots ({})",
                n.bottlenecks,
                n.datapoints,
                share(n.bottlenecks as f64 / n.datapoints as f64)
            )
        })
        .collect()
}

/// One clause per node and mode, those the rule fired for first. A step is named with its
/// mode: step spans number the steps of each mode from 0, as the trace files write them.
fn step_outliers(d: &StepOutlierDetails) -> Vec<String> {
    let mut judged: Vec<_> = d
        .nodes
        .iter()
        .flat_map(|(node, modes)| modes.iter().map(move |(mode, s)| (node, mode, s)))
        .collect();
    judged.sort_by_key(|(_, _, s)| s.times_fired == 0);
    judged
        .into_iter()
        .map(|(node, mode, s)| {
            let mut clause = format!(
                "node {node}, {mode}: {} of {} steps took longer than the outlier limit {} \
                 (mean {}, stddev {})",
                s.outliers,
                s.steps,
                ms(s.outlier_limit_s),
                ms(s.duration_s.mean),
                ms(s.duration_s.std)
            );
            if let Some(allowed) = d.allowed_outliers {
                clause.push_str(&format!(" ({allowed} allowed before the rule fires)"));
            }
            if let Some(slowest) = s.outlier_steps.first() {
                clause.push_str(&format!(
                    ", the slowest, {mode} step {}, took {}",
                    slowest.step,
                    ms(slowest.duration_s)
                ));
            }
            clause
        })
        .collect()
}

fn load_balancing(d: &LoadBalancingDetails) -> Vec<String> {
    d.nodes
        .iter()
        .filter_map(|(node, n)| {
            let farthest = n
                .distances
                .iter()
                .max_by(|a, b| a.distance.total_cmp(&b.distance))?;
            Some(format!(
                "node {node}: {} pair(s) of GPUs compared, the farthest apart {} and {} at a \
                 distance of {:.3}",
                n.distances.len(),
                farthest.gpus[0],
                farthest.gpus[1],
                farthest.distance
            ))
        })
        .collect()
}

fn gpu_utilization(d: &GpuUtilizationDetails) -> Vec<String> {
    let mut clauses = Vec::new();
    let mut busy = 0;
    for (node, gpus) in &d.nodes {
        for (gpu, g) in gpus.iter().filter(|(_, g)| g.judged) {
            if g.state.is_none() && g.violations == 0 {
                busy += 1;
                continue;
            }
            let now = match g.state {
                Some(GpuUsageState::Underused) => "is underused",
                Some(GpuUsageState::Fluctuating) => "is fluctuating",
                None => "is busy now",
            };
            let mut clause = format!(
                "node {node} {gpu} {now}, found underused or fluctuating {} time(s)",
                g.violations
            );
            if let (Some(p95), Some(p5)) = (g.window_p95, g.window_p5) {
                clause.push_str(&format!(
                    "; p95 {}, p5 {} over the rule's latest window",
                    percent(p95),
                    percent(p5)
                ));
            }
            clauses.push(clause);
        }
    }
    if busy > 0 {
        clauses.push(format!(
            "{busy} GPU(s) never underused nor fluctuating over the rule's window"
        ));
    }
    clauses
}

fn batch_size(d: &BatchSizeDetails) -> Vec<String> {
    let mut clauses = Vec::new();
    let mut judged = 0;
    for (node, n) in &d.nodes {
        for (gpu, g) in &n.gpus {
            let Some(gpu_p95) = g.window_p95 else {
                continue;
            };
            judged += 1;
            if !g.all_under && g.violations == 0 {
                continue;
            }
            let state = if g.all_under {
                "all under their thresholds"
            } else {
                "not all under their thresholds"
            };
            clauses.push(format!(
                "node {node} {gpu}: room for a larger batch found {} time(s); over the latest \
                 judged window CPU p95 {}, GPU p95 {}, GPU memory p95 {}, {state}",
                g.violations,
                n.cpu_window_p95.map_or("-".into(), percent),
                percent(gpu_p95),
                g.memory_window_p95.map_or("-".into(), percent),
            ));
        }
    }
    if clauses.is_empty() && judged > 0 {
        clauses.push(format!(
            "{judged} GPU(s) judged: none had CPU, GPU and GPU memory all under their \
             thresholds over a judged window"
        ));
    }
    clauses
}

fn gpu_memory(d: &GpuMemoryDetails) -> Vec<String> {
    let mut clauses = Vec::new();
    let mut steady = 0;
    for (node, gpus) in &d.nodes {
        for (gpu, g) in gpus {
            if g.average.is_none() {
                continue;
            }
            if g.increases.is_empty() {
                steady += 1;
                continue;
            }
            clauses.push(format!(
                "node {node} {gpu}: the moving average rose above its baseline by more than the \
                 limit {} time(s), by at most {:.1} points; it is {} against a baseline of {}",
                g.increases.len(),
                g.largest_rise,
                g.average.map_or("-".into(), percent),
                g.baseline.map_or("-".into(), percent)
            ));
        }
    }
    if steady > 0 {
        clauses.push(format!(
            "{steady} GPU(s) without a rise of more than {} points",
            d.increase
        ));
    }
    clauses
}

fn dataloader(d: &DataloaderDetails) -> Vec<String> {
    d.nodes
        .iter()
        .filter(|(_, n)| n.data_loading_spans > 0)
        .map(|(node, n)| {
            let judged = match n.verdict {
                _ if n.cores == 0 => {
                    "the core count is unknown, so the workers were not judged".to_owned()
                }
                Some(WorkerVerdict::TooFew) => format!(
                    "too few: fewer than {} allowed, raise the worker count to about {}",
                    n.min_workers, n.cores
                ),
                Some(WorkerVerdict::TooMany) => format!(
                    "too many: more than {} allowed, lower the worker count to about {}",
                    n.max_workers, n.cores
                ),
                None if (n.workers as f64) < n.min_workers => format!(
                    "fewer than {} allowed, but loading took under {} % of the training loop, \
                     so the workers are not what holds it back",
                    n.min_workers, d.min_loading_percent
                ),
                None => format!("within {} to {}", n.min_workers, n.max_workers),
            };
            let workers = if n.cores == 0 {
                format!(
                    "{} data-loading workers ({}): {judged}",
                    n.workers, n.workers_from
                )
            } else {
                format!(
                    "{} data-loading workers ({}) on {} cores, {judged}",
                    n.workers, n.workers_from, n.cores
                )
            };
            let mut clause = format!(
                "node {node}: {workers}; {} loads took {:.3} s",
                n.data_loading_spans, n.data_loading_total_s
            );
            if let Some(s) = n.training_loop_share_loading {
                clause.push_str(&format!(", {} of the training loop", share(s)));
            }
            if let Some(t) = &n.load_time_s {
                clause.push_str(&format!(
                    ", a load {} at the median and {} at p95",
                    ms(t.p50),
                    ms(t.p95)
                ));
            }
            clause
        })
        .collect()
}

fn initialization(d: &InitializationDetails) -> Vec<String> {
    let Some(init) = d.initialization_s else {
        return Vec::new();
    };
    let verdict = if d.exceeded { "more" } else { "not more" };
    vec![format!(
        "the first step started {} after the job's start, {verdict} than the limit of {} min",
        duration(init),
        d.threshold_minutes
    )]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::profiler::details::{GpuMemoryUse, MemoryIncrease};

    #[test]
    fn a_finding_words_at_most_eight_gpus_and_counts_the_others() {
        let grown = GpuMemoryUse {
            average: Some(60.0),
            baseline: Some(40.0),
            largest_rise: 20.0,
            increases: vec![MemoryIncrease {
                time_us: 1,
                step: 3,
                from: 40.0,
                to: 60.0,
            }],
            ..GpuMemoryUse::default()
        };
        let gpus: BTreeMap<String, GpuMemoryUse> = (0..20)
            .map(|i| (format!("gpu{i:02}"), grown.clone()))
            .collect();
        let details = Details::GpuMemory(GpuMemoryDetails {
            increase: 10.0,
            window: 5,
            nodes: BTreeMap::from([("algo-1".to_owned(), gpus)]),
        });
        let finding = details.finding("GPUMemoryIncrease").unwrap();
        assert_eq!(
            finding.matches("node algo-1 gpu").count(),
            MAX_CLAUSES,
            "{finding}"
        );
        assert!(finding.starts_with(
            "node algo-1 gpu00: the moving average rose above its baseline by more than the \
             limit 1 time(s), by at most 20.0 points; it is 60.0% against a baseline of 40.0%"
        ));
        assert!(
            finding.ends_with("; and 12 more in the rule's details"),
            "{finding}"
        );
    }

    /// The mode the rule fired for leads (EVAL sorts before TRAIN by name), and a step is named
    /// with its mode: the trace files number each mode's steps from 0.
    #[test]
    fn step_outliers_lead_with_the_modes_that_fired_and_name_steps_with_their_mode() {
        use crate::profiler::details::{OutlierStep, StepHistogram, StepSeriesDetails};
        let series = |durations: &[f64], slowest: u64, fired: u64| StepSeriesDetails {
            steps: durations.len() as u64,
            duration_s: smdebug_analysis::stats::Summary::of(durations.iter().copied()).unwrap(),
            outlier_limit_s: 0.05,
            outliers: 1,
            outlier_steps: vec![OutlierStep {
                step: slowest,
                start_us: 1,
                duration_s: 0.06,
            }],
            histogram: StepHistogram {
                min_s: 0.01,
                bin_width_s: 0.01,
                counts: vec![1; 5],
            },
            times_fired: fired,
        };
        let modes = BTreeMap::from([
            ("EVAL".to_owned(), series(&[0.01, 0.02, 0.06], 79, 0)),
            ("TRAIN".to_owned(), series(&[0.01, 0.03, 0.06], 380, 1)),
        ]);
        let details = Details::StepOutliers(StepOutlierDetails {
            nodes: BTreeMap::from([("vm".to_owned(), modes)]),
            allowed_outliers: Some(5),
        });
        let finding = details.finding("StepOutlier").unwrap();
        // How many outliers the rule lets pass is said beside the count.
        assert!(
            finding.contains("1 of 3 steps took longer than the outlier limit 50.000 ms (mean "),
            "{finding}"
        );
        assert!(
            finding.contains(") (5 allowed before the rule fires)"),
            "{finding}"
        );
        let train = finding.find("node vm, TRAIN:").expect(&finding);
        let eval = finding.find("node vm, EVAL:").expect(&finding);
        assert!(train < eval, "{finding}");
        assert!(finding.contains("the slowest, TRAIN step 380, took 60.000 ms"));
        assert!(finding.contains("the slowest, EVAL step 79, took 60.000 ms"));
    }

    #[test]
    fn rules_that_judge_nothing_have_no_finding() {
        let usage = Details::SystemUsage(Default::default());
        assert_eq!(usage.finding("OverallSystemUsage"), None);
        let steps = Details::StepOutliers(Default::default());
        assert_eq!(steps.finding("StepOutlier"), None);
    }
}
