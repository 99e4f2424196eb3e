//! Values decoded ahead of a caller that reads one tensor value by value, step after step
//! (Python's `for s in steps: tensor.value(s)`, through `Trial::raw_value_as`).
//!
//! Such a caller would otherwise pay, for every value, a lookup in the index under the trial's
//! lock and a record read and decoded on its own thread, with the files read on demand. So once
//! it reads a tensor in step order (two reads of the same tensor, mode, worker and conversion,
//! the second at a later step), the tensor's next steps are looked up under one lock and their
//! values read and decoded together (by the caller and rayon's threads beside it), and the next reads take them from here
//! (`Trial::decoded_value`) without a lookup, a file or a decoder.
//!
//! A value taken from here is the one the caller's own read would give: it was looked up by
//! the same lookup ([`State::find`]) and read with the same checks while the index stood as it
//! stands now ([`State::generation`], which every refresh and release moves on: values looked
//! up before are not used), and a refresh that is due is done by the caller's own read first.
//! A step whose read fails (a placeholder index entry, a record that does not decode, a value
//! over the budget) is left out: the caller's read of that step reads it and gets the error.
//! The decoded values hold slices of their event files: at most [`BATCH_VALUES`] values, the
//! files and values they hold within [`BATCH_BYTES`]. The files read for them are kept for good
//! (within [`TrialOptions::file_cache_bytes`](super::TrialOptions::file_cache_bytes), as the
//! caller's own reads here are: [`FirstFetch::ForGood`]): a caller going tensor after tensor
//! finds the next tensor's records in the files the first one read.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use smdebug_core::Mode;

use super::records::TensorValue;
use super::source::{Files, FirstFetch, Location, WHOLE_FILE_MAX};
use super::state::State;
use smdebug_format::budget::{Budget, Conversion};
use smdebug_storage::Storage;

/// Values decoded ahead at most.
const BATCH_VALUES: usize = 512;

/// Bytes the values decoded ahead may hold at most: their event files (a file up to 1 MiB is
/// held whole) and the values decoded out of them.
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
    /// The generation of the index the values were looked up in.
    generation: u64,
    /// Values of `last`'s tensor at steps after `last`'s, in step order.
    values: VecDeque<(u64, TensorValue)>,
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

impl DecodedAhead {
    /// The value of `name` at `step` when it was decoded ahead, with the index still at
    /// `generation`. Never waits: `None` when another thread holds the values.
    pub(crate) fn take(
        &self,
        name: &str,
        step: u64,
        mode: Mode,
        worker: Option<&str>,
        conversion: Conversion,
        generation: u64,
    ) -> Option<TensorValue> {
        let mut guard = self.inner.try_lock().ok()?;
        let inner = &mut *guard;
        let (key, last) = inner.last.as_mut()?;
        if inner.generation != generation || !key.is(name, mode, worker, conversion) {
            return None;
        }
        // Steps the caller skipped are not asked for again by a caller going forward.
        if step > *last {
            while inner.values.front().is_some_and(|(s, _)| *s < step) {
                inner.values.pop_front();
            }
        }
        if inner.values.front().is_some_and(|(s, _)| *s == step) {
            *last = step;
            return inner.values.pop_front().map(|(_, v)| v);
        }
        None
    }

    /// The caller read `name` at `step` itself (nothing decoded ahead had it). When this read
    /// follows the previous one in step order and nothing decoded ahead is left, the values of
    /// the tensor's next steps are decoded now.
    /// `ahead` gives the index's generation and where the next steps' values are (under the
    /// trial's lock, through [`next_locations`]); `decode` reads them (through [`decode`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn after_read(
        &self,
        name: &str,
        step: u64,
        mode: Mode,
        worker: Option<&str>,
        conversion: Conversion,
        ahead: impl FnOnce() -> (u64, Vec<(u64, Location)>),
        decode: impl FnOnce(Vec<(u64, Location)>) -> VecDeque<(u64, TensorValue)>,
    ) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let in_order = match &mut inner.last {
            Some((key, last)) if key.is(name, mode, worker, conversion) => {
                let in_order = *last < step;
                *last = step;
                in_order
            }
            _ => {
                inner.last = Some((Key::new(name, mode, worker, conversion), step));
                inner.values.clear();
                false
            }
        };
        while inner.values.front().is_some_and(|(s, _)| *s <= step) {
            inner.values.pop_front();
        }
        if !in_order || !inner.values.is_empty() {
            return;
        }
        let (generation, locations) = ahead();
        inner.generation = generation;
        inner.values = decode(locations);
    }
}

