//! Framework spans held compactly: the report's [`Span`] (read by smdebug-profiler's parser)
//! with its strings interned and its `args` dropped, 56 bytes a span instead of ~250 (three
//! strings and a map each). A 1-hour run of 100,000 steps has half a million spans.

use std::collections::HashMap;

use smdebug_core::Mode;
use smdebug_profiler::reader::Span;
use smdebug_profiler::spans::Phase;

/// One span; strings are indices into the store's table.
#[derive(Clone, Copy, Debug)]
struct Packed {
    start_us: u64,
    end_us: u64,
    step: Option<u64>,
    worker: Option<u32>,
    phase: u32,
    name: u32,
    node: u32,
    /// The mode when the span is a step span.
    step_mode: Option<Mode>,
}

/// A span as the views read it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SpanRef<'a> {
    pub phase: &'a str,
    pub name: &'a str,
    pub node: &'a str,
    pub start_us: u64,
    pub end_us: u64,
    pub worker: Option<u32>,
    pub step: Option<u64>,
    /// `Some(mode)` for a step span.
    pub step_mode: Option<Mode>,
}

impl SpanRef<'_> {
    pub fn duration_us(&self) -> u64 {
        self.end_us.saturating_sub(self.start_us)
    }
}

/// Spans ordered by (start, end), strings interned.
#[derive(Debug, Default)]
pub(crate) struct SpanStore {
    strings: Vec<Box<str>>,
    ids: HashMap<Box<str>, u32>,
    spans: Vec<Packed>,
}

impl SpanStore {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        self.strings.push(s.into());
        self.ids.insert(s.into(), id);
        id
    }

    fn view(&self, p: &Packed) -> SpanRef<'_> {
        SpanRef {
            phase: &self.strings[p.phase as usize],
            name: &self.strings[p.name as usize],
            node: &self.strings[p.node as usize],
            start_us: p.start_us,
            end_us: p.end_us,
            worker: p.worker,
            step: p.step,
            step_mode: p.step_mode,
        }
    }

    /// Adds spans (in any order); the store stays ordered by (start, end).
    pub fn extend(&mut self, spans: Vec<Span>) {
        let mut in_order = true;
        self.spans.reserve_exact(spans.len());
        for span in spans {
            let step_mode = match span.phase_kind() {
                Phase::Step(mode) => Some(mode),
                _ => None,
            };
            let packed = Packed {
                start_us: span.start_us,
                end_us: span.end_us,
                step: span.step,
                worker: span.worker,
                phase: self.intern(&span.phase),
                name: self.intern(&span.name),
                node: self.intern(&span.node),
                step_mode,
            };
            if let Some(last) = self.spans.last()
                && (last.start_us, last.end_us) > (packed.start_us, packed.end_us)
            {
                in_order = false;
            }
            self.spans.push(packed);
        }
        if !in_order {
            // Stable sort of an almost sorted vector: cheap, and new files can interleave.
            self.spans.sort_by_key(|s| (s.start_us, s.end_us));
        }
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = SpanRef<'_>> + '_ {
        self.spans.iter().map(|p| self.view(p))
    }

    pub fn first(&self) -> Option<SpanRef<'_>> {
        self.spans.first().map(|p| self.view(p))
    }

    /// The spans from index `from` on.
    pub fn iter_from(&self, from: usize) -> impl Iterator<Item = SpanRef<'_>> + '_ {
        self.spans[from.min(self.spans.len())..]
            .iter()
            .map(|p| self.view(p))
    }

    /// The index of the first span starting at or after `start_us`.
    pub fn first_starting_at(&self, start_us: u64) -> usize {
        self.spans.partition_point(|s| s.start_us < start_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(phase: &str, start: u64, end: u64, step: Option<u64>) -> Span {
        Span {
            phase: phase.into(),
            name: format!("{phase}-event"),
            start_us: start,
            end_us: end,
            node: "algo-1".into(),
            worker: Some(0),
            step,
            mode: None,
            args: serde_json::Map::new(),
        }
    }

    #[test]
    fn spans_are_ordered_interned_and_read_back() {
        let mut store = SpanStore::default();
        store.extend(vec![
            span("Step:ModeKeys.TRAIN", 10, 20, Some(1)),
            span("Forward", 12, 15, Some(1)),
        ]);
        store.extend(vec![span("Step:ModeKeys.TRAIN", 0, 9, Some(0))]);
        let all: Vec<SpanRef<'_>> = store.iter().collect();
        assert_eq!(all.len(), 3);
        assert_eq!(
            all.iter().map(|s| s.start_us).collect::<Vec<_>>(),
            [0, 10, 12]
        );
        assert_eq!(all[0].step_mode, Some(Mode::Train));
        assert_eq!(all[2].step_mode, None);
        assert_eq!(all[2].phase, "Forward");
        assert_eq!(all[2].name, "Forward-event");
        assert_eq!(all[1].duration_us(), 10);
        // Phase, node and the step rows' names are stored once each.
        assert_eq!(store.strings.len(), 5);
        assert_eq!(store.first_starting_at(11), 2);
        assert_eq!(store.iter_from(2).count(), 1);
    }
}
