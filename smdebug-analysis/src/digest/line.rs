//! A series over time in a fixed number of slices: [`Line`].

use std::collections::BTreeMap;

/// Most slices a [`Line`] holds by default (the report's); it holds at least half as many once
/// its data span that many. [`Line::with_slices`] sets another bound (the dashboard's).
pub const LINE_SLICES: usize = 400;

/// The values of one time slice of a [`Line`]: exact count, sum, min and max with their times,
/// and the times of its first and last value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slice {
    /// The earliest time of a value in the slice, µs since the epoch.
    pub first_us: u64,
    /// The latest time of a value in the slice, µs since the epoch.
    pub last_us: u64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// The time of the smallest value (the earliest of equal ones), µs since the epoch.
    pub min_us: u64,
    /// The time of the largest value (the earliest of equal ones), µs since the epoch.
    pub max_us: u64,
    /// The sum of the values.
    pub sum: f64,
    /// How many values.
    pub count: u64,
}

impl Slice {
    fn of(t_us: u64, v: f64) -> Slice {
        Slice {
            first_us: t_us,
            last_us: t_us,
            min: v,
            max: v,
            min_us: t_us,
            max_us: t_us,
            sum: v,
            count: 1,
        }
    }

    fn merge(&mut self, o: &Slice) {
        self.first_us = self.first_us.min(o.first_us);
        self.last_us = self.last_us.max(o.last_us);
        if o.min < self.min || (o.min == self.min && o.min_us < self.min_us) {
            self.min = o.min;
            self.min_us = o.min_us;
        }
        if o.max > self.max || (o.max == self.max && o.max_us < self.max_us) {
            self.max = o.max;
            self.max_us = o.max_us;
        }
        self.sum += o.sum;
        self.count += o.count;
    }

    /// The mean of the slice's values.
    pub fn mean(&self) -> f64 {
        self.sum / self.count as f64
    }

    /// The middle of the slice's first and last time, µs since the epoch.
    pub fn middle_us(&self) -> u64 {
        self.first_us + (self.last_us - self.first_us) / 2
    }
}

/// A series `(time, value)` downsampled as it is read: slices of equal width (a power of two
/// of µs, aligned on multiples of it), at most [`LINE_SLICES`] of them (or the bound of
/// [`Line::with_slices`]); when a value would make one more, the width doubles and neighbouring
/// slices merge. Values may come in any order; the result does not depend on it. Non-finite
/// values are left out.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    width_us: u64,
    most: usize,
    slices: BTreeMap<u64, Slice>,
}

impl Default for Line {
    fn default() -> Self {
        Line::with_slices(LINE_SLICES)
    }
}

impl Line {
    /// An empty line of at most `most` slices (at least 2).
    pub fn with_slices(most: usize) -> Line {
        Line {
            width_us: 1,
            most: most.max(2),
            slices: BTreeMap::new(),
        }
    }

    /// The most slices it holds.
    pub fn most_slices(&self) -> usize {
        self.most
    }

    /// Adds a value at `t_us`.
    pub fn add(&mut self, t_us: u64, v: f64) {
        if !v.is_finite() {
            return;
        }
        let s = Slice::of(t_us, v);
        self.slices
            .entry(t_us / self.width_us)
            .and_modify(|e| e.merge(&s))
            .or_insert(s);
        if self.slices.len() > self.most {
            self.coarsen();
        }
    }

    fn coarsen(&mut self) {
        while self.slices.len() > self.most {
            self.width_us *= 2;
            self.slices = regroup(std::mem::take(&mut self.slices), 2);
        }
    }

    /// Adds every value of `other`, as if they had been added here.
    pub fn merge(&mut self, other: &Line) {
        let width = self.width_us.max(other.width_us);
        let mut mine = regroup(std::mem::take(&mut self.slices), width / self.width_us);
        for (i, s) in regroup(other.slices.clone(), width / other.width_us) {
            mine.entry(i).and_modify(|e| e.merge(&s)).or_insert(s);
        }
        self.width_us = width;
        self.slices = mine;
        self.coarsen();
    }

    /// The slices' width, µs.
    pub fn width_us(&self) -> u64 {
        self.width_us
    }

    /// Whether no value was added.
    pub fn is_empty(&self) -> bool {
        self.slices.is_empty()
    }

