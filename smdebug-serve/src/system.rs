//! The `/system` view: timelines by page and the per-core / per-GPU heatmap in bands, so that
//! a run with thousands of series answers a bounded response. Drawn from each series' line (at
//! most [`LINE_SLICES`](crate::profile_model::LINE_SLICES) slices, each its count, sum, lowest
//! and highest value with their times); a window finer than the lines is read again from the
//! run's system files (one read for the page), every sample of it.

use std::cmp::Ordering;
use std::collections::HashMap;

use smdebug_analysis::digest::{Line, SeriesDigest};
use smdebug_format::system::vocab;
use smdebug_read::profile::{MetricSeries, ProfileData};

use crate::api::{Window, time_series};
use crate::downsample::line_points;
use crate::natural::natural_cmp;
use crate::page::Page;
use crate::run::Run;
use crate::run_data::RunData;
use crate::series::{
    Heatmap, HeatmapRow, SystemPage, SystemSeries, TimeSeries, finite, is_timeline,
};

/// Heatmap rows at most: beyond, neighbouring rows are averaged into bands.
pub const HEATMAP_ROWS: usize = 256;

/// Columns of the heatmap.
const HEATMAP_COLUMNS: usize = 300;

/// A series' key: node, type, name, dimension.
type Key<'a> = (&'a str, &'a str, &'a str, &'a str);

fn key_of(m: &SeriesDigest) -> Key<'_> {
    (&m.node, &m.metric_type, &m.name, &m.dimension)
}

/// System timelines (downsampled over the window, one page of them: `series_total` says how
/// many there are, `next_offset` where the next page starts) and the per-core / per-GPU
/// heatmap (at most [`HEATMAP_ROWS`] rows). Blocking I/O when the window is read again.
pub fn system(run: &Run, window: &Window, page: Page) -> SystemPage {
    let wanted = {
        let d = run.data.read().expect("run data lock");
        finer_than_lines(&d, window)
    };
    let read = wanted.and_then(|(from, to)| {
        let storage = run.storage()?;
        crate::profile_model::read_system(storage, from, to)
            .map_err(|e| log::warn!("smdebug serve: {}: system metrics: {e}", run.name))
            .ok()
    });
    let read_series: HashMap<Key<'_>, &MetricSeries> = read
        .iter()
        .flat_map(ProfileData::metrics)
        .map(|m| {
            (
                (
                    m.node.as_str(),
                    m.metric_type.as_str(),
                    m.name.as_str(),
                    m.dimension.as_str(),
                ),
                m,
            )
        })
        .collect();
    let d = run.data.read().expect("run data lock");
    let mut timelines: Vec<&SeriesDigest> = d
        .digest
        .series()
        .filter(|m| is_timeline(&m.metric_type, &m.name, &m.dimension))
        .collect();
    timelines.sort_by(|a, b| metric_order(a, b));
    let (series, total) = page.select(timelines.into_iter(), |m| {
        let count = m.values.count() as usize;
        let data = match (&read, read_series.get(&key_of(m))) {
            (Some(_), Some(points)) => TimeSeries {
                total: count,
                ..time_series(&points.points, window)
            },
            (Some(_), None) => TimeSeries {
                t: Vec::new(),
                v: Vec::new(),
                total: count,
            },
            (None, _) => line_series(&m.line, window, count),
        };
        SystemSeries {
            node: m.node.clone(),
            r#type: m.metric_type.clone(),
            name: m.name.clone(),
            dimension: m.dimension.clone(),
            unit: m.unit(),
            data,
        }
    });
    SystemPage {
        next_offset: page.next_offset(series.len(), total),
        series,
        series_total: total,
        offset: page.offset,
        heatmap: heatmap(&d, window, read.as_ref().map(|_| &read_series)),
    }
}

/// The window `(from, to)` in µs when it is finer than the timelines' lines: narrower than
/// half the point budget of their slices, and some slice of it holds more than two samples
/// (a slice of one or two samples draws them exactly); `None` when the lines draw it.
fn finer_than_lines(d: &RunData, window: &Window) -> Option<(u64, u64)> {
    if window.from.is_none() && window.to.is_none() {
        return None;
    }
    let (start, end) = d.time_range()?;
    let from = window.start_us().map_or(start, |f| f.max(0.0) as u64);
    let to = window.end_us().map_or(end, |t| t.max(0.0) as u64);
    if to < from {
        return None;
    }
    let slices_wanted = (window.budget() / 2) as u64;
    let lines = d.digest.series().map(|m| &m.line);
    let mut coarse = false;
    for line in lines {
        let width = line.width_us();
        if (to - from) / width.max(1) >= slices_wanted {
            continue;
        }
        if line.slices_within(from, to).any(|s| s.count > 2) {
            coarse = true;
            break;
        }
    }
    coarse.then_some((from, to))
}

