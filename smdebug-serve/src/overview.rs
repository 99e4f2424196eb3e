//! The overview: where the run stands (progress, the headline loss and accuracy), the job's
//! phases, per-node statistics and the rules' statuses.

use std::collections::BTreeMap;

use smdebug_analysis::digest::SeriesDigest;
use smdebug_analysis::stats::Sketch;
use smdebug_analysis::time::seconds;
use smdebug_core::Mode;
use smdebug_format::progress::ProgressTotals;
use smdebug_format::system::vocab;

use crate::api::Window;
use crate::downsample::plan;
use crate::liveness;
use crate::non_finite::NonFiniteSteps;
use crate::run::Run;
use crate::run_data::RunData;
use crate::series::finite;
use crate::verdicts::rule_views;
use crate::views::{
    Headline, HeadlineChart, HeadlineLine, Headlines, JobPhases, NodeStats, Num, Overview, Phase,
    PhaseTotal, Progress, StatRow, WriterDrops,
};
use smdebug_analysis::scalars::SeriesSummary;

/// The rows of the per-node statistics table: `(label, the values' sketch, unit)`, the
/// values of every series a row takes in pooled.
fn node_rows(node: &[&SeriesDigest]) -> Vec<(String, Sketch, &'static str)> {
    let mut rows = Vec::new();
    let mut pick = |label: &str, unit: &'static str, f: &dyn Fn(&SeriesDigest) -> bool| {
        let mut values = Sketch::default();
        for m in node.iter().filter(|m| f(m)) {
            values.merge(&m.values);
        }
        if values.count() > 0 {
            rows.push((label.to_owned(), values, unit));
        }
    };
    pick("CPU utilization", "%", &|m| {
        m.metric_type == vocab::TYPE_CPU
            && m.name == vocab::CPU_TOTAL
            && m.dimension == vocab::CPU_UTILIZATION
    });
    pick("I/O wait", "%", &|m| {
        m.metric_type == vocab::TYPE_CPU
            && m.name == vocab::CPU_TOTAL
            && m.dimension == vocab::IO_WAIT_PERCENTAGE
    });
    pick("GPU utilization", "%", &|m| {
        m.metric_type == vocab::TYPE_GPU && m.dimension == vocab::GPU_UTILIZATION
    });
    pick("GPU memory", "%", &|m| {
        m.metric_type == vocab::TYPE_GPU && m.dimension == vocab::GPU_MEMORY_UTILIZATION
    });
    pick("Memory used", "%", &|m| {
        m.metric_type == vocab::TYPE_MEMORY && m.name == vocab::MEMORY_USED_PERCENT
    });
    pick("Network receive", "B/s", &|m| {
        m.metric_type == vocab::TYPE_NETWORK && m.name == vocab::RECEIVE_BYTES_PER_SECOND
    });
    pick("Network transmit", "B/s", &|m| {
        m.metric_type == vocab::TYPE_NETWORK && m.name == vocab::TRANSMIT_BYTES_PER_SECOND
    });
    pick("Disk read", "B/s", &|m| {
        m.metric_type == vocab::TYPE_IO && m.name == vocab::READ_BYTES_PER_SECOND
    });
    pick("Disk write", "B/s", &|m| {
        m.metric_type == vocab::TYPE_IO && m.name == vocab::WRITE_BYTES_PER_SECOND
    });
    rows
}

