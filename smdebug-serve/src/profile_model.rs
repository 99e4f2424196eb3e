//! The dashboard's profiler data, in a size that does not grow with the run's length (issue
//! 36): what the follower reads is aggregated as it comes, and a window finer than the
//! aggregates is read again from the run's files, as the scalars are ([`smdebug_analysis::scalars`]).
//!
//! - System metrics and step durations: smdebug-analysis's [`ProfileDigest`] (the report's
//!   model, shared with "Download report"), its lines at most [`LINE_SLICES`] slices a series
//!   (count, sum, lowest and highest value with their times), exact counts, sums, extremes and
//!   means, and quantiles within 1 % ([`smdebug_analysis::stats::Sketch`]).
//! - Spans: a [`TraceIndex`], one entry per trace file read (its spans' extent in time, how
//!   many spans and step spans it holds, and per phase their count and total), so that a
//!   window's spans are counted without reading the files it holds whole and read again from
//!   the files that hold them; [`StepSpans`] the run's slowest step spans
//!   ([`SLOWEST_KEPT`]) and the course of its steps for the step rate ([`StepClock`]).
//!
//! [`read_spans`] and [`read_system`] read a window again (blocking I/O, outside the run's
//! lock).

use std::collections::BTreeMap;
use std::sync::Arc;

use smdebug_analysis::digest::ProfileDigest;
use smdebug_core::Mode;
use smdebug_core::phase::Phase;
use smdebug_format::system::parse_system_file_key;
use smdebug_format::trace::TraceFileName;
use smdebug_read::follow::Increment;
use smdebug_read::profile::{
    ProfileData, ProfilerReader, SampleBatch, Span, SpanStore, parse_system_chunk,
    parse_trace_without_args,
};
use smdebug_storage::Storage;

/// The most slices of each of the dashboard's lines (a series' course, a step series'): a
/// whole-run chart of up to 2,048 points, as a scalar's 1,024 buckets give.
pub const LINE_SLICES: usize = 1024;

/// The slowest step spans kept (the "slowest steps" table asks for at most 500).
pub const SLOWEST_KEPT: usize = 500;

/// The run's [`ProfileDigest`] as the dashboard keeps it (lines of [`LINE_SLICES`]), shared
/// with a report being drawn.
#[derive(Clone, Debug)]
pub(crate) struct Digest(pub Arc<ProfileDigest>);

impl Default for Digest {
    fn default() -> Self {
        Digest(Arc::new(ProfileDigest::with_line_slices(LINE_SLICES)))
    }
}

impl std::ops::Deref for Digest {
    type Target = ProfileDigest;

    fn deref(&self) -> &ProfileDigest {
        &self.0
    }
}

/// One trace file read: where its spans lie in time and what they add up to.
#[derive(Clone, Debug)]
pub(crate) struct TraceEntry {
    /// The file.
    pub file: TraceFileName,
    /// The earliest start of a span in it, µs since the epoch.
    pub first_start_us: u64,
    /// The latest start.
    pub last_start_us: u64,
    /// The latest end.
    pub last_end_us: u64,
    /// Spans in it.
    pub spans: u32,
    /// Step spans in it.
    pub steps: u32,
    /// Per phase (its number in [`TraceIndex::phase`]): spans and their total duration, µs.
    pub phases: Vec<(u32, u32, u64)>,
}

impl TraceEntry {
    /// Whether a span of it may overlap `from..=to` (µs).
    pub fn overlaps(&self, from: u64, to: u64) -> bool {
        self.last_end_us >= from && self.first_start_us <= to
    }

    /// Whether every span of it overlaps `from..=to`: each starts at or before `to` and ends
    /// at or after `from`. Known without reading it when it lies inside the window.
    pub fn inside(&self, from: u64, to: u64) -> bool {
        self.first_start_us >= from && self.last_end_us <= to
    }
}

/// The trace files read, in the order read, with their phases' names once.
#[derive(Clone, Debug, Default)]
pub(crate) struct TraceIndex {
    entries: Vec<TraceEntry>,
    phases: Vec<String>,
}

impl TraceIndex {
    /// Notes the trace files of a follower's increment.
    pub fn add(&mut self, increment: &Increment) {
        for read in &increment.traces {
            let spans = &increment.spans[read.spans.clone()];
            let Some(first) = spans.first() else { continue };
            let mut entry = TraceEntry {
                file: read.file.clone(),
                first_start_us: first.start_us,
                last_start_us: first.start_us,
                last_end_us: first.end_us,
                spans: 0,
                steps: 0,
                phases: Vec::new(),
            };
            for s in spans {
                entry.first_start_us = entry.first_start_us.min(s.start_us);
                entry.last_start_us = entry.last_start_us.max(s.start_us);
                entry.last_end_us = entry.last_end_us.max(s.end_us);
                entry.spans += 1;
                if is_step_span(s).is_some() {
                    entry.steps += 1;
                }
                let number = match self.phases.iter().position(|p| *p == s.phase) {
                    Some(n) => n as u32,
                    None => {
                        self.phases.push(s.phase.clone());
                        (self.phases.len() - 1) as u32
                    }
                };
                match entry.phases.iter_mut().find(|p| p.0 == number) {
                    Some(p) => {
                        p.1 += 1;
                        p.2 += s.duration_us();
                    }
                    None => entry.phases.push((number, 1, s.duration_us())),
                }
            }
            self.entries.push(entry);
        }
    }

