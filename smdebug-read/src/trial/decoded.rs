//! Values decoded ahead of a caller that reads one tensor value by value, step after step
//! (Python's `for s in steps: tensor.value(s)`, through `Trial::raw_value_as`).
//!
//! Such a caller would otherwise pay, for every value, a lookup in the index under the trial's
//! lock and a record read and decoded on its own thread, with the files read on demand. So once
//! it reads a tensor in step order (two reads of the same tensor, mode, worker and conversion,
//! the second at a later step), the tensor's next steps are looked up under one lock and their
//! values read and decoded together on rayon's threads, and the next reads take them from here
//! (`Trial::decoded_value`) without a lookup, a file or a decoder. While the caller takes one
//! batch, the next is decoded: once half a batch is left, the steps after it are looked up and
//! handed to the pool, so a caller that keeps going finds its values decoded, or reads the
//! batch with the pool (without the interpreter's lock, in `Trial::raw_value_as`) when it gets
//! to a batch still being decoded (a tensor's first, or any when the pool is slower than the
//! caller).
//!
//! A value taken from here is the one the caller's own read would give: it was looked up as
//! [`State::find`] looks it up ([`State::find_saved_after`] shares its last part, and a test
//! holds the two to the same answers) and read with the same checks while the index stood as it
//! stands now ([`State::generation`], which every refresh and release moves on: values looked
//! up before are not used), and a refresh that is due is done by the caller's own read first.
//! A step whose read fails (a placeholder index entry, a record that does not decode, a value
//! over the budget) is left out: the caller's read of that step reads it and gets the error.
//! Two batches at most (the one the caller takes and the next), each of at most
//! [`BATCH_VALUES`] values within [`BATCH_BYTES`]. Each event file a batch reads is read once,
//! into a buffer of the reading thread, and every value its index entries list is taken out of
//! it into memory of its own ([`records::read_taking_values_out`](super::records::read_taking_values_out)):
//! the batch gets its tensor's, and the others stay with the file (within
//! [`TrialOptions::file_cache_bytes`](super::TrialOptions::file_cache_bytes)) for the batches
//! of the tensors the caller reads next, which take them without reading the file again. Every
//! value is copied once, into memory that is its alone: the Python binding makes its numpy
//! array over it without another copy.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use smdebug_core::Mode;

use super::source::{Files, Location, TensorTable, WHOLE_FILE_MAX};
use super::state::State;
use super::value::TensorValue;
use smdebug_format::budget::{Budget, Conversion};
use smdebug_storage::Storage;

/// Values decoded ahead in one batch at most.
const BATCH_VALUES: usize = 512;

/// Bytes one batch of values decoded ahead may hold at most: their event files (a file up to
/// 1 MiB is held whole) and the values decoded out of them.
const BATCH_BYTES: u64 = 16 << 20;

/// Steps looked at for one batch at most (a mode's steps among those of other modes).
const SCAN_STEPS: usize = 4 * BATCH_VALUES;

/// The values decoded ahead, and the read they follow.
#[derive(Default)]
pub(crate) struct DecodedAhead {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The caller's last read (what it read, and the step).
    last: Option<(Key, u64)>,
    /// The generation of the index the values (and the pending batch) were looked up in.
    generation: u64,
    /// Values of `last`'s tensor at steps after `last`'s, in step order.
    values: VecDeque<(u64, TensorValue)>,
    /// The batch after `values`, being decoded on the pool's threads.
    pending: Option<Arc<Work>>,
    /// A lookup after this step found nothing to decode: not looked up again.
    nothing_after: Option<u64>,
}

impl Inner {
    /// Forgets the values and the pending batch (whose threads stop at their next chunk).
    fn clear(&mut self) {
        self.values.clear();
        if let Some(pending) = self.pending.take() {
            pending.cancelled.store(true, Ordering::Relaxed);
        }
        self.nothing_after = None;
    }

    /// Moves the pending batch's values into `values` once it is decoded (never waits).
    fn collect_pending(&mut self) {
        if !self.values.is_empty() {
            return;
        }
        if let Some(values) = self.pending.as_ref().and_then(|p| p.finished()) {
            self.values = values;
            self.pending = None;
        }
    }
}

