//! The JSON views of a run that the page draws, computed from [`RunData`] (no I/O) or, for
//! tensor values, through the run's `Trial`. Every series is downsampled on the server
//! ([`crate::downsample`]); times are seconds since the epoch (the page's charts' unit).

use std::collections::BTreeMap;

use regex::Regex;
use serde::Deserialize;
use smdebug_analysis::digest::StepDigest;
use smdebug_analysis::downsample::PointSource;
use smdebug_analysis::time::seconds;
use smdebug_core::Mode;
use smdebug_read::profile::{SpanRef, SpanStore};

use smdebug_rules::Summary;
use smdebug_rules::profiler::{StepOutlier, StepOutlierDetails};

use smdebug_read::trial::TensorFollower;

use crate::downsample::{MAX_POINTS, Plan, ScalarLines, Value, draw, min_max, plan};
use crate::profile_model::{TraceEntry, read_spans};
use crate::run::Run;
use crate::run_data::RunData;
use crate::series::{
    EveryValue, Histogram, ModeSeries, Outlier, ScalarModeValues, ScalarPage, ScalarSeries,
    ScalarValues, SmoothedLine, SpanList, SpanRow, SpanSort, StepPhases, StepRow, StepSeries,
    Steps, TimeSeries, finite,
};
use crate::views::{Num, PhaseTotal, RunList, RunState};
use smdebug_analysis::scalars::SeriesSummary;

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

