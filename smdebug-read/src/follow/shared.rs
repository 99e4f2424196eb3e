//! One reading of a run's profiler data for every consumer in the process.
//!
//! A [`ProfilerSource`] owns the run's one [`ProfilerFollower`]. Each consumer (the rule
//! runner, the dashboard) takes a [`ProfilerSubscription`] and polls it at its own pace: the
//! first subscriber to ask for more data than has been read makes the follower read it, and
//! what was read is kept as an append-only log of [`Arc<Increment>`]s until every subscriber
//! has taken it, then let go. Taking an increment costs a reference count, not a copy; a
//! subscriber that is the last to take one gets it by value.
//!
//! Subscriptions are taken before the first poll (a subscription taken later, once the log's
//! head has been let go, starts its own follower, so that no subscriber misses data): a
//! `Session` subscribes its rules and its dashboard up front and hands them the subscriptions.
//!
//! A backlog (a whole run read at once) is read in pieces of a bounded number of samples and
//! spans; while one kind has a backlog, the kind that is ahead in time is held back, so that a
//! consumer cutting the data into time windows never waits for one kind with the other piling
//! up (see [`ProfilerSource::poll_follower`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use smdebug_storage::Storage;

use super::follower::{Increment, ProfilerFollower};
use super::problems::{DataArea, DataProblems};

/// Samples (and as many spans) one read of the source hands out at most: a backlog is taken
/// in pieces of this size, so that consumers hold a bounded part of the run at a time.
pub const ITEMS_PER_READ: usize = 50_000;

/// The one follower of a run's profiler data in a process, shared by its subscribers. Cheap to
/// clone (a handle).
#[derive(Clone)]
pub struct ProfilerSource {
    inner: Arc<Mutex<SourceState>>,
}

struct SourceState {
    follower: ProfilerFollower,
    /// What was read and not yet taken by every subscriber, oldest first.
    log: VecDeque<Arc<Increment>>,
    /// The sequence number of `log[0]` (every increment ever read is numbered from 0).
    base: u64,
    /// Per subscriber, the sequence number of the next increment it takes.
    cursors: BTreeMap<u64, u64>,
    next_id: u64,
    balance: Balance,
}

/// What the source knows of where each kind of data is in time, to hold back the one ahead.
#[derive(Default)]
struct Balance {
    /// The latest sample time read, when the last read of samples handed out a full piece
    /// (more may follow); likewise for spans (their latest end).
    backlog_samples_us: Option<u64>,
    backlog_spans_us: Option<u64>,
    latest_sample_us: u64,
    latest_span_us: u64,
    hold_samples: bool,
    hold_spans: bool,
}

impl Balance {
    /// Takes in what one read found, and decides what the next read holds back.
    fn note(&mut self, read: &Increment) {
        let latest_sample = read.samples.iter().map(|s| s.timestamp_us()).max();
        let latest_span = read.spans.iter().map(|s| s.end_us).max();
        self.latest_sample_us = self.latest_sample_us.max(latest_sample.unwrap_or(0));
        self.latest_span_us = self.latest_span_us.max(latest_span.unwrap_or(0));
        if !self.hold_samples {
            self.backlog_samples_us =
                latest_sample.filter(|_| read.more && read.samples.len() >= ITEMS_PER_READ);
        }
        if !self.hold_spans {
            self.backlog_spans_us =
                latest_span.filter(|_| read.more && read.spans.len() >= ITEMS_PER_READ);
        }
        self.hold_spans =
            self.backlog_samples_us.is_some() && self.latest_span_us > self.latest_sample_us;
        self.hold_samples =
            self.backlog_spans_us.is_some() && self.latest_sample_us > self.latest_span_us;
    }
}

impl ProfilerSource {
    /// The source of the run `storage`: its follower keeps spans' `args` (the rules read
    /// them) and hands out at most [`ITEMS_PER_READ`] samples and spans a read.
    pub fn new(storage: Arc<dyn Storage>) -> ProfilerSource {
        Self::with_follower(ProfilerFollower::new(storage).items_per_poll(ITEMS_PER_READ))
    }

    /// A source reading through `follower` as it is configured.
    pub fn with_follower(follower: ProfilerFollower) -> ProfilerSource {
        ProfilerSource {
            inner: Arc::new(Mutex::new(SourceState {
                follower,
                log: VecDeque::new(),
                base: 0,
                cursors: BTreeMap::new(),
                next_id: 0,
                balance: Balance::default(),
            })),
        }
    }

