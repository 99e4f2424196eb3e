//! One reading of a run's tensor files for every reader in the process: [`TensorSource`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::error::Result;
use bytes::Bytes;
use smdebug_core::EndReason;
use smdebug_storage::Storage;

use super::index_files::{IndexEntry, IndexShare};

/// The most bytes of event files a source holds for subscribers that have not taken them yet.
pub const HELD_EVENT_BYTES: usize = 64 << 20;

/// The most index files a source holds for subscribers that have not taken them yet (about
/// 200 bytes each, their tables shared with the readers').
pub const HELD_INDEX_FILES: usize = 1 << 16;

/// How many index files a subscriber that may wait reads ahead of the others
/// ([`TensorSubscription::is_ahead`]).
pub const LEAD_INDEX_FILES: usize = 4096;

/// How many bytes of event files a subscriber that may wait reads ahead of the others
/// ([`TensorSubscription::is_ahead`]).
pub const LEAD_EVENT_BYTES: usize = 8 << 20;

/// The one reading of a run's index, event and collections files in a process, shared by its
/// subscribers. Cheap to clone (a handle).
///
/// A [`TensorSource`] is where the tensor readers of one run in a process (a `Session`'s rule
/// runner through its [`Trial`](super::Trial), its dashboard through its
/// [`TensorFollower`](super::TensorFollower)) get their index files and event files: the first
/// subscriber to need a file reads it, and what it read (the index file parsed, the event file's
/// bytes) is held for the other subscribers until each has taken it, then let go. Taking a file
/// costs a reference count, or for the last taker nothing: a parsed index file shares its
/// tables (names and record places are `Arc`s) and an event file's bytes are one `Bytes`.
///
/// Each reader keeps its own listing, step completeness and checks ([`StepProgress`], the
/// `Trial`'s read-ahead horizon, the follower's time budget): what they share is the files'
/// contents, which never change once published (smdebug's writers, ours and Python's, write a
/// temporary file and rename it). A subscriber asking for a file another is reading waits for
/// that read rather than reading the file too. Collections files are shared the same way.
///
/// What is held for a subscriber goes once it takes it, once it says it will not ask for it
/// (its listings start past the file's step: [`TensorSubscription::release_index_before`];
/// it has let go of the step's event files: [`TensorSubscription::release_events_before`]), or
/// once it is dropped. What is held is also bounded ([`HELD_INDEX_FILES`], [`HELD_EVENT_BYTES`]):
/// past the bound a file read is not held, so a reader far behind the others takes the files
/// it is at from what is held and reads those far ahead of it again on its own, rather than
/// having a whole run piled up for it (a dashboard reads an ended run's index in seconds, the
/// rules step by step). A subscriber that comes late (after files were read) is not waited
/// for: it reads what was read before it came on its own.
///
/// A subscriber that may wait keeps well within that bound: once what it read and holds for
/// the others is [`LEAD_INDEX_FILES`] index files or [`LEAD_EVENT_BYTES`] bytes of event files
/// ([`TensorSubscription::is_ahead`]) it starts no new file until they took half of it
/// ([`TensorSubscription::wait_while_ahead`]). The report's
/// scalar curves, read beside the rules' trial
/// ([`TensorFollower::read_to_end_paced`](super::TensorFollower::read_to_end_paced)), so read
/// each file of a run of any length once for both.
///
/// [`StepProgress`]: super::StepProgress
#[derive(Clone)]
pub struct TensorSource {
    inner: Arc<Inner>,
}

struct Inner {
    storage: Arc<dyn Storage>,
    state: Mutex<Shared>,
    /// Signalled when a file being read is done.
    done: Condvar,
}

/// A file read for some subscribers and not yet taken by all of them.
struct Held<T> {
    value: T,
    /// The subscribers still to take it.
    waiting: Vec<u64>,
    /// The subscriber that read it.
    reader: u64,
}

/// Which files a subscriber may still ask for: those of steps from these on (`u64::MAX`:
/// none, collections files included); and what it read that is held for the others.
#[derive(Clone, Copy, Default)]
struct Wants {
    index_from: u64,
    events_from: u64,
    /// Index files it read that are held for others.
    index_held: usize,
    /// Bytes of event files it read that are held for others.
    event_bytes_held: usize,
    /// It no longer waits for the others ([`TensorSubscription::stop_waiting`]).
    free: bool,
    /// It waits for the others ([`TensorSubscription::wait_while_ahead`]).
    pacing: bool,
}

