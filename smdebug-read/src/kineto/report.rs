//! The serializable summary of Kineto traces and its text rendering.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use smdebug_core::text::escape_controls;

/// Summary of a set of trace files, one entry per file (= per rank).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceReport {
    /// Per-file summaries, sorted by rank (files with equal ranks keep their input order).
    pub ranks: Vec<RankSummary>,
}

/// Summary of one trace file.
///
/// Times are microseconds, the unit of Chrome-trace `ts`/`dur`. The first six fields are the
/// stable JSON contract; the ones after them add detail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankSummary {
    /// `distributedInfo.rank`, else the `N` of `rank-N` (or `rank_N`) in the file name, else 0.
    pub rank: u32,
    /// First start to last end over all complete (`"ph": "X"`) events of any category,
    /// including Kineto's `Trace` span of the profiling window.
    pub span_us: f64,
    /// Time at least one GPU activity (kernel, memcpy or memset) was running, summed over
    /// devices: per device, the length of the union of its activity intervals across all
    /// streams, so concurrent streams are not double counted.
    pub gpu_busy_us: f64,
    /// Summed over devices: the device's GPU activity span (first activity start to last
    /// activity end) minus its busy time.
    pub gpu_idle_us: f64,
    /// Events with category `kernel`, by name, total time descending.
    pub gpu_kernels: Vec<OpStats>,
    /// Events with category `cpu_op`, by name, total time descending. Durations are inclusive:
    /// a nested operator's time also counts in its parent's row.
    pub cpu_operators: Vec<OpStats>,
    /// The file this summary was read from.
    pub file: String,
    /// Events with category `gpu_memcpy`, by name (share is of total memcpy time).
    pub gpu_memcpy: Vec<OpStats>,
    /// Events with category `gpu_memset`, by name (share is of total memset time).
    pub gpu_memset: Vec<OpStats>,
    /// Events with category `user_annotation` (`record_function` ranges, `ProfilerStep#N`).
    pub user_annotations: Vec<OpStats>,
    /// Sum of all kernel durations (the denominator of kernel `share`).
    pub gpu_kernel_total_us: f64,
    /// Sum of all memcpy durations.
    pub gpu_memcpy_total_us: f64,
    /// Sum of all memset durations.
    pub gpu_memset_total_us: f64,
    /// Sum of all CPU operator durations (inclusive, see `cpu_operators`).
    pub cpu_operator_total_us: f64,
    /// Sum of all user annotation durations.
    pub user_annotation_total_us: f64,
    /// Per-device GPU figures, ascending device id; empty for a CPU-only trace.
    pub gpu_devices: Vec<GpuDeviceSummary>,
    /// Elements of `traceEvents`, of any phase.
    pub event_count: u64,
    /// Complete (`"ph": "X"`) events counted.
    pub complete_event_count: u64,
    /// Complete events dropped for a missing/non-numeric `ts`, a negative `dur`, or a `ts` or
    /// end beyond ±2^53 µs (not a time a profiler wrote).
    pub skipped_event_count: u64,
}

/// Statistics of one operator or kernel name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OpStats {
    /// The event name.
    pub name: String,
    /// Number of events with this name.
    pub count: u64,
    /// Sum of their durations.
    pub total_us: f64,
    /// `total_us / count`.
    pub mean_us: f64,
    /// Shortest duration.
    pub min_us: f64,
    /// Longest duration.
    pub max_us: f64,
    /// `total_us` over the total of the table's category (0 when that total is 0).
    pub share: f64,
}

/// GPU figures of one device within one trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuDeviceSummary {
    /// `args.device` of the device's events (else their `pid`; -1 when neither is numeric).
    pub device: i64,
    /// First activity start to last activity end on this device.
    pub span_us: f64,
    /// Length of the union of activity intervals on this device.
    pub busy_us: f64,
    /// `span_us - busy_us`.
    pub idle_us: f64,
    /// Number of disjoint busy intervals (idle gaps + 1).
    pub busy_intervals: u64,
}

