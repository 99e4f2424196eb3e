//! The JSON views of a run that the page draws, computed from [`RunData`] (no I/O) or, for
//! tensor values, through the run's `Trial`. Every series is downsampled on the server
//! ([`crate::downsample`]); times are seconds since the epoch (the page's charts' unit).

use std::collections::BTreeMap;

use regex::Regex;
use serde::Deserialize;
use smdebug_core::Mode;
use smdebug_profiler::downsample::PointSource;
use smdebug_profiler::reader::{SpanRef, SpanStore};
use smdebug_profiler::stats::percentile;

use smdebug_rules::Summary;
use smdebug_rules::profiler::StepOutlierDetails;

use smdebug_io::trial::TensorFollower;

use crate::downsample::{MAX_POINTS, Plan, ScalarLines, Value, draw, min_max, plan};
use crate::run::{Run, RunData};
use crate::series::{
    EveryValue, Histogram, ModeSeries, Outlier, ScalarModeValues, ScalarPage, ScalarSeries,
    ScalarValues, SmoothedLine, SpanList, SpanRow, StepPhases, StepRow, StepSeries, Steps,
    TimeSeries, finite,
};
use crate::summary::SeriesSummary;
use crate::views::{Num, PhaseTotal, RunList, RunState};

/// A window and a point budget, from the query string.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Window {
    /// Window start, seconds since the epoch (or a step, for step-indexed series).
    pub from: Option<f64>,
    /// Window end.
    pub to: Option<f64>,
    /// Points wanted per series (at most [`MAX_POINTS`]).
    pub points: Option<usize>,
}

impl Window {
    pub(crate) fn budget(&self) -> usize {
        self.points.unwrap_or(MAX_POINTS).clamp(2, MAX_POINTS)
    }

    pub(crate) fn start_us(&self) -> Option<f64> {
        self.from.map(|s| s * 1e6)
    }

    pub(crate) fn end_us(&self) -> Option<f64> {
        self.to.map(|s| s * 1e6)
    }
}

fn secs(us: u64) -> f64 {
    us as f64 / 1e6
}

/// Time-stamped points, downsampled over the window.
pub(crate) fn time_series<S: PointSource<u64> + ?Sized>(points: &S, window: &Window) -> TimeSeries {
    let kept = min_max(points, window.start_us(), window.end_us(), window.budget());
    TimeSeries {
        t: kept.iter().map(|p| finite(secs(p.0))).collect(),
        v: kept.iter().map(|p| finite(p.1)).collect(),
        total: points.count(),
    }
}

/// The list of runs with their live state (also in each SSE update), at the server's time.
pub fn runs(runs: &[std::sync::Arc<Run>]) -> RunList {
    let now = smdebug_io::jobs::now_s();
    let list = runs
        .iter()
        .map(|run| {
            let d = run.data.read().expect("run data lock");
            let range = d.time_range();
            let stop_rule = crate::diagnosis::stop_cause(&d).map(|c| c.rule);
            let fresh = crate::liveness::freshness(&d, stop_rule.as_deref(), now);
            RunState {
                id: run.id,
                name: run.name.clone(),
                location: run.location.clone(),
                version: d.version,
                changed: d.changed,
                phase: fresh.phase,
                phase_note: fresh.note,
                last_advanced: fresh.last_advanced,
                idle_s: fresh.idle_s,
                stalled_since: fresh.stalled_since,
                stalled_after_s: fresh.stalled_after_s,
                processes: d.processes.clone(),
                exists: d.exists,
                gone: d.gone,
                identity: d.identity.clone(),
                resets: d.resets,
                open_error: d.open_error.clone(),
                complete: d.complete,
                end_reason: d.end_reason.as_ref().map(ToString::to_string),
                writable: d.writable,
                stop_requested: d.stop_request.as_ref().map(|r| r.reason.clone()),
                stop_requested_at: d.stop_request.as_ref().map(|r| r.requested_at),
                stop_request_error: d.stop_request_error.clone(),
                stop_rule,
                steps: d.steps.len(),
                last_step: d.steps.last().copied(),
                steps_done: d.steps_done(),
                planned_steps: d.planned_steps(),
                samples: d.profile.sample_count(),
                tensors: d.tensors.len(),
                scalar_values: d.scalars.values(),
                index_pending: d.index_pending,
                index_backlog: d.index_backlog,
                missing_since: d.missing_since,
                trial_open: run.trial_open(),
                report: run.report_stage(),
                spans: d.profile.spans().len(),
                start: range.map(|r| secs(r.0)),
                end: range.map(|r| secs(r.1)),
                rules: d.rules.as_ref().map(|s| s.rules.len()),
                issues: d.rules.as_ref().map(crate::diagnosis::issue_count),
                no_data: d.rules.as_ref().map(|s| s.no_data().count()),
            }
        })
        .collect();
    RunList {
        runs: list,
        server_time: now,
    }
}