impl Wants {
    /// Whether what it read and holds for the others has reached `1 / part` of its lead
    /// ([`LEAD_INDEX_FILES`], [`LEAD_EVENT_BYTES`]), and it may wait.
    fn ahead(&self, part: usize) -> bool {
        !self.free
            && (self.index_held >= LEAD_INDEX_FILES / part
                || self.event_bytes_held >= LEAD_EVENT_BYTES / part)
    }
}

#[derive(Default)]
struct Shared {
    next_id: u64,
    subscribers: BTreeMap<u64, Wants>,
    /// Parsed index files by (step, path).
    index: BTreeMap<(u64, String), Held<IndexEntry>>,
    /// Event files' bytes by (step, path).
    events: BTreeMap<(u64, String), Held<Bytes>>,
    event_bytes: usize,
    /// Files a subscriber is reading now (index and event files alike).
    reading: BTreeSet<String>,
    /// Files read through the source.
    reads: u64,
    /// The end marker's reason, once a subscriber found the marker.
    end: Option<Option<EndReason>>,
    /// A subscriber waiting for the others to take what it read may go on
    /// ([`TensorSubscription::wait_while_ahead`]): wake it.
    wake: bool,
    /// Subscribers waiting for a file another is reading (or the end marker).
    waiting_for_reads: usize,
}

impl Shared {
    /// `index_files` and `bytes` that `reader` read are no longer held for others.
    fn unheld(&mut self, reader: u64, index_files: usize, bytes: usize) {
        self.event_bytes -= bytes;
        if let Some(wants) = self.subscribers.get_mut(&reader) {
            wants.index_held -= index_files;
            wants.event_bytes_held -= bytes;
            self.wake |= wants.pacing && !wants.ahead(2);
        }
    }

    fn lose_claims<T>(
        map: &mut BTreeMap<(u64, String), Held<T>>,
        id: u64,
        before: u64,
    ) -> Vec<Held<T>> {
        let mut gone = Vec::new();
        // `u64::MAX`: every file (collections files too, held under that step).
        let range = match before {
            u64::MAX => map.range(..),
            before => map.range(..(before, String::new())),
        };
        let keys: Vec<(u64, String)> = range
            .filter(|(_, held)| held.waiting.contains(&id))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            let held = map.get_mut(&key).expect("a key just listed");
            held.waiting.retain(|w| *w != id);
            if held.waiting.is_empty() {
                gone.push(map.remove(&key).expect("a key just listed"));
            }
        }
        gone
    }

    fn lose_index_claims(&mut self, id: u64, before: u64) {
        for held in Self::lose_claims(&mut self.index, id, before) {
            self.unheld(held.reader, 1, 0);
        }
    }

    fn lose_event_claims(&mut self, id: u64, before: u64) {
        for held in Self::lose_claims(&mut self.events, id, before) {
            self.unheld(held.reader, 0, held.value.len());
        }
    }
}