/// What a caller reads: a tensor, the mode its steps are numbered in, the worker asked for (any
/// when `None`) and what the caller makes of the values.
#[derive(PartialEq, Eq)]
struct Key {
    name: String,
    mode: Mode,
    worker: Option<String>,
    conversion: Conversion,
}

impl Key {
    fn new(name: &str, mode: Mode, worker: Option<&str>, conversion: Conversion) -> Key {
        Key {
            name: name.to_string(),
            mode,
            worker: worker.map(str::to_string),
            conversion,
        }
    }

    fn is(&self, name: &str, mode: Mode, worker: Option<&str>, conversion: Conversion) -> bool {
        self.name == name
            && self.mode == mode
            && self.worker.as_deref() == worker
            && self.conversion == conversion
    }
}

/// A read's tensor, mode, worker and conversion, as [`DecodedAhead`]'s calls take them.
#[derive(Clone, Copy)]
pub(crate) struct Read<'a> {
    pub name: &'a str,
    pub mode: Mode,
    pub worker: Option<&'a str>,
    pub conversion: Conversion,
}

impl Read<'_> {
    fn matches(&self, key: &Key) -> bool {
        key.is(self.name, self.mode, self.worker, self.conversion)
    }
}

impl DecodedAhead {
    /// The value of `read` at `step` when it was decoded ahead, with the index still at
    /// `generation`. Never waits for the values (`None` when another thread holds them, and
    /// when the batch that may hold the step is still being decoded: see
    /// [`wait_for_pending`](DecodedAhead::wait_for_pending)), nor for the batch it starts:
    /// once half a batch is left, the steps after it are looked up with `next` (under the
    /// trial's lock, through [`next_locations`]) and handed to the pool with `start` (through
    /// [`start`]).
    pub(crate) fn take(
        &self,
        read: Read<'_>,
        step: u64,
        generation: u64,
        next: impl FnOnce(u64) -> Vec<Planned>,
        start: impl FnOnce(Vec<Planned>) -> Option<Arc<Work>>,
    ) -> Option<TensorValue> {
        let mut guard = self.inner.try_lock().ok()?;
        let inner = &mut *guard;
        let (key, last) = inner.last.as_ref()?;
        if inner.generation != generation || !read.matches(key) {
            return None;
        }
        let last = *last;
        // Steps the caller skipped are not asked for again by a caller going forward.
        let skip = |values: &mut VecDeque<(u64, TensorValue)>| {
            if step > last {
                while values.front().is_some_and(|(s, _)| *s < step) {
                    values.pop_front();
                }
            }
        };
        skip(&mut inner.values);
        inner.collect_pending();
        skip(&mut inner.values);
        if inner.values.front().is_none_or(|(s, _)| *s != step) {
            return None;
        }
        let (_, value) = inner.values.pop_front().expect("the front is the step");
        if let Some((_, next)) = inner.values.front() {
            next.prefetch_shape();
        }
        if let Some((_, last)) = inner.last.as_mut() {
            *last = step;
        }
        // Keep the next batch coming while the caller takes this one.
        if inner.pending.is_none() && inner.values.len() <= BATCH_VALUES / 2 {
            let after = inner.values.back().map_or(step, |(s, _)| *s);
            if inner.nothing_after != Some(after) {
                inner.pending = start(next(after));
                if inner.pending.is_none() {
                    inner.nothing_after = Some(after);
                }
            }
        }
        Some(value)
    }

    /// Waits until the batch being decoded for `read` is decoded, when the caller has taken
    /// every value decoded before it (the caller's next value is likely in it). The caller
    /// reads the chunks no pool thread has started itself, then waits only for those being
    /// read: it would otherwise sit idle while the pool's threads read the batch (a tensor's
    /// first sweep, when every event file is read and its values taken out, keeps them busy),
    /// and a caller that is one of the pool's threads must not wait for another to start
    /// (every other may be waiting too).
    pub(crate) fn wait_for_pending(&self, read: Read<'_>) {
        let pending = {
            let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            match (&inner.last, &inner.pending) {
                (Some((key, _)), Some(pending)) if read.matches(key) && inner.values.is_empty() => {
                    pending.clone()
                }
                _ => return,
            }
        };
        pending.run();
        pending.wait();
    }