/// The overview of a run.
pub fn overview(run: &Run) -> Overview {
    let d = run.data.read().expect("run data lock");
    let range = d.time_range();
    // Initialization, training loop, finalization: the report's definition (`JobPhases`).
    let phases = range.and_then(|job| {
        let steps = d
            .digest
            .steps()
            .values()
            .map(|s| (s.first_start_us, s.last_end_us));
        let p = smdebug_analysis::phases::JobPhases::new(job, steps);
        let (first, last) = p.loop_us?;
        Some(JobPhases {
            initialization: p.initialization_s()?,
            training_loop: p.training_loop_s()?,
            finalization: p.finalization_s()?,
            loop_start: seconds(first),
            loop_end: seconds(last),
        })
    });
    let mut by_node: BTreeMap<&str, Vec<&SeriesDigest>> = BTreeMap::new();
    for m in d.digest.series() {
        by_node.entry(&m.node).or_default().push(m);
    }
    let nodes = by_node
        .iter()
        .map(|(node, series)| NodeStats {
            node: (*node).to_owned(),
            rows: node_rows(series)
                .into_iter()
                .map(|(label, values, unit)| StatRow {
                    note: label.starts_with("Network").then_some(
                        "all interfaces, loopback included (this dashboard's own traffic too)",
                    ),
                    metric: label,
                    unit,
                    min: Num(values.min().unwrap_or(f64::NAN)),
                    max: Num(values.max().unwrap_or(f64::NAN)),
                    p99: Num(values.quantile(0.99).unwrap_or(f64::NAN)),
                    p90: Num(values.quantile(0.90).unwrap_or(f64::NAN)),
                    p50: Num(values.quantile(0.50).unwrap_or(f64::NAN)),
                })
                .collect(),
        })
        .collect();
    // The most time-consuming phases (resource-intensive operations).
    let mut top: Vec<(&str, f64, u64)> = d
        .digest
        .phases()
        .iter()
        .map(|(p, digest)| (p.as_str(), digest.durations.sum(), digest.durations.count()))
        .collect();
    top.sort_by(|a, b| b.1.total_cmp(&a.1));
    let top_phases = top
        .iter()
        .take(10)
        .map(|(p, total, count)| PhaseTotal {
            phase: (*p).to_owned(),
            total_s: total / 1e6,
            count: *count,
        })
        .collect();
    let stop_rule = crate::diagnosis::stopping_rule(&d).map(|c| c.rule);
    let fresh = liveness::freshness(&d, stop_rule.as_deref(), smdebug_io::jobs::now_s());
    let rules = rule_views(&d);
    let issues = d.rules.as_ref().map_or(0, crate::diagnosis::issue_count);
    let health = crate::diagnosis::health(&d, fresh.phase, &rules, issues);
    Overview {
        id: run.id,
        version: d.version,
        name: run.name.clone(),
        location: run.location.to_string(),
        standing: d.standing(),
        start: range.map(|r| seconds(r.0)),
        end: range.map(|r| seconds(r.1)),
        steps: d.steps.len(),
        last_step: d.steps.last().copied(),
        samples: d.digest.sample_count(),
        spans: d.digest.span_count() as usize,
        tensors: d.tensors.len(),
        phases,
        nodes,
        rules,
        issues,
        health,
        top_phases,
        rules_written: d.rules.is_some(),
        warnings: d.warnings.clone(),
        progress: progress(&d, &fresh),
        loss: headline(&d, "loss"),
        accuracy: headline(&d, "acc"),
    }
}

/// How far along and how fast: the step rate over a trailing window after the warm-up
/// ([`liveness::stable_rate`]), from the step spans of the mode with the most of them, else
/// the progress files' course; an ETA only while the run advances at an even rate.
fn progress(d: &RunData, fresh: &liveness::Freshness) -> Progress {
    let phase = fresh.phase;
    let (points, rate_source) = liveness::step_points(d);
    // An ended run's rate is its average; a running one's, its recent steady rate.
    let rate = if d.complete {
        liveness::average_rate(&points)
    } else {
        liveness::stable_rate(&points)
    };
    let step_rate = rate.rate;
    // Quiet for longer than its steps take (three of them, ten seconds at least): the rate no
    // longer says when it ends, though the run is not stalled yet.
    let quiet = match (step_rate, fresh.idle_s) {
        (Some(r), Some(idle)) if r > 0.0 => idle > liveness::QUIET_AFTER_S.max(3.0 / r),
        _ => false,
    };
    let files = &d.progress;
    let planned_steps = d.planned_steps();
    let steps_done = d.steps_done();
    let (eta_s, eta_note) = match (planned_steps, step_rate, steps_done) {
        _ if d.complete => (None, Some("the run has ended")),
        _ if phase == Phase::Crashed => (None, Some("no ETA: the run crashed")),
        _ if phase == Phase::Stalled => (None, Some("no ETA: the run is not advancing (stalled)")),
        (None, ..) if files.is_empty() => (
            None,
            Some("no plan recorded: the run has no progress file (written by smdebug's Session)"),
        ),
        (None, ..) => (
            None,
            Some("no plan recorded: the job did not say how many steps it plans"),
        ),
        (Some(_), None, _) => (None, rate.note.or(Some("no step rate yet"))),
        (Some(_), Some(_), _) if !rate.steady => (None, rate.note),
        (Some(_), Some(_), _) if quiet => (
            None,
            Some("ETA unknown: no step for longer than three of its steps take"),
        ),
        (Some(planned), Some(rate), done) => (
            Some(planned.saturating_sub(done.unwrap_or(0)) as f64 / rate),
            None,
        ),
    };
    let drops = (!files.is_empty()).then(|| {
        let totals = ProgressTotals::of(files);
        let share = |part: u64, whole: u64| (whole > 0).then(|| part as f64 / whole as f64);
        WriterDrops {
            records_dropped: totals.records_dropped,
            records_written: totals.records_written,
            records_share: share(
                totals.records_dropped,
                totals
                    .records_dropped
                    .saturating_add(totals.records_written),
            ),
            steps_with_drops: totals.steps_with_drops,
            steps_share: share(totals.steps_with_drops, totals.steps),
            spans_dropped: totals.spans_dropped,
            spans_written: totals.spans_written,
            workers: files.len(),
            finished: files.iter().all(|p| p.finished),
            wall_time: files.iter().map(|p| p.wall_time).fold(0.0, f64::max),
        }
    });
    Progress {
        step_rate,
        rate_steps: rate.steps as usize,
        rate_window_s: rate.window_s,
        rate_steady: rate.steady,
        rate_over_run: d.complete,
        rate_source,
        planned_steps,
        steps_done,
        eta_s,
        eta_note,
        drops_note: drops.is_none().then_some(
            "not recorded: the run has no progress file (written by smdebug's Session), so \
             the writer's drops are known in the training process only",
        ),
        drops,
    }
}