impl TensorSource {
    /// The source of the run rooted at `storage`. Each subscriber reads a file the others have
    /// not read as it reads alone; `storage` is the run's for a subscriber that has none of its
    /// own yet (a `Session`'s dashboard reads through it).
    pub fn new(storage: Arc<dyn Storage>) -> TensorSource {
        TensorSource {
            inner: Arc::new(Inner {
                storage,
                state: Mutex::new(Shared::default()),
                done: Condvar::new(),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, Shared> {
        // Every change under the lock is one insert or removal: a panic elsewhere while it was
        // held leaves it consistent.
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes the subscribers waiting for a file being read, and one waiting for the others
    /// to take what it read once they took enough (`state` is then dropped). Nobody waiting,
    /// nobody is woken (a wake is a system call, and a run has a few files a step).
    fn let_go(&self, mut state: MutexGuard<'_, Shared>) {
        let wake = std::mem::take(&mut state.wake) || state.waiting_for_reads > 0;
        drop(state);
        if wake {
            self.inner.done.notify_all();
        }
    }

    /// Waits for a file being read by another subscriber to be done.
    fn wait_for_read<'s>(&'s self, mut state: MutexGuard<'s, Shared>) -> MutexGuard<'s, Shared> {
        state.waiting_for_reads += 1;
        let mut state = self
            .inner
            .done
            .wait(state)
            .unwrap_or_else(|p| p.into_inner());
        state.waiting_for_reads -= 1;
        state
    }

    /// A new subscriber: it takes what other subscribers read from now on, and reads on its
    /// own what was read before it came.
    pub fn subscribe(&self) -> TensorSubscription {
        let mut state = self.state();
        let id = state.next_id;
        state.next_id += 1;
        state.subscribers.insert(id, Wants::default());
        TensorSubscription {
            claim: Arc::new(Claim {
                source: self.clone(),
                id,
            }),
        }
    }

    /// The run's storage, as the source was made with it.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.inner.storage
    }

    /// How many subscribers share this source now.
    pub fn subscribers(&self) -> usize {
        self.state().subscribers.len()
    }

    /// Index files and event files read through the source so far, for every subscriber.
    pub fn reads(&self) -> u64 {
        self.state().reads
    }

    /// Index files and event files held now for subscribers that have not taken them, and the
    /// event files' bytes.
    pub fn held(&self) -> (usize, usize, usize) {
        let state = self.state();
        (state.index.len(), state.events.len(), state.event_bytes)
    }
}

impl std::fmt::Debug for TensorSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorSource")
            .field("storage", &self.inner.storage.describe())
            .finish_non_exhaustive()
    }
}

/// One reader's place in a [`TensorSource`]. Clones are the same subscriber (a `Trial`'s
/// options and the `Trial` both hold it); the last one dropped lets the source go of what only
/// it had still to take.
#[derive(Clone)]
pub struct TensorSubscription {
    claim: Arc<Claim>,
}

struct Claim {
    source: TensorSource,
    id: u64,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut state = self.source.state();
        state.lose_index_claims(self.id, u64::MAX);
        state.lose_event_claims(self.id, u64::MAX);
        state.subscribers.remove(&self.id);
        self.source.let_go(state);
    }
}

impl std::fmt::Debug for TensorSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorSubscription")
            .field("id", &self.claim.id)
            .finish_non_exhaustive()
    }
}

/// How a subscriber gets a file: taken from what another read, or read by it.
enum Got<T> {
    Taken(T),
    Read,
}

impl TensorSubscription {
    /// The source this subscription reads from.
    pub fn source(&self) -> &TensorSource {
        &self.claim.source
    }

    /// This subscriber will not ask for index files of steps before `step` (its listings start
    /// there): what is held of them for it is let go.
    pub fn release_index_before(&self, step: u64) {
        let mut state = self.claim.source.state();
        if let Some(wants) = state.subscribers.get_mut(&self.claim.id) {
            wants.index_from = wants.index_from.max(step);
        }
        state.lose_index_claims(self.claim.id, step);
        self.claim.source.let_go(state);
    }

    /// This subscriber will not read event files of steps before `step`: what is held of them
    /// for it is let go.
    pub fn release_events_before(&self, step: u64) {
        let mut state = self.claim.source.state();
        if let Some(wants) = state.subscribers.get_mut(&self.claim.id) {
            wants.events_from = wants.events_from.max(step);
        }
        state.lose_event_claims(self.claim.id, step);
        self.claim.source.let_go(state);
    }

    /// The run's end marker, read once for every subscriber: `Some(reason)` once it is there
    /// (and from then on without a read: the marker of a run is written once, never removed by
    /// its writers), `None` while it is not. A subscriber asking while another reads it waits
    /// for that read.
    pub fn end_marker(&self) -> Result<Option<Option<EndReason>>> {
        let source = &self.claim.source;
        let mut state = source.state();
        loop {
            if let Some(end) = &state.end {
                return Ok(Some(end.clone()));
            }
            if !state.reading.contains(crate::run::EndMarker::PATH) {
                state.reading.insert(crate::run::EndMarker::PATH.to_owned());
                break;
            }
            state = source.wait_for_read(state);
        }
        drop(state);
        // Taken off the files being read (the others woken) when dropped, whatever the read did.
        let reading = Reading {
            subscription: self,
            key: Some((0, crate::run::EndMarker::PATH.to_owned())),
        };
        let read = crate::run::EndMarker::read(source.storage().as_ref());
        if let Ok(Some(reason)) = &read {
            source.state().end = Some(reason.clone());
        }
        drop(reading);
        read
    }

