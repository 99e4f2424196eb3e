//! What a run's follower found new, in arrival order, numbered: the source of the deltas each
//! push carries ([`crate::push`]). A follower pass appends the step spans and system samples it
//! read, and notes which rule verdicts changed (scalars are not pushed: the page fetches their
//! charts, downsampled by the server, when the tensor data changed); a client's cursor is
//! a sequence number per kind, so a push sends exactly what that client has not seen. Each log
//! keeps its last entries only: a client further behind than that is told to fetch again.

use std::collections::{BTreeMap, HashMap, VecDeque};

use smdebug_core::Mode;
use smdebug_core::phase::Phase;
use smdebug_read::profile::{SampleRef, Span, SystemSamples};

/// Step spans a log keeps.
pub(crate) const MAX_STEPS: usize = 8192;
/// System samples a log keeps.
pub(crate) const MAX_SAMPLES: usize = 65_536;

/// Entries numbered from `base`; the oldest dropped beyond `cap`.
#[derive(Debug)]
pub(crate) struct Log<T> {
    base: u64,
    items: VecDeque<T>,
    cap: usize,
}

impl<T> Log<T> {
    fn new(cap: usize) -> Log<T> {
        Log {
            base: 0,
            items: VecDeque::new(),
            cap,
        }
    }

    fn push(&mut self, item: T) {
        if self.items.len() == self.cap {
            self.items.pop_front();
            self.base += 1;
        }
        self.items.push_back(item);
    }

    /// The number the next entry gets.
    pub(crate) fn end(&self) -> u64 {
        self.base + self.items.len() as u64
    }

    /// The entries from number `from` on; `None` when some of them were dropped already.
    pub(crate) fn since(&self, from: u64) -> Option<impl Iterator<Item = &T>> {
        let skip = from.checked_sub(self.base)? as usize;
        (skip <= self.items.len()).then(|| self.items.range(skip..))
    }
}

/// A step span as it arrived.
#[derive(Debug)]
pub(crate) struct StepEntry {
    pub step: u64,
    pub mode: Mode,
    pub node: String,
    pub worker: Option<u32>,
    pub start_us: u64,
    pub duration_us: u64,
}

/// One system sample: its series (an index into [`Journal::series`]), time and value.
#[derive(Debug)]
pub(crate) struct SampleEntry {
    pub series: u32,
    pub t: f64,
    pub v: f64,
}

/// A system series' identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SeriesKey {
    pub node: String,
    pub metric_type: String,
    pub name: String,
    pub dimension: String,
}

/// A run's journal. Cleared with the rest of the run's view when the run is replaced.
#[derive(Debug)]
pub(crate) struct Journal {
    pub steps: Log<StepEntry>,
    pub samples: Log<SampleEntry>,
    pub series: Vec<SeriesKey>,
    series_index: HashMap<SeriesKey, u32>,
    /// Each rule's verdict as last shown (its view as JSON) and the number of the change that
    /// made it so.
    pub rules: BTreeMap<String, (u64, String)>,
    /// Changes of verdicts so far.
    pub rule_changes: u64,
}

impl Default for Journal {
    fn default() -> Journal {
        Journal {
            steps: Log::new(MAX_STEPS),
            samples: Log::new(MAX_SAMPLES),
            series: Vec::new(),
            series_index: HashMap::new(),
            rules: BTreeMap::new(),
            rule_changes: 0,
        }
    }
}

impl Journal {
    /// Notes the step spans among `spans`.
    pub(crate) fn add_spans(&mut self, spans: &[Span]) {
        for s in spans {
            if let (Phase::Step(mode), Some(step)) = (s.phase_kind(), s.step) {
                self.steps.push(StepEntry {
                    step,
                    mode,
                    node: s.node.clone(),
                    worker: s.worker,
                    start_us: s.start_us,
                    duration_us: s.duration_us(),
                });
            }
        }
    }

    /// Notes new system samples (of the series drawn as timelines), in file order: a series
    /// is numbered at its first sample kept.
    pub(crate) fn add_samples(&mut self, samples: &SystemSamples) {
        // Each series of the batch looked up once: `None` until its first sample kept,
        // `Some(None)` when it is not a timeline.
        let mut numbers: Vec<Option<Option<u32>>> = vec![None; samples.series().len()];
        for s in samples.iter() {
            // As the series hold them: finite samples, times in whole µs.
            if !s.value.is_finite() || !s.timestamp.is_finite() {
                continue;
            }
            let number = *numbers[s.series].get_or_insert_with(|| {
                crate::series::is_timeline(s.metric_type, s.name, s.dimension)
                    .then(|| self.series_number(&s))
            });
            let Some(series) = number else { continue };
            self.samples.push(SampleEntry {
                series,
                t: s.timestamp_us() as f64 / 1e6,
                v: s.value,
            });
        }
    }

    /// The number of `s`'s series, given when new.
    fn series_number(&mut self, s: &SampleRef<'_>) -> u32 {
        let key = SeriesKey {
            node: s.node_id.to_owned(),
            metric_type: s.metric_type.to_owned(),
            name: s.name.to_owned(),
            dimension: s.dimension.to_owned(),
        };
        match self.series_index.get(&key) {
            Some(&i) => i,
            None => {
                let i = self.series.len() as u32;
                self.series.push(key.clone());
                self.series_index.insert(key, i);
                i
            }
        }
    }

    /// Notes the verdicts now shown, `(rule, its view as JSON)`: those that differ from the
    /// last ones get a new change number.
    pub(crate) fn note_rules(&mut self, views: impl IntoIterator<Item = (String, String)>) {
        for (name, json) in views {
            let same = self.rules.get(&name).is_some_and(|(_, old)| *old == json);
            if !same {
                self.rule_changes += 1;
                self.rules.insert(name, (self.rule_changes, json));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_numbers_its_entries_and_forgets_the_oldest() {
        let mut log = Log::new(3);
        for i in 0..5 {
            log.push(i);
        }
        assert_eq!(log.end(), 5);
        assert!(log.since(1).is_none(), "entries 0 and 1 were dropped");
        assert_eq!(
            log.since(2).unwrap().copied().collect::<Vec<_>>(),
            [2, 3, 4]
        );
        assert_eq!(log.since(5).unwrap().count(), 0);
    }

    #[test]
    fn only_changed_verdicts_get_a_new_number() {
        let mut j = Journal::default();
        j.note_rules([("A".into(), "1".into()), ("B".into(), "1".into())]);
        assert_eq!(j.rule_changes, 2);
        j.note_rules([("A".into(), "1".into()), ("B".into(), "2".into())]);
        assert_eq!(j.rule_changes, 3);
        assert_eq!(j.rules["A"].0, 1);
        assert_eq!(j.rules["B"].0, 3);
    }
}