/// The step of each point of a step-duration series (`rows`: `(step, start µs, duration)` in
/// start order; a point's time is its span's start).
fn steps_at(rows: &[(u64, u64, f64)], data: &TimeSeries) -> Vec<Option<u64>> {
    data.t
        .iter()
        .map(|t| {
            let us = (t.unwrap_or(f64::NAN) * 1e6).round();
            let at = rows.partition_point(|r| (r.1 as f64) < us - 1.0);
            rows.get(at)
                .filter(|r| (r.1 as f64 - us).abs() <= 1.0)
                .map(|r| r.0)
        })
        .collect()
}

pub(crate) fn is_step(span: &SpanRef<'_>) -> Option<Mode> {
    span.step_mode
}

/// The rows of the span list that a request asks for.
#[derive(Clone, Copy, Debug, Default)]
pub struct SpanRows {
    /// List from the window's end (its last spans first are the latest), not its start.
    pub from_end: bool,
    /// Rows skipped (from the start, or from the end with `from_end`).
    pub offset: usize,
    /// Rows listed at most (default: the window's point budget).
    pub limit: Option<usize>,
}

/// The spans inside a window: one page of them (the first, or with `rows.from_end` the last,
/// listed in time order), how many there are, and per-phase totals.
pub fn spans(run: &Run, window: &Window, rows: SpanRows) -> SpanList {
    let d = run.data.read().expect("run data lock");
    let from = window.start_us().unwrap_or(0.0);
    let to = window.end_us().unwrap_or(f64::INFINITY);
    let limit = rows.limit.unwrap_or(window.budget()).clamp(1, MAX_POINTS);
    let mut count = 0usize;
    // From the start: rows offset..offset+limit. From the end: the last offset+limit kept, the
    // last `offset` of them dropped afterwards.
    let keep = rows.offset.saturating_add(limit);
    let mut list: std::collections::VecDeque<SpanRow> = std::collections::VecDeque::new();
    let mut totals: BTreeMap<&str, (f64, u64)> = BTreeMap::new();
    for s in d
        .profile
        .spans()
        .iter()
        .filter(|s| (s.end_us as f64) >= from && (s.start_us as f64) <= to)
    {
        count += 1;
        let e = totals.entry(s.phase).or_default();
        e.0 += secs(s.duration_us());
        e.1 += 1;
        let wanted = if rows.from_end {
            true
        } else {
            count > rows.offset && list.len() < limit
        };
        if wanted {
            list.push_back(SpanRow {
                phase: s.phase.to_owned(),
                name: s.name.to_owned(),
                start: secs(s.start_us),
                end: secs(s.end_us),
                node: s.node.to_owned(),
                worker: s.worker,
                step: s.step,
            });
            if rows.from_end && list.len() > keep {
                list.pop_front();
            }
        }
    }
    if rows.from_end {
        let shown = list.len().saturating_sub(rows.offset);
        list.truncate(shown);
    }
    let totals = totals
        .iter()
        .map(|(p, (t, c))| PhaseTotal {
            phase: (*p).to_owned(),
            total_s: *t,
            count: *c,
        })
        .collect();
    let listed = list.len();
    SpanList {
        count,
        spans: Vec::from(list),
        truncated: count > listed,
        offset: rows.offset,
        from_end: rows.from_end,
        totals,
    }
}