    /// The caller read `read` at `step` itself (nothing decoded ahead had it), with the index
    /// at `generation`. When this read follows the previous one in step order and nothing
    /// decoded ahead is left, the values of the tensor's next steps are looked up (`next`) and
    /// their decoding started (`start`), as in [`take`](DecodedAhead::take).
    pub(crate) fn after_read(
        &self,
        read: Read<'_>,
        step: u64,
        generation: u64,
        next: impl FnOnce(u64) -> Vec<Planned>,
        start: impl FnOnce(Vec<Planned>) -> Option<Arc<Work>>,
    ) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.generation != generation {
            // Looked up in an index that has changed since: not given.
            inner.clear();
            inner.generation = generation;
        }
        let in_order = match &mut inner.last {
            Some((key, last)) if read.matches(key) => {
                let in_order = *last < step;
                *last = step;
                in_order
            }
            _ => {
                inner.last = Some((
                    Key::new(read.name, read.mode, read.worker, read.conversion),
                    step,
                ));
                inner.clear();
                false
            }
        };
        while inner.values.front().is_some_and(|(s, _)| *s <= step) {
            inner.values.pop_front();
        }
        inner.collect_pending();
        while inner.values.front().is_some_and(|(s, _)| *s <= step) {
            inner.values.pop_front();
        }
        if !in_order || !inner.values.is_empty() || inner.pending.is_some() {
            return;
        }
        inner.pending = start(next(step));
    }
}

/// Where `name`'s values are at the steps after `step` (in `mode`'s numbering), as
/// [`State::find`] finds them ([`State::find_saved_after`]): at most [`BATCH_VALUES`] of them,
/// among the next [`SCAN_STEPS`] saved steps, the steps it finds nothing for (or an error) left
/// out.
pub(crate) fn next_locations(
    st: &State,
    name: &str,
    step: u64,
    mode: Mode,
    worker: Option<&str>,
) -> Vec<Planned> {
    let Some(after) = st.global_step(step, mode) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    st.find_saved_after(name, after, mode, worker, SCAN_STEPS, |step, loc, ws| {
        out.push(Planned {
            step,
            loc,
            table: ws.tensors.clone(),
        });
        out.len() < BATCH_VALUES
    });
    out
}

/// A value to decode ahead: its step (in the caller's numbering), where its record is, and the
/// index entries of its event file (the records whose values are taken out of the file with it,
/// [`records::read_taking_values_out`](super::records::read_taking_values_out)).
pub(crate) struct Planned {
    step: u64,
    loc: Location,
    table: TensorTable,
}

/// What a value read at `loc` holds in memory: its event file (whole when up to 1 MiB, else its
/// record) and the value (`None`: before it is decoded, at most its record).
fn held_bytes(loc: &Location, value: Option<&TensorValue>) -> u64 {
    let file = if loc.file.len <= WHOLE_FILE_MAX {
        loc.file.len
    } else {
        loc.length
    };
    file + value.map_or(loc.length, TensorValue::held_bytes)
}

/// Values read together by one thread.
const CHUNK: usize = 16;

/// Values decoded ahead, with their steps.
type Values = Vec<(u64, TensorValue)>;

/// A batch of reads the pool's threads share: each takes the next chunk of locations until
/// none is left.
pub(crate) struct Work {
    storage: Arc<dyn Storage>,
    files: Arc<Files>,
    name: String,
    budget: Budget,
    locations: Vec<Planned>,
    /// The next chunk to take.
    next: AtomicUsize,
    /// Set when nobody will take the values: the chunks not started are not read.
    cancelled: AtomicBool,
    /// Each chunk's values once read, and how many chunks are read.
    done: Mutex<(Vec<Values>, usize)>,
    all_done: Condvar,
}

impl Work {
    fn chunks(&self) -> usize {
        self.locations.len().div_ceil(CHUNK)
    }

