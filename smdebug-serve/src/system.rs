//! The `/system` view: timelines by page and the per-core / per-GPU heatmap in bands, so that
//! a run with thousands of series answers a bounded response.

use std::cmp::Ordering;

use smdebug_format::system::vocab;
use smdebug_read::profile::MetricSeries;

use crate::api::{Window, time_series};
use crate::natural::natural_cmp;
use crate::page::Page;
use crate::run::Run;
use crate::run_data::RunData;
use crate::series::{Heatmap, HeatmapRow, SystemPage, SystemSeries, finite, is_timeline};

/// Heatmap rows at most: beyond, neighbouring rows are averaged into bands.
pub const HEATMAP_ROWS: usize = 256;

/// System timelines (downsampled over the window, one page of them: `series_total` says how
/// many there are, `next_offset` where the next page starts) and the per-core / per-GPU
/// heatmap (at most [`HEATMAP_ROWS`] rows).
pub fn system(run: &Run, window: &Window, page: Page) -> SystemPage {
    let d = run.data.read().expect("run data lock");
    let mut timelines: Vec<&MetricSeries> = d
        .profile
        .metrics()
        .filter(|m| is_timeline(&m.metric_type, &m.name, &m.dimension))
        .collect();
    timelines.sort_by(|a, b| metric_order(a, b));
    let (series, total) = page.select(timelines.into_iter(), |m| SystemSeries {
        node: m.node.clone(),
        r#type: m.metric_type.clone(),
        name: m.name.clone(),
        dimension: m.dimension.clone(),
        unit: m.unit(),
        data: time_series(&m.points, window),
    });
    SystemPage {
        next_offset: page.next_offset(series.len(), total),
        series,
        series_total: total,
        offset: page.offset,
        heatmap: heatmap(&d, window),
    }
}

/// One row per CPU core and per GPU (utilization), the window cut into at most 300 columns of
/// mean values.
fn heatmap(d: &RunData, window: &Window) -> Heatmap {
    let mut rows: Vec<&MetricSeries> = d
        .profile
        .metrics()
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
    let columns = 300usize;
    let width = (to - from) / columns as f64;
    // Many rows (thousands of cores or GPUs) are averaged in bands of neighbours.
    let band = rows.len().div_ceil(HEATMAP_ROWS).max(1);
    let out = rows
        .chunks(band)
        .map(|members| {
            let mut sum = vec![0.0; columns];
            let mut count = vec![0u32; columns];
            for m in members {
                let lo = m.points.partition_point(|p| (p.0 as f64) < from);
                for p in m.points.range(lo..m.points.len()) {
                    let at = p.0 as f64;
                    if at > to {
                        break;
                    }
                    let c = (((at - from) / width) as usize).min(columns - 1);
                    sum[c] += p.1;
                    count[c] += 1;
                }
            }
            let values = sum
                .iter()
                .zip(&count)
                .map(|(s, &c)| (c > 0).then(|| finite(s / f64::from(c))).flatten())
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
fn metric_order(a: &MetricSeries, b: &MetricSeries) -> Ordering {
    natural_cmp(&a.node, &b.node)
        .then_with(|| a.metric_type.cmp(&b.metric_type))
        .then_with(|| natural_cmp(&a.name, &b.name))
        .then_with(|| a.dimension.cmp(&b.dimension))
}
