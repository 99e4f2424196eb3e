//! Python smdebug 1.0.34's step completeness in one type, [`StepProgress`] (the rules are in the
//! [`trial`](crate::trial) module's docs), and the step range a trial reads, [`StepRange`].

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};

/// Where a step stands for a reader (smdebug's `StepState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum StepState {
    /// The step is complete: every worker wrote it, or it can no longer change.
    Available,
    /// Not written (or not by every worker) yet, and the run goes on.
    NotYetAvailable,
    /// The step will never come: the run ended without it, or the run is past it.
    Unavailable,
}

/// The global steps a trial reads (Python smdebug's `range_steps`): from `start` (included) to
/// `end` (excluded); `None` leaves that side open. Index files of other steps are not read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepRange {
    /// The first step read (`None`: from the first).
    pub start: Option<u64>,
    /// The first step not read (`None`: to the last).
    pub end: Option<u64>,
}

impl StepRange {
    /// Every step.
    pub const ALL: StepRange = StepRange {
        start: None,
        end: None,
    };

    /// Steps `start..end`; `end` must be past `start` when both are given (Python asserts it).
    pub fn new(start: Option<u64>, end: Option<u64>) -> Result<StepRange> {
        let range = StepRange { start, end };
        range.check()?;
        Ok(range)
    }

    /// Fails when both ends are given and `end` is not past `start`.
    pub fn check(&self) -> Result<()> {
        match (self.start, self.end) {
            (Some(start), Some(end)) if end <= start => Err(Error::BadRangeSteps { start, end }),
            _ => Ok(()),
        }
    }

    /// Whether global step `step` is read.
    pub fn contains(&self, step: u64) -> bool {
        self.start.is_none_or(|s| step >= s) && self.end.is_none_or(|e| step < e)
    }
}

/// Python smdebug 1.0.34's step completeness for one run (see the [`trial`](crate::trial) module docs), fed
/// with what a reader reads: the collections files, and each worker's index file of each step.
/// The `Trial` keeps one; so does the [`TensorFollower`](super::TensorFollower), which reads index
/// files in bulk. A reader reports each worker's index file of a step once, and lists from
/// [`start_listing`](Self::start_listing) (no index file of an earlier step is read again, as in
/// Python smdebug).
///
/// A listing is not a snapshot: a file created while it runs may be left out while a later one
/// is in it (a folder read while files are renamed into it returns a new name or not depending
/// on where the name lands; an object store's listing pages). A worker's files of steps 7 and 8
/// can both be new, and a listing may hold 8 and not 7. So what the files read say is complete
/// (here *seen complete*) is not yet the last complete step: it is once a listing that started
/// after those files were read has been read too. Every file of a step seen complete existed
/// when that listing started (each worker writes its steps in order), and a listing holds every
/// file that existed when it started. Listings start after the last complete step, so a file
/// left out of one listing is in the next.
#[derive(Clone, Debug)]
pub struct StepProgress {
    /// `num_workers` of the first collections file.
    declared: Option<usize>,
    /// The workers the collections files are named after.
    collection_workers: BTreeSet<String>,
    /// The workers whose index files were read.
    step_workers: BTreeSet<String>,
    /// Steps past the last complete step, with the workers that wrote them.
    open: BTreeMap<u64, BTreeSet<String>>,
    /// How many distinct steps were read (Python's `len(_global_to_mode)`).
    known_steps: usize,
    /// The last step the files read so far make complete.
    seen_complete: Option<u64>,
    /// `seen_complete` when the listing being read started.
    seen_at_listing: Option<u64>,
    /// The last complete step: seen complete before a listing that has been read since.
    last_complete: Option<u64>,
    window: u64,
    ended: bool,
}

/// Python smdebug's default incomplete-step window (`SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW`).
pub const DEFAULT_INCOMPLETE_STEP_WINDOW: u64 = 1000;

impl Default for StepProgress {
    /// Nothing read yet, with Python smdebug's default window.
    fn default() -> StepProgress {
        StepProgress::new(DEFAULT_INCOMPLETE_STEP_WINDOW)
    }
}