    /// Reads chunks until none is left; a chunk stops at its first read that fails (the caller
    /// reads that step itself).
    fn run(&self) {
        // The event files this thread opens are looked up from the run's folder, held while it
        // reads (once, not a chunk: most chunks of a tensor after the first open no file).
        let _held = self
            .storage
            .local_root()
            .map(smdebug_storage::regular::HeldRoot::hold);
        loop {
            let c = self.next.fetch_add(1, Ordering::Relaxed);
            if c >= self.chunks() {
                return;
            }
            let end = (c * CHUNK + CHUNK).min(self.locations.len());
            let mut out = Vec::with_capacity(end - c * CHUNK);
            for planned in &self.locations[c * CHUNK..end] {
                if self.cancelled.load(Ordering::Relaxed) {
                    break;
                }
                let (storage, loc) = (self.storage.as_ref(), &planned.loc);
                let read = super::records::read_taking_values_out(
                    storage,
                    &self.files,
                    loc,
                    &self.name,
                    self.budget,
                    &planned.table,
                );
                let Ok(value) = read else {
                    break;
                };
                out.push((planned.step, value));
            }
            let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
            done.0[c] = out;
            done.1 += 1;
            if done.1 == self.chunks() {
                self.all_done.notify_all();
            }
        }
    }

