//! Framework spans held compactly: [`Span`]s with their strings interned and their `args`
//! dropped, 56 bytes a span instead of ~250 (three strings and a map each). A 1-hour run of
//! 100,000 steps has half a million spans.

use std::cmp::Ordering;
use std::collections::HashMap;

use serde_json::Map;
use smdebug_core::Mode;

use super::Span;
use crate::spans::Phase;

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
    /// The span's mode (`args.mode`, or its step row's).
    mode: Option<Mode>,
    /// Whether the span is a step span (its phase row is `Step:<mode>`).
    step_mode: Option<Mode>,
}

/// A span as a [`SpanStore`] holds it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpanRef<'a> {
    /// The phase row, e.g. `Forward`, `Step:ModeKeys.TRAIN`.
    pub phase: &'a str,
    /// The event name.
    pub name: &'a str,
    /// The node.
    pub node: &'a str,
    /// Start, microseconds since the epoch.
    pub start_us: u64,
    /// End, microseconds since the epoch.
    pub end_us: u64,
    /// The worker.
    pub worker: Option<u32>,
    /// The step.
    pub step: Option<u64>,
    /// The mode.
    pub mode: Option<Mode>,
    /// `Some(mode)` for a step span.
    pub step_mode: Option<Mode>,
}

impl SpanRef<'_> {
    /// The span's length in microseconds.
    pub fn duration_us(&self) -> u64 {
        self.end_us.saturating_sub(self.start_us)
    }

    /// The phase as this crate's [`Phase`](crate::spans::Phase).
    pub fn phase_kind(&self) -> crate::spans::Phase {
        crate::spans::Phase::from_trace_name(self.phase)
    }

    /// The span as a [`Span`] (with no `args`).
    pub fn to_span(&self) -> Span {
        Span {
            phase: self.phase.to_owned(),
            name: self.name.to_owned(),
            start_us: self.start_us,
            end_us: self.end_us,
            node: self.node.to_owned(),
            worker: self.worker,
            step: self.step,
            mode: self.mode,
            args: Map::new(),
        }
    }

    /// The store's order: start, end, then node, worker, phase, name, step, so that spans
    /// added in any order and in any batches end in one order.
    fn order(&self, other: &SpanRef<'_>) -> Ordering {
        (self.start_us, self.end_us)
            .cmp(&(other.start_us, other.end_us))
            .then_with(|| self.node.cmp(other.node))
            .then_with(|| self.worker.cmp(&other.worker))
            .then_with(|| self.phase.cmp(other.phase))
            .then_with(|| self.name.cmp(other.name))
            .then_with(|| self.step.cmp(&other.step))
    }
}

/// The store's order of two spans (see [`SpanStore`]).
fn span_order(a: &Span, b: &Span) -> Ordering {
    (a.start_us, a.end_us)
        .cmp(&(b.start_us, b.end_us))
        .then_with(|| a.node.cmp(&b.node))
        .then_with(|| a.worker.cmp(&b.worker))
        .then_with(|| a.phase.cmp(&b.phase))
        .then_with(|| a.name.cmp(&b.name))
        .then_with(|| a.step.cmp(&b.step))
}

/// Spans sorted in a [`SpanStore`]'s order, ready to merge into one: built without holding a
/// lock on the store.
#[derive(Debug, Default)]
pub struct SpanBatch<'s>(pub(super) Vec<&'s Span>);