impl StepProgress {
    /// Nothing read yet; `window`: the incomplete-step window (Python's
    /// `SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW`, 1000 by default).
    pub fn new(window: u64) -> StepProgress {
        StepProgress {
            declared: None,
            collection_workers: BTreeSet::new(),
            step_workers: BTreeSet::new(),
            open: BTreeMap::new(),
            known_steps: 0,
            seen_complete: None,
            seen_at_listing: None,
            last_complete: None,
            window,
            ended: false,
        }
    }

    /// A collections file was read: `worker` (from its name) and its `num_workers`. The first
    /// file's `num_workers` is the run's.
    pub fn collections_file(&mut self, worker: Option<&str>, num_workers: usize) {
        self.declared.get_or_insert(num_workers);
        if let Some(w) = worker {
            self.collection_workers.insert(w.to_string());
        }
    }

    /// Whether a collections file was read for each worker the first one declares. A worker
    /// writes its collections file before its first index file, and a rewrite keeps its name:
    /// listing the collections folder again can then find no worker that counts, so readers
    /// stop listing it (on an object store, each listing is a request).
    pub fn knows_every_worker(&self) -> bool {
        self.declared
            .is_some_and(|n| self.collection_workers.len() >= n.max(1))
    }

    /// How many workers must write a step for it to be complete: the collections file's
    /// `num_workers`, or (no collections file) the workers that wrote steps so far.
    pub fn expected_workers(&self) -> usize {
        self.declared
            .unwrap_or_else(|| self.step_workers.len().max(1))
    }

    /// The `num_workers` the collections file declares, if one was read.
    pub fn declared_workers(&self) -> Option<usize> {
        self.declared
    }

    /// The run's workers as Python smdebug names them: the collections files' workers (the
    /// workers that wrote steps when there is no collections file).
    pub fn workers(&self) -> Vec<String> {
        if self.collection_workers.is_empty() {
            self.step_workers.iter().cloned().collect()
        } else {
            self.collection_workers.iter().cloned().collect()
        }
    }

    /// The workers whose index files were read.
    pub fn step_workers(&self) -> &BTreeSet<String> {
        &self.step_workers
    }

    /// Whether `worker`'s index file of `step` was read, or need not be: the step is at or
    /// before the last complete step.
    pub fn has_read(&self, step: u64, worker: &str) -> bool {
        self.seen_complete.is_some_and(|l| step <= l)
            || self.open.get(&step).is_some_and(|w| w.contains(worker))
    }

    /// `worker`'s index file of `step` (one listing at least one tensor) was read. The step is
    /// the last complete one when that makes as many workers as the run declares (Python's
    /// `==`: a collections file declaring 0 workers completes nothing before the end).
    pub fn step_written(&mut self, step: u64, worker: &str) {
        if !self.step_workers.contains(worker) {
            self.step_workers.insert(worker.to_string());
        }
        if self.seen_complete.is_some_and(|l| step <= l) {
            return;
        }
        let expected = self.expected_workers();
        let workers = self.open.entry(step).or_insert_with(|| {
            self.known_steps += 1;
            BTreeSet::new()
        });
        if !workers.contains(worker) {
            workers.insert(worker.to_string());
        }
        if workers.len() == expected {
            self.complete_up_to(step);
        }
    }

    fn complete_up_to(&mut self, step: u64) {
        if self.seen_complete.is_none_or(|l| step > l) {
            self.seen_complete = Some(step);
            self.open = self.open.split_off(&step.saturating_add(1));
        }
    }

    /// A listing starts: the first step it lists, the one after the last complete step. What
    /// the files read so far make complete becomes the last complete step once this listing is
    /// read ([`listed`](Self::listed)).
    pub fn start_listing(&mut self) -> u64 {
        self.seen_at_listing = self.seen_complete;
        self.resume_step()
    }

