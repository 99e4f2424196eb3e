//! A set of steps held compactly: [`StepSet`], the `save_steps` of a schedule.
//!
//! A hook config may list millions of steps (`"save_steps": "0,1,2,…"`). Held as a list, each
//! step costs 8 bytes in every copy of the schedule (a collection's schedule starts from the
//! hook's, per mode), and `should_save` walks the whole list at every step. A `StepSet` keeps
//! the steps sorted, as arithmetic runs (`first, first + stride, …`, three steps or more) and the
//! steps that fall in no run; copies share them, and a lookup is two binary searches.

use std::fmt;
use std::sync::Arc;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

/// Steps `first`, `first + stride`, …, `count` of them (at least three; `stride` at least 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    first: u64,
    stride: u64,
    count: u64,
}

impl Run {
    fn last(&self) -> u64 {
        self.first + self.stride * (self.count - 1)
    }

    fn contains(&self, step: u64) -> bool {
        step >= self.first && step <= self.last() && (step - self.first).is_multiple_of(self.stride)
    }
}

/// A set of steps, sorted and without duplicates, held as arithmetic runs and single steps
/// (a hook config may list millions of steps, `"save_steps": "0,1,2,…"`: as a list each would
/// cost 8 bytes in every copy of the schedule, and a lookup would walk it; here a lookup is two
/// binary searches). Copies share the steps. Built from any steps in any order
/// ([`FromIterator`], `From<Vec<u64>>`, `From<[u64; N]>`); serialized as the sorted list, read
/// from a list of numbers or numeric strings, or from one comma-separated string, as smdebug's
/// `save_steps`.
///
/// ```
/// use smdebug_core::save_config::StepSet;
///
/// let steps: StepSet = (0..3_000_000u64).chain([7_000_001, 5]).collect();
/// assert!(steps.contains(2_999_999) && steps.contains(7_000_001));
/// assert!(!steps.contains(3_000_000));
/// assert_eq!(steps.len(), 3_000_001, "5 is there once");
/// assert_eq!(steps.iter().rev().take(2).collect::<Vec<_>>(), [7_000_001, 2_999_999]);
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StepSet {
    /// Ordered by `first`; the runs' spans do not overlap each other or a single step.
    runs: Arc<[Run]>,
    /// Steps in no run, ascending.
    singles: Arc<[u64]>,
    len: u64,
}

impl StepSet {
    /// No steps.
    pub fn new() -> Self {
        StepSet::default()
    }

    /// Whether `step` is in the set.
    pub fn contains(&self, step: u64) -> bool {
        let at = self.runs.partition_point(|r| r.first <= step);
        (at > 0 && self.runs[at - 1].contains(step)) || self.singles.binary_search(&step).is_ok()
    }

    /// How many steps.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The steps, ascending.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = u64> + '_ {
        Merge {
            runs: self
                .runs
                .iter()
                .flat_map(|r| (0..r.count).map(move |i| r.first + r.stride * i)),
            singles: self.singles.iter().copied(),
            next_run: None,
            next_single: None,
            back_run: None,
            back_single: None,
        }
    }

    /// The set from steps already sorted and without duplicates.
    fn from_sorted(steps: impl IntoIterator<Item = u64>) -> StepSet {
        let mut builder = Builder::default();
        for step in steps {
            builder.push(step);
        }
        builder.finish()
    }

    /// Bytes held by the runs and single steps (shared by every copy).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.runs) + std::mem::size_of_val(&*self.singles)
    }
}

/// Cuts a sorted, deduplicated stream of steps into runs of three or more and single steps.
#[derive(Default)]
struct Builder {
    runs: Vec<Run>,
    singles: Vec<u64>,
    /// The run being grown: one or two steps are tentative, three or more a run.
    open: Option<Run>,
    len: u64,
}

impl Builder {
    fn push(&mut self, step: u64) {
        self.len += 1;
        let Some(mut run) = self.open else {
            self.open = Some(Run {
                first: step,
                stride: 1,
                count: 1,
            });
            return;
        };
        let last = run.last();
        debug_assert!(step > last);
        if run.count == 1 {
            run.stride = step - run.first;
            run.count = 2;
        } else if step - last == run.stride {
            run.count += 1;
        } else if run.count == 2 {
            // Two steps are no run: the first stays single, the second starts one with `step`.
            self.singles.push(run.first);
            run = Run {
                first: last,
                stride: step - last,
                count: 2,
            };
        } else {
            self.runs.push(run);
            run = Run {
                first: step,
                stride: 1,
                count: 1,
            };
        }
        self.open = Some(run);
    }