    /// The values, in step order, once every chunk is read (`None` before). A chunk cut short
    /// leaves a gap (the caller reads its steps itself); a value decoded larger than its
    /// record (values held in typed fields) may end the batch.
    fn finished(&self) -> Option<VecDeque<(u64, TensorValue)>> {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        if done.1 < self.chunks() {
            return None;
        }
        let mut held = 0u64;
        let mut out = VecDeque::new();
        let parts = std::mem::take(&mut done.0);
        'parts: for (c, part) in parts.into_iter().enumerate() {
            let first = c * CHUNK;
            for (i, (step, value)) in part.into_iter().enumerate() {
                held += held_bytes(&self.locations[first + i].loc, Some(&value));
                if held > BATCH_BYTES {
                    break 'parts;
                }
                out.push_back((step, value));
            }
        }
        Some(out)
    }

    /// Waits until every chunk is read.
    fn wait(&self) {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        while done.1 < self.chunks() {
            done = self.all_done.wait(done).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Starts reading the values at `locations` (as many as [`BATCH_BYTES`] holds) on the pool's
/// threads; `None` when there is nothing to read.
pub(crate) fn start(
    storage: Arc<dyn Storage>,
    files: Arc<Files>,
    name: &str,
    budget: Budget,
    mut locations: Vec<Planned>,
) -> Option<Arc<Work>> {
    // At most what the batch may hold, counting each record as its value's size.
    let mut held = 0u64;
    let fit = locations
        .iter()
        .take_while(|planned| {
            held = held.saturating_add(held_bytes(&planned.loc, None));
            held <= BATCH_BYTES
        })
        .count();
    locations.truncate(fit);
    if locations.is_empty() {
        return None;
    }
    let chunks = locations.len().div_ceil(CHUNK);
    let work = Arc::new(Work {
        storage,
        files,
        name: name.to_string(),
        budget,
        locations,
        next: AtomicUsize::new(0),
        cancelled: AtomicBool::new(false),
        done: Mutex::new((vec![Vec::new(); chunks], 0)),
        all_done: Condvar::new(),
    });
    for _ in 0..rayon_core::current_num_threads().min(chunks) {
        let work = work.clone();
        rayon_core::spawn(move || work.run());
    }
    Some(work)
}

#[cfg(test)]
mod tests {
    use smdebug_core::{Mode, TensorView};

    use super::super::source::TensorTable;
    use super::super::state::State;
    use super::super::{Trial, TrialOptions};
    use super::{BATCH_VALUES, Planned, SCAN_STEPS, next_locations};

    const STEPS: u64 = 1500;

    /// Worker `rank` of two: TRAIN steps with an EVAL step every tenth; `w` at every step but
    /// each 50th of worker 1, `count` every third step (worker 0 only).
    fn write_worker(run: &std::path::Path, rank: usize) {
        let mut hook = smdebug_testkit::runs::worker_hook(run, rank, 2);
        for step in 0..STEPS {
            hook.set_mode(if step % 10 == 9 {
                Mode::Eval
            } else {
                Mode::Train
            });
            if rank == 0 || step % 50 != 0 {
                let w = [rank as f32, step as f32];
                hook.save_tensor("w", &TensorView::from_slice(&w, &[2]).unwrap(), &["w"]);
            }
            if rank == 0 && step % 3 == 0 {
                let c = [step as i64];
                hook.save_tensor("count", &TensorView::from_slice(&c, &[]).unwrap(), &["c"]);
            }
            hook.step();
        }
        hook.close();
    }

    /// What the values decoded ahead were planned from before: [`State::find`] at each saved
    /// step after `step`, one by one.
    fn by_find(
        st: &State,
        name: &str,
        step: u64,
        mode: Mode,
        worker: Option<&str>,
    ) -> Vec<Planned> {
        let (Some(saved), Some(at)) = (st.names.get(name), st.global_step(step, mode)) else {
            return Vec::new();
        };
        let from = match saved.search(at) {
            Ok(i) => i + 1,
            Err(i) => i,
        };
        let mut out = Vec::new();
        for i in from..saved.len().min(from + SCAN_STEPS) {
            let g = saved.get(i);
            let s = match mode {
                Mode::Global => g,
                m => match st.steps.get(&g) {
                    Some(e) if e.mode == m => e.mode_step,
                    _ => continue,
                },
            };
            if let Ok(Some(loc)) = st.find(name, s, mode, worker, "run") {
                let ws = st
                    .steps
                    .get(&loc.step)
                    .unwrap()
                    .workers
                    .get(&loc.file.worker);
                let table = ws
                    .filter(|ws| std::sync::Arc::ptr_eq(&ws.file, &loc.file))
                    .expect("a location's worker step holds its file")
                    .tensors
                    .clone();
                out.push(Planned {
                    step: s,
                    loc,
                    table,
                });
                if out.len() == BATCH_VALUES {
                    break;
                }
            }
        }
        out
    }

    fn entries(table: &TensorTable) -> String {
        format!("{:?}", table.entries().collect::<Vec<_>>())
    }

    fn same(a: &Planned, b: &Planned) -> bool {
        let (la, lb) = (&a.loc, &b.loc);
        a.step == b.step
            && std::sync::Arc::ptr_eq(&la.file, &lb.file)
            && (la.step, la.mode, la.mode_step, la.start, la.length)
                == (lb.step, lb.mode, lb.mode_step, lb.start, lb.length)
            && entries(&a.table) == entries(&b.table)
    }

    /// The steps planned for decoding ahead are those `State::find` finds, one step at a time:
    /// in every mode, from any worker or one (or one that did not save the tensor), for a
    /// tensor at every step and one at some, from every step on and after steps are released.
    #[test]
    fn the_steps_planned_ahead_are_the_ones_find_finds() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        write_worker(&run, 0);
        write_worker(&run, 1);
        let trial = Trial::open_with(&run, TrialOptions::default()).unwrap();
        let workers: Vec<String> = {
            let st = trial.lock();
            let e = st.steps.get(&1).unwrap();
            e.workers.iter().map(|(n, _)| n.to_string()).collect()
        };
        assert_eq!(workers.len(), 2, "{workers:?}");
        let mut compared = 0;
        for released in [false, true] {
            if released {
                trial.release_steps_before(600);
            }
            let st = trial.lock();
            for name in ["w", "count", "no_such_tensor"] {
                for mode in [Mode::Global, Mode::Train, Mode::Eval] {
                    for worker in [None, Some(workers[0].as_str()), Some(workers[1].as_str())] {
                        for step in (0..STEPS).step_by(97).chain([STEPS - 2, STEPS + 5]) {
                            let fast = next_locations(&st, name, step, mode, worker);
                            let slow = by_find(&st, name, step, mode, worker);
                            assert_eq!(fast.len(), slow.len(), "{name} {mode:?} {worker:?} {step}");
                            assert!(
                                fast.iter().zip(&slow).all(|(a, b)| same(a, b)),
                                "{name} {mode:?} {worker:?} {step}"
                            );
                            compared += fast.len();
                        }
                    }
                }
            }
        }
        assert!(compared > 50_000, "{compared} planned values compared");
    }
}
