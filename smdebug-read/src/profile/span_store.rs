//! Framework spans held compactly: [`Span`]s with their `args` dropped and everything but
//! their times and step interned, 32 bytes a span instead of ~250 (three strings and a map
//! each), with at most an eighth more held in reserve. A 1-hour run of 100,000 steps has half
//! a million spans: 16 MB.

use foldhash::HashMap;
use std::cmp::Ordering;

use serde_json::Map;
use smdebug_core::Mode;

use super::Span;
use smdebug_core::phase::Phase;

/// One span: its times, its step, and the id of what it shares with many others.
#[derive(Clone, Copy, Debug)]
struct Packed {
    start_us: u64,
    end_us: u64,
    /// The step; 0 when the kind says there is none.
    step: u64,
    /// An index into the store's kinds.
    kind: u32,
}

/// What spans share: their strings (indices into the store's table), worker and modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Kind {
    phase: u32,
    name: u32,
    node: u32,
    worker: Option<u32>,
    /// The span's mode (`args.mode`, or its step row's).
    mode: Option<Mode>,
    /// Whether the span is a step span (its phase row is `Step:<mode>`).
    step_mode: Option<Mode>,
    /// Whether the span has a step.
    has_step: bool,
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

    /// The phase as this crate's [`Phase`](smdebug_core::phase::Phase).
    pub fn phase_kind(&self) -> smdebug_core::phase::Phase {
        smdebug_core::phase::Phase::from_trace_name(self.phase)
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
    kinds: Vec<Kind>,
    kind_ids: HashMap<Kind, u32>,
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

    fn pack(&mut self, span: &Span) -> Packed {
        let kind = Kind {
            phase: self.intern(&span.phase),
            name: self.intern(&span.name),
            node: self.intern(&span.node),
            worker: span.worker,
            mode: span.mode,
            step_mode: match span.phase_kind() {
                Phase::Step(mode) => Some(mode),
                _ => None,
            },
            has_step: span.step.is_some(),
        };
        let kind = match self.kind_ids.get(&kind) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(self.kinds.len()).unwrap_or(u32::MAX);
                self.kinds.push(kind);
                self.kind_ids.insert(kind, id);
                id
            }
        };
        Packed {
            start_us: span.start_us,
            end_us: span.end_us,
            step: span.step.unwrap_or(0),
            kind,
        }
    }

    fn view(&self, p: &Packed) -> SpanRef<'_> {
        let kind = &self.kinds[p.kind as usize];
        SpanRef {
            phase: &self.strings[kind.phase as usize],
            name: &self.strings[kind.name as usize],
            node: &self.strings[kind.node as usize],
            start_us: p.start_us,
            end_us: p.end_us,
            worker: kind.worker,
            step: kind.has_step.then_some(p.step),
            mode: kind.mode,
            step_mode: kind.step_mode,
        }
    }

    fn order(&self, a: &Packed, b: &Packed) -> Ordering {
        (a.start_us, a.end_us)
            .cmp(&(b.start_us, b.end_us))
            .then_with(|| {
                if a.kind == b.kind {
                    // Same node, worker, phase and name, and both with a step or both without.
                    a.step.cmp(&b.step)
                } else {
                    self.view(a).order(&self.view(b))
                }
            })
    }

    /// Room for `additional` more spans, with at most an eighth of the spans held in reserve
    /// (not the doubling of `Vec::push`): a large store's slack stays small, and growing a
    /// large block is a remap rather than a copy with the system allocator.
    fn reserve(&mut self, additional: usize) {
        let need = self.spans.len() + additional;
        if need > self.spans.capacity() {
            let target = need + need / 8;
            self.spans.reserve_exact(target - self.spans.len());
        }
    }

    /// Adds spans in any order: the batch is sorted (`O(k log k)`) and merged into the spans
    /// held from the first one it precedes (`O(tail + k)`, in place from the back), never
    /// inserted one by one.
    pub fn extend<'s>(&mut self, spans: impl IntoIterator<Item = &'s Span>) {
        let mut batch: Vec<Packed> = spans.into_iter().map(|span| self.pack(span)).collect();
        let Some(_) = batch.first() else { return };
        if !batch.is_sorted_by(|a, b| self.order(a, b).is_le()) {
            batch.sort_by(|a, b| self.order(a, b));
        }
        let at = self
            .spans
            .partition_point(|p| self.order(p, &batch[0]) != Ordering::Greater);
        self.reserve(batch.len());
        let held = self.spans.len();
        if at == held {
            self.spans.extend_from_slice(&batch);
            return;
        }
        // Merge from the back: the tail `at..held` and the batch fill `at..held + k`, each
        // slot written after the one it may overwrite was read.
        self.spans.resize(held + batch.len(), batch[0]);
        let (mut i, mut j, mut out) = (held, batch.len(), held + batch.len());
        while j > 0 {
            out -= 1;
            // Equal spans: the ones held first, as a forward merge would place them.
            if i > at && self.order(&batch[j - 1], &self.spans[i - 1]) == Ordering::Less {
                i -= 1;
                self.spans[out] = self.spans[i];
            } else {
                j -= 1;
                self.spans[out] = batch[j];
            }
        }
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

    #[test]
    fn a_span_takes_32_bytes_and_the_reserve_stays_within_an_eighth() {
        assert!(size_of::<Packed>() <= 32, "{}", size_of::<Packed>());
        let spans: Vec<Span> = (0..20_000u64)
            .map(|i| span("Forward", i * 10, i * 10 + 5, Some(i)))
            .collect();
        let mut store = SpanStore::default();
        // In order, file by file, as a reader adds them; then an early batch merged in.
        for chunk in spans[1000..].chunks(333) {
            store.extend(chunk);
            assert!(store.spans.capacity() <= store.len() + store.len() / 8 + 333);
        }
        store.extend(&spans[..1000]);
        assert_eq!(store.len(), 20_000);
        assert!(
            store.spans.capacity() <= 20_000 + 20_000 / 8,
            "{}",
            store.spans.capacity()
        );
        assert_eq!(store.to_spans(), spans);
    }

    #[test]
    fn every_field_survives_and_batches_in_any_order_give_the_sorted_spans() {
        let phases = [
            "Step:ModeKeys.TRAIN",
            "Forward",
            "Step:ModeKeys.EVAL",
            "Backward",
        ];
        let spans: Vec<Span> = (0..3000u64)
            .map(|i| {
                let phase = phases[(i % 4) as usize];
                let step = match i % 6 {
                    0 => None,
                    1 => Some(u64::MAX),
                    2 => Some(0),
                    _ => Some(i % 17),
                };
                Span {
                    phase: phase.into(),
                    name: format!("ev{}", i % 3),
                    start_us: (i * 7919) % 400,
                    end_us: (i * 7919) % 400 + i % 3,
                    node: if i % 5 == 0 { "algo-2" } else { "algo-1" }.into(),
                    worker: (i % 7 != 0).then_some((i % 3) as u32),
                    // A function of the fields the order compares, so that spans equal in
                    // the order are equal.
                    mode: match (step, i % 4) {
                        (None, _) => None,
                        (_, 2) => Some(Mode::Eval),
                        _ => Some(Mode::Train),
                    },
                    step,
                    args: serde_json::Map::new(),
                }
            })
            .collect();
        let mut expected = spans.clone();
        expected.sort_by(span_order);
        // Batches of odd sizes, in a scrambled order of batches.
        let chunks: Vec<&[Span]> = spans.chunks(97).collect();
        let mut store = SpanStore::default();
        for k in 0..chunks.len() {
            store.extend(chunks[(k * 13) % chunks.len()]);
        }
        assert_eq!(store.len(), spans.len());
        assert_eq!(store.to_spans(), expected);
        for s in store.iter() {
            let expected = match s.phase {
                "Step:ModeKeys.TRAIN" => Some(Mode::Train),
                "Step:ModeKeys.EVAL" => Some(Mode::Eval),
                _ => None,
            };
            assert_eq!(s.step_mode, expected);
        }
        assert!(store.iter().any(|s| s.step == Some(u64::MAX)));
        assert!(store.iter().any(|s| s.step.is_none()));
        assert!(store.iter().any(|s| s.step == Some(0)));
    }
}
