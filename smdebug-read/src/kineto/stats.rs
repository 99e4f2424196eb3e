//! Streaming aggregation of complete events into per-name statistics and GPU busy intervals.
//!
//! Memory held here grows with the number of distinct operator/kernel names and with the number
//! of disjoint GPU busy intervals (one per idle gap), never with the number of CPU events or the
//! size of the document.

use std::collections::HashMap;

use super::report::{GpuDeviceSummary, OpStats};

/// Which report table an event's category feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Category {
    /// `kernel`: GPU kernels.
    Kernel,
    /// `gpu_memcpy`: GPU copies.
    Memcpy,
    /// `gpu_memset`: GPU memsets.
    Memset,
    /// `cpu_op`: CPU operators.
    CpuOp,
    /// `user_annotation`: `record_function` ranges and `ProfilerStep#N`.
    UserAnnotation,
    /// Anything else (cuda_runtime, cuda_sync, python_function, Trace, ...): counts toward the
    /// span only.
    Other,
}

impl Category {
    pub(crate) fn from_cat(cat: &str) -> Self {
        match cat {
            "kernel" => Self::Kernel,
            "gpu_memcpy" => Self::Memcpy,
            "gpu_memset" => Self::Memset,
            "cpu_op" => Self::CpuOp,
            "user_annotation" => Self::UserAnnotation,
            _ => Self::Other,
        }
    }

    /// GPU work that occupies a device: kernels, copies and memsets.
    pub(crate) fn is_gpu_activity(self) -> bool {
        matches!(self, Self::Kernel | Self::Memcpy | Self::Memset)
    }
}

/// Running count/total/min/max of one name.
#[derive(Debug, Clone, Copy)]
struct Running {
    count: u64,
    total: f64,
    min: f64,
    max: f64,
}

/// Per-name statistics of one category, plus the category total in event order.
#[derive(Debug, Default)]
pub(crate) struct NameTable {
    by_name: HashMap<String, Running>,
    total: f64,
}

impl NameTable {
    fn add(&mut self, name: &str, dur: f64) {
        self.total += dur;
        // Look up by &str first so the common case (name already seen) allocates nothing.
        if let Some(r) = self.by_name.get_mut(name) {
            r.count += 1;
            r.total += dur;
            r.min = r.min.min(dur);
            r.max = r.max.max(dur);
        } else {
            self.by_name.insert(
                name.to_owned(),
                Running {
                    count: 1,
                    total: dur,
                    min: dur,
                    max: dur,
                },
            );
        }
    }

    /// Sum of all durations in this category, in event order.
    pub(crate) fn total(&self) -> f64 {
        self.total
    }

    /// Rows sorted by total time descending, ties by name ascending.
    pub(crate) fn rows(&self) -> Vec<OpStats> {
        let mut rows: Vec<OpStats> = self
            .by_name
            .iter()
            .map(|(name, r)| OpStats {
                name: name.clone(),
                count: r.count,
                total_us: r.total,
                mean_us: r.total / r.count as f64,
                min_us: r.min,
                max_us: r.max,
                share: if self.total > 0.0 {
                    r.total / self.total
                } else {
                    0.0
                },
            })
            .collect();
        rows.sort_by(|a, b| {
            b.total_us
                .total_cmp(&a.total_us)
                .then_with(|| a.name.cmp(&b.name))
        });
        rows
    }
}

/// Busy intervals of one GPU device, kept as a list that is periodically sorted and merged so
/// that its length stays near the number of disjoint busy intervals.
#[derive(Debug)]
struct DeviceIntervals {
    intervals: Vec<(f64, f64)>,
    /// Length of `intervals` right after the last merge; the next merge happens once the list
    /// has doubled, which keeps merging amortised O(log n) per interval.
    merged_len: usize,
    first_start: f64,
    last_end: f64,
}

/// Below this many pending intervals merging is not worth its cost.
const MIN_MERGE_LEN: usize = 4096;

impl DeviceIntervals {
    fn new() -> Self {
        Self {
            intervals: Vec::new(),
            merged_len: 0,
            first_start: f64::INFINITY,
            last_end: f64::NEG_INFINITY,
        }
    }

    fn add(&mut self, start: f64, end: f64) {
        self.first_start = self.first_start.min(start);
        self.last_end = self.last_end.max(end);
        // Events of one stream arrive in time order; extending the last interval in place
        // when the new one overlaps it avoids most growth between merges.
        if let Some(last) = self.intervals.last_mut()
            && start >= last.0
            && start <= last.1
        {
            last.1 = last.1.max(end);
            return;
        }
        self.intervals.push((start, end));
        if self.intervals.len() >= (2 * self.merged_len).max(MIN_MERGE_LEN) {
            self.merge();
        }
    }

