//! Formatting and small helpers over time series and intervals.

use smdebug_core::Mode;
use smdebug_format::system::vocab;

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

/// At most this many fields in a [`Cell::Fields`] drawn from JSON; the rest are counted.
const MAX_FIELDS: usize = 40;

/// A JSON value (a rule's parameters, a user rule's details) as named fields, one a scalar:
/// nested objects by their dotted path (`per_class.cat`), lists of scalars joined (`a, b`),
/// lists of objects by index (`judged[0].class`). A scalar that is not in an object is the
/// field `value`; null and an empty object give none.
pub(super) fn json_fields(value: &serde_json::Value) -> Vec<(String, String)> {
    fn scalar(v: &serde_json::Value) -> Option<String> {
        use serde_json::Value::*;
        match v {
            Null => Some("none".into()),
            Bool(b) => Some(b.to_string()),
            Number(n) => Some(n.to_string()),
            String(s) => Some(s.clone()),
            Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => Some(
                items
                    .iter()
                    .filter_map(scalar)
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            _ => None,
        }
    }
    fn walk(path: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
        if let Some(s) = scalar(v) {
            out.push((path.to_owned(), s));
            return;
        }
        let join = |key: &str| {
            if path.is_empty() {
                key.to_owned()
            } else {
                format!("{path}.{key}")
            }
        };
        match v {
            serde_json::Value::Object(m) => {
                for (k, item) in m {
                    walk(&join(k), item, out);
                }
            }
            serde_json::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(&format!("{path}[{i}]"), item, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    match value {
        serde_json::Value::Null => {}
        serde_json::Value::Object(_) | serde_json::Value::Array(_) => walk("", value, &mut out),
        other => walk("value", other, &mut out),
    }
    if out.len() > MAX_FIELDS {
        let more = out.len() - MAX_FIELDS;
        out.truncate(MAX_FIELDS);
        out.push(("…".into(), format!("{more} more fields")));
    }
    out
}

/// A rule's evidence, data warnings and own details (a user rule's) as named fields: each
/// measurement as `evidence` (`step 3: loss (TRAIN) mean = 2.31 (limit 1.5)`), each warning,
/// then the details' fields.
pub(super) fn status_fields(status: &smdebug_rules::RuleStatus) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = status
        .evidence
        .iter()
        .map(|e| {
            let limit = e.limit.map_or(String::new(), |l| format!(" (limit {l})"));
            (
                "evidence".to_owned(),
                format!(
                    "{}: {} {} = {}{limit}",
                    e.step_ref(),
                    e.tensor,
                    e.measure,
                    e.value
                ),
            )
        })
        .collect();
    out.extend(
        status
            .warnings
            .iter()
            .map(|w| ("warning".to_owned(), w.clone())),
    );
    out.extend(json_fields(&status.details.to_value()));
    out
}

#[cfg(test)]
mod fields_tests {
    use super::*;

    #[test]
    fn json_reads_as_one_field_a_scalar() {
        let v = serde_json::json!({
            "threshold": 0.5,
            "names": ["a", "b"],
            "per_class": {"cat": 3, "dog": null},
            "judged": [{"class": 1, "ok": true}],
        });
        let fields = json_fields(&v);
        let get = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("threshold"), Some("0.5"));
        assert_eq!(get("names"), Some("a, b"));
        assert_eq!(get("per_class.cat"), Some("3"));
        assert_eq!(get("per_class.dog"), Some("none"));
        assert_eq!(get("judged[0].class"), Some("1"));
        assert_eq!(get("judged[0].ok"), Some("true"));
        assert!(json_fields(&serde_json::Value::Null).is_empty());
        let many =
            serde_json::Value::Array((0..50).map(|i| serde_json::json!({ "i": i })).collect());
        let fields = json_fields(&many);
        assert_eq!(fields.len(), MAX_FIELDS + 1);
        assert_eq!(fields[MAX_FIELDS].1, "10 more fields");
    }
}
