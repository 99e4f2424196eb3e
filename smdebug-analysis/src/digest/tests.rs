use super::*;
use crate::stats::{SKETCH_RELATIVE_ERROR, Summary, histogram};

fn span(phase: &str, start_us: u64, end_us: u64, worker: u32, step: u64) -> Span {
    Span {
        phase: phase.to_owned(),
        name: "s".to_owned(),
        start_us,
        end_us,
        node: "algo-1".to_owned(),
        worker: Some(worker),
        step: Some(step),
        mode: Some(Mode::Train),
        args: Default::default(),
    }
}

fn samples(n: u64) -> Vec<SystemSample> {
    (0..n)
        .map(|i| SystemSample {
            metric_type: "gpu".into(),
            name: "gpu0".into(),
            dimension: "GPUUtilization".into(),
            value: ((i * 37) % 101) as f64 + 0.5 * (i % 2) as f64,
            node_id: "algo-1".into(),
            timestamp: 1_700_000_000.0 + i as f64 * 0.1,
        })
        .collect()
}

#[test]
fn a_digest_has_the_exact_figures_of_its_data_and_quantiles_within_the_bound() {
    let records = samples(5_000);
    let mut digest = ProfileDigest::default();
    let grouped: SystemSamples = records.iter().collect();
    digest.add_system_samples(&grouped);
    let mut one_by_one = ProfileDigest::default();
    for chunk in records.rchunks(333) {
        one_by_one.add_samples(chunk);
    }
    assert_eq!(
        digest, one_by_one,
        "the same whatever the order and batches"
    );
    let s = digest.series().next().unwrap();
    let values: Vec<f64> = records.iter().map(|r| r.value).collect();
    let exact = Summary::of(values.iter().copied()).unwrap();
    let got = s.values.summary().unwrap();
    assert_eq!(
        (got.count, got.min, got.max),
        (exact.count, exact.min, exact.max)
    );
    assert!((got.mean - exact.mean).abs() < 1e-9);
    let mut sorted = values.clone();
    sorted.sort_by(f64::total_cmp);
    for (q, v) in [(0.5, got.p50), (0.95, got.p95), (0.99, got.p99)] {
        let at_rank = sorted[(q * (sorted.len() - 1) as f64).round() as usize];
        assert!(
            (v - at_rank).abs() <= SKETCH_RELATIVE_ERROR * at_rank,
            "{q}: {v} vs {at_rank}"
        );
    }
    for bins in [10, 50] {
        assert_eq!(
            s.percent_histogram(bins).unwrap(),
            histogram(values.iter().copied(), bins, 0.0, 100.0)
        );
    }
    assert!(s.line.slices().len() <= LINE_SLICES);
    assert_eq!(digest.sample_count(), 5_000);

    let spans: Vec<Span> = (0..2_000u64)
        .flat_map(|i| {
            let t = 1_700_000_000_000_000 + i * 30_000;
            let d = 20_000 + (i * 7919) % 5_000;
            [
                span("Step:ModeKeys.TRAIN", t, t + d, (i % 2) as u32, i),
                span("Forward", t + 10, t + 10 + d / 3, (i % 2) as u32, i),
            ]
        })
        .collect();
    digest.add_spans(&spans);
    assert_eq!(digest.span_count(), 4_000);
    assert_eq!(digest.steps().len(), 2);
    let w0 = &digest.steps()[&("algo-1".to_owned(), Some(0), Some(Mode::Train))];
    let exact_w0: Vec<f64> = spans
        .iter()
        .filter(|s| s.phase.starts_with("Step") && s.worker == Some(0))
        .map(|s| s.duration_us() as f64)
        .collect();
    assert_eq!(w0.durations.count(), exact_w0.len() as u64);
    assert_eq!(w0.durations.sum(), exact_w0.iter().sum::<f64>());
    assert_eq!(digest.phases()["Forward"].durations.count(), 2_000);
    let (t0, t1) = digest.time_range().unwrap();
    assert_eq!(t0, 1_700_000_000_000_000);
    assert!(t1 >= 1_700_000_000_000_000 + 1_999 * 30_000 + 20_000);
}

#[test]
fn phases_beyond_the_limit_are_pooled() {
    let mut digest = ProfileDigest::default();
    let spans: Vec<Span> = (0..(MAX_PHASES as u64 + 10))
        .map(|i| span(&format!("custom{i}"), 10, 20, 0, i))
        .collect();
    digest.add_spans(&spans);
    assert_eq!(digest.phases().len(), MAX_PHASES + 1);
    assert_eq!(digest.phases()[OTHER_PHASES].durations.count(), 10);
    assert_eq!(digest.pooled_phases(), 10);
}
