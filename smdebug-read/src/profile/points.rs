//! A system metric's points held compactly: [`Points`], `(timestamp µs, value)` in time order,
//! 8 bytes a point where a `Vec<(u64, f64)>` takes 16, and exactly the points taken in.
//!
//! - **Times** are `u32` offsets in µs from a base: a series keeps one base per stretch of 71
//!   minutes (`u32::MAX` µs), so 4 bytes a point.
//! - **Values** are decimal numbers while every value is one exactly: `m / 10^e` with `m` an
//!   `i32` and `e` at most 6, the same `f64` to the bit (a sampler writes `12.5`, `40.23`,
//!   `1.2e8`; `m / 10^e` of exact integers is correctly rounded, as is reading the decimal
//!   text, so both give the double nearest the decimal). 4 bytes a value; at the first value
//!   that is not such a decimal the series' values become `f64`s, 8 bytes.

use std::ops::Range;

/// Powers of ten an `f64` holds exactly, for the decimal exponents used.
const TEN_TO: [f64; 7] = [1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6];

/// Timestamps as `u32` offsets from the base of their stretch.
#[derive(Clone, Debug, Default)]
struct Times {
    /// `(base µs, index of the stretch's first point)`, in order.
    stretches: Vec<(u64, usize)>,
    offsets: Vec<u32>,
}

impl Times {
    fn get(&self, i: usize) -> u64 {
        let s = self.stretches.partition_point(|&(_, at)| at <= i) - 1;
        self.stretches[s].0 + u64::from(self.offsets[i])
    }

    /// Appends `t`, not before the last time.
    fn push(&mut self, t: u64) {
        let offset = self
            .stretches
            .last()
            .and_then(|&(base, _)| u32::try_from(t.checked_sub(base)?).ok());
        match offset {
            Some(offset) => self.offsets.push(offset),
            None => {
                self.stretches.push((t, self.offsets.len()));
                self.offsets.push(0);
            }
        }
    }
}

/// Values as decimals `m / 10^e` while each is one exactly, else `f64`.
#[derive(Clone, Debug)]
enum Values {
    Decimal {
        exponent: usize,
        mantissas: Vec<i32>,
    },
    Wide(Vec<f64>),
}

impl Default for Values {
    fn default() -> Values {
        Values::Decimal {
            exponent: 0,
            mantissas: Vec::new(),
        }
    }
}

/// `v` as `m / 10^exponent` exactly, when there is such an `i32` `m`.
fn mantissa(v: f64, exponent: usize) -> Option<i32> {
    let scaled = (v * TEN_TO[exponent]).round();
    // NaN and the infinities fail this too.
    if scaled.abs().partial_cmp(&f64::from(i32::MAX)) != Some(std::cmp::Ordering::Less) {
        return None;
    }
    let m = scaled as i32;
    (decimal(m, exponent).to_bits() == v.to_bits()).then_some(m)
}

fn decimal(m: i32, exponent: usize) -> f64 {
    f64::from(m) / TEN_TO[exponent]
}

impl Values {
    fn get(&self, i: usize) -> f64 {
        match self {
            Values::Decimal {
                exponent,
                mantissas,
            } => decimal(mantissas[i], *exponent),
            Values::Wide(v) => v[i],
        }
    }

    fn push(&mut self, v: f64) {
        if let Values::Decimal {
            exponent,
            mantissas,
        } = self
        {
            if let Some(m) = mantissa(v, *exponent) {
                mantissas.push(m);
                return;
            }
            // A finer exponent that holds `v` and every value held (each scaled exactly).
            for finer in *exponent + 1..TEN_TO.len() {
                let Some(m) = mantissa(v, finer) else {
                    continue;
                };
                let factor = 10i32.pow((finer - *exponent) as u32);
                let scaled: Option<Vec<i32>> =
                    mantissas.iter().map(|&x| x.checked_mul(factor)).collect();
                if let Some(mut scaled) = scaled {
                    scaled.reserve(mantissas.capacity().saturating_sub(scaled.len()));
                    scaled.push(m);
                    *mantissas = scaled;
                    *exponent = finer;
                    return;
                }
                break;
            }
            let mut wide = Vec::with_capacity(mantissas.capacity().max(mantissas.len() + 1));
            wide.extend(mantissas.iter().map(|&m| decimal(m, *exponent)));
            *self = Values::Wide(wide);
        }
        if let Values::Wide(values) = self {
            values.push(v);
        }
    }