/// The first scalar whose name contains `word` (case-insensitive; the shortest such name),
/// its TRAIN values when it has some, else its first mode's.
fn pick<'a>(d: &'a RunData, word: &str) -> Option<(Headline, Mode, &'a SeriesSummary)> {
    let (name, track) = d
        .scalars
        .iter()
        .filter(|(name, _)| name.to_lowercase().contains(word))
        .min_by_key(|(name, _)| (name.len(), (*name).clone()))?;
    let (mode, column) = track
        .get(&Mode::Train)
        .filter(|p| !p.is_empty())
        .map(|p| (Mode::Train, p))
        .or_else(|| {
            track
                .iter()
                .find(|(_, p)| !p.is_empty())
                .map(|(m, p)| (*m, p))
        })?;
    let last = column.last()?;
    let headline = Headline {
        name: name.clone(),
        mode: mode.name(),
        last_step: last.step,
        last_value: Num(last.value),
    };
    Some((headline, mode, column))
}

fn headline(d: &RunData, word: &str) -> Option<Headline> {
    pick(d, word).map(|(h, _, _)| h)
}

/// What a page holds of a headline chart: the buckets' width it was drawn with and the step
/// its last bucket starts at.
#[derive(Clone, Copy, Debug, Default)]
pub struct Held {
    /// The width.
    pub width: Option<u64>,
    /// The step.
    pub since: Option<u64>,
}

/// The summary's loss and accuracy charts: each headline scalar's values over all its steps,
/// at most `window`'s budget of them, by the Scalars tab's buckets; for a chart the page
/// holds with the buckets' width still in use, only its points from the step it says on.
pub fn headlines(run: &Run, window: &Window, held: [Held; 2]) -> Headlines {
    // A chart finer than its buckets (rare: a series of fewer values than the budget, spread
    // over more steps than its buckets are wide) is read again from the files, outside the lock.
    let plans: Vec<Option<crate::downsample::Plan>> = {
        let d = run.data.read().expect("run data lock");
        ["loss", "acc"]
            .iter()
            .map(|word| pick(&d, word).and_then(|(_, _, s)| plan(s, None, None, window.budget())))
            .collect()
    };
    let to_read = plans
        .iter()
        .flatten()
        .flat_map(|p| p.read.iter().copied())
        .collect();
    let read = crate::api::read_ranges(run, to_read);
    let d = run.data.read().expect("run data lock");
    let whole = Window {
        from: None,
        to: None,
        points: window.points,
    };
    let chart = |word: &str, held: Held, planned: Option<&crate::downsample::Plan>| {
        let (headline, mode, column) = pick(&d, word)?;
        let exact = read.as_ref().map(|r| {
            r.get(&(headline.name.clone(), mode))
                .map_or(&[][..], Vec::as_slice)
        });
        let lines = crate::api::series_lines(column, planned, window, 0.0, exact);
        // A chart drawn with values read ends where they did: its headline is its last value
        // (the follower may have taken in more since).
        let mut headline = headline;
        if let Some(last) = lines.raw.last().filter(|p| p.0 < headline.last_step) {
            headline.last_step = last.0;
            headline.last_value = Num(last.1);
        }
        let since = held.since.filter(|_| held.width == Some(lines.width));
        let kept: Vec<(u64, f64)> = match since {
            Some(s) => lines
                .raw
                .into_iter()
                .filter(|p| p.0 >= s)
                .map(|p| (p.0, p.1))
                .collect(),
            None => lines.raw.into_iter().map(|p| (p.0, p.1)).collect(),
        };
        // The other mode's line beside it: EVAL beside TRAIN (TRAIN beside another mode).
        let other_mode = if mode == Mode::Train {
            Mode::Eval
        } else {
            Mode::Train
        };
        let other = d
            .scalars
            .get(&headline.name)
            .and_then(|t| t.get(&other_mode))
            .filter(|s| !s.is_empty())
            .map(|s| {
                let line = crate::api::series_lines(s, None, &whole, 0.0, None);
                HeadlineLine {
                    mode: other_mode.name(),
                    total: s.len(),
                    steps: line.raw.iter().map(|p| p.0).collect(),
                    values: line.raw.iter().map(|p| finite(p.1)).collect(),
                    non_finite: NonFiniteSteps::of(s, None, None),
                }
            });
        Some(HeadlineChart {
            headline,
            total: column.len(),
            width: lines.width,
            since,
            steps: kept.iter().map(|p| p.0).collect(),
            values: kept.iter().map(|p| finite(p.1)).collect(),
            non_finite: NonFiniteSteps::of(column, None, None),
            other,
        })
    };
    Headlines {
        loss: chart("loss", held[0], plans[0].as_ref()),
        accuracy: chart("acc", held[1], plans[1].as_ref()),
    }
}

