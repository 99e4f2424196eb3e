//! Steps held as arithmetic runs: [`StepRuns`].
//!
//! A tensor saved every step, or every tenth, is one run (`first`, `stride`, where the run
//! starts) however long the job: 24 bytes where a list of its steps took 8 a step. A stretch
//! cut by another mode's steps is one run per stretch. Used by the trial's per-name step sets
//! and by the scalar columns.

/// A stretch of steps `first, first + stride, ...`, starting at value `at` of its column (it
/// runs to the next run's `at`, or to the column's end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StepRun {
    first: u64,
    stride: u64,
    at: usize,
}

/// Steps, increasing, as arithmetic runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct StepRuns {
    runs: Vec<StepRun>,
    len: usize,
}

impl StepRuns {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The step of value `i`.
    pub(crate) fn get(&self, i: usize) -> u64 {
        let run = &self.runs[self.runs.partition_point(|run| run.at <= i) - 1];
        run.first + run.stride * (i - run.at) as u64
    }

    pub(crate) fn last(&self) -> Option<u64> {
        (self.len > 0).then(|| self.get(self.len - 1))
    }

    /// `Ok(i)` when step `step` is value `i`, else `Err(i)` where it would go.
    pub(crate) fn search(&self, step: u64) -> Result<usize, usize> {
        // The last run starting at or before `step`.
        let r = self.runs.partition_point(|run| run.first <= step);
        if r == 0 {
            return Err(0);
        }
        let run = &self.runs[r - 1];
        let end = self.runs.get(r).map_or(self.len, |next| next.at);
        let offset = step - run.first;
        let n = (end - run.at) as u64;
        if run.stride == 0 {
            // A run of one value.
            return if offset == 0 {
                Ok(run.at)
            } else {
                Err(run.at + 1)
            };
        }
        let k = offset / run.stride;
        if k >= n {
            return Err(end);
        }
        if offset.is_multiple_of(run.stride) {
            Ok(run.at + k as usize)
        } else {
            Err(run.at + k as usize + 1)
        }
    }

    /// Appends `step`, greater than the last.
    pub(crate) fn push(&mut self, step: u64) {
        match self.runs.last_mut() {
            None => self.runs.push(StepRun {
                first: step,
                stride: 0,
                at: 0,
            }),
            Some(run) => {
                let n = self.len - run.at;
                let last = run.first + run.stride * (n as u64 - 1);
                if n == 1 {
                    run.stride = step - last;
                } else if step - last != run.stride {
                    self.runs.push(StepRun {
                        first: step,
                        stride: 0,
                        at: self.len,
                    });
                }
            }
        }
        self.len += 1;
    }

    /// Inserts `step` (not held) at value `i`: the runs are built again (a late step, rare).
    pub(crate) fn insert(&mut self, i: usize, step: u64) {
        let mut all: Vec<u64> = (0..self.len).map(|j| self.get(j)).collect();
        all.insert(i, step);
        *self = StepRuns::default();
        for s in all {
            self.push(s);
        }
    }

    /// Lets go of the steps before `step`: the runs wholly before it are dropped, the one it
    /// cuts starts at its first step at or after `step`.
    pub(crate) fn drop_before(&mut self, step: u64) {
        let cut = match self.search(step) {
            Ok(i) | Err(i) => i,
        };
        if cut == 0 {
            return;
        }
        if cut >= self.len {
            *self = StepRuns::default();
            return;
        }
        let r = self.runs.partition_point(|run| run.at <= cut) - 1;
        let first = self.get(cut);
        self.runs.drain(..r);
        self.runs[0].first = first;
        self.runs[0].at = cut;
        for run in &mut self.runs {
            run.at -= cut;
        }
        self.len -= cut;
    }

    /// How many runs hold the steps.
    #[cfg(test)]
    pub(crate) fn run_count(&self) -> usize {
        self.runs.len()
    }

    /// `step` alone.
    pub(crate) fn single(step: u64) -> Self {
        let mut runs = StepRuns::default();
        runs.push(step);
        runs
    }

    /// Whether `step` is held.
    pub(crate) fn contains(&self, step: u64) -> bool {
        self.search(step).is_ok()
    }

    /// Adds `step` in its place; nothing when it is held already.
    pub(crate) fn add(&mut self, step: u64) {
        match self.last() {
            Some(last) if last >= step => {
                if let Err(at) = self.search(step) {
                    self.insert(at, step);
                }
            }
            _ => self.push(step),
        }
    }

    /// The steps, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.runs.iter().enumerate().flat_map(move |(r, run)| {
            let end = self.runs.get(r + 1).map_or(self.len, |next| next.at);
            (0..(end - run.at) as u64).map(move |k| run.first + run.stride * k)
        })
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.runs.capacity() * std::mem::size_of::<StepRun>()
    }

    pub(crate) fn shrink(&mut self) {
        self.runs.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::StepRuns;

    /// Dropping the steps before a step keeps every later step, in its runs.
    #[test]
    fn dropping_steps_before_a_step_keeps_the_later_ones() {
        let all: Vec<u64> = (0..100u64)
            .step_by(10)
            .chain([101, 102, 103, 200, 500, 505, 510])
            .collect();
        for cut in [0, 5, 10, 11, 95, 101, 102, 104, 200, 505, 511, 1000] {
            let mut runs = StepRuns::default();
            for s in &all {
                runs.push(*s);
            }
            runs.drop_before(cut);
            let kept: Vec<u64> = all.iter().copied().filter(|s| *s >= cut).collect();
            assert_eq!(runs.iter().collect::<Vec<_>>(), kept, "cut at {cut}");
            assert_eq!(runs.len(), kept.len());
            for s in 0..600 {
                assert_eq!(
                    runs.contains(s),
                    kept.contains(&s),
                    "cut at {cut}, step {s}"
                );
            }
            runs.add(2000);
            assert_eq!(runs.last(), Some(2000));
        }
    }

    /// Steps added in any order, with repeats, are held once each, in order, as few runs.
    #[test]
    fn steps_in_any_order_are_held_once_in_order() {
        let mut runs = StepRuns::default();
        let mut expected = std::collections::BTreeSet::new();
        let steps = (0..1000u64)
            .step_by(10)
            .chain([5, 995, 0, 2000, 2001, 2002, 7, 7, 500]);
        for s in steps {
            runs.add(s);
            expected.insert(s);
        }
        assert_eq!(
            runs.iter().collect::<Vec<_>>(),
            expected.iter().copied().collect::<Vec<_>>()
        );
        assert_eq!(runs.len(), expected.len());
        for s in 0..2100 {
            assert_eq!(runs.contains(s), expected.contains(&s), "{s}");
        }
        // 0..990 by 10 with 5, 7 and 995 cut in: a handful of runs, not a step each.
        assert!(runs.heap_bytes() < 24 * 16, "{} bytes", runs.heap_bytes());
    }
}