    fn reserve_exact(&mut self, n: usize) {
        match self {
            Values::Decimal { mantissas, .. } => mantissas.reserve_exact(n),
            Values::Wide(v) => v.reserve_exact(n),
        }
    }

    fn truncate(&mut self, len: usize) {
        match self {
            Values::Decimal { mantissas, .. } => mantissas.truncate(len),
            Values::Wide(v) => v.truncate(len),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Values::Decimal { mantissas, .. } => mantissas.capacity() * 4,
            Values::Wide(v) => v.capacity() * 8,
        }
    }
}

/// One series' points, `(timestamp µs since the epoch, value)`, ordered by time (then value).
/// See the module docs for how they are held.
#[derive(Clone, Debug, Default)]
pub struct Points {
    times: Times,
    values: Values,
}

impl Points {
    /// How many points.
    pub fn len(&self) -> usize {
        self.times.offsets.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th point; panics past the end, as indexing does.
    pub fn get(&self, i: usize) -> (u64, f64) {
        assert!(i < self.len(), "point {i} of {}", self.len());
        (self.times.get(i), self.values.get(i))
    }

    /// The first point.
    pub fn first(&self) -> Option<(u64, f64)> {
        (!self.is_empty()).then(|| self.get(0))
    }

    /// The last point.
    pub fn last(&self) -> Option<(u64, f64)> {
        (!self.is_empty()).then(|| self.get(self.len() - 1))
    }

    /// Every point, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (u64, f64)> + DoubleEndedIterator + '_ {
        self.range(0..self.len())
    }

    /// The points `range` of the order.
    pub fn range(
        &self,
        range: Range<usize>,
    ) -> impl ExactSizeIterator<Item = (u64, f64)> + DoubleEndedIterator + '_ {
        range.map(|i| self.get(i))
    }

    /// The number of points before the first one for which `before` is false (`before` true
    /// for a prefix of the points, as `slice::partition_point` asks).
    pub fn partition_point(&self, before: impl Fn((u64, f64)) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(self.get(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The points as pairs.
    pub fn to_vec(&self) -> Vec<(u64, f64)> {
        self.iter().collect()
    }

    /// Bytes held on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.times.stretches.capacity() * 16
            + self.times.offsets.capacity() * 4
            + self.values.heap_bytes()
    }

    /// Appends a point at or after the last (in the order of [`point_order`]).
    fn push(&mut self, (t, v): (u64, f64)) {
        self.times.push(t);
        self.values.push(v);
    }

    /// Room for `n` more points, with at most an eighth of the points in reserve once large.
    fn reserve(&mut self, n: usize) {
        let need = self.len() + n;
        if need > self.times.offsets.capacity() {
            let more = need + need / 8 - self.len();
            self.times.offsets.reserve_exact(more);
            self.values.reserve_exact(more);
        }
    }

    /// Merges the sorted `batch` in: the points after the batch's first are merged with it
    /// and held again (`O(tail + k)`; a batch after the last point is appended).
    pub(super) fn merge(&mut self, batch: Vec<(u64, f64)>) {
        let Some(&first) = batch.first() else { return };
        let at = self.partition_point(|p| point_order(&p, &first).is_le());
        let tail: Vec<(u64, f64)> = self.range(at..self.len()).collect();
        self.truncate(at);
        self.reserve(tail.len() + batch.len());
        let (mut tail, mut new) = (tail.into_iter().peekable(), batch.into_iter().peekable());
        while let Some(p) = match (tail.peek(), new.peek()) {
            (Some(held), Some(n)) if point_order(n, held).is_lt() => new.next(),
            (Some(_), _) => tail.next(),
            (None, _) => new.next(),
        } {
            self.push(p);
        }
    }

    /// Keeps the first `len` points.
    fn truncate(&mut self, len: usize) {
        self.times.offsets.truncate(len);
        self.times.stretches.retain(|&(_, at)| at < len);
        self.values.truncate(len);
    }
}

impl PartialEq for Points {
    fn eq(&self, other: &Points) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other.iter())
                .all(|(a, b)| a.0 == b.0 && a.1.to_bits() == b.1.to_bits())
    }
}

impl FromIterator<(u64, f64)> for Points {
    /// Points from pairs in any order (sorted first).
    fn from_iter<I: IntoIterator<Item = (u64, f64)>>(pairs: I) -> Points {
        let mut pairs: Vec<(u64, f64)> = pairs.into_iter().collect();
        if !pairs.is_sorted_by(|a, b| point_order(a, b).is_le()) {
            pairs.sort_by(point_order);
        }
        let mut points = Points::default();
        points.merge(pairs);
        points
    }
}