/// Where `name`'s values are at the steps after `step` (in `mode`'s numbering), as
/// [`State::find`] finds them: at most [`BATCH_VALUES`] of them, the steps it finds nothing
/// for (or an error) left out.
pub(crate) fn next_locations(
    st: &State,
    run: &str,
    name: &str,
    step: u64,
    mode: Mode,
    worker: Option<&str>,
) -> Vec<(u64, Location)> {
    let (Some(saved), Some(at)) = (st.names.get(name), st.global_step(step, mode)) else {
        return Vec::new();
    };
    let from = match saved.search(at) {
        Ok(i) => i + 1,
        Err(i) => i,
    };
    let mut out = Vec::new();
    for i in from..saved.len().min(from.saturating_add(SCAN_STEPS)) {
        let g = saved.get(i);
        let s = match mode {
            Mode::Global => g,
            m => match st.steps.get(&g) {
                Some(e) if e.mode == m => e.mode_step,
                _ => continue,
            },
        };
        if let Ok(Some(loc)) = st.find(name, s, mode, worker, run) {
            out.push((s, loc));
            if out.len() == BATCH_VALUES {
                break;
            }
        }
    }
    out
}

/// What a value read at `loc` holds in memory: its event file (whole when up to 1 MiB, else its
/// record) and the value (`None`: before it is decoded, at most its record).
fn held_bytes(loc: &Location, value: Option<&TensorValue>) -> u64 {
    let file = if loc.file.len <= WHOLE_FILE_MAX {
        loc.file.len
    } else {
        loc.length
    };
    let value = match value {
        None => loc.length,
        Some(TensorValue::Numbers(bytes)) => bytes.data.len() as u64,
        Some(TensorValue::Strings(strings)) => {
            strings.values().iter().map(|v| v.len() as u64).sum()
        }
    };
    file + value
}

/// Values read together by one thread.
const CHUNK: usize = 16;

/// Values decoded ahead, with their steps.
type Values = Vec<(u64, TensorValue)>;

/// A batch of reads shared by the caller and the pool's threads: each takes the next chunk of
/// locations until none is left.
struct Work {
    storage: Arc<dyn Storage>,
    files: Arc<Files>,
    name: String,
    budget: Budget,
    locations: Vec<(u64, Location)>,
    /// The next chunk to take.
    next: AtomicUsize,
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
        loop {
            let c = self.next.fetch_add(1, Ordering::Relaxed);
            if c >= self.chunks() {
                return;
            }
            let end = (c * CHUNK + CHUNK).min(self.locations.len());
            let mut out = Vec::with_capacity(end - c * CHUNK);
            for (step, loc) in &self.locations[c * CHUNK..end] {
                let read = super::records::read_value(
                    self.storage.as_ref(),
                    &self.files,
                    loc,
                    &self.name,
                    self.budget,
                    FirstFetch::ForGood,
                );
                let Ok(value) = read else {
                    break;
                };
                out.push((*step, value));
            }
            let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
            done.0[c] = out;
            done.1 += 1;
            if done.1 == self.chunks() {
                self.all_done.notify_all();
            }
        }
    }
}

/// The values at `locations` (as many as [`BATCH_BYTES`] holds), read by the caller and, when
/// there are enough of them, by the pool's threads beside it. The caller never waits for a
/// thread to start: it reads whatever no thread has taken, and waits only for chunks being
/// read.
pub(crate) fn decode(
    storage: Arc<dyn Storage>,
    files: Arc<Files>,
    name: &str,
    budget: Budget,
    mut locations: Vec<(u64, Location)>,
) -> VecDeque<(u64, TensorValue)> {
    // At most what the batch may hold, counting each record as its value's size.
    let mut held = 0u64;
    let fit = locations
        .iter()
        .take_while(|(_, loc)| {
            held = held.saturating_add(held_bytes(loc, None));
            held <= BATCH_BYTES
        })
        .count();
    locations.truncate(fit);
    if locations.is_empty() {
        return VecDeque::new();
    }
    let chunks = locations.len().div_ceil(CHUNK);
    let work = Arc::new(Work {
        storage,
        files,
        name: name.to_string(),
        budget,
        locations,
        next: AtomicUsize::new(0),
        done: Mutex::new((vec![Vec::new(); chunks], 0)),
        all_done: Condvar::new(),
    });
    let helpers = rayon_core::current_num_threads().min(chunks - 1);
    for _ in 0..helpers {
        let work = work.clone();
        rayon_core::spawn(move || work.run());
    }
    work.run();
    let mut done = work.done.lock().unwrap_or_else(|p| p.into_inner());
    while done.1 < chunks {
        done = work.all_done.wait(done).unwrap_or_else(|p| p.into_inner());
    }
    // In step order; a chunk cut short leaves a gap (the caller reads its steps itself). A
    // value decoded larger than its record (values held in typed fields) may end the batch.
    let mut held = 0u64;
    let mut out = VecDeque::new();
    let parts = std::mem::take(&mut done.0);
    'parts: for (c, part) in parts.into_iter().enumerate() {
        let first = c * CHUNK;
        for (i, (step, value)) in part.into_iter().enumerate() {
            held += held_bytes(&work.locations[first + i].1, Some(&value));
            if held > BATCH_BYTES {
                break 'parts;
            }
            out.push_back((step, value));
        }
    }
    out
}