impl<'s> SpanBatch<'s> {
    /// Sorts `spans`.
    pub fn new(spans: impl IntoIterator<Item = &'s Span>) -> SpanBatch<'s> {
        let mut spans: Vec<&Span> = spans.into_iter().collect();
        if !spans.is_sorted_by(|a, b| span_order(a, b).is_le()) {
            spans.sort_by(|a, b| span_order(a, b));
        }
        SpanBatch(spans)
    }
}

/// Spans ordered by start and end (then node, worker, phase, name, step), strings interned.
#[derive(Clone, Debug, Default)]
pub struct SpanStore {
    strings: Vec<Box<str>>,
    ids: HashMap<Box<str>, u32>,
    spans: Vec<Packed>,
}

impl SpanStore {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = u32::try_from(self.strings.len()).unwrap_or(u32::MAX);
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
            mode: p.mode,
            step_mode: p.step_mode,
        }
    }

    fn order(&self, a: &Packed, b: &Packed) -> Ordering {
        self.view(a).order(&self.view(b))
    }

    /// Adds spans in any order: the batch is sorted (`O(k log k)`) and merged into the spans
    /// held from the first one it precedes (`O(tail + k)`), never inserted one by one.
    pub fn extend<'s>(&mut self, spans: impl IntoIterator<Item = &'s Span>) {
        let mut batch: Vec<Packed> = spans
            .into_iter()
            .map(|span| Packed {
                start_us: span.start_us,
                end_us: span.end_us,
                step: span.step,
                worker: span.worker,
                phase: self.intern(&span.phase),
                name: self.intern(&span.name),
                node: self.intern(&span.node),
                mode: span.mode,
                step_mode: match span.phase_kind() {
                    Phase::Step(mode) => Some(mode),
                    _ => None,
                },
            })
            .collect();
        let Some(_) = batch.first() else { return };
        if !batch.is_sorted_by(|a, b| self.order(a, b).is_le()) {
            batch.sort_by(|a, b| self.order(a, b));
        }
        let at = self
            .spans
            .partition_point(|p| self.order(p, &batch[0]) != Ordering::Greater);
        if at == self.spans.len() {
            self.spans.append(&mut batch);
            return;
        }
        let tail = self.spans.split_off(at);
        self.spans.reserve(tail.len() + batch.len());
        let (mut i, mut j) = (0, 0);
        while i < tail.len() && j < batch.len() {
            if self.order(&batch[j], &tail[i]) == Ordering::Less {
                self.spans.push(batch[j]);
                j += 1;
            } else {
                self.spans.push(tail[i]);
                i += 1;
            }
        }
        self.spans.extend_from_slice(&tail[i..]);
        self.spans.extend_from_slice(&batch[j..]);
    }

    /// How many spans are held.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether no span is held.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The spans in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = SpanRef<'_>> + '_ {
        self.spans.iter().map(|p| self.view(p))
    }

    /// The first span.
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

    /// Every span as a [`Span`] (with no `args`), in order.
    pub fn to_spans(&self) -> Vec<Span> {
        self.iter().map(|s| s.to_span()).collect()
    }

    /// Distinct strings held (phases, names, nodes).
    pub fn strings(&self) -> usize {
        self.strings.len()
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
        store.extend(&[
            span("Step:ModeKeys.TRAIN", 10, 20, Some(1)),
            span("Forward", 12, 15, Some(1)),
        ]);
        store.extend(&[span("Step:ModeKeys.TRAIN", 0, 9, Some(0))]);
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
        assert_eq!(store.strings(), 5);
        assert_eq!(store.first_starting_at(11), 2);
        assert_eq!(store.iter_from(2).count(), 1);
    }

    #[test]
    fn batches_in_any_order_end_in_one_order() {
        let spans: Vec<Span> = (0..200u64)
            .map(|i| {
                let phase = if i % 3 == 0 { "Forward" } else { "Backward" };
                // Many ties on (start, end): the rest of the order decides.
                span(phase, (i * 7919) % 50, (i * 7919) % 50 + i % 4, Some(i % 5))
            })
            .collect();
        let mut whole = SpanStore::default();
        whole.extend(&spans);
        let mut pieces = SpanStore::default();
        for chunk in spans.rchunks(17) {
            pieces.extend(chunk);
        }
        assert_eq!(pieces.to_spans(), whole.to_spans());
        let starts: Vec<u64> = whole.iter().map(|s| s.start_us).collect();
        assert!(starts.is_sorted());
    }
}