/// Time-stamped points, downsampled over the window; in a window of time, with the point just
/// before it and the one just after, so that a line crosses a window narrower than the
/// sampling interval (a zoom on one step) instead of leaving the chart empty.
pub(crate) fn time_series<S: PointSource<u64> + ?Sized>(points: &S, window: &Window) -> TimeSeries {
    let mut kept = min_max(points, window.start_us(), window.end_us(), window.budget());
    let n = points.count();
    // The first point at or after `us` (points are in time order).
    let first_from = |us: f64| {
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if (points.point(mid).0 as f64) < us {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    };
    if let Some(from) = window.start_us() {
        let at = first_from(from);
        if at > 0 {
            kept.insert(0, points.point(at - 1));
        }
    }
    if let Some(to) = window.end_us() {
        // The first point after `to`.
        let at = first_from(to.floor() + 1.0);
        if at < n {
            kept.push(points.point(at));
        }
    }
    TimeSeries {
        t: kept.iter().map(|p| finite(seconds(p.0))).collect(),
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
            let stop_rule = crate::diagnosis::stopping_rule(&d).map(|c| c.rule);
            let fresh = crate::liveness::freshness(&d, stop_rule.as_deref(), now);
            RunState {
                id: run.id,
                name: run.name.clone(),
                location: run.location.to_string(),
                version: d.version,
                changed: d.changed,
                phase: fresh.phase,
                phase_note: fresh.note,
                last_advanced: fresh.last_advanced,
                idle_s: fresh.idle_s,
                stalled_since: fresh.stalled_since,
                stalled_after_s: fresh.stalled_after_s,
                processes: d.processes.clone(),
                standing: d.standing(),
                gone: d.gone,
                identity: d.identity.clone(),
                resets: d.resets,
                stop_requested_at: d.stop_request.as_ref().map(|r| r.requested_at),
                stop_rule,
                steps: d.steps.len(),
                last_step: d.steps.last().copied(),
                steps_done: d.steps_done(),
                planned_steps: d.planned_steps(),
                samples: d.digest.sample_count(),
                tensors: d.tensors.len(),
                scalar_values: d.scalars.values(),
                index_pending: d.index_pending,
                index_backlog: d.index_backlog,
                missing_since: d.missing_since,
                trial_open: run.trial_open(),
                report: run.report_stage(),
                spans: d.digest.span_count() as usize,
                start: range.map(|r| seconds(r.0)),
                end: range.map(|r| seconds(r.1)),
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
    /// Listed in this column's order (all the window's spans sorted, then paged) rather than
    /// in time order.
    pub sort: Option<SpanSort>,
    /// Largest first (with `sort`).
    pub descending: bool,
}

fn span_row(s: &SpanRef<'_>) -> SpanRow {
    SpanRow {
        phase: s.phase.to_owned(),
        name: s.name.to_owned(),
        start: seconds(s.start_us),
        end: seconds(s.end_us),
        node: s.node.to_owned(),
        worker: s.worker,
        step: s.step,
    }
}

/// The window of a span query in whole µs: spans with `end >= from` and `start <= to`;
/// `None` when it holds no time.
fn span_window(window: &Window) -> Option<(u64, u64)> {
    let from = window.start_us().unwrap_or(0.0);
    let to = window.end_us().unwrap_or(f64::INFINITY);
    if to < 0.0 || to < from || from.is_nan() || to.is_nan() {
        return None;
    }
    let lo = from.max(0.0).ceil();
    let hi = to.floor();
    let cap = u64::MAX as f64;
    Some((lo.min(cap) as u64, hi.min(cap) as u64))
}

/// The trace files whose spans may overlap the window, cloned out of the run's lock.
fn entries_within(d: &RunData, (lo, hi): (u64, u64)) -> Vec<TraceEntry> {
    d.traces
        .entries()
        .iter()
        .filter(|e| e.overlaps(lo, hi))
        .cloned()
        .collect()
}

/// Reads again the spans of `entries` within the window into `store`; a file that cannot be
/// read is logged and left out.
fn read_into(run: &Run, entries: &[&TraceEntry], window: (u64, u64), store: &mut SpanStore) {
    if entries.is_empty() {
        return;
    }
    let Some(storage) = run.storage() else { return };
    if let Err(e) = read_spans(storage.as_ref(), entries.iter().copied(), window, store) {
        log::warn!("smdebug serve: {}: spans: {e}", run.name);
    }
}

/// The spans inside a window: one page of them (the first, or with `rows.from_end` the last,
/// listed in time order; with `rows.sort`, the page of them all sorted by that column), how
/// many there are, and per-phase totals. Counted from the index of the trace files for the
/// files the window holds whole; the files it cuts, and those of the rows listed, are read
/// again (with `rows.sort`, every file of the window). Blocking I/O.
pub fn spans(run: &Run, window: &Window, rows: SpanRows) -> SpanList {
    let limit = rows.limit.unwrap_or(window.budget()).clamp(1, MAX_POINTS);
    let list = |count: usize, spans: Vec<SpanRow>, totals: &BTreeMap<String, (f64, u64)>| {
        let listed = spans.len();
        SpanList {
            count,
            spans,
            truncated: count > listed,
            offset: rows.offset,
            from_end: rows.from_end && rows.sort.is_none(),
            sort: rows.sort,
            descending: rows.sort.is_some() && rows.descending,
            totals: phase_totals(totals),
        }
    };
    let Some(w) = span_window(window) else {
        return list(0, Vec::new(), &BTreeMap::new());
    };
    let mut totals: BTreeMap<String, (f64, u64)> = BTreeMap::new();
    let mut count = 0usize;
    let entries = {
        let d = run.data.read().expect("run data lock");
        let entries = entries_within(&d, w);
        // The files the window holds whole, from the index.
        for e in entries.iter().filter(|e| e.inside(w.0, w.1)) {
            count += e.spans as usize;
            for &(phase, n, total_us) in &e.phases {
                let t = totals.entry(d.traces.phase(phase).to_owned()).or_default();
                t.0 += seconds(total_us);
                t.1 += u64::from(n);
            }
        }
        entries
    };
    let mut store = SpanStore::default();
    if let Some(sort) = rows.sort {
        return sorted_spans(run, &entries, w, limit, rows, sort);
    }
    // The files the window cuts: read for their count and totals.
    let cut: Vec<&TraceEntry> = entries.iter().filter(|e| !e.inside(w.0, w.1)).collect();
    read_into(run, &cut, w, &mut store);
    for s in store.iter() {
        count += 1;
        let t = totals.entry(s.phase.to_owned()).or_default();
        t.0 += seconds(s.duration_us());
        t.1 += 1;
    }
    // The rows: the files from the window's end (or start) read until they hold the rows and
    // no file left can hold a span among them.
    let keep = rows.offset.saturating_add(limit);
    let mut order: Vec<&TraceEntry> = entries.iter().filter(|e| e.inside(w.0, w.1)).collect();
    if rows.from_end {
        order.sort_by_key(|e| std::cmp::Reverse(e.last_start_us));
    } else {
        order.sort_by_key(|e| e.first_start_us);
    }
    for e in order {
        if store.len() >= keep {
            let bound = if rows.from_end {
                store.iter().rev().nth(keep - 1).map(|s| s.start_us)
            } else {
                store.iter().nth(keep - 1).map(|s| s.start_us)
            };
            let done = bound.is_some_and(|b| {
                if rows.from_end {
                    e.last_start_us < b
                } else {
                    e.first_start_us > b
                }
            });
            if done {
                break;
            }
        }
        read_into(run, &[e], w, &mut store);
    }
    let spans: Vec<SpanRow> = if rows.from_end {
        let mut last: Vec<SpanRow> = store
            .iter()
            .rev()
            .skip(rows.offset)
            .take(limit)
            .map(|s| span_row(&s))
            .collect();
        last.reverse();
        last
    } else {
        store
            .iter()
            .skip(rows.offset)
            .take(limit)
            .map(|s| span_row(&s))
            .collect()
    };
    list(count, spans, &totals)
}

fn phase_totals(totals: &BTreeMap<String, (f64, u64)>) -> Vec<PhaseTotal> {
    totals
        .iter()
        .map(|(p, (t, c))| PhaseTotal {
            phase: p.clone(),
            total_s: *t,
            count: *c,
        })
        .collect()
}

/// The window's spans sorted by `sort` (ties in time order), one page of them from the start
/// of that order (`rows.from_end` does not apply): every file of the window read again, one at
/// a time, keeping only the rows of the page and those before it.
fn sorted_spans(
    run: &Run,
    entries: &[TraceEntry],
    w: (u64, u64),
    limit: usize,
    rows: SpanRows,
    sort: SpanSort,
) -> SpanList {
    // A row and its place in time: (start, end) of its span.
    type Candidate = (SpanRow, u64, u64);
    let key = |a: &Candidate, b: &Candidate| match sort {
        SpanSort::Phase => a.0.phase.cmp(&b.0.phase),
        SpanSort::Name => a.0.name.cmp(&b.0.name),
        SpanSort::Step => a.0.step.cmp(&b.0.step),
        SpanSort::Node => crate::natural::natural_cmp(&a.0.node, &b.0.node),
        SpanSort::Start => std::cmp::Ordering::Equal,
        SpanSort::Duration => (a.2.saturating_sub(a.1)).cmp(&b.2.saturating_sub(b.1)),
    };
    let time = |a: &Candidate, b: &Candidate| (a.1, a.2).cmp(&(b.1, b.2));
    // Largest first, ties in time order (by start: the latest first).
    let order = |a: &Candidate, b: &Candidate| {
        if rows.descending {
            if sort == SpanSort::Start {
                time(b, a)
            } else {
                key(b, a).then_with(|| time(a, b))
            }
        } else {
            key(a, b).then_with(|| time(a, b))
        }
    };
    let keep = rows.offset.saturating_add(limit);
    let mut totals: BTreeMap<String, (f64, u64)> = BTreeMap::new();
    let mut count = 0usize;
    let mut best: Vec<Candidate> = Vec::new();
    for entry in entries {
        let mut store = SpanStore::default();
        read_into(run, &[entry], w, &mut store);
        for s in store.iter() {
            count += 1;
            let e = totals.entry(s.phase.to_owned()).or_default();
            e.0 += seconds(s.duration_us());
            e.1 += 1;
            best.push((span_row(&s), s.start_us, s.end_us));
        }
        if best.len() > 2 * keep.max(1024) {
            best.sort_by(order);
            best.truncate(keep);
        }
    }
    best.sort_by(order);
    let spans: Vec<SpanRow> = best
        .into_iter()
        .skip(rows.offset)
        .take(limit)
        .map(|c| c.0)
        .collect();
    SpanList {
        count,
        truncated: count > spans.len(),
        spans,
        offset: rows.offset,
        from_end: false,
        sort: Some(sort),
        descending: rows.descending,
        totals: phase_totals(&totals),
    }
}

/// `(mode, node, worker)` of a step-duration series.
type StepGroup = (String, String, Option<u32>);

/// Bins of the step-duration histogram.
pub const HISTOGRAM_BINS: usize = 30;

/// Step durations per mode and node/worker, outliers, a histogram of the window's steps on a
/// log axis, time per phase over the window's last `last` steps, and its `slowest` slowest
/// steps with their phases.
///
/// Each series' count, mean and median are of all its steps (the run's digest: the median
/// within 1 %). The whole run is drawn from the digest's lines (each slice's shortest and
/// longest step, their step numbers not known: `null`), its histogram from the digest's
/// sketches (a duration within 1 % of a bin's edge may be counted in the bin beside it), its
/// slowest steps from those kept ([`SLOWEST_KEPT`](crate::profile_model::SLOWEST_KEPT)); the
/// spans of the steps listed (the last and the slowest) are read again from their trace
/// files. A window is read again from the files whole, every step of it. Blocking I/O.
pub fn steps(run: &Run, window: &Window, last: usize, slowest: usize) -> Steps {
    let whole = window.from.is_none() && window.to.is_none();
    let last = last.clamp(1, 500);
    let slowest = slowest.min(500);
    let w = span_window(window);
    // What to read again: the window's files (and those of the steps that end after it), or
    // for the whole run those of its last steps and of its slowest; and those of the outliers
    // when a node and mode has several workers (whose outlier is whose).
    let mut store = SpanStore::default();
    let (first, outlier_times) = {
        let d = run.data.read().expect("run data lock");
        let outlier_times = shared_outliers(&d);
        let mut plan: Vec<TraceEntry> = Vec::new();
        let entries = d.traces.entries();
        if whole {
            // The files of the last `last` step spans: those from the latest back until they
            // hold as many, and every file reaching into the time from their earliest start.
            let mut by_last: Vec<&TraceEntry> = entries.iter().collect();
            by_last.sort_by_key(|e| std::cmp::Reverse(e.last_start_us));
            let mut held = 0usize;
            let mut since = None;
            for e in by_last {
                if held >= last {
                    break;
                }
                held += e.steps as usize;
                since = Some(since.map_or(e.first_start_us, |t: u64| t.min(e.first_start_us)));
            }
            if let Some(since) = since {
                plan.extend(entries.iter().filter(|e| e.last_end_us >= since).cloned());
            }
            for st in d.step_spans.slowest().iter().take(slowest) {
                plan.extend(
                    entries
                        .iter()
                        .filter(|e| e.overlaps(st.start_us, st.end_us))
                        .cloned(),
                );
            }
        } else if let Some(w) = w {
            plan.extend(entries_within(&d, w));
        }
        for &t in &outlier_times {
            plan.extend(entries.iter().filter(|e| e.overlaps(t, t)).cloned());
        }
        plan.sort_by(|a, b| a.file.key.cmp(&b.file.key));
        plan.dedup_by(|a, b| a.file.key == b.file.key);
        (plan, outlier_times)
    };
    let everything = (0, u64::MAX);
    let refs: Vec<&TraceEntry> = first.iter().collect();
    read_into(run, &refs, everything, &mut store);
    if let (false, Some((lo, hi))) = (whole, w) {
        // The spans of the window's steps that end after it.
        let end = store
            .iter()
            .filter(|s| is_step(s).is_some() && s.start_us >= lo && s.start_us <= hi)
            .map(|s| s.end_us)
            .max()
            .unwrap_or(hi);
        if end > hi {
            let more: Vec<TraceEntry> = {
                let d = run.data.read().expect("run data lock");
                d.traces
                    .entries()
                    .iter()
                    .filter(|e| e.overlaps(hi.saturating_add(1), end))
                    .filter(|e| !first.iter().any(|f| f.file.key == e.file.key))
                    .cloned()
                    .collect()
            };
            let refs: Vec<&TraceEntry> = more.iter().collect();
            read_into(run, &refs, everything, &mut store);
        }
    }
    let d = run.data.read().expect("run data lock");
    steps_of(&d, &store, window, whole, (last, slowest), &outlier_times)
}

/// The start times of StepOutlier's outliers of the nodes and modes with several workers'
/// step series: their spans say whose they are.
fn shared_outliers(d: &RunData) -> Vec<u64> {
    let Ok(Some(verdicts)) = step_outlier_details(d.rules.as_ref()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (node, _, mode) in d.digest.steps().keys() {
        let Some(mode) = mode else { continue };
        let workers = d
            .digest
            .steps()
            .keys()
            .filter(|k| k.0 == *node && k.2 == Some(*mode))
            .count();
        if workers < 2 {
            continue;
        }
        if let Some(j) = verdicts.nodes.get(node).and_then(|m| m.get(mode.name())) {
            out.extend(j.outlier_steps.iter().map(|o| o.start_us));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// A step span read: (step, start µs, duration s).
type StepSpanRow = (u64, u64, f64);

/// [`steps`] from the digest and the spans read again (`spans`).
fn steps_of(
    d: &RunData,
    spans: &SpanStore,
    window: &Window,
    whole: bool,
    (last, slowest): (usize, usize),
    outlier_times: &[u64],
) -> Steps {
    let (groups, windowed) = read_step_spans(spans, window);
    // The outliers are StepOutlier's own, from the summary its runner wrote into the run: per
    // node and mode, its limit and its slowest outlier steps. Without a StepOutlier result the
    // dashboard marks none (it does not judge the steps itself).
    let (verdicts, outliers_unread) = match step_outlier_details(d.rules.as_ref()) {
        Ok(verdicts) => (verdicts, None),
        Err(e) => (None, Some(e.to_string())),
    };
    let mut digests: Vec<(StepGroup, &StepDigest)> = d
        .digest
        .steps()
        .iter()
        .filter_map(|((node, worker, mode), digest)| {
            let mode = (*mode)?;
            Some(((mode.name().to_owned(), node.clone(), *worker), digest))
        })
        .collect();
    digests.sort_by(|a, b| a.0.cmp(&b.0));
    let series = digests
        .iter()
        .map(|(group, digest)| {
            let (mode, node, _) = group;
            let judged = verdicts
                .as_ref()
                .and_then(|v| v.nodes.get(node))
                .and_then(|modes| modes.get(mode));
            // Several workers' series of this node and mode: an outlier is this worker's when
            // its span is (the spans at the outliers' times were read).
            let shared = !outlier_times.is_empty()
                && digests
                    .iter()
                    .filter(|(g, _)| g.0 == *mode && g.1 == *node)
                    .count()
                    > 1;
            let rows = groups.get(group).map(Vec::as_slice).unwrap_or_default();
            let data = step_durations(digest, rows, window, whole);
            step_series(group, digest, rows, data, judged, shared)
        })
        .collect();
    let (histogram, window_steps) = step_histogram(&digests, &windowed, whole);
    let slowest = if whole {
        slowest_of_run(d, spans, slowest)
    } else {
        slowest_of_window(spans, &windowed, slowest)
    };
    let recent: Vec<SpanRef<'_>> = windowed
        .iter()
        .rev()
        .take(last)
        .rev()
        .filter_map(|&(i, _)| spans.iter_from(i).next())
        .collect();
    let phases = step_phases(spans, &recent);
    Steps {
        series,
        histogram,
        phases,
        slowest,
        window_steps,
        outliers_unread,
    }
}

/// The step spans read: those with a step number per (mode, node, worker), in start order,
/// and the window's as (index in the store, duration µs).
#[allow(clippy::type_complexity)]
fn read_step_spans(
    spans: &SpanStore,
    window: &Window,
) -> (BTreeMap<StepGroup, Vec<StepSpanRow>>, Vec<(usize, u64)>) {
    let from = window.start_us().unwrap_or(f64::NEG_INFINITY);
    let to = window.end_us().unwrap_or(f64::INFINITY);
    let mut groups: BTreeMap<StepGroup, Vec<StepSpanRow>> = BTreeMap::new();
    let mut windowed: Vec<(usize, u64)> = Vec::new();
    for (i, s) in spans.iter().enumerate() {
        let Some(mode) = is_step(&s) else { continue };
        if (s.start_us as f64) >= from && (s.start_us as f64) <= to {
            windowed.push((i, s.duration_us()));
        }
        if let Some(step) = s.step {
            groups
                .entry((mode.name().to_owned(), s.node.to_owned(), s.worker))
                .or_default()
                .push((step, s.start_us, seconds(s.duration_us())));
        }
    }
    (groups, windowed)
}

/// One series' step durations: the whole run from the digest's line (in µs), a window from the
/// spans read.
fn step_durations(
    digest: &StepDigest,
    rows: &[StepSpanRow],
    window: &Window,
    whole: bool,
) -> TimeSeries {
    let count = digest.durations.count() as usize;
    if whole {
        let kept = crate::downsample::line_points(
            &digest.line,
            window.start_us(),
            window.end_us(),
            window.budget(),
        );
        TimeSeries {
            t: kept.iter().map(|p| finite(seconds(p.0))).collect(),
            v: kept.iter().map(|p| finite(p.1 / 1e6)).collect(),
            total: count,
        }
    } else {
        let points: Vec<(u64, f64)> = rows.iter().map(|r| (r.1, r.2)).collect();
        TimeSeries {
            total: count,
            ..time_series(&points, window)
        }
    }
}

/// One (mode, node, worker)'s step series, with StepOutlier's outliers of it (`judged`); when
/// the node and mode have several workers (`shared`), an outlier is this worker's when one of
/// its step spans starts at the outlier's time with its step.
fn step_series(
    (mode, node, worker): &StepGroup,
    digest: &StepDigest,
    rows: &[StepSpanRow],
    data: TimeSeries,
    judged: Option<&smdebug_rules::profiler::StepSeriesDetails>,
    shared: bool,
) -> StepSeries {
    let outliers = judged
        .map(|j| {
            j.outlier_steps
                .iter()
                // This worker's outliers: rows are in start order (the store's).
                .filter(|o| {
                    !shared || {
                        let at = rows.partition_point(|r| r.1 < o.start_us);
                        rows[at..]
                            .iter()
                            .take_while(|r| r.1 == o.start_us)
                            .any(|r| r.0 == o.step)
                    }
                })
                .map(|o| Outlier {
                    step: o.step,
                    t: seconds(o.start_us),
                    duration: o.duration_s,
                })
                .collect()
        })
        .unwrap_or_default();
    StepSeries {
        mode: mode.clone(),
        node: node.clone(),
        worker: *worker,
        count: digest.durations.count() as usize,
        p50: digest
            .durations
            .quantile(0.5)
            .map(|us| us / 1e6)
            .and_then(finite),
        mean: digest.durations.mean().map(|us| us / 1e6).and_then(finite),
        outlier_limit: judged.and_then(|j| finite(j.outlier_limit_s)),
        step: steps_at(rows, &data),
        data,
        outliers,
    }
}

/// The step-duration histogram and its step count: of the whole run from the digests'
/// sketches, bins from the exact shortest step to the exact longest; of a window from its
/// spans.
fn step_histogram(
    digests: &[(StepGroup, &StepDigest)],
    windowed: &[(usize, u64)],
    whole: bool,
) -> (Option<Histogram>, usize) {
    if whole {
        let mut all = smdebug_analysis::stats::Sketch::default();
        for (_, digest) in digests {
            all.merge(&digest.durations);
        }
        let ends = [all.min(), all.max()]
            .into_iter()
            .flatten()
            .map(|us| (us, 0));
        let weighted = all.buckets().chain(ends).map(|(us, n)| (us / 1e6, n));
        (
            log_histogram_weighted(weighted, HISTOGRAM_BINS),
            all.count() as usize,
        )
    } else {
        let durations: Vec<f64> = windowed.iter().map(|w| seconds(w.1)).collect();
        (log_histogram(&durations, HISTOGRAM_BINS), windowed.len())
    }
}

/// The run's `n` slowest steps, from the kept slowest step spans, each found again among the
/// spans read for its phases.
fn slowest_of_run(d: &RunData, spans: &SpanStore, n: usize) -> Vec<StepRow> {
    d.step_spans
        .slowest()
        .iter()
        .take(n)
        .filter_map(|st| {
            let at = spans.first_starting_at(st.start_us);
            let node = d.step_spans.node(st.node);
            let found = spans
                .iter_from(at)
                .take_while(|s| s.start_us == st.start_us)
                .find(|s| {
                    s.end_us == st.end_us
                        && s.node == node
                        && s.worker == st.worker
                        && s.step == st.step
                        && is_step(s) == Some(st.mode)
                });
            found.map(|s| step_row(spans, &s))
        })
        .collect()
}

/// The window's `n` slowest steps: the slowest first; among equals, the earlier first.
fn slowest_of_window(spans: &SpanStore, windowed: &[(usize, u64)], n: usize) -> Vec<StepRow> {
    let mut by_duration = windowed.to_vec();
    by_duration.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    by_duration.truncate(n);
    by_duration
        .iter()
        .filter_map(|&(i, _)| spans.iter_from(i).next())
        .map(|st| step_row(spans, &st))
        .collect()
}

/// `values` (seconds) in `bins` bins of equal width on a log axis from the smallest to the
/// largest (a value of 0 counts in the first bin); one value, or all equal, in one bin a tenth
/// wide around them. `None` without values.
pub fn log_histogram(values: &[f64], bins: usize) -> Option<Histogram> {
    log_histogram_weighted(values.iter().map(|&v| (v, 1)), bins)
}

/// [`log_histogram`] of values each counted as many times as it says (a value counted 0 times
/// only stretches the bins to it).
pub fn log_histogram_weighted(
    values: impl Iterator<Item = (f64, u64)>,
    bins: usize,
) -> Option<Histogram> {
    let finite: Vec<(f64, u64)> = values.filter(|x| x.0.is_finite()).collect();
    let positive = finite.iter().map(|x| x.0).filter(|&x| x > 0.0);
    let lo = positive.clone().fold(f64::INFINITY, f64::min);
    let hi = positive.fold(0.0, f64::max);
    if finite.is_empty() {
        return None;
    }
    let (lo, hi, bins) = if !lo.is_finite() {
        // Every value is 0: one bin of a microsecond.
        (1e-6, 1e-6, 1)
    } else {
        (lo, hi, bins.max(1))
    };
    let (lo, hi, bins) = if hi <= lo * (1.0 + 1e-9) {
        (lo / 1.05, hi * 1.05, 1)
    } else {
        (lo, hi, bins)
    };
    let ratio = (hi / lo).ln() / bins as f64;
    let mut edges: Vec<f64> = (0..=bins).map(|i| lo * (ratio * i as f64).exp()).collect();
    // Exactly the extremes (no rounding leaves the longest step out).
    edges[0] = lo;
    edges[bins] = hi;
    let mut counts = vec![0u64; bins];
    for &(x, n) in &finite {
        let at = if x <= lo {
            0
        } else {
            (((x / lo).ln() / ratio) as usize).min(bins - 1)
        };
        // The log of a value right on an edge may fall on either side: the edges decide.
        let at = if at + 1 < bins && x >= edges[at + 1] {
            at + 1
        } else if at > 0 && x < edges[at] {
            at - 1
        } else {
            at
        };
        counts[at] += n;
    }
    Some(Histogram { edges, counts })
}

/// StepOutlier's typed details from the rules summary: `Ok(None)` when it did not run or
/// found nothing yet, an error when its recorded findings do not read (a summary written by
/// another version): the page says so rather than "no verdict yet".
fn step_outlier_details(
    rules: Option<&Summary>,
) -> Result<Option<StepOutlierDetails>, smdebug_rules::DecodeError> {
    let Some(status) = rules.and_then(|s| s.rule(StepOutlier::NAME)) else {
        return Ok(None);
    };
    Ok(status
        .profiler_details()?
        .and_then(|d| d.step_outliers().cloned()))
}

/// A step's time per phase: the spans of its node and worker within its step span (of its
/// step, when the span and the step both carry a step number), added up by phase.
fn step_row(spans: &SpanStore, st: &SpanRef<'_>) -> StepRow {
    let mut phases: BTreeMap<String, f64> = BTreeMap::new();
    for s in spans.iter_from(spans.first_starting_at(st.start_us)) {
        if s.start_us > st.end_us {
            break;
        }
        // A span of another step (steps that overlap) is not this step's, when both say.
        let same_step = s.step.is_none() || st.step.is_none() || s.step == st.step;
        if is_step(&s).is_none()
            && s.node == st.node
            && s.worker == st.worker
            && s.end_us <= st.end_us
            && same_step
        {
            *phases.entry(s.phase.to_owned()).or_default() += seconds(s.duration_us());
        }
    }
    let duration = seconds(st.duration_us());
    let other = duration - phases.values().sum::<f64>();
    StepRow {
        step: st.step,
        mode: is_step(st).map(|m| m.name()),
        node: st.node.to_owned(),
        worker: st.worker,
        start: seconds(st.start_us),
        duration,
        phases,
        other: other.max(0.0),
    }
}

/// Where a phase comes in a training step: data loading, forward, backward, optimizer, then
/// the others.
pub(crate) fn phase_rank(trace_name: &str) -> u8 {
    use smdebug_core::phase::Phase;
    match Phase::from_trace_name(trace_name) {
        Phase::DataLoading => 0,
        Phase::Forward => 1,
        Phase::Backward => 2,
        Phase::Optimizer => 3,
        _ => 4,
    }
}

/// Time per phase within each of `steps` (step spans in start order), and the phases seen in
/// a step's order ([`phase_rank`]).
fn step_phases(spans: &SpanStore, steps: &[SpanRef<'_>]) -> StepPhases {
    let steps: Vec<StepRow> = steps.iter().map(|st| step_row(spans, st)).collect();
    let mut phase_names: Vec<String> = Vec::new();
    for row in &steps {
        for p in row.phases.keys() {
            if !phase_names.contains(p) {
                phase_names.push(p.clone());
            }
        }
    }
    // In the order a step runs them: data loading, forward, backward, optimizer, then the
    // others by name.
    phase_names.sort_by_key(|p| (phase_rank(p), p.clone()));
    StepPhases {
        steps,
        phases: phase_names,
    }
}

/// Which of a run's scalars an answer is about: those whose names a regular expression
/// matches, or all of them (no expression, or an empty one).
struct ScalarFilter(Option<Regex>);

impl ScalarFilter {
    /// The filter of `regex`; fails with `bad regex: …` when it is not a regular expression.
    fn new(regex: Option<&str>) -> Result<ScalarFilter, String> {
        match regex.filter(|r| !r.is_empty()) {
            Some(r) => Ok(ScalarFilter(Some(
                Regex::new(r).map_err(|e| format!("bad regex: {e}"))?,
            ))),
            None => Ok(ScalarFilter(None)),
        }
    }

    /// The names of `d`'s scalars it lets through, in name order.
    fn names(&self, d: &RunData) -> Vec<String> {
        d.scalars
            .iter()
            .map(|(name, _)| name)
            .filter(|name| self.0.as_ref().is_none_or(|f| f.is_match(name)))
            .cloned()
            .collect()
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
    let filter = ScalarFilter::new(regex)?;
    // How each series of the page is drawn, and the steps to read again: of every series whose
    // window is finer than its buckets or cuts a slice.
    let plans: BTreeMap<(String, Mode), Plan> = {
        let d = run.data.read().expect("run data lock");
        let names = filter.names(&d);
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
    let names = filter.names(&d);
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
                    non_finite: crate::non_finite::NonFiniteSteps::of(
                        summary,
                        window.from,
                        window.to,
                    ),
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
    let filter = ScalarFilter::new(regex).map_err(EveryValueError::BadRegex)?;
    let names = filter.names(&run.data.read().expect("run data lock"));
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

#[cfg(test)]
mod tests {
    use super::log_histogram;

    #[test]
    fn step_durations_fall_in_log_spaced_bins_from_the_shortest_to_the_longest() {
        let values = [0.001, 0.002, 0.004, 0.008, 0.1, 1.0];
        let h = log_histogram(&values, 3).unwrap();
        assert_eq!(h.edges.len(), 4);
        assert_eq!(h.edges[0], 0.001);
        assert_eq!(h.edges[3], 1.0);
        // Each bin a decade: [1 ms, 10 ms), [10 ms, 100 ms), [100 ms, 1 s].
        assert!((h.edges[1] - 0.01).abs() < 1e-12 && (h.edges[2] - 0.1).abs() < 1e-12);
        assert_eq!(h.counts, [4, 0, 2]);
        // All equal: one bin around them; a 0 counts in the first bin; nothing: none.
        let one = log_histogram(&[0.5, 0.5], 30).unwrap();
        assert_eq!(one.counts, [2]);
        assert!(one.edges[0] < 0.5 && one.edges[1] > 0.5);
        assert_eq!(log_histogram(&[0.0, 0.1, 1.0], 2).unwrap().counts, [2, 1]);
        assert!(log_histogram(&[], 30).is_none());
    }
}
