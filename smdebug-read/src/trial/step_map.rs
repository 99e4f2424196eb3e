//! The trial's per-step tables as sorted vectors: a long run's index has an entry a step, and a
//! `BTreeMap` of them cost ~140 bytes a step in half-full nodes (the steps and their mode
//! numbers, 14 MB of a 34 MB index at 100,000 steps) where a sorted vector costs the entries.
//! Steps arrive in order (listings are in step order, and a refresh lists from the last
//! complete step on), so an insertion is a push, or a short move near the end.

use std::ops::{Bound, RangeBounds};

use smdebug_core::Mode;

/// A map from keys to values, sorted by key in one vector (see the [module docs](self)).
#[derive(Clone, Debug)]
pub(crate) struct StepMap<K, V> {
    entries: Vec<(K, V)>,
}

impl<K, V> Default for StepMap<K, V> {
    fn default() -> Self {
        StepMap {
            entries: Vec::new(),
        }
    }
}

impl<K: Ord + Copy, V> StepMap<K, V> {
    /// Where `key` is, or where it would go (the end without a search when it is past the last).
    fn position(&self, key: &K) -> Result<usize, usize> {
        match self.entries.last() {
            None => Err(0),
            Some((last, _)) if last < key => Err(self.entries.len()),
            _ => self.entries.binary_search_by(|(k, _)| k.cmp(key)),
        }
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        self.position(key).ok().map(|i| &self.entries[i].1)
    }

    pub fn contains_key(&self, key: &K) -> bool {
        self.position(key).is_ok()
    }

    /// The value of `key`, made with `make` when there is none.
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.position(&key) {
            Ok(i) => i,
            Err(i) => {
                self.entries.insert(i, (key, make()));
                i
            }
        };
        &mut self.entries[i].1
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + '_ {
        self.entries.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + '_ {
        self.entries.iter().map(|(_, v)| v)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + '_ {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// The entries whose keys are in `range`, in order.
    pub fn range(&self, range: impl RangeBounds<K>) -> impl DoubleEndedIterator<Item = (&K, &V)> {
        let from = match range.start_bound() {
            Bound::Included(k) => self.entries.partition_point(|(e, _)| e < k),
            Bound::Excluded(k) => self.entries.partition_point(|(e, _)| e <= k),
            Bound::Unbounded => 0,
        };
        let to = match range.end_bound() {
            Bound::Included(k) => self.entries.partition_point(|(e, _)| e <= k),
            Bound::Excluded(k) => self.entries.partition_point(|(e, _)| e < k),
            Bound::Unbounded => self.entries.len(),
        };
        self.entries[from..to.max(from)].iter().map(|(k, v)| (k, v))
    }

    /// Lets go of the entries before `key`; the vector's room is given back when most of it
    /// is spare.
    pub fn drop_before(&mut self, key: &K) {
        let n = self.entries.partition_point(|(k, _)| k < key);
        self.entries.drain(..n);
        if self.entries.capacity() > 2 * self.entries.len() + 16 {
            self.entries.shrink_to_fit();
        }
    }

    /// Gives back the room no entry uses (a vector grown by doubling has up to half spare).
    pub fn shrink_to_fit(&mut self) {
        self.entries.shrink_to_fit();
    }
}

impl<K: Ord + Copy, V> std::ops::Index<&K> for StepMap<K, V> {
    type Output = V;

    fn index(&self, key: &K) -> &V {
        self.get(key).expect("a key the map holds")
    }
}

impl<'a, K: Ord + Copy, V> IntoIterator for &'a StepMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

/// Per mode, its steps' numbers -> the first global step numbered so (Python smdebug's
/// `_mode_to_global`): one sorted vector a mode, since the modes' steps interleave (an
/// epoch's training steps, then its evaluation's) and each mode's come in order.
#[derive(Clone, Debug, Default)]
pub(crate) struct ModeSteps(Vec<(Mode, StepMap<u64, u64>)>);

impl ModeSteps {
    /// Mode `mode`'s steps, if it has any.
    pub fn of(&self, mode: Mode) -> Option<&StepMap<u64, u64>> {
        self.0.iter().find(|(m, _)| *m == mode).map(|(_, s)| s)
    }

