//! The one percentile of the profiler rules, the debugging rules' selections and the report.

/// The `p`-th percentile (0–100, clamped) of sorted values, interpolating linearly between the
/// two nearest ranks (NumPy's default `linear` method): rank `p/100 · (n−1)`. NaN for no values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else {
        return f64::NAN;
    };
    let rank = (p.clamp(0.0, 100.0) / 100.0) * last as f64;
    let low = rank.floor() as usize;
    let high = rank.ceil() as usize;
    sorted[low] + (sorted[high] - sorted[low]) * (rank - low as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_match_numpy_linear() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        // numpy.percentile(range(1, 11), [50, 95, 99]) == [5.5, 9.55, 9.91]
        assert!((percentile(&v, 50.0) - 5.5).abs() < 1e-12);
        assert!((percentile(&v, 95.0) - 9.55).abs() < 1e-12);
        assert!((percentile(&v, 99.0) - 9.91).abs() < 1e-12);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 100.0), 10.0);
        assert_eq!(percentile(&v, 150.0), 10.0);
        assert_eq!(percentile(&[7.0], 30.0), 7.0);
        assert!(percentile(&[], 50.0).is_nan());
    }
}