/// Renders `report` as plain-text tables: per rank, its headline figures and the `top_n`
/// rows of each table (kernels, memcpy, memset, CPU operators, user annotations). Control
/// characters in names and file names are shown escaped, so a trace cannot drive the terminal.
pub fn render_text(report: &TraceReport, top_n: usize) -> String {
    let mut out = String::new();
    if report.ranks.is_empty() {
        out.push_str("no trace files\n");
    }
    for (i, r) in report.ranks.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        render_rank(&mut out, r, top_n);
    }
    out
}

fn render_rank(out: &mut String, r: &RankSummary, top_n: usize) {
    // Writing into a String cannot fail, so the fmt::Results below are ignored on purpose.
    let _ = writeln!(out, "== rank {} ({})", r.rank, escape_controls(&r.file));
    let _ = writeln!(
        out,
        "span {} | {} events ({} complete, {} skipped)",
        ms(r.span_us),
        r.event_count,
        r.complete_event_count,
        r.skipped_event_count
    );
    if r.gpu_devices.is_empty() {
        let _ = writeln!(out, "GPU: no GPU activity in this trace");
    } else {
        let gpu_span = r.gpu_busy_us + r.gpu_idle_us;
        let _ = writeln!(
            out,
            "GPU busy {} | idle {} | busy {:.1}% of the GPU active span ({} device{})",
            ms(r.gpu_busy_us),
            ms(r.gpu_idle_us),
            percent(r.gpu_busy_us, gpu_span),
            r.gpu_devices.len(),
            if r.gpu_devices.len() == 1 { "" } else { "s" }
        );
    }
    let _ = writeln!(
        out,
        "CPU operators {} (inclusive of nesting) vs GPU kernels {}, memcpy {}, memset {}",
        ms(r.cpu_operator_total_us),
        ms(r.gpu_kernel_total_us),
        ms(r.gpu_memcpy_total_us),
        ms(r.gpu_memset_total_us)
    );
    table(out, "GPU kernels", &r.gpu_kernels, top_n);
    table(out, "GPU memcpy", &r.gpu_memcpy, top_n);
    table(out, "GPU memset", &r.gpu_memset, top_n);
    table(out, "CPU operators", &r.cpu_operators, top_n);
    table(out, "user annotations", &r.user_annotations, top_n);
}

fn table(out: &mut String, title: &str, rows: &[OpStats], top_n: usize) {
    if rows.is_empty() {
        return;
    }
    let shown = rows.len().min(top_n);
    let _ = writeln!(out, "\ntop {shown} of {} {title} by total time", rows.len());
    let _ = writeln!(
        out,
        "{:>12} {:>8} {:>11} {:>11} {:>11} {:>6}  name",
        "total_ms", "count", "mean_us", "min_us", "max_us", "share"
    );
    for row in &rows[..shown] {
        let _ = writeln!(
            out,
            "{:>12.3} {:>8} {:>11.3} {:>11.3} {:>11.3} {:>5.1}%  {}",
            row.total_us / 1000.0,
            row.count,
            row.mean_us,
            row.min_us,
            row.max_us,
            row.share * 100.0,
            escape_controls(&shorten(&row.name, 100))
        );
    }
}

fn ms(us: f64) -> String {
    format!("{:.3} ms", us / 1000.0)
}

fn percent(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// Templated kernel names run to hundreds of characters; keep table rows on one screen line.
fn shorten(name: &str, max_chars: usize) -> String {
    if name.chars().count() <= max_chars {
        return name.to_owned();
    }
    let mut s: String = name.chars().take(max_chars.saturating_sub(1)).collect();
    s.push('…');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorten_is_char_safe() {
        assert_eq!(shorten("abc", 5), "abc");
        assert_eq!(shorten("äöüäöü", 4), "äöü…");
    }

    #[test]
    fn percent_of_zero_is_zero() {
        assert_eq!(percent(1.0, 0.0), 0.0);
        assert_eq!(percent(1.0, 4.0), 25.0);
    }
}