    /// This subscriber reads nothing more (its run ended and was read).
    pub fn release_all(&self) {
        self.release_index_before(u64::MAX);
        self.release_events_before(u64::MAX);
    }

    /// Whether this subscriber is ahead of the others: what it read and holds for them (files
    /// they have not taken yet) has reached [`LEAD_INDEX_FILES`] index files or
    /// [`LEAD_EVENT_BYTES`] bytes of event files, well within what the source holds
    /// ([`HELD_INDEX_FILES`], [`HELD_EVENT_BYTES`]), past which files it read would not be
    /// held, and the others would read them again. Never once it
    /// [stopped waiting](Self::stop_waiting).
    ///
    /// A reader that has nothing else to do and may wait (the report's scalar curves, read
    /// beside the rules: [`TensorFollower::read_to_end_paced`](super::TensorFollower::read_to_end_paced))
    /// stops reading while it is ahead, and [waits](Self::wait_while_ahead) for the others to
    /// take what it read, so that each file is read once however long the run.
    pub fn is_ahead(&self) -> bool {
        let state = self.claim.source.state();
        state
            .subscribers
            .get(&self.claim.id)
            .is_some_and(|w| w.ahead(1))
    }

    /// Waits while this subscriber [is ahead](Self::is_ahead), until what it holds for the
    /// others is down to half its lead (they took it, said they will not ask for it, or were
    /// dropped), or it [stopped waiting](Self::stop_waiting). Call it with no file of this
    /// subscriber being read, and only from a thread the others never wait for (not rayon's
    /// pool, where the others parse their index files).
    pub fn wait_while_ahead(&self) {
        let source = &self.claim.source;
        let id = self.claim.id;
        let mut state = source.state();
        let ahead =
            |state: &Shared, part| state.subscribers.get(&id).is_some_and(|w| w.ahead(part));
        let pacing = |state: &mut Shared, on| {
            if let Some(wants) = state.subscribers.get_mut(&id) {
                wants.pacing = on;
            }
        };
        if !ahead(&state, 1) {
            return;
        }
        pacing(&mut state, true);
        while ahead(&state, 2) {
            state = source
                .inner
                .done
                .wait(state)
                .unwrap_or_else(|p| p.into_inner());
        }
        pacing(&mut state, false);
    }

    /// From now on this subscriber never waits for the others (they are done reading what
    /// they will read, or its caller needs what it reads now): a wait in
    /// [`wait_while_ahead`](Self::wait_while_ahead) ends at once.
    pub fn stop_waiting(&self) {
        let mut state = self.claim.source.state();
        if let Some(wants) = state.subscribers.get_mut(&self.claim.id) {
            wants.free = true;
        }
        drop(state);
        self.claim.source.inner.done.notify_all();
    }

    /// Takes `key` from `map` when it is held for this subscriber, waiting while another
    /// subscriber reads it; else marks it as being read by this one.
    /// `size`: the index files and the bytes a held value counts as.
    fn take_or_claim<T: Clone>(
        &self,
        pick: impl Fn(&mut Shared) -> &mut BTreeMap<(u64, String), Held<T>>,
        size: impl Fn(&T) -> (usize, usize),
        key: &(u64, String),
    ) -> Got<T> {
        let source = &self.claim.source;
        let mut state = source.state();
        loop {
            let map = pick(&mut state);
            if let Some(held) = map.get_mut(key)
                && let Some(at) = held.waiting.iter().position(|w| *w == self.claim.id)
            {
                held.waiting.swap_remove(at);
                if !held.waiting.is_empty() {
                    return Got::Taken(held.value.clone());
                }
                let held = map.remove(key).expect("held just now");
                let (index_files, bytes) = size(&held.value);
                state.unheld(held.reader, index_files, bytes);
                source.let_go(state);
                return Got::Taken(held.value);
            }
            if !state.reading.contains(&key.1) {
                state.reading.insert(key.1.clone());
                return Got::Read;
            }
            state = source.wait_for_read(state);
        }
    }
}