    /// The listing started last has been read: what was seen complete when it started is the
    /// last complete step. Then Python smdebug's incomplete-step window: while more than
    /// `window` known steps are past the step seen complete (its formula: the number of steps
    /// minus the last complete step plus one), that step moves on by half the window. Python
    /// moves once per refresh; this moves until the window holds, so the answer does not depend
    /// on how many queries came before.
    pub fn listed(&mut self) {
        if self.seen_at_listing > self.last_complete {
            self.last_complete = self.seen_at_listing;
        }
        let half = i128::from(self.window / 2);
        if half == 0 {
            return;
        }
        let known = self.known_steps as i128;
        let mut last = self.seen_complete.map_or(-1, i128::from);
        while known - (last + 1) > i128::from(self.window) {
            last += half;
        }
        if let Ok(last) = u64::try_from(last) {
            self.complete_up_to(last);
        }
    }

    /// Whether the files read make steps complete that a listing has not yet confirmed: one
    /// more listing (from the last complete step) makes them the last complete step.
    pub fn relisting_due(&self) -> bool {
        !self.ended && self.seen_complete > self.last_complete
    }

    /// The run's end marker was read, and then a listing that has been read: every step is
    /// complete, and the last complete step is the last step (Python's `loaded_all_steps`).
    pub fn ended(&mut self, last_step: Option<u64>) {
        self.ended = true;
        if let Some(last) = last_step {
            self.complete_up_to(last);
        }
        self.last_complete = self.last_complete.max(self.seen_complete);
        self.open.clear();
    }

    /// The run's end marker was read, and every index file of the steps up to `step` (the
    /// reader reads ahead no further): those steps are complete, and the last complete step is
    /// at least `step`. The steps after it are still to be read.
    pub fn ended_through(&mut self, step: u64) {
        self.complete_up_to(step);
        self.last_complete = self.last_complete.max(self.seen_complete);
    }

    /// Whether the end marker was read.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// The last step the files read so far make complete, before a later listing confirms it
    /// (what [`last_complete`](Self::last_complete) becomes then).
    pub fn seen_complete(&self) -> Option<u64> {
        self.seen_complete
    }

    /// Python's `last_complete_step` (`None` for its -1).
    pub fn last_complete(&self) -> Option<u64> {
        self.last_complete
    }

    /// Whether global step `step` (a known step) is complete.
    pub fn is_complete(&self, step: u64) -> bool {
        self.ended || self.last_complete.is_some_and(|l| step <= l)
    }