    /// The name of phase `number`.
    pub fn phase(&self, number: u32) -> &str {
        &self.phases[number as usize]
    }

    /// Every entry, in the order read.
    pub fn entries(&self) -> &[TraceEntry] {
        &self.entries
    }
}

/// The mode of a step span (a span of a `Step:ModeKeys.<MODE>` row), as the span store tells
/// it (`SpanRef::step_mode`).
pub(crate) fn is_step_span(s: &Span) -> Option<Mode> {
    match s.phase_kind() {
        Phase::Step(mode) => Some(mode),
        _ => None,
    }
}

/// One step span, compactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StepSpan {
    pub start_us: u64,
    pub end_us: u64,
    /// Its node's number in [`StepSpans::node`].
    pub node: u32,
    pub worker: Option<u32>,
    pub step: Option<u64>,
    pub mode: Mode,
}

impl StepSpan {
    pub fn duration_us(&self) -> u64 {
        self.end_us.saturating_sub(self.start_us)
    }
}

/// The run's step spans as the dashboard keeps them: the slowest [`SLOWEST_KEPT`], and the
/// course of the steps ([`StepClock`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct StepSpans {
    nodes: Vec<String>,
    /// The slowest, the slowest first (among equals, the earlier first).
    slowest: Vec<StepSpan>,
    /// When each step started.
    pub clock: StepClock,
}

impl StepSpans {
    /// Takes in the step spans among `spans`.
    pub fn add(&mut self, spans: &[Span]) {
        for s in spans {
            let Some(mode) = is_step_span(s) else {
                continue;
            };
            self.clock.add(mode, s.step, s.start_us);
            let step = StepSpan {
                start_us: s.start_us,
                end_us: s.end_us,
                node: 0,
                worker: s.worker,
                step: s.step,
                mode,
            };
            let key = |x: &StepSpan| (std::cmp::Reverse(x.duration_us()), x.start_us, x.end_us);
            if self.slowest.len() >= SLOWEST_KEPT
                && self.slowest.last().is_some_and(|l| key(l) <= key(&step))
            {
                continue;
            }
            let node = match self.nodes.iter().position(|n| *n == s.node) {
                Some(n) => n as u32,
                None => {
                    self.nodes.push(s.node.clone());
                    (self.nodes.len() - 1) as u32
                }
            };
            let step = StepSpan { node, ..step };
            let at = self.slowest.partition_point(|x| key(x) <= key(&step));
            self.slowest.insert(at, step);
            self.slowest.truncate(SLOWEST_KEPT);
        }
    }

    /// The slowest step spans of the run, the slowest first.
    pub fn slowest(&self) -> &[StepSpan] {
        &self.slowest
    }

    /// The name of node `number`.
    pub fn node(&self, number: u32) -> &str {
        &self.nodes[number as usize]
    }
}

/// The first steps of a run whose starts are kept for good (the rate's warm-up is left out
/// from them).
const EARLY_STEPS: usize = 16;

/// The latest steps whose starts are kept (a trailing window of the step rate, two minutes,
/// holds up to 34 steps a second; a faster job's rate is measured over its last 4,096).
const RECENT_STEPS: usize = 4_096;

/// When each step started, as the step rate needs it: one point a step (a step of a mode
/// counted once, at its earliest start, whichever worker's span says it; a span without a
/// step number is a step of its own), the first [`EARLY_STEPS`] and the last [`RECENT_STEPS`]
/// kept and the steps between counted. A worker's span of a step read more than
/// `RECENT_STEPS` steps after the others' counts the step again.
#[derive(Clone, Debug, Default)]
pub(crate) struct StepClock {
    early: Vec<u64>,
    between: u64,
    /// `(mode, step, n)` (`n` numbers the spans without a step) → start, µs.
    recent: BTreeMap<(u8, u64, u64), u64>,
    /// Starts of `recent`, to find the earliest.
    by_start: BTreeMap<(u64, (u8, u64, u64)), ()>,
    unnumbered: u64,
}

impl StepClock {
    /// Takes in a step span's mode, step and start.
    pub fn add(&mut self, mode: Mode, step: Option<u64>, start_us: u64) {
        let key = match step {
            Some(step) => (mode as u8, step, 0),
            None => {
                self.unnumbered += 1;
                (mode as u8, u64::MAX, self.unnumbered)
            }
        };
        if let Some(held) = self.recent.get_mut(&key) {
            if start_us < *held {
                self.by_start.remove(&(*held, key));
                *held = start_us;
                self.by_start.insert((start_us, key), ());
            }
            return;
        }
        self.recent.insert(key, start_us);
        self.by_start.insert((start_us, key), ());
        if self.recent.len() > RECENT_STEPS
            && let Some(((start, key), ())) = self.by_start.pop_first()
        {
            self.recent.remove(&key);
            if self.early.len() < EARLY_STEPS {
                self.early.push(start);
            } else {
                self.between += 1;
            }
        }
    }