impl IndexShare for TensorSubscription {
    /// Index file `path` of step `step`, parsed: taken when another subscriber read it, else
    /// read by `read` (and held for the others when it could be read).
    fn index_file(
        &self,
        step: u64,
        path: &str,
        read: &mut dyn FnMut() -> Result<IndexEntry>,
    ) -> Result<IndexEntry> {
        let key = (step, path.to_owned());
        if let Got::Taken(entry) = self.take_or_claim(|s| &mut s.index, |_| (1, 0), &key) {
            return Ok(entry);
        }
        let mut reading = Reading {
            subscription: self,
            key: Some(key),
        };
        let entry = read();
        let key = reading.key.take().expect("set above");
        let mut state = self.claim.source.state();
        let waiting = state.done_reading(&key.1, key.0, self.claim.id, |w| w.index_from);
        if let (Ok(entry), false) = (&entry, waiting.is_empty())
            && state.index.len() < HELD_INDEX_FILES
        {
            let value = entry.clone();
            let reader = self.claim.id;
            if let Some(old) = state.index.insert(
                key,
                Held {
                    value,
                    waiting,
                    reader,
                },
            ) {
                state.unheld(old.reader, 1, 0);
            }
            if let Some(wants) = state.subscribers.get_mut(&reader) {
                wants.index_held += 1;
            }
        }
        self.claim.source.let_go(state);
        entry
    }
}

impl TensorSubscription {
    /// The bytes of event file `path` of step `step`, whole: taken when another subscriber read
    /// them, else read by `read` (and held for the others when they could be read, within
    /// [`HELD_EVENT_BYTES`]).
    pub(crate) fn event_file(
        &self,
        step: u64,
        path: &str,
        read: impl FnOnce() -> Result<Bytes>,
    ) -> Result<Bytes> {
        let key = (step, path.to_owned());
        if let Got::Taken(bytes) =
            self.take_or_claim(|s| &mut s.events, |b: &Bytes| (0, b.len()), &key)
        {
            return Ok(bytes);
        }
        let mut reading = Reading {
            subscription: self,
            key: Some(key),
        };
        let bytes = read();
        let key = reading.key.take().expect("set above");
        let mut state = self.claim.source.state();
        let waiting = state.done_reading(&key.1, key.0, self.claim.id, |w| w.events_from);
        if let (Ok(bytes), false) = (&bytes, waiting.is_empty())
            && state.event_bytes + bytes.len() <= HELD_EVENT_BYTES
        {
            state.event_bytes += bytes.len();
            let value = bytes.clone();
            let reader = self.claim.id;
            if let Some(old) = state.events.insert(
                key,
                Held {
                    value,
                    waiting,
                    reader,
                },
            ) {
                state.unheld(old.reader, 0, old.value.len());
            }
            if let Some(wants) = state.subscribers.get_mut(&reader) {
                wants.event_bytes_held += bytes.len();
            }
        }
        self.claim.source.let_go(state);
        bytes
    }
}

impl TensorSubscription {
    /// The bytes of collections file `path`, shared as an event file is. It is held for every
    /// other subscriber until it takes it or is dropped (a run has one a worker): collections
    /// files are read after listings, whatever step those start at.
    pub(crate) fn collections_file(
        &self,
        path: &str,
        read: impl FnOnce() -> Result<Bytes>,
    ) -> Result<Bytes> {
        self.event_file(COLLECTIONS_STEP, path, read)
    }
}

/// The step a collections file is held under: past every step a subscriber lets go of.
const COLLECTIONS_STEP: u64 = u64::MAX;

/// A file being read by one subscriber: should the read panic, the others stop waiting for it
/// (and read it themselves).
struct Reading<'s> {
    subscription: &'s TensorSubscription,
    key: Option<(u64, String)>,
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        if let Some((_, path)) = self.key.take() {
            let source = &self.subscription.claim.source;
            let mut state = source.state();
            state.reading.remove(&path);
            source.let_go(state);
        }
    }
}