    /// Sorts by start and merges overlapping or touching intervals, so that the list becomes
    /// the (unique) set of maximal disjoint busy intervals seen so far.
    fn merge(&mut self) {
        self.intervals
            .sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let mut out = 0usize;
        for i in 0..self.intervals.len() {
            let (s, e) = self.intervals[i];
            if out > 0 && s <= self.intervals[out - 1].1 {
                let prev = &mut self.intervals[out - 1];
                prev.1 = prev.1.max(e);
            } else {
                self.intervals[out] = (s, e);
                out += 1;
            }
        }
        self.intervals.truncate(out);
        self.merged_len = out;
    }

    /// Busy time: the total length of the union of all intervals.
    fn busy(&mut self) -> f64 {
        self.merge();
        self.intervals.iter().map(|(s, e)| e - s).sum()
    }
}

/// Everything accumulated from one trace's events.
#[derive(Debug)]
pub(crate) struct Accumulator {
    pub(crate) kernels: NameTable,
    pub(crate) memcpy: NameTable,
    pub(crate) memset: NameTable,
    pub(crate) cpu_ops: NameTable,
    pub(crate) annotations: NameTable,
    devices: HashMap<i64, DeviceIntervals>,
    span_start: f64,
    span_end: f64,
    /// Every element of `traceEvents`.
    pub(crate) events: u64,
    /// Complete (`"ph": "X"`) events that were counted.
    pub(crate) complete_events: u64,
    /// Complete events dropped because `ts` was missing or not a number within ±2^53 µs, or
    /// `dur` was negative or ended the event past that.
    pub(crate) skipped_events: u64,
}

/// The fields of one event that the summary needs.
pub(crate) struct EventFields<'a> {
    pub(crate) ph: &'a str,
    pub(crate) cat: &'a str,
    pub(crate) name: &'a str,
    pub(crate) ts: Option<f64>,
    pub(crate) dur: Option<f64>,
    pub(crate) pid: Option<i64>,
    pub(crate) device: Option<i64>,
}

/// The largest `ts`, `dur` and end (`ts + dur`) an event may have: 2^53 µs (about 285 years
/// from the epoch), past which an f64 no longer holds whole microseconds. Larger values are not
/// times a profiler wrote; summed, they would print as `inf` or `NaN`.
const MAX_TIME_US: f64 = 9_007_199_254_740_992.0;

/// Device key used when a GPU event names neither `args.device` nor a numeric `pid`.
pub(crate) const UNKNOWN_DEVICE: i64 = -1;

impl Accumulator {
    pub(crate) fn new() -> Self {
        Self {
            kernels: NameTable::default(),
            memcpy: NameTable::default(),
            memset: NameTable::default(),
            cpu_ops: NameTable::default(),
            annotations: NameTable::default(),
            devices: HashMap::new(),
            span_start: f64::INFINITY,
            span_end: f64::NEG_INFINITY,
            events: 0,
            complete_events: 0,
            skipped_events: 0,
        }
    }

    pub(crate) fn record(&mut self, ev: &EventFields<'_>) {
        self.events += 1;
        // Only complete events carry durations in Kineto traces; metadata ("M"), instant ("i"),
        // flow ("s"/"f"), counter ("C") and any other phase carry no span of work.
        if ev.ph != "X" {
            return;
        }
        let Some(ts) = ev.ts.filter(|t| t.abs() <= MAX_TIME_US) else {
            self.skipped_events += 1;
            return;
        };
        let dur = match ev.dur {
            None => 0.0,
            Some(d) if (0.0..=MAX_TIME_US).contains(&d) && (ts + d).abs() <= MAX_TIME_US => d,
            Some(_) => {
                self.skipped_events += 1;
                return;
            }
        };
        self.complete_events += 1;
        let end = ts + dur;
        self.span_start = self.span_start.min(ts);
        self.span_end = self.span_end.max(end);
        let category = Category::from_cat(ev.cat);
        match category {
            Category::Kernel => self.kernels.add(ev.name, dur),
            Category::Memcpy => self.memcpy.add(ev.name, dur),
            Category::Memset => self.memset.add(ev.name, dur),
            Category::CpuOp => self.cpu_ops.add(ev.name, dur),
            Category::UserAnnotation => self.annotations.add(ev.name, dur),
            Category::Other => {}
        }
        if category.is_gpu_activity() {
            let device = ev.device.or(ev.pid).unwrap_or(UNKNOWN_DEVICE);
            self.devices
                .entry(device)
                .or_insert_with(DeviceIntervals::new)
                .add(ts, end);
        }
    }