    /// The points `(seconds, steps before it)` of the steps kept, in time order.
    pub fn points(&self) -> Vec<(f64, f64)> {
        let early = self.early.iter().enumerate().map(|(i, &us)| (us, i as u64));
        let before = self.early.len() as u64 + self.between;
        let recent = self
            .by_start
            .keys()
            .enumerate()
            .map(|(i, (us, _))| (*us, before + i as u64));
        early
            .chain(recent)
            .map(|(us, n)| (us as f64 / 1e6, n as f64))
            .collect()
    }
}

/// The spans overlapping `from..=to` (µs) of the trace files `entries`, read again (their
/// `args` dropped), added to `store`; an error naming a file that cannot be read.
pub(crate) fn read_spans<'e>(
    storage: &dyn Storage,
    entries: impl IntoIterator<Item = &'e TraceEntry>,
    (from, to): (u64, u64),
    store: &mut SpanStore,
) -> Result<(), String> {
    for entry in entries {
        let bytes = storage
            .get(&entry.file.key)
            .map_err(|e| format!("{}: {e}", entry.file.key))?;
        let spans = parse_trace_without_args(&entry.file, &bytes)
            .map_err(|e| format!("{}: {e}", entry.file.key))?;
        store.extend(
            spans
                .iter()
                .filter(|s| s.end_us >= from && s.start_us <= to),
        );
    }
    Ok(())
}

/// The system samples of the files that may hold samples at `from_us..=to_us`, with those just
/// before and after in the same files, read again: per node, from the last file starting at or
/// before `from_us` to the last starting at or before `to_us`.
pub(crate) fn read_system(
    storage: Arc<dyn Storage>,
    from_us: u64,
    to_us: u64,
) -> Result<ProfileData, String> {
    let reader = ProfilerReader::new(Arc::clone(&storage));
    let files = reader.system_files().map_err(|e| e.to_string())?;
    let mut data = ProfileData::default();
    for (index, file) in files.iter().enumerate() {
        if file.start_s.saturating_mul(1_000_000) > to_us {
            continue;
        }
        let next_start = files[index + 1..]
            .iter()
            .find(|f| f.node == file.node)
            .map(|f| f.start_s.saturating_mul(1_000_000));
        if next_start.is_some_and(|next| next <= from_us) {
            continue;
        }
        debug_assert!(parse_system_file_key(&file.key).is_some());
        let bytes = storage
            .get(&file.key)
            .map_err(|e| format!("{}: {e}", file.key))?;
        let chunk = parse_system_chunk(&file.key, &bytes, 0);
        data.add_sample_batch(SampleBatch::new(&chunk.samples));
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past its recent steps the clock keeps the first and the last, and counts the others:
    /// the points' step counts are those of every step.
    #[test]
    fn the_step_clock_keeps_the_first_and_last_steps_and_counts_the_rest() {
        let mut clock = StepClock::default();
        let n = RECENT_STEPS as u64 * 3;
        for step in 0..n {
            // Two workers, the second's span a little later and read later.
            clock.add(Mode::Train, Some(step), 1_000 * step);
        }
        for step in n - 100..n {
            clock.add(Mode::Train, Some(step), 1_000 * step + 7);
        }
        let points = clock.points();
        assert_eq!(points.len(), EARLY_STEPS + RECENT_STEPS);
        assert_eq!(points[0], (0.0, 0.0));
        assert_eq!(points[EARLY_STEPS - 1].1, (EARLY_STEPS - 1) as f64);
        assert_eq!(
            *points.last().unwrap(),
            ((n - 1) as f64 / 1e3, (n - 1) as f64)
        );
        assert!(
            points
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1)
        );
        assert_eq!(clock.recent.len(), RECENT_STEPS);
    }

    #[test]
    fn the_slowest_steps_kept_are_the_slowest_the_earlier_first_among_equals() {
        let span = |start: u64, duration: u64| Span {
            phase: "Step:ModeKeys.TRAIN".into(),
            name: "step".into(),
            start_us: start,
            end_us: start + duration,
            node: format!("node-{}", start % 3),
            worker: Some(0),
            step: Some(start),
            mode: Some(Mode::Train),
            args: Default::default(),
        };
        let mut steps = StepSpans::default();
        let all: Vec<Span> = (0..5_000u64)
            .map(|i| span(i, (i * 7_919) % 1_000))
            .collect();
        for chunk in all.chunks(333).rev() {
            steps.add(chunk);
        }
        let mut expected: Vec<(u64, u64)> =
            all.iter().map(|s| (s.duration_us(), s.start_us)).collect();
        expected.sort_by_key(|&(d, start)| (std::cmp::Reverse(d), start));
        expected.truncate(SLOWEST_KEPT);
        let kept: Vec<(u64, u64)> = steps
            .slowest()
            .iter()
            .map(|s| (s.duration_us(), s.start_us))
            .collect();
        assert_eq!(kept, expected);
        assert_eq!(
            steps.node(steps.slowest()[0].node),
            format!("node-{}", expected[0].1 % 3)
        );
    }
}