#[cfg(test)]
mod tests {
    use smdebug_format::progress::Progress;

    use super::progress;
    use crate::liveness::{Freshness, STALLED_AFTER_S};
    use crate::run_data::RunData;
    use crate::views::Phase;

    /// A run whose progress files counted `points` (wall time, steps), planning 1,000 steps.
    fn run(points: &[(f64, u64)]) -> RunData {
        let mut d = RunData {
            exists: true,
            ..RunData::default()
        };
        let &(wall, steps) = points.last().unwrap();
        let mut p = Progress::new("worker_0");
        p.planned_steps = Some(1000);
        p.steps = steps;
        p.wall_time = wall;
        d.progress = vec![p];
        d.progress_history = points.iter().copied().collect();
        d
    }

    fn fresh(phase: Phase, idle_s: f64) -> Freshness {
        Freshness {
            phase,
            note: None,
            last_advanced: Some(1000.0),
            idle_s: Some(idle_s),
            stalled_since: None,
            stalled_after_s: STALLED_AFTER_S,
        }
    }

    #[test]
    fn an_eta_only_from_a_steady_rate_of_a_run_that_advances() {
        // Two steps a second for a minute after five warm-up steps, 125 steps done.
        let mut points: Vec<(f64, u64)> = (0..5u32)
            .map(|i| (f64::from(i) * 4.0, u64::from(i)))
            .collect();
        points.extend((0..=120u32).map(|i| (20.0 + f64::from(i) / 2.0, 5 + u64::from(i))));
        let d = run(&points);
        let p = progress(&d, &fresh(Phase::Live, 1.0));
        assert!(p.rate_steady);
        assert_eq!(p.step_rate, Some(2.0));
        assert_eq!(p.steps_done, Some(125));
        assert_eq!(p.eta_s, Some(875.0 / 2.0));
        assert_eq!(p.rate_source, "progress files");
        // Nothing for 11 s (more than 10 s and three steps): no ETA, though not stalled yet.
        let p = progress(&d, &fresh(Phase::Live, 11.0));
        assert_eq!(p.eta_s, None);
        assert_eq!(
            p.eta_note,
            Some("ETA unknown: no step for longer than three of its steps take")
        );
        for (phase, note) in [
            (Phase::Stalled, "no ETA: the run is not advancing (stalled)"),
            (Phase::Crashed, "no ETA: the run crashed"),
        ] {
            let p = progress(&d, &fresh(phase, 1.0));
            assert_eq!((p.eta_s, p.eta_note), (None, Some(note)));
        }
        // A step every 2 s for the last minute: unsteady, no ETA.
        let &(t, s) = points.last().unwrap();
        points.extend((1..=30u32).map(|i| (t + 2.0 * f64::from(i), s + u64::from(i))));
        let p = progress(&run(&points), &fresh(Phase::Live, 1.0));
        assert!(!p.rate_steady && p.step_rate.is_some());
        assert_eq!(p.eta_s, None);
        assert_eq!(p.eta_note, Some("ETA unknown: the step rate is unsteady"));
    }
}
