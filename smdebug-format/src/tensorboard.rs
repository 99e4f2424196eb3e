//! TensorBoard summaries: `simple_value` scalars and `HistogramProto` histograms with
//! TensorFlow's default exponential buckets.
//!
//! A TensorBoard event file starts with an event holding `file_version = "brain.Event:2"`, and
//! every record must carry the real payload CRC: TensorBoard stops reading a file (silently) at
//! the first record whose CRC does not match.

use std::sync::OnceLock;

use prost::Message;

use super::proto::{Event, HistogramProto, Summary, event, summary};

/// The `file_version` of TensorBoard's first record.
pub const FILE_VERSION: &str = "brain.Event:2";

/// The first event of a TensorBoard file.
pub fn file_version_event(wall_time: f64) -> Event {
    Event {
        wall_time,
        step: 0,
        what: Some(event::What::FileVersion(FILE_VERSION.to_string())),
    }
}

/// A tag TensorBoard accepts: characters outside `[-/\w.]` become `_`, leading `/` go (what
/// TensorFlow's and smdebug's `clean_tag` do).
pub fn clean_tag(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '/' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    cleaned.trim_start_matches('/').to_string()
}

fn summary_event(wall_time: f64, step: u64, value: summary::Value) -> Event {
    Event {
        wall_time,
        step: step as i64,
        what: Some(event::What::Summary(Summary { value: vec![value] })),
    }
}

/// A scalar summary event (`simple_value`).
pub fn scalar_event(tag: &str, value: f32, step: u64, wall_time: f64) -> Event {
    summary_event(
        wall_time,
        step,
        summary::Value {
            tag: clean_tag(tag),
            value: Some(summary::value::Value::SimpleValue(value)),
            ..Default::default()
        },
    )
}

/// A histogram summary event.
pub fn histogram_event(tag: &str, histogram: HistogramProto, step: u64, wall_time: f64) -> Event {
    summary_event(
        wall_time,
        step,
        summary::Value {
            tag: clean_tag(tag),
            value: Some(summary::value::Value::Histo(histogram)),
            ..Default::default()
        },
    )
}

/// Serializes an event (for framing with [`super::record::write_record`]).
pub fn encode_event(event: &Event) -> Vec<u8> {
    event.encode_to_vec()
}

/// TensorFlow's default histogram bucket limits (`histogram.cc`): ±1e-12·1.1^k up to 1e20,
/// zero, and ±f64::MAX at the ends.
pub fn default_bucket_limits() -> &'static [f64] {
    static LIMITS: OnceLock<Vec<f64>> = OnceLock::new();
    LIMITS.get_or_init(|| {
        let mut pos = Vec::new();
        let mut v = 1.0e-12f64;
        while v < 1.0e20 {
            pos.push(v);
            v *= 1.1;
        }
        pos.push(f64::MAX);
        let mut limits: Vec<f64> = pos.iter().rev().map(|v| -v).collect();
        limits.push(0.0);
        limits.extend_from_slice(&pos);
        limits
    })
}

/// A histogram of `values` with TensorFlow's default buckets, encoded the way TensorFlow's
/// `Histogram::EncodeToProto(preserve_zero_buckets = false)` does: runs of empty buckets are
/// collapsed into one. Non-finite values are left out (TensorBoard cannot place them).
/// `None` when no value is finite.
pub fn histogram(values: impl IntoIterator<Item = f64>) -> Option<HistogramProto> {
    let limits = default_bucket_limits();
    let mut counts = vec![0f64; limits.len()];
    let (mut min, mut max, mut num, mut sum, mut sum_squares) =
        (f64::INFINITY, f64::NEG_INFINITY, 0f64, 0f64, 0f64);
    for v in values.into_iter().filter(|v| v.is_finite()) {
        // Bucket i holds [limits[i-1], limits[i]): the first limit greater than v.
        let b = limits.partition_point(|&l| l <= v).min(limits.len() - 1);
        counts[b] += 1.0;
        min = min.min(v);
        max = max.max(v);
        num += 1.0;
        sum += v;
        sum_squares += v * v;
    }
    if num == 0.0 {
        return None;
    }
    let mut bucket_limit = Vec::new();
    let mut bucket = Vec::new();
    let mut i = 0;
    while i < counts.len() {
        let mut end = limits[i];
        let mut count = counts[i];
        i += 1;
        if count <= 0.0 {
            while i < counts.len() && counts[i] <= 0.0 {
                end = limits[i];
                count = counts[i];
                i += 1;
            }
        }
        bucket_limit.push(end);
        bucket.push(count);
    }
    Some(HistogramProto {
        min,
        max,
        num,
        sum,
        sum_squares,
        bucket_limit,
        bucket,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_counts_every_finite_value_once() {
        let h = histogram([0.5, -1.0, 2.0, 2.0, f64::NAN, 0.0]).unwrap();
        assert_eq!(h.num, 5.0);
        assert_eq!(h.bucket.iter().sum::<f64>(), 5.0);
        assert_eq!((h.min, h.max), (-1.0, 2.0));
        // Limits increase and each non-empty bucket's limit is above its values.
        assert!(h.bucket_limit.windows(2).all(|w| w[0] < w[1]));
        assert!(
            h.bucket.len() < 30,
            "empty runs collapse: {} buckets",
            h.bucket.len()
        );
    }

    #[test]
    fn tags_are_cleaned_like_tensorflow() {
        assert_eq!(clean_tag("/fc1.weight:0 (grad)"), "fc1.weight_0__grad_");
    }
}