/// `(mode, node, worker)` of a step-duration series.
type StepGroup = (String, String, Option<u32>);

/// Step durations per mode and node/worker, outliers, a histogram, and time per phase over
/// the last `last` steps.
pub fn steps(run: &Run, window: &Window, last: usize) -> Steps {
    let d = run.data.read().expect("run data lock");
    // (mode, node, worker) → [(step, start µs, duration s)]
    let mut groups: BTreeMap<StepGroup, Vec<(u64, u64, f64)>> = BTreeMap::new();
    for s in d.profile.spans().iter() {
        if let (Some(mode), Some(step)) = (is_step(&s), s.step) {
            groups
                .entry((mode.name().to_owned(), s.node.to_owned(), s.worker))
                .or_default()
                .push((step, s.start_us, secs(s.duration_us())));
        }
    }
    // The outliers are StepOutlier's own, from the summary its runner wrote into the run: per
    // node and mode, its limit and its slowest outlier steps. Without a StepOutlier result the
    // dashboard marks none (it does not judge the steps itself).
    let verdicts = step_outlier_details(d.rules.as_ref());
    let mut all: Vec<f64> = Vec::new();
    let series = groups
        .iter()
        .map(|((mode, node, worker), rows)| {
            let mut durations: Vec<f64> = rows.iter().map(|r| r.2).collect();
            all.extend_from_slice(&durations);
            durations.sort_by(f64::total_cmp);
            let p50 = percentile(&durations, 50.0);
            let mean = durations.iter().sum::<f64>() / durations.len() as f64;
            let judged = verdicts
                .as_ref()
                .and_then(|v| v.nodes.get(node))
                .and_then(|modes| modes.get(mode));
            let points: Vec<(u64, f64)> = rows.iter().map(|r| (r.1, r.2)).collect();
            let data = time_series(&points, window);
            let outliers = judged
                .map(|j| {
                    j.outlier_steps
                        .iter()
                        // This worker's outliers: rows are in start order (the store's).
                        .filter(|o| {
                            let at = rows.partition_point(|r| r.1 < o.start_us);
                            rows[at..]
                                .iter()
                                .take_while(|r| r.1 == o.start_us)
                                .any(|r| r.0 == o.step)
                        })
                        .map(|o| Outlier {
                            step: o.step,
                            t: secs(o.start_us),
                            duration: o.duration_s,
                        })
                        .collect()
                })
                .unwrap_or_default();
            StepSeries {
                mode: mode.clone(),
                node: node.clone(),
                worker: *worker,
                count: rows.len(),
                p50: finite(p50),
                mean: finite(mean),
                outlier_limit: judged.and_then(|j| finite(j.outlier_limit_s)),
                step: steps_at(rows, &data),
                data,
                outliers,
            }
        })
        .collect();
    // Histogram of all step durations, 30 bins.
    all.sort_by(f64::total_cmp);
    let histogram = match (all.first(), all.last()) {
        (Some(&lo), Some(&hi)) => {
            let bins = 30usize;
            let width = ((hi - lo) / bins as f64).max(1e-9);
            let mut counts = vec![0u64; bins];
            for x in &all {
                counts[(((x - lo) / width) as usize).min(bins - 1)] += 1;
            }
            Some(Histogram { lo, width, counts })
        }
        _ => None,
    };
    Steps {
        series,
        histogram,
        phases: last_steps(d.profile.spans(), last),
    }
}

/// StepOutlier's typed details from the rules summary, when it ran.
fn step_outlier_details(rules: Option<&Summary>) -> Option<StepOutlierDetails> {
    rules?
        .rules
        .iter()
        .filter(|r| r.rule == "StepOutlier")
        .find_map(|r| r.profiler_details()?.step_outliers().cloned())
}