    /// First start to last end over all counted complete events (0 when there are none).
    pub(crate) fn span(&self) -> f64 {
        if self.span_end >= self.span_start {
            self.span_end - self.span_start
        } else {
            0.0
        }
    }

    /// Per-device busy/idle figures in ascending device order.
    pub(crate) fn device_summaries(&mut self) -> Vec<GpuDeviceSummary> {
        let mut ids: Vec<i64> = self.devices.keys().copied().collect();
        ids.sort_unstable();
        ids.into_iter()
            .filter_map(|id| {
                let d = self.devices.get_mut(&id)?;
                let busy = d.busy();
                let span = d.last_end - d.first_start;
                Some(GpuDeviceSummary {
                    device: id,
                    span_us: span,
                    busy_us: busy,
                    idle_us: span - busy,
                    busy_intervals: d.intervals.len() as u64,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn union(intervals: &[(f64, f64)]) -> f64 {
        let mut d = DeviceIntervals::new();
        for &(s, e) in intervals {
            d.add(s, e);
        }
        d.busy()
    }

    #[test]
    fn union_merges_overlaps_touches_and_nesting() {
        assert_eq!(union(&[(0.0, 10.0), (5.0, 15.0)]), 15.0);
        assert_eq!(union(&[(0.0, 10.0), (10.0, 12.0)]), 12.0);
        assert_eq!(union(&[(0.0, 10.0), (2.0, 3.0)]), 10.0);
        assert_eq!(union(&[(20.0, 30.0), (0.0, 10.0)]), 20.0);
        assert_eq!(union(&[(5.0, 6.0), (0.0, 100.0), (50.0, 60.0)]), 100.0);
        assert_eq!(union(&[]), 0.0);
    }

    #[test]
    fn union_survives_many_merges_out_of_order() {
        // Three interleaved "streams" of 10_000 unit intervals each, shifted by 0.5, delivered
        // stream after stream so that merges happen with data arriving out of time order.
        let mut all = Vec::new();
        for stream in 0..3 {
            for i in 0..10_000 {
                let s = (i * 4) as f64 + stream as f64 * 0.5;
                all.push((s, s + 1.0));
            }
        }
        // Per block of 4 time units: [0,1] ∪ [0.5,1.5] ∪ [1,2] = [0,2], so 2 busy per block.
        assert_eq!(union(&all), 20_000.0);
        let mut d = DeviceIntervals::new();
        for &(s, e) in &all {
            d.add(s, e);
        }
        d.busy();
        assert_eq!(d.intervals.len(), 10_000);
    }

    #[test]
    fn name_table_sorts_by_total_then_name() {
        let mut t = NameTable::default();
        t.add("b", 2.0);
        t.add("a", 2.0);
        t.add("c", 1.0);
        t.add("c", 5.0);
        let rows = t.rows();
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["c", "a", "b"]);
        assert_eq!(rows[0].count, 2);
        assert_eq!(rows[0].mean_us, 3.0);
        assert_eq!(rows[0].min_us, 1.0);
        assert_eq!(rows[0].max_us, 5.0);
        assert_eq!(rows[0].share, 0.6);
    }

    #[test]
    fn non_complete_and_bad_events_do_not_count() {
        let mut acc = Accumulator::new();
        let ev = |ph, ts, dur| EventFields {
            ph,
            cat: "kernel",
            name: "k",
            ts,
            dur,
            pid: Some(0),
            device: None,
        };
        acc.record(&ev("i", Some(0.0), None));
        acc.record(&ev("X", None, Some(1.0)));
        acc.record(&ev("X", Some(f64::NAN), Some(1.0)));
        acc.record(&ev("X", Some(1.0), Some(-1.0)));
        acc.record(&ev("X", Some(10.0), Some(2.0)));
        assert_eq!(acc.events, 5);
        assert_eq!(acc.complete_events, 1);
        assert_eq!(acc.skipped_events, 3);
        assert_eq!(acc.span(), 2.0);
        assert_eq!(acc.kernels.rows()[0].count, 1);
    }
}