    /// The first global step of step `step` of `mode`.
    pub fn get(&self, mode: Mode, step: u64) -> Option<u64> {
        self.of(mode).and_then(|s| s.get(&step)).copied()
    }

    /// Step `step` of `mode` is global step `global`: kept when it is the first.
    pub fn add(&mut self, mode: Mode, step: u64, global: u64) {
        let i = match self.0.iter().position(|(m, _)| *m == mode) {
            Some(i) => i,
            None => {
                self.0.push((mode, StepMap::default()));
                self.0.len() - 1
            }
        };
        let first = self.0[i].1.get_or_insert_with(step, || global);
        *first = (*first).min(global);
    }

    /// `mode`'s steps in its numbering from `from` on, each with its global step, in order.
    pub fn range_from(&self, mode: Mode, from: u64) -> impl DoubleEndedIterator<Item = (u64, u64)> {
        self.of(mode)
            .into_iter()
            .flat_map(move |s| s.range(from..).map(|(s, g)| (*s, *g)))
    }

    /// The modes that have steps.
    pub fn modes(&self) -> impl Iterator<Item = Mode> + '_ {
        self.0.iter().map(|(m, _)| *m)
    }

    /// Lets go of `mode`'s steps whose global step is before `before` (a mode numbers its steps
    /// in the order of their global steps, so they come first); the last one let go.
    pub fn release_before(&mut self, mode: Mode, before: u64) -> Option<u64> {
        let steps = &mut self.0.iter_mut().find(|(m, _)| *m == mode)?.1;
        let gone = steps.values().take_while(|g| **g < before).count();
        let last = steps.keys().nth(gone.checked_sub(1)?).copied()?;
        steps.drop_before(&(last + 1));
        Some(last)
    }

    /// See [`StepMap::shrink_to_fit`].
    pub fn shrink_to_fit(&mut self) {
        for (_, s) in &mut self.0 {
            s.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_map_keeps_its_keys_in_order_whatever_order_they_come_in() {
        let mut m: StepMap<u64, &str> = StepMap::default();
        for (k, v) in [(5, "e"), (1, "a"), (9, "i"), (3, "c"), (7, "g")] {
            m.get_or_insert_with(k, || v);
        }
        *m.get_or_insert_with(3, || "x") = "C";
        assert_eq!(m.keys().copied().collect::<Vec<_>>(), [1, 3, 5, 7, 9]);
        assert_eq!(m[&3], "C");
        assert_eq!(m.get(&4), None);
        assert_eq!(m.keys().next_back(), Some(&9));
        let r = |m: &StepMap<u64, &str>, r: std::ops::Range<u64>| {
            m.range(r).map(|(k, _)| *k).collect::<Vec<_>>()
        };
        assert_eq!(r(&m, 2..8), [3, 5, 7]);
        assert_eq!(r(&m, 3..3), Vec::<u64>::new());
        assert_eq!(m.range(6..).map(|(k, _)| *k).collect::<Vec<_>>(), [7, 9]);
        assert_eq!(
            m.range(..=5).map(|(k, _)| *k).collect::<Vec<_>>(),
            [1, 3, 5]
        );
        m.drop_before(&5);
        assert_eq!(m.iter().map(|(k, _)| *k).collect::<Vec<_>>(), [5, 7, 9]);
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn mode_steps_keep_the_first_global_step_and_release_each_mode_from_its_first() {
        let mut s = ModeSteps::default();
        s.add(Mode::Train, 0, 0);
        s.add(Mode::Eval, 0, 1);
        s.add(Mode::Train, 1, 2);
        s.add(Mode::Eval, 1, 3);
        s.add(Mode::Train, 1, 1);
        assert_eq!(s.get(Mode::Train, 1), Some(1));
        assert_eq!(s.get(Mode::Predict, 0), None);
        assert_eq!(s.range_from(Mode::Eval, 1).collect::<Vec<_>>(), [(1, 3)]);
        assert_eq!(s.release_before(Mode::Train, 2), Some(1));
        assert_eq!(s.release_before(Mode::Eval, 1), None);
        assert_eq!(s.get(Mode::Train, 0), None);
        assert_eq!(s.get(Mode::Eval, 0), Some(1));
    }
}