    /// The first global step the next listing reads: the one after the last complete step.
    pub fn resume_step(&self) -> u64 {
        self.last_complete.map_or(0, |l| l.saturating_add(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_reads_from_its_start_up_to_its_end() {
        let r = StepRange::new(Some(2), Some(5)).unwrap();
        assert_eq!(
            (0..8).filter(|s| r.contains(*s)).collect::<Vec<_>>(),
            [2, 3, 4]
        );
        assert!(StepRange::ALL.contains(u64::MAX));
        let open_end = StepRange::new(Some(6), None).unwrap();
        assert!(!open_end.contains(5) && open_end.contains(6) && open_end.contains(u64::MAX));
        let err = StepRange::new(Some(5), Some(5)).unwrap_err();
        assert!(
            matches!(err, Error::BadRangeSteps { start: 5, end: 5 }),
            "{err}"
        );
    }

    /// What a reader does after reading the files of a listing: lists again (finding nothing
    /// new here), which confirms what the files made complete.
    fn confirm(p: &mut StepProgress) {
        p.listed();
        p.start_listing();
        p.listed();
    }

    /// The window moves the last complete step on by half a window at a time, as Python's
    /// formula does, until no more than a window of steps is past it.
    #[test]
    fn the_incomplete_step_window_moves_the_last_complete_step_by_half_windows() {
        let mut p = StepProgress::new(4);
        p.collections_file(Some("worker_0"), 2);
        p.start_listing();
        for g in 0..10 {
            p.step_written(g, "worker_0");
        }
        assert_eq!(
            p.last_complete(),
            None,
            "one of two workers wrote each step"
        );
        confirm(&mut p);
        // 10 - (-1 + 1) > 4 -> 1; 10 - 2 > 4 -> 3; 10 - 4 > 4 -> 5; 10 - 6 = 4 stops.
        assert_eq!(p.last_complete(), Some(5));
        assert!(p.is_complete(5) && !p.is_complete(6));
        assert_eq!(p.resume_step(), 6);
        let mut tiny = StepProgress::new(1);
        tiny.collections_file(None, 2);
        tiny.start_listing();
        for g in 0..10 {
            tiny.step_written(g, "w");
        }
        confirm(&mut tiny);
        assert_eq!(
            tiny.last_complete(),
            None,
            "half of a window of 1 moves nothing"
        );
    }

    /// A listing may hold a worker's step 8 and not its step 7 (written just before it, while
    /// the listing ran): what the files read make complete is the last complete step only once
    /// a listing started after them has been read, and listings start from the last complete
    /// step, so the next one reads step 7.
    #[test]
    fn steps_are_complete_once_a_later_listing_was_read() {
        let mut p = StepProgress::new(1000);
        assert_eq!(p.start_listing(), 0);
        p.step_written(5, "worker_0");
        p.step_written(6, "worker_0");
        p.step_written(8, "worker_0"); // 7 was not in the listing
        p.listed();
        assert_eq!(p.last_complete(), None, "nothing is confirmed yet");
        assert!(p.relisting_due());
        assert_eq!(
            p.start_listing(),
            0,
            "the next listing starts where this one did"
        );
        p.step_written(7, "worker_0");
        p.step_written(9, "worker_0");
        p.listed();
        assert_eq!(
            p.last_complete(),
            Some(8),
            "what was seen before the listing"
        );
        assert!(p.relisting_due(), "step 9 is not confirmed yet");
        assert_eq!(p.start_listing(), 9);
        p.listed();
        assert_eq!(p.last_complete(), Some(9));
        assert!(!p.relisting_due());
        // The end completes everything at once.
        p.start_listing();
        p.step_written(10, "worker_0");
        p.listed();
        p.ended(Some(10));
        assert_eq!(p.last_complete(), Some(10));
        assert!(!p.relisting_due());
    }

    /// A worker named only by a collections file holds nothing back; the declared count does;
    /// the end completes every step.
    #[test]
    fn completeness_counts_the_declared_workers_not_the_names() {
        let mut p = StepProgress::new(1000);
        p.collections_file(Some("worker_0"), 1);
        p.start_listing();
        p.step_written(0, "algo-1");
        confirm(&mut p);
        assert_eq!(p.last_complete(), Some(0));
        assert_eq!(p.workers(), ["worker_0"]);
        assert_eq!(p.step_workers().iter().collect::<Vec<_>>(), ["algo-1"]);
        let mut two = StepProgress::new(1000);
        two.collections_file(Some("worker_0"), 2);
        // A second collections file does not change the count.
        two.collections_file(Some("worker_1"), 5);
        two.start_listing();
        two.step_written(0, "worker_0");
        two.step_written(1, "worker_0");
        two.step_written(0, "worker_0");
        confirm(&mut two);
        assert_eq!(
            two.last_complete(),
            None,
            "the same worker twice is one worker"
        );
        two.start_listing();
        two.step_written(1, "worker_1");
        confirm(&mut two);
        assert_eq!(
            two.last_complete(),
            Some(1),
            "step 0 is passed: complete too"
        );
        assert!(two.is_complete(0) && two.has_read(0, "worker_1"));
        two.start_listing();
        two.step_written(2, "worker_0");
        confirm(&mut two);
        assert!(!two.is_complete(2) && two.has_read(2, "worker_0") && !two.has_read(2, "worker_1"));
        two.ended(Some(3));
        assert!(two.is_ended() && two.is_complete(3) && two.last_complete() == Some(3));
        // Declared 0: nothing completes before the end (Python's `==`).
        let mut zero = StepProgress::new(1000);
        zero.collections_file(Some("worker_0"), 0);
        zero.start_listing();
        zero.step_written(0, "worker_0");
        confirm(&mut zero);
        assert_eq!(zero.last_complete(), None);
        // No collections file: the workers that wrote steps.
        let mut none = StepProgress::new(1000);
        none.start_listing();
        none.step_written(0, "a");
        confirm(&mut none);
        assert_eq!(
            (none.last_complete(), none.workers()),
            (Some(0), vec!["a".to_string()])
        );
    }
}