    fn state(&self) -> MutexGuard<'_, SourceState> {
        // A subscriber that panicked while holding the lock left the log consistent (every
        // change to it is one push or one pop), so the state is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new subscriber. It gets every increment from the first read on when nothing has been
    /// let go yet; otherwise (subscribing late) it reads the run with a source of its own, as
    /// [`ProfilerSource::new`] makes one (spans with their `args`, [`ITEMS_PER_READ`] a read).
    pub fn subscribe(&self) -> ProfilerSubscription {
        let mut state = self.state();
        if state.base > 0 {
            let storage = Arc::clone(state.follower.storage());
            drop(state);
            return ProfilerSource::new(storage).subscribe();
        }
        let id = state.next_id;
        state.next_id += 1;
        state.cursors.insert(id, 0);
        ProfilerSubscription {
            source: self.clone(),
            id,
        }
    }

    /// How many subscribers share this source now.
    pub fn subscribers(&self) -> usize {
        self.state().cursors.len()
    }

    /// Files the follower fetched so far (whole or a byte range), for every subscriber.
    pub fn fetches(&self) -> u64 {
        self.state().follower.fetches()
    }

    /// Bytes the follower fetched so far.
    pub fn bytes_read(&self) -> u64 {
        self.state().follower.bytes_read()
    }
}

impl SourceState {
    /// One read of the follower, holding back the kind ahead in time while the other has a
    /// backlog; the increment joins the log unless it found nothing at all.
    fn poll_follower(&mut self) {
        self.follower
            .hold(DataArea::System, self.balance.hold_samples);
        self.follower.hold(DataArea::Spans, self.balance.hold_spans);
        let read = self.follower.poll();
        self.balance.note(&read);
        if !read.is_empty() || !read.problems.is_empty() || read.more {
            self.log.push_back(Arc::new(read));
        }
    }

    /// Lets go of the increments every subscriber has taken.
    fn trim(&mut self) {
        let oldest = self.cursors.values().copied().min().unwrap_or(u64::MAX);
        while self.base < oldest && !self.log.is_empty() {
            self.log.pop_front();
            self.base += 1;
        }
    }
}

/// One consumer's place in a [`ProfilerSource`]. Dropping it lets the source go of what only
/// it had still to take.
pub struct ProfilerSubscription {
    source: ProfilerSource,
    id: u64,
}

impl ProfilerSubscription {
    /// What is new to this subscriber, oldest first: increments other subscribers already
    /// made the follower read, then one new read (one piece of a backlog: see
    /// [`Increment::more`]). While the follower is reading a backlog in pieces, a subscriber
    /// behind the others takes only what they read (it comes back for more, as
    /// [`Increment::more`] says); otherwise every poll ends with a read of its own, so that
    /// what a poll hands out holds every file there was when it started (a runner's last look
    /// after the run ended must not stop at what another subscriber read before the last file
    /// came). Empty when nothing new was found.
    pub fn poll(&mut self) -> Vec<Arc<Increment>> {
        let mut state = self.source.state();
        let head = state.base + state.log.len() as u64;
        let at = state.cursors.get(&self.id).copied().unwrap_or(head);
        let backlog = state.log.back().is_some_and(|read| read.more);
        if at == head || !backlog {
            state.poll_follower();
        }
        let from = (at - state.base) as usize;
        let taken: Vec<Arc<Increment>> = state.log.range(from..).cloned().collect();
        let end = state.base + state.log.len() as u64;
        state.cursors.insert(self.id, end);
        state.trim();
        taken
    }

    /// Every problem the follower met so far, each once.
    pub fn problems(&self) -> DataProblems {
        self.source.state().follower.problems().clone()
    }

    /// The source this subscription reads from.
    pub fn source(&self) -> &ProfilerSource {
        &self.source
    }
}

impl Drop for ProfilerSubscription {
    fn drop(&mut self) {
        let mut state = self.source.state();
        state.cursors.remove(&self.id);
        state.trim();
    }
}

impl Increment {
    /// The increment by value: moved out when `shared` is its last handle, copied otherwise.
    pub fn into_owned(shared: Arc<Increment>) -> Increment {
        Arc::try_unwrap(shared).unwrap_or_else(|shared| Increment::clone(&shared))
    }
}