/// The order of a series' points: by time, then value.
pub(super) fn point_order(a: &(u64, f64), b: &(u64, f64)) -> std::cmp::Ordering {
    a.0.cmp(&b.0).then_with(|| a.1.total_cmp(&b.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_held_in_four_bytes_and_given_back_to_the_bit() {
        for text in [
            "40.23",
            "12.5",
            "0.01",
            "1.2e8",
            "35.000278",
            "-3.75",
            "0",
            "99.99",
        ] {
            let v: f64 = text.parse().unwrap();
            let points: Points = [(1, v)].into_iter().collect();
            assert_eq!(points.get(0).1.to_bits(), v.to_bits(), "{text}");
            assert!(matches!(points.values, Values::Decimal { .. }), "{text}");
        }
        // Finer decimals later: the held mantissas are scaled, their values unchanged.
        let texts = ["40", "40.5", "40.25", "40.125", "40.0625"];
        let points: Points = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (i as u64, t.parse::<f64>().unwrap()))
            .collect();
        let got: Vec<f64> = points.iter().map(|p| p.1).collect();
        let want: Vec<f64> = texts.iter().map(|t| t.parse().unwrap()).collect();
        assert_eq!(got, want);
        assert!(matches!(points.values, Values::Decimal { exponent: 4, .. }));
    }

    #[test]
    fn values_that_are_not_short_decimals_widen_to_f64_and_keep_every_bit() {
        let odd = [0.1 + 0.2, std::f64::consts::PI, -0.0, 5e9, 1e-9, f64::MAX];
        for v in odd {
            let points: Points = [(0, 40.23), (1, v), (2, 12.5)].into_iter().collect();
            let got: Vec<u64> = points.iter().map(|p| p.1.to_bits()).collect();
            assert_eq!(got, [40.23, v, 12.5].map(f64::to_bits), "{v}");
            assert!(matches!(points.values, Values::Wide(_)), "{v}");
        }
    }

    #[test]
    fn points_merged_in_any_order_hold_what_a_sorted_vec_holds() {
        for seed in 1..30u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut model: Vec<(u64, f64)> = Vec::new();
            let mut points = Points::default();
            // Batches of 100 ms samples with jitter, some late, across 71-minute stretches.
            for _ in 0..20 {
                let start = rng.u64(..) % (3 * 3_600_000_000);
                let mut batch: Vec<(u64, f64)> = (0..1 + rng.u64(..) % 200)
                    .map(|i| {
                        let t = start + i * 100_000 + rng.u64(..) % 5_000;
                        let v = match rng.u64(..) % 10 {
                            0 => (rng.u64(..) % 1000) as f64 * 0.1 + 0.05 * (seed % 3) as f64,
                            1 if seed % 4 == 0 => (rng.u64(..) % 1000) as f64 / 3.0,
                            _ => (rng.u64(..) % 10_000) as f64 / 100.0,
                        };
                        (t, v)
                    })
                    .collect();
                batch.sort_by(point_order);
                model.extend_from_slice(&batch);
                model.sort_by(point_order);
                points.merge(batch);
                assert_eq!(points.len(), model.len(), "seed {seed}");
            }
            let got = points.to_vec();
            assert_eq!(got.len(), model.len());
            for (i, (g, m)) in got.iter().zip(&model).enumerate() {
                assert!(
                    g.0 == m.0 && g.1.to_bits() == m.1.to_bits(),
                    "seed {seed} {i}"
                );
            }
            assert_eq!(points.first(), model.first().copied());
            assert_eq!(points.last(), model.last().copied());
            assert_eq!(points.iter().next_back(), model.last().copied());
            let t = model[model.len() / 2].0;
            assert_eq!(
                points.partition_point(|p| p.0 < t),
                model.partition_point(|p| p.0 < t)
            );
            assert!(points.times.stretches.len() >= 2, "seed {seed}: stretches");
        }
    }

    #[test]
    fn a_series_of_decimal_samples_takes_8_bytes_a_point() {
        let mut points = Points::default();
        let batch: Vec<(u64, f64)> = (0..36_000u64)
            .map(|i| {
                (
                    1_795_781_340_000_000 + i * 100_000,
                    (i % 10_000) as f64 / 100.0,
                )
            })
            .collect();
        points.merge(batch);
        assert_eq!(points.len(), 36_000);
        // 8 bytes a point, and an eighth in reserve.
        assert!(
            points.heap_bytes() <= 36_000 * 9 + 64,
            "{}",
            points.heap_bytes()
        );
    }
}
