//! Formatting and small helpers over time series and intervals.

use smdebug_core::Mode;
use smdebug_format::system::vocab;

use crate::charts::clock;
use crate::html::Cell;
use crate::stats::Summary;
use smdebug_analysis::digest::SeriesDigest;
use smdebug_analysis::stats::SKETCH_RELATIVE_ERROR;

/// The columns [`duration_cells`] fills.
pub(super) const DURATION_COLUMNS: [&str; 6] = [
    "total s",
    "share of step time",
    "mean ms",
    "p50 ms",
    "p95 ms",
    "max ms",
];

/// A row's cells for a set of span durations (µs): their total in seconds, their share of
/// the step time (`-` when none applies), and their mean, p50, p95 and max in milliseconds.
pub(super) fn duration_cells(sum: &Summary, total_us: f64, share: Option<f64>) -> [Cell; 6] {
    [
        Cell::num(format!("{:.3}", total_us / 1e6)),
        Cell::num(share.map_or("-".into(), pct)),
        Cell::num(ms(sum.mean)),
        Cell::num(ms(sum.p50)),
        Cell::num(ms(sum.p95)),
        Cell::num(ms(sum.max)),
    ]
}

pub(super) fn fmt_secs(s: f64) -> String {
    if s >= 120.0 {
        format!("{s:.1} s ({})", clock(s))
    } else {
        format!("{s:.3} s")
    }
}

pub(super) fn ms(us: f64) -> String {
    format!("{:.3}", us / 1000.0)
}

pub(super) fn pct(share: f64) -> String {
    if share.is_finite() {
        format!("{:.1}%", share * 100.0)
    } else {
        "-".to_owned()
    }
}

pub(super) fn fmt_value(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return "-".to_owned();
    }
    if unit == "B" || unit == "B/s" {
        let suffix = if unit == "B/s" { "/s" } else { "" };
        let a = v.abs();
        let (scaled, prefix) = if a >= 1024f64.powi(3) {
            (v / 1024f64.powi(3), "GiB")
        } else if a >= 1024f64.powi(2) {
            (v / 1024f64.powi(2), "MiB")
        } else if a >= 1024.0 {
            (v / 1024.0, "KiB")
        } else {
            (v, "B")
        };
        format!("{scaled:.2} {prefix}{suffix}")
    } else {
        format!("{v:.2}")
    }
}

pub(super) fn type_rank(t: &str) -> u8 {
    match t {
        vocab::TYPE_CPU => 0,
        vocab::TYPE_GPU => 1,
        vocab::TYPE_MEMORY => 2,
        vocab::TYPE_IO => 3,
        vocab::TYPE_NETWORK => 4,
        vocab::TYPE_PROCESS => 5,
        _ => 6,
    }
}

pub(super) fn metric_label(s: &SeriesDigest) -> String {
    let parts: Vec<&str> = [s.name.as_str(), s.dimension.as_str()]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect();
    format!("{}: {}", s.metric_type, parts.join(" "))
}

pub(super) fn mode_name(mode: Option<Mode>) -> &'static str {
    mode.map_or("unknown mode", Mode::name)
}

/// The sentence a table or chart of percentiles carries: what is exact and what is within the
/// sketch's bound.
pub(super) fn percentile_bound() -> String {
    format!(
        "Counts, sums, means, minima and maxima are exact; a percentile pN is the value at rank \
         round(N% · (count − 1)) of the sorted values within {:.2}% (a quantile sketch kept as \
         the data were read).",
        SKETCH_RELATIVE_ERROR * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_values() {
        let unit = |t: &str, n: &str, d: &str| vocab::unit(t, n, d);
        assert_eq!(unit("gpu", "gpu0", "GPUMemoryUtilization"), "%");
        assert_eq!(unit("i/o", "ReadThroughputInBytesPerSecond", ""), "B/s");
        assert_eq!(unit("gpu", "gpu0", "GPUMemoryUsedBytes"), "B");
        assert_eq!(fmt_value(3.0 * 1024.0 * 1024.0, "B/s"), "3.00 MiB/s");
    }
}