    fn finish(mut self) -> StepSet {
        match self.open {
            Some(run) if run.count >= 3 => self.runs.push(run),
            Some(run) => self
                .singles
                .extend((0..run.count).map(|i| run.first + run.stride * i)),
            None => {}
        }
        StepSet {
            runs: self.runs.into(),
            singles: self.singles.into(),
            len: self.len,
        }
    }
}

/// The runs' steps and the single steps merged into one ascending stream (the two never hold
/// the same step).
struct Merge<R, S> {
    runs: R,
    singles: S,
    next_run: Option<u64>,
    next_single: Option<u64>,
    back_run: Option<u64>,
    back_single: Option<u64>,
}

impl<R: DoubleEndedIterator<Item = u64>, S: DoubleEndedIterator<Item = u64>> Iterator
    for Merge<R, S>
{
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.next_run.is_none() {
            self.next_run = self.runs.next().or_else(|| self.back_run.take());
        }
        if self.next_single.is_none() {
            self.next_single = self.singles.next().or_else(|| self.back_single.take());
        }
        match (self.next_run, self.next_single) {
            (Some(r), Some(s)) if s < r => self.next_single.take(),
            (Some(_), _) => self.next_run.take(),
            (None, s) => s.and_then(|_| self.next_single.take()),
        }
    }
}

impl<R: DoubleEndedIterator<Item = u64>, S: DoubleEndedIterator<Item = u64>> DoubleEndedIterator
    for Merge<R, S>
{
    fn next_back(&mut self) -> Option<u64> {
        if self.back_run.is_none() {
            self.back_run = self.runs.next_back().or_else(|| self.next_run.take());
        }
        if self.back_single.is_none() {
            self.back_single = self.singles.next_back().or_else(|| self.next_single.take());
        }
        match (self.back_run, self.back_single) {
            (Some(r), Some(s)) if s > r => self.back_single.take(),
            (Some(_), _) => self.back_run.take(),
            (None, s) => s.and_then(|_| self.back_single.take()),
        }
    }
}

impl FromIterator<u64> for StepSet {
    /// Any steps, in any order, repeated or not. Steps already ascending are taken as they come;
    /// others are sorted first.
    fn from_iter<I: IntoIterator<Item = u64>>(steps: I) -> Self {
        let mut builder = Builder::default();
        let mut rest = Vec::new();
        let mut last = None;
        for step in steps {
            match last {
                _ if !rest.is_empty() => rest.push(step),
                Some(l) if step == l => {}
                Some(l) if step < l => rest.push(step),
                _ => {
                    builder.push(step);
                    last = Some(step);
                }
            }
        }
        if rest.is_empty() {
            return builder.finish();
        }
        // Out of order: everything sorted together.
        let mut all: Vec<u64> = builder.finish().iter().chain(rest).collect();
        all.sort_unstable();
        all.dedup();
        StepSet::from_sorted(all)
    }
}

impl From<Vec<u64>> for StepSet {
    fn from(steps: Vec<u64>) -> Self {
        steps.into_iter().collect()
    }
}

impl<const N: usize> From<[u64; N]> for StepSet {
    fn from(steps: [u64; N]) -> Self {
        steps.into_iter().collect()
    }
}

impl fmt::Debug for StepSet {
    /// The steps, a long set shortened to its first and last few.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.len <= 16 {
            return f.debug_list().entries(self.iter()).finish();
        }
        let head: Vec<u64> = self.iter().take(8).collect();
        let mut tail: Vec<u64> = self.iter().rev().take(8).collect();
        tail.reverse();
        write!(f, "{head:?}… {} steps …{tail:?}", self.len)
    }
}