impl Shared {
    /// File `path` of `step` was read by subscriber `id`: it is no longer being read; the
    /// other subscribers that may still ask for it (`from`: from which step on they do).
    fn done_reading(
        &mut self,
        path: &str,
        step: u64,
        id: u64,
        from: impl Fn(&Wants) -> u64,
    ) -> Vec<u64> {
        self.reading.remove(path);
        self.reads += 1;
        self.subscribers
            .iter()
            .filter(|(s, wants)| **s != id && from(wants) != u64::MAX && step >= from(wants))
            .map(|(s, _)| *s)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn source() -> TensorSource {
        TensorSource::new(Arc::new(smdebug_storage::LocalStorage::new(".").unwrap()))
    }

    /// Event file `path` of `step` through `sub`; `reads` counts the reads it made itself.
    fn event(sub: &TensorSubscription, step: u64, len: usize, reads: &AtomicUsize) -> Bytes {
        let path = format!("events/{step}");
        sub.event_file(step, &path, || {
            reads.fetch_add(1, Ordering::Relaxed);
            Ok(Bytes::from(vec![step as u8; len]))
        })
        .unwrap()
    }

    #[test]
    fn a_file_is_read_once_for_every_subscriber_and_let_go_once_all_took_it() {
        let source = source();
        let (a, b, c) = (source.subscribe(), source.subscribe(), source.subscribe());
        let reads = AtomicUsize::new(0);
        let first = event(&a, 3, 10, &reads);
        assert_eq!(source.held(), (0, 1, 10));
        let second = event(&b, 3, 10, &reads);
        assert_eq!(source.held(), (0, 1, 10), "c has still to take it");
        let third = event(&c, 3, 10, &reads);
        assert_eq!(reads.load(Ordering::Relaxed), 1);
        assert_eq!(source.reads(), 1);
        assert_eq!(source.held(), (0, 0, 0));
        // The same bytes, not copies.
        assert_eq!(first.as_ptr(), second.as_ptr());
        assert_eq!(first.as_ptr(), third.as_ptr());
        // Asked again (a reader reading a step a second time), a file is read again.
        event(&a, 3, 10, &reads);
        assert_eq!(reads.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn the_end_marker_is_read_once_for_every_subscriber_once_it_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let local: Arc<dyn Storage> =
            Arc::new(smdebug_storage::LocalStorage::new(dir.path()).unwrap());
        let counting = Arc::new(smdebug_storage::testing::CountingStorage::new(Arc::clone(
            &local,
        )));
        let source = TensorSource::new(counting.clone());
        let (a, b) = (source.subscribe(), source.subscribe());
        // Not there yet: each asks storage, and finds nothing to read.
        assert_eq!(a.end_marker().unwrap(), None);
        assert_eq!(b.end_marker().unwrap(), None);
        assert!(counting.file_reads().is_empty());
        local
            .put(crate::run::EndMarker::PATH, Bytes::from_static(b""))
            .unwrap();
        // Python smdebug's empty marker: ended, no reason.
        assert_eq!(a.end_marker().unwrap(), Some(None));
        assert_eq!(b.end_marker().unwrap(), Some(None));
        // A late subscriber is told too, without a read.
        assert_eq!(source.subscribe().end_marker().unwrap(), Some(None));
        let reads = counting.file_reads();
        assert_eq!(reads.len(), 1, "{reads:?}");
        assert_eq!(reads[crate::run::EndMarker::PATH].reads, 1);
    }

    #[test]
    fn a_late_subscriber_reads_what_came_before_it_on_its_own() {
        let source = source();
        let a = source.subscribe();
        let reads = AtomicUsize::new(0);
        event(&a, 1, 4, &reads);
        // Nobody else subscribed: nothing is held.
        assert_eq!(source.held(), (0, 0, 0));
        let late = source.subscribe();
        event(&late, 1, 4, &reads);
        assert_eq!(reads.load(Ordering::Relaxed), 2);
        // From now on it is held for the other.
        event(&late, 2, 4, &reads);
        event(&a, 2, 4, &reads);
        assert_eq!(reads.load(Ordering::Relaxed), 3);
        assert_eq!(source.subscribers(), 2);
        drop(late);
        assert_eq!(source.subscribers(), 1);
    }

    #[test]
    fn what_a_subscriber_will_not_ask_for_is_let_go() {
        let source = source();
        let (a, b) = (source.subscribe(), source.subscribe());
        let b_too = b.clone();
        let reads = AtomicUsize::new(0);
        for step in 0..10 {
            event(&a, step, 100, &reads);
        }
        assert_eq!(source.held(), (0, 10, 1000));
        b.release_events_before(4);
        assert_eq!(source.held(), (0, 6, 600));
        // Read again, a file of a step `b` is past is not held for it.
        event(&a, 2, 100, &reads);
        assert_eq!(source.held(), (0, 6, 600));
        b.release_index_before(u64::MAX);
        assert_eq!(source.held(), (0, 6, 600), "index files only");
        // A clone is the same subscriber: dropping one keeps its place.
        drop(b);
        assert_eq!(source.held(), (0, 6, 600));
        drop(b_too);
        assert_eq!(source.held(), (0, 0, 0));
        assert_eq!(source.subscribers(), 1);
    }

    #[test]
    fn a_collections_file_is_held_until_taken_whatever_the_steps_let_go() {
        let source = source();
        let (a, b) = (source.subscribe(), source.subscribe());
        let reads = AtomicUsize::new(0);
        let read = || {
            reads.fetch_add(1, Ordering::Relaxed);
            Ok(Bytes::from_static(b"{}"))
        };
        a.collections_file("collections/000000000/worker_0_collections.json", read)
            .unwrap();
        b.release_events_before(1_000);
        b.release_index_before(1_000);
        assert_eq!(source.held(), (0, 1, 2));
        b.collections_file("collections/000000000/worker_0_collections.json", read)
            .unwrap();
        assert_eq!(reads.load(Ordering::Relaxed), 1);
        assert_eq!(source.held(), (0, 0, 0));
        // Held for a subscriber that is dropped, it goes with it; one whose run was read is
        // held nothing.
        a.collections_file("collections/000000000/worker_1_collections.json", read)
            .unwrap();
        assert_eq!(source.held(), (0, 1, 2));
        drop(b);
        assert_eq!(source.held(), (0, 0, 0));
        let c = source.subscribe();
        c.release_all();
        a.collections_file("collections/000000000/worker_2_collections.json", read)
            .unwrap();
        assert_eq!(source.held(), (0, 0, 0));
    }

    #[test]
    fn event_files_held_stay_within_their_bound() {
        let source = source();
        let (a, b) = (source.subscribe(), source.subscribe());
        let reads = AtomicUsize::new(0);
        let len = 1 << 20;
        let files = HELD_EVENT_BYTES / len + 8;
        for step in 0..files as u64 {
            event(&a, step, len, &reads);
        }
        let (_, held, bytes) = source.held();
        assert_eq!(bytes, HELD_EVENT_BYTES);
        assert_eq!(held, HELD_EVENT_BYTES / len);
        // The reader behind takes the first ones held and reads the others itself, holding
        // them for `a` unless `a` said it was past them.
        a.release_events_before(files as u64 - 2);
        for step in 0..files as u64 {
            event(&b, step, len, &reads);
        }
        assert_eq!(reads.load(Ordering::Relaxed), files + 8);
        assert_eq!(source.held(), (0, 2, 2 * len));
    }

    #[test]
    fn a_subscriber_ahead_of_the_others_waits_for_them_to_take_what_it_read() {
        let source = source();
        let (ahead, behind) = (source.subscribe(), source.subscribe());
        let reads = AtomicUsize::new(0);
        let len = 1 << 20;
        let lead = LEAD_EVENT_BYTES / len;
        for step in 0..lead as u64 - 1 {
            event(&ahead, step, len, &reads);
        }
        assert!(!ahead.is_ahead());
        // Not ahead: the wait returns at once.
        ahead.wait_while_ahead();
        event(&ahead, lead as u64 - 1, len, &reads);
        assert!(ahead.is_ahead(), "its lead");
        // What the other read and holds for it does not count.
        assert!(!behind.is_ahead());
        let (waited_tx, waited_rx) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| {
                ahead.wait_while_ahead();
                waited_tx.send(()).unwrap();
            });
            // The other takes nothing before the waiter waits: a wait that begins once the
            // other took a file finds it no longer ahead and returns at once (CI, under load,
            // started the waiter after the first file was taken).
            smdebug_storage::testing::wait_until(
                std::time::Duration::from_secs(60),
                "the subscriber ahead to wait",
                || source.state().subscribers[&ahead.claim.id].pacing,
            );
            // It waits until what is held for the other is under half its lead.
            let half_lead = LEAD_EVENT_BYTES / 2 / len;
            let mut early = None;
            for step in 0..=(lead - half_lead) as u64 {
                if early.is_none() && waited_rx.try_recv().is_ok() {
                    early = Some(step);
                }
                event(&behind, step, len, &reads);
            }
            let waited = waited_rx.recv_timeout(std::time::Duration::from_secs(60));
            // Whatever happened, the waiter goes on (a failing test does not hang).
            ahead.stop_waiting();
            waiter.join().unwrap();
            assert_eq!(early, None, "the wait ended before the files were taken");
            waited.expect("the wait to end once the other took the files");
        });
        // Told to stop waiting, it is never paced again: a new subscriber reads on.
        drop(ahead);
        let ahead = source.subscribe();
        assert_eq!(reads.load(Ordering::Relaxed), lead);
        // Letting go counts as taking: a subscriber that says it will not ask for the files
        // frees the one ahead, and so does one that is dropped.
        for step in lead as u64..2 * lead as u64 {
            event(&ahead, step, len, &reads);
        }
        assert!(ahead.is_ahead());
        behind.release_all();
        assert!(!ahead.is_ahead());
        let other = source.subscribe();
        for step in 2 * lead as u64..3 * lead as u64 {
            event(&ahead, step, len, &reads);
        }
        assert!(ahead.is_ahead());
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| ahead.wait_while_ahead());
            drop(other);
            waiter.join().unwrap();
        });
        assert!(!ahead.is_ahead());
        assert_eq!(source.held(), (0, 0, 0));
    }

    #[test]
    fn a_subscriber_told_to_stop_waiting_goes_on() {
        let source = source();
        let (ahead, _idle) = (source.subscribe(), source.subscribe());
        let reads = AtomicUsize::new(0);
        let len = 1 << 20;
        for step in 0..(LEAD_EVENT_BYTES / len) as u64 {
            event(&ahead, step, len, &reads);
        }
        assert!(ahead.is_ahead());
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| ahead.wait_while_ahead());
            // The other never takes a file (its rules are done): told to, the one ahead stops
            // waiting for it.
            ahead.stop_waiting();
            waiter.join().unwrap();
        });
        assert!(!ahead.is_ahead());
        ahead.wait_while_ahead();
    }

    #[test]
    fn a_subscriber_waits_for_a_file_another_is_reading() {
        let source = source();
        let (a, b) = (source.subscribe(), source.subscribe());
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|scope| {
            let reader = scope.spawn(move || {
                a.event_file(7, "events/7", || {
                    started_tx.send(()).unwrap();
                    go_rx.recv().unwrap();
                    Ok(Bytes::from_static(b"seven"))
                })
            });
            started_rx.recv().unwrap();
            let waiter = scope
                .spawn(|| b.event_file(7, "events/7", || panic!("read by the other subscriber")));
            go_tx.send(()).unwrap();
            assert_eq!(&reader.join().unwrap().unwrap()[..], b"seven");
            assert_eq!(&waiter.join().unwrap().unwrap()[..], b"seven");
        });
        assert_eq!(source.reads(), 1);
    }

    #[test]
    fn a_read_that_failed_or_panicked_leaves_the_file_to_the_others() {
        let source = source();
        let (a, b) = (source.subscribe(), source.subscribe());
        let failed = a.event_file(1, "events/1", || {
            Err(crate::Error::NoSuchRun {
                location: "here".into(),
            })
        });
        assert!(failed.is_err());
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            a.event_file(2, "events/2", || panic!("a reader's bug"))
        }));
        assert!(panicked.is_err());
        assert_eq!(source.held(), (0, 0, 0));
        let reads = AtomicUsize::new(0);
        event(&b, 1, 3, &reads);
        event(&b, 2, 3, &reads);
        assert_eq!(reads.load(Ordering::Relaxed), 2);
    }
}