/// A series drawn from its line over the window ([`line_points`]).
pub(crate) fn line_series(line: &Line, window: &Window, total: usize) -> TimeSeries {
    let kept = line_points(line, window.start_us(), window.end_us(), window.budget());
    TimeSeries {
        t: kept.iter().map(|p| finite(p.0 as f64 / 1e6)).collect(),
        v: kept.iter().map(|p| finite(p.1)).collect(),
        total,
    }
}

/// One row per CPU core and per GPU (utilization), the window cut into
/// [`HEATMAP_COLUMNS`] columns of mean values: from the samples read again when the window was
/// (`read`), else from the lines' slices (a slice counted whole in the column of its middle).
fn heatmap(
    d: &RunData,
    window: &Window,
    read: Option<&HashMap<Key<'_>, &MetricSeries>>,
) -> Heatmap {
    let mut rows: Vec<&SeriesDigest> = d
        .digest
        .series()
        .filter(|m| {
            (m.metric_type == vocab::TYPE_CPU
                && m.name != vocab::CPU_TOTAL
                && m.dimension == vocab::CPU_UTILIZATION)
                || (m.metric_type == vocab::TYPE_GPU && m.dimension == vocab::GPU_UTILIZATION)
        })
        .collect();
    // cpu0, cpu1, …, cpu10 (not cpu0, cpu1, cpu10), then the GPUs, per node.
    rows.sort_by(|a, b| metric_order(a, b));
    let Some((start, end)) = d.time_range() else {
        return Heatmap::default();
    };
    let from = window.start_us().unwrap_or(start as f64);
    let to = window.end_us().unwrap_or(end as f64).max(from + 1.0);
    let columns = HEATMAP_COLUMNS;
    let width = (to - from) / columns as f64;
    let column = |at: f64| (((at - from) / width) as usize).min(columns - 1);
    // Many rows (thousands of cores or GPUs) are averaged in bands of neighbours.
    let band = rows.len().div_ceil(HEATMAP_ROWS).max(1);
    let out = rows
        .chunks(band)
        .map(|members| {
            let mut sum = vec![0.0; columns];
            let mut count = vec![0u64; columns];
            for m in members {
                match read.map(|r| r.get(&key_of(m))) {
                    Some(Some(series)) => {
                        let lo = series.points.partition_point(|p| (p.0 as f64) < from);
                        for p in series.points.range(lo..series.points.len()) {
                            let at = p.0 as f64;
                            if at > to {
                                break;
                            }
                            sum[column(at)] += p.1;
                            count[column(at)] += 1;
                        }
                    }
                    Some(None) => {}
                    None => {
                        let (a, z) = (from.max(0.0) as u64, to.max(0.0) as u64);
                        for s in m.line.slices_within(a, z) {
                            let at = s.middle_us() as f64;
                            if at < from || at > to {
                                continue;
                            }
                            sum[column(at)] += s.sum;
                            count[column(at)] += s.count;
                        }
                    }
                }
            }
            let values = sum
                .iter()
                .zip(&count)
                .map(|(s, &c)| (c > 0).then(|| finite(s / c as f64)).flatten())
                .collect();
            let first = members[0];
            let label = match members {
                [_] => format!("{} {}", first.node, first.name),
                [.., last] => format!(
                    "{} {} … {} {} (mean of {})",
                    first.node,
                    first.name,
                    last.node,
                    last.name,
                    members.len()
                ),
                [] => String::new(),
            };
            HeatmapRow { label, values }
        })
        .collect();
    Heatmap {
        rows: out,
        columns,
        from: Some(from / 1e6),
        to: Some(to / 1e6),
        row_total: rows.len(),
        band,
    }
}

/// Metrics by node, type, name and dimension, names compared as people count
/// ([`natural_cmp`]: `cpu2` before `cpu10`).
fn metric_order(a: &SeriesDigest, b: &SeriesDigest) -> Ordering {
    natural_cmp(&a.node, &b.node)
        .then_with(|| a.metric_type.cmp(&b.metric_type))
        .then_with(|| natural_cmp(&a.name, &b.name))
        .then_with(|| a.dimension.cmp(&b.dimension))
}