/// Time per phase within each of the last `n` step spans (of any mode, node, worker).
fn last_steps(spans: &SpanStore, n: usize) -> StepPhases {
    let mut recent: Vec<SpanRef<'_>> = spans
        .iter()
        .rev()
        .filter(|s| is_step(s).is_some())
        .take(n.clamp(1, 500))
        .collect();
    recent.reverse();
    let Some(first) = recent.first() else {
        return StepPhases::default();
    };
    let lo = spans.first_starting_at(first.start_us);
    let mut phase_names: Vec<String> = Vec::new();
    let mut table: Vec<BTreeMap<String, f64>> = vec![BTreeMap::new(); recent.len()];
    for s in spans.iter_from(lo) {
        if is_step(&s).is_some() {
            continue;
        }
        // The step span on the same node and worker that contains it.
        if let Some(i) = recent.iter().position(|st| {
            st.node == s.node
                && st.worker == s.worker
                && s.start_us >= st.start_us
                && s.end_us <= st.end_us
        }) {
            if !phase_names.iter().any(|p| p == s.phase) {
                phase_names.push(s.phase.to_owned());
            }
            *table[i].entry(s.phase.to_owned()).or_default() += secs(s.duration_us());
        }
    }
    let steps = recent
        .iter()
        .zip(table)
        .map(|(st, row)| {
            let other = secs(st.duration_us()) - row.values().sum::<f64>();
            StepRow {
                step: st.step,
                mode: is_step(st).map(|m| m.name()),
                duration: secs(st.duration_us()),
                phases: row,
                other: other.max(0.0),
            }
        })
        .collect();
    StepPhases {
        steps,
        phases: phase_names,
    }
}

/// Scalars whose names match `regex`, per mode, downsampled by step (with `smoothing` above 0,
/// each with its smoothed line): one page of them (`series_total` says how many match,
/// `next_offset` where the next page starts; a run with thousands of scalars answers a bounded
/// response). Each series is drawn from its summary's buckets, or, in a window finer than
/// them, from its values read again from the run's files ([`crate::downsample::plan`]): one
/// read of the window's steps for the whole page, outside the run's lock. Blocking I/O: call
/// it off the async runtime.
pub fn scalars(
    run: &Run,
    regex: Option<&str>,
    window: &Window,
    smoothing: f64,
    page: crate::page::Page,
) -> Result<ScalarPage, String> {
    let filter = match regex.filter(|r| !r.is_empty()) {
        Some(r) => Some(Regex::new(r).map_err(|e| format!("bad regex: {e}"))?),
        None => None,
    };
    let matching = |d: &'_ RunData| -> Vec<String> {
        d.scalars
            .iter()
            .map(|(name, _)| name)
            .filter(|name| filter.as_ref().is_none_or(|f| f.is_match(name)))
            .cloned()
            .collect()
    };
    // How each series of the page is drawn, and the steps to read again: of every series whose
    // window is finer than its buckets or cuts a slice.
    let plans: BTreeMap<(String, Mode), Plan> = {
        let d = run.data.read().expect("run data lock");
        let names = matching(&d);
        let (names, _) = page.select(names.iter(), |name| name.clone());
        let mut plans = BTreeMap::new();
        for name in &names {
            for (mode, summary) in d.scalars.get(name).into_iter().flat_map(|t| t.iter()) {
                if let Some(p) = plan(summary, window.from, window.to, window.budget()) {
                    plans.insert((name.clone(), *mode), p);
                }
            }
        }
        plans
    };
    let to_read = plans
        .values()
        .flat_map(|p| p.read.iter().copied())
        .collect();
    let read = read_ranges(run, to_read);
    let d = run.data.read().expect("run data lock");
    let names = matching(&d);
    let (out, total) = page.select(names.iter(), |name| {
        let track = d.scalars.get(name);
        // Modes in name order (EVAL, GLOBAL, PREDICT, TRAIN).
        let mut by_name: Vec<(&Mode, &SeriesSummary)> =
            track.into_iter().flat_map(|t| t.iter()).collect();
        by_name.sort_by_key(|(mode, _)| mode.name());
        let modes = by_name
            .into_iter()
            .map(|(mode, summary)| {
                let exact = read
                    .as_ref()
                    .map(|r| r.get(&(name.clone(), *mode)).map_or(&[][..], Vec::as_slice));
                let planned = plans.get(&(name.clone(), *mode));
                let lines = series_lines(summary, planned, window, smoothing, exact);
                let walls = |kept: &[Value]| -> Vec<Option<f64>> {
                    kept.iter().map(|p| finite(p.2)).collect()
                };
                ModeSeries {
                    mode: mode.name(),
                    total: summary.len(),
                    steps: lines.raw.iter().map(|p| p.0).collect(),
                    values: lines.raw.iter().map(|p| finite(p.1)).collect(),
                    wall_times: walls(&lines.raw),
                    smoothed: lines.smoothed.map(|kept| SmoothedLine {
                        steps: kept.iter().map(|p| p.0).collect(),
                        values: kept.iter().map(|p| finite(p.1)).collect(),
                        wall_times: walls(&kept),
                    }),
                    non_finite: crate::summary::NonFiniteSteps::of(summary, window.from, window.to),
                }
            })
            .collect();
        ScalarSeries {
            name: name.clone(),
            modes,
        }
    });
    Ok(ScalarPage {
        next_offset: page.next_offset(out.len(), total),
        scalars: out,
        series_total: total,
        offset: page.offset,
        tensors: d.tensors.clone(),
        first_wall_time: d.scalars.first_wall_time().and_then(finite),
        smoothing,
    })
}