impl Serialize for StepSet {
    /// The sorted list of steps, written one by one.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(usize::try_from(self.len).ok())?;
        for step in self.iter() {
            seq.serialize_element(&step)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for StepSet {
    /// A list of steps (numbers, or strings holding one), or one comma-separated string
    /// (`"1, 2,3"`), read one step at a time into the set.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StepSetVisitor)
    }
}

struct StepSetVisitor;

impl<'de> Visitor<'de> for StepSetVisitor {
    type Value = StepSet;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of steps or a comma-separated string of steps")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<StepSet, E> {
        let mut error = None;
        let set = text
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map_while(|p| match p.parse::<u64>() {
                Ok(step) => Some(step),
                Err(e) => {
                    error = Some(E::custom(format!("step `{p}`: {e}")));
                    None
                }
            })
            .collect();
        match error {
            Some(e) => Err(e),
            None => Ok(set),
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StepSet, A::Error> {
        let mut error = None;
        let set = std::iter::from_fn(|| match seq.next_element::<OneStep>() {
            Ok(step) => step.map(|s| s.0),
            Err(e) => {
                error = Some(e);
                None
            }
        })
        .collect();
        match error {
            Some(e) => Err(e),
            None => Ok(set),
        }
    }
}

/// One step of a list: a number, or a string holding one.
struct OneStep(u64);

impl<'de> Deserialize<'de> for OneStep {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = OneStep;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a step: a whole number from 0, or a string holding one")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<OneStep, E> {
                Ok(OneStep(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<OneStep, E> {
                u64::try_from(v)
                    .map(OneStep)
                    .map_err(|_| E::custom(format!("step {v}: steps start at 0")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<OneStep, E> {
                v.trim()
                    .parse()
                    .map(OneStep)
                    .map_err(|e| E::custom(format!("step `{v}`: {e}")))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_long_regular_list_is_one_run() {
        let set: StepSet = (0..3_000_000u64).map(|s| s * 2).collect();
        assert_eq!(set.len(), 3_000_000);
        assert!(set.heap_bytes() <= 64, "{}", set.heap_bytes());
        assert!(set.contains(5_999_998) && !set.contains(5_999_999) && !set.contains(6_000_000));
        let copy = set.clone();
        assert!(Arc::ptr_eq(&copy.runs, &set.runs), "copies share the steps");
    }

    #[test]
    fn an_irregular_list_costs_at_most_eight_bytes_a_step() {
        // A fixed xorshift sequence: steps with no pattern.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let steps: Vec<u64> = (0..10_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x >> 24
            })
            .collect();
        let set: StepSet = steps.iter().copied().collect();
        let mut sorted = steps.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(set.iter().collect::<Vec<_>>(), sorted);
        assert!(set.heap_bytes() <= 8 * sorted.len(), "{}", set.heap_bytes());
    }

    #[test]
    fn read_from_lists_and_strings_as_smdebug_writes_them() {
        let from =
            |v: serde_json::Value| StepSet::deserialize(&v).map(|s| s.iter().collect::<Vec<_>>());
        assert_eq!(from(serde_json::json!("3, 1,2,,")).unwrap(), [1, 2, 3]);
        assert_eq!(from(serde_json::json!([5, "4", " 4 "])).unwrap(), [4, 5]);
        assert_eq!(from(serde_json::json!([])).unwrap(), Vec::<u64>::new());
        for bad in [
            serde_json::json!("1,two"),
            serde_json::json!([-1]),
            serde_json::json!([1.5]),
            serde_json::json!(7),
            serde_json::json!({"a": 1}),
        ] {
            assert!(from(bad.clone()).is_err(), "{bad}");
        }
        let err = from(serde_json::json!("1,two")).unwrap_err().to_string();
        assert!(err.contains("`two`"), "{err}");
        let set = StepSet::from([9, 1, 5]);
        assert_eq!(serde_json::to_string(&set).unwrap(), "[1,5,9]");
    }

    proptest! {
        #[test]
        fn the_set_holds_exactly_the_steps_given(
            steps in proptest::collection::vec(
                prop_oneof![0u64..200, Just(u64::MAX), Just(u64::MAX - 3)], 0..60),
            probe in proptest::collection::vec(any::<u64>(), 8),
        ) {
            let set: StepSet = steps.iter().copied().collect();
            let mut sorted = steps.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(set.iter().collect::<Vec<_>>(), sorted.clone());
            let mut back: Vec<u64> = set.iter().rev().collect();
            back.reverse();
            prop_assert_eq!(&back, &sorted);
            prop_assert_eq!(set.len(), sorted.len() as u64);
            for s in (0..210).chain(probe).chain([u64::MAX, u64::MAX - 1, u64::MAX - 3]) {
                prop_assert_eq!(set.contains(s), sorted.binary_search(&s).is_ok(), "step {}", s);
            }
            // One order or another, the same set.
            let reversed: StepSet = sorted.iter().rev().copied().collect();
            prop_assert_eq!(reversed, set);
        }
    }
}