    /// The slices in time order.
    pub fn slices(&self) -> impl ExactSizeIterator<Item = &Slice> + '_ {
        self.slices.values()
    }

    /// The slices holding values at times `from_us..=to_us`, in time order (slices partly
    /// inside included).
    pub fn slices_within(&self, from_us: u64, to_us: u64) -> impl Iterator<Item = &Slice> + '_ {
        let first = from_us / self.width_us;
        let last = to_us / self.width_us;
        self.slices
            .range(first..=last.max(first))
            .map(|(_, s)| s)
            .filter(move |s| s.last_us >= from_us && s.first_us <= to_us)
    }

    /// The last slice whose values are all before `from_us` and the first whose values are all
    /// after `to_us`.
    pub fn neighbours(&self, from_us: u64, to_us: u64) -> (Option<&Slice>, Option<&Slice>) {
        let before = self
            .slices
            .range(..=from_us / self.width_us)
            .rev()
            .map(|(_, s)| s)
            .find(|s| s.last_us < from_us);
        let after = self
            .slices
            .range(to_us / self.width_us..)
            .map(|(_, s)| s)
            .find(|s| s.first_us > to_us);
        (before, after)
    }

    /// The total of the slices' counts.
    pub fn count(&self) -> u64 {
        self.slices.values().map(|s| s.count).sum()
    }

    /// The line of the mean over `lines` per slice: each slice of the result holds the means
    /// of the lines' slices at that time (slices of the widest width): its mean is their mean,
    /// its min and max the lowest and highest of them.
    pub fn mean_of<'a>(lines: impl IntoIterator<Item = &'a Line>) -> Line {
        let lines: Vec<&Line> = lines.into_iter().collect();
        let width = lines.iter().map(|l| l.width_us).max().unwrap_or(1);
        let most = lines.iter().map(|l| l.most).max().unwrap_or(LINE_SLICES);
        let mut out: BTreeMap<u64, Slice> = BTreeMap::new();
        for line in lines {
            for (i, s) in regroup(line.slices.clone(), width / line.width_us) {
                let m = Slice {
                    min: s.mean(),
                    max: s.mean(),
                    min_us: s.middle_us(),
                    max_us: s.middle_us(),
                    sum: s.mean(),
                    count: 1,
                    ..s
                };
                out.entry(i).and_modify(|e| e.merge(&m)).or_insert(m);
            }
        }
        Line {
            width_us: width,
            most,
            slices: out,
        }
    }
}

/// Slices merged `factor` to one (indices divided by it).
fn regroup(slices: BTreeMap<u64, Slice>, factor: u64) -> BTreeMap<u64, Slice> {
    if factor <= 1 {
        return slices;
    }
    let mut out: BTreeMap<u64, Slice> = BTreeMap::new();
    for (i, s) in slices {
        out.entry(i / factor)
            .and_modify(|e| e.merge(&s))
            .or_insert(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_keeps_at_most_its_slices_with_exact_extremes_and_counts() {
        let mut line = Line::default();
        let mut shuffled = Line::default();
        let n = 100_000u64;
        for i in 0..n {
            let v = if i == 77_777 { 1e6 } else { (i % 10) as f64 };
            line.add(1_000_000 + i * 1_000, v);
        }
        for i in (0..n).rev() {
            let v = if i == 77_777 { 1e6 } else { (i % 10) as f64 };
            shuffled.add(1_000_000 + i * 1_000, v);
        }
        assert_eq!(line, shuffled);
        assert!(line.slices().len() <= LINE_SLICES && line.slices().len() > LINE_SLICES / 2);
        assert_eq!(line.slices().map(|s| s.count).sum::<u64>(), n);
        assert!(
            line.slices()
                .any(|s| s.max == 1e6 && s.max_us == 1_000_000 + 77_777 * 1_000)
        );
        // Each extreme's time is a time of that value, the earliest of equal ones.
        for s in line.slices() {
            assert_eq!(s.min, (((s.min_us - 1_000_000) / 1_000) % 10) as f64);
            assert!(s.min_us >= s.first_us && s.min_us < s.first_us + 10_000);
        }
        assert_eq!(line.slices().map(|s| s.min).fold(f64::MAX, f64::min), 0.0);
        let total: f64 = line.slices().map(|s| s.sum).sum();
        let exact: f64 = (0..n)
            .map(|i| if i == 77_777 { 1e6 } else { (i % 10) as f64 })
            .sum();
        assert_eq!(total, exact);
        let mut halves = Line::default();
        let mut other = Line::default();
        for i in 0..n {
            let v = if i == 77_777 { 1e6 } else { (i % 10) as f64 };
            if i < n / 3 {
                halves.add(1_000_000 + i * 1_000, v)
            } else {
                other.add(1_000_000 + i * 1_000, v)
            }
        }
        halves.merge(&other);
        assert_eq!(halves.width_us(), line.width_us());
        assert_eq!(halves.slices().map(|s| s.count).sum::<u64>(), n);
        let mean = Line::mean_of([&line, &halves]);
        assert_eq!(mean.slices().len(), line.slices().len());
    }
}