/// The most values one answer of [`every_value`] holds by default (about 45 MB of JSON; the
/// page asks for more in several answers).
pub const MAX_EVERY_VALUE: usize = 1_000_000;

/// Why [`every_value`] has no answer, with the HTTP status it is.
#[derive(Debug)]
pub enum EveryValueError {
    /// The filter is not a regular expression (400).
    BadRegex(String),
    /// No scalar of the run matches (404).
    NoMatch(String),
    /// More values match than one answer holds (413).
    TooMany(String),
    /// The run's files could not be read (500).
    Unreadable(String),
}

/// Every value at the steps `from..=to` (all without them) of each scalar whose name `regex`
/// matches (all without one) as the run's files hold it, in every mode, in step order. The
/// steps are those the run's index lists for them (through its `Trial`), read again from the
/// files ten index folders at a time, so that a run of sparse step numbers is read where it has
/// steps only. Refused beyond `most` values (the server's
/// [`max_download_values`](crate::ServeOptions::max_download_values)). Blocking I/O.
pub fn every_value(
    run: &Run,
    regex: Option<&str>,
    (from, to): (Option<u64>, Option<u64>),
    most: usize,
) -> Result<EveryValue, EveryValueError> {
    let filter = match regex.filter(|r| !r.is_empty()) {
        Some(r) => {
            Some(Regex::new(r).map_err(|e| EveryValueError::BadRegex(format!("bad regex: {e}")))?)
        }
        None => None,
    };
    let names: Vec<String> = {
        let d = run.data.read().expect("run data lock");
        d.scalars
            .iter()
            .map(|(name, _)| name)
            .filter(|name| filter.as_ref().is_none_or(|f| f.is_match(name)))
            .cloned()
            .collect()
    };
    if names.is_empty() {
        return Err(EveryValueError::NoMatch(match regex {
            Some(r) if !r.is_empty() => format!("no scalar of this run matches {r:?}"),
            _ => "this run has no scalars".to_owned(),
        }));
    }
    let unreadable = |e: String| EveryValueError::Unreadable(e);
    let trial = run.open_trial().map_err(unreadable)?;
    let within = |s: &u64| from.is_none_or(|f| *s >= f) && to.is_none_or(|t| *s <= t);
    let mut steps = Vec::new();
    let mut count = 0;
    for name in &names {
        let tensor = trial.tensor(name).map_err(|e| unreadable(e.to_string()))?;
        let mine: Vec<u64> = tensor
            .steps(None)
            .map_err(|e| unreadable(e.to_string()))?
            .into_iter()
            .filter(within)
            .collect();
        count += mine.len();
        steps.extend(mine);
    }
    if count > most {
        return Err(EveryValueError::TooMany(format!(
            "{count} values of {} scalar(s): more than {most} in one answer",
            names.len()
        )));
    }
    steps.sort_unstable();
    steps.dedup();
    // Stretches of steps within ten index folders (1,000 steps each) of their first.
    let mut chunks: Vec<(u64, u64)> = Vec::new();
    for step in steps {
        match chunks.last_mut() {
            Some((lo, hi)) if step / 1000 < *lo / 1000 + 10 => *hi = step,
            _ => chunks.push((step, step)),
        }
    }
    let wanted: std::collections::BTreeSet<&str> = names.iter().map(String::as_str).collect();
    let mut out: BTreeMap<(String, &'static str), ScalarModeValues> = BTreeMap::new();
    for (lo, hi) in chunks {
        let read = read_window(run, lo, hi)
            .ok_or_else(|| unreadable(format!("steps {lo} to {hi} cannot be read")))?;
        for ((name, mode), values) in read {
            if !wanted.contains(name.as_str()) {
                continue;
            }
            let m = out
                .entry((name, mode.name()))
                .or_insert_with(|| ScalarModeValues {
                    mode: mode.name(),
                    steps: Vec::new(),
                    values: Vec::new(),
                    wall_times: Vec::new(),
                });
            for (step, value, wall) in values {
                m.steps.push(step);
                m.values.push(Num(value));
                m.wall_times.push(finite(wall));
            }
        }
    }
    let mut scalars: Vec<ScalarValues> = Vec::new();
    let mut values = 0;
    for ((name, _), modes) in out {
        values += modes.steps.len();
        match scalars.last_mut() {
            Some(last) if last.name == name => last.modes.push(modes),
            _ => scalars.push(ScalarValues {
                name,
                modes: vec![modes],
            }),
        }
    }
    Ok(EveryValue { scalars, values })
}

/// The values of the steps `lo..=hi` of every scalar, read again from the run's files, by name
/// and mode; `None` when they cannot be read (the buckets are drawn instead).
pub(crate) fn read_window(run: &Run, lo: u64, hi: u64) -> Option<ReadWindow> {
    let storage = run.storage()?;
    match TensorFollower::read_steps(storage, lo, hi) {
        Ok((batch, _)) => Some(
            batch
                .into_iter()
                .map(|(name, mode, column)| ((name, mode), column))
                .collect(),
        ),
        Err(e) => {
            log::warn!("smdebug serve: {}: steps {lo} to {hi}: {e}", run.name);
            None
        }
    }
}

/// Values read again from the run's files, by scalar and mode.
pub(crate) type ReadWindow = BTreeMap<(String, Mode), Vec<Value>>;

/// The values of every scalar at the steps of `ranges` (merged where they overlap or touch),
/// read again from the run's files; `None` when there is nothing to read or a range cannot be
/// read.
pub(crate) fn read_ranges(run: &Run, mut ranges: Vec<(u64, u64)>) -> Option<ReadWindow> {
    if ranges.is_empty() {
        return None;
    }
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (lo, hi) in ranges {
        match merged.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    let mut out = ReadWindow::new();
    for (lo, hi) in merged {
        for (key, values) in read_window(run, lo, hi)? {
            out.entry(key).or_default().extend(values);
        }
    }
    for values in out.values_mut() {
        values.sort_by_key(|v| v.0);
    }
    Some(out)
}

/// A series' points in `window`: from its buckets and, where its plan reads them, `exact`
/// (its values at the steps read again; `None` when they could not be read).
/// `planned` is its plan when the values were read (a series without one is planned now,
/// and has nothing read).
pub(crate) fn series_lines(
    summary: &SeriesSummary,
    planned: Option<&Plan>,
    window: &Window,
    smoothing: f64,
    exact: Option<&[Value]>,
) -> ScalarLines {
    let (from, to) = (window.from, window.to);
    let Some(plan) = planned
        .cloned()
        .or_else(|| plan(summary, from, to, window.budget()))
    else {
        return ScalarLines::default();
    };
    let exact = if planned.is_some() { exact } else { None };
    // Only its own ranges' values (a page reads the ranges of all its series).
    let own: Option<Vec<Value>> = exact.map(|values| {
        values
            .iter()
            .filter(|v| plan.read.iter().any(|r| r.0 <= v.0 && v.0 <= r.1))
            .copied()
            .collect()
    });
    draw(
        summary,
        from,
        to,
        &plan,
        window.budget(),
        own.as_deref(),
        smoothing,
    )
}
