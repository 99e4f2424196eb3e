//! Values decoded ahead of a caller that reads one tensor value by value, step after step
//! (Python's `for s in steps: tensor.value(s)`, through [`Trial::raw_value_as`]).
//!
//! Such a caller would otherwise pay, for every value, a lookup in the index under the trial's
//! lock and a record read and decoded on its own thread, with the files read on demand. So once
//! it reads a tensor in step order (two reads of the same tensor, mode, worker and conversion,
//! the second at a later step), the tensor's next steps are looked up under one lock and their
//! values read and decoded together on a few threads, and the next reads take them from here
//! ([`Trial::decoded_value`]) without a lookup, a file or a decoder.
//!
//! A value taken from here is the one the caller's own read would give: it was looked up by
//! the same lookup ([`State::find`]) and read with the same checks while the index stood as it
//! stands now ([`State::generation`], which every refresh and release moves on: values looked
//! up before are not used), and a refresh that is due is done by the caller's own read first.
//! A step whose read fails (a placeholder index entry, a record that does not decode, a value
//! over the budget) is left out: the caller's read of that step reads it and gets the error.
//! The decoded values hold slices of their event files: at most [`BATCH_VALUES`] values, the
//! files and values they hold within [`BATCH_BYTES`].

use std::collections::VecDeque;
use std::sync::Mutex;

use smdebug_core::Mode;

use super::records::TensorValue;
use super::source::{Location, WHOLE_FILE_MAX};
use super::state::State;
use super::{Conversion, Trial};

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
    pub(crate) fn after_read(
        &self,
        trial: &Trial,
        name: &str,
        step: u64,
        mode: Mode,
        worker: Option<&str>,
        conversion: Conversion,
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
        let (generation, locations) = {
            let st = trial.lock();
            let locations = next_locations(&st, trial.location(), name, step, mode, worker);
            (st.generation, locations)
        };
        inner.generation = generation;
        inner.values = decode(trial, name, conversion, locations);
    }
}

/// Where `name`'s values are at the steps after `step` (in `mode`'s numbering), as
/// [`State::find`] finds them: at most [`BATCH_VALUES`] of them, the steps it finds nothing
/// for (or an error) left out.
fn next_locations(
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
/// record) and the value.
fn held_bytes(loc: &Location, value: &TensorValue) -> u64 {
    let file = if loc.file.len <= WHOLE_FILE_MAX {
        loc.file.len
    } else {
        loc.length
    };
    let value = match value {
        TensorValue::Numbers(bytes) => bytes.data.len(),
        TensorValue::Strings(strings) => strings.values().iter().map(|v| v.len()).sum(),
    };
    file + value as u64
}

/// The values at `locations`, read on a few threads, each thread's part within its share of
/// [`BATCH_BYTES`]: a thread stops at the first value past it, and at the first read that
/// fails (the caller reads that step itself).
fn decode(
    trial: &Trial,
    name: &str,
    conversion: Conversion,
    locations: Vec<(u64, Location)>,
) -> VecDeque<(u64, TensorValue)> {
    if locations.is_empty() {
        return VecDeque::new();
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(locations.len().div_ceil(64));
    let share = BATCH_BYTES / threads as u64;
    let read_part = |part: &[(u64, Location)]| {
        let mut held = 0u64;
        let mut out = Vec::with_capacity(part.len());
        for (step, loc) in part {
            let Ok(value) = trial.read_value(name, loc, conversion) else {
                break;
            };
            held += held_bytes(loc, &value);
            if held > share {
                break;
            }
            out.push((*step, value));
        }
        out
    };
    if threads <= 1 {
        return read_part(&locations).into();
    }
    let part_len = locations.len().div_ceil(threads);
    let parts: Vec<Vec<(u64, TensorValue)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = locations
            .chunks(part_len)
            .map(|part| scope.spawn(|| read_part(part)))
            .collect();
        handles
            .into_iter()
            // A panic in a reader thread is a bug: re-raise it here rather than hide it.
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    // A part cut short leaves a gap: the values after it are kept, the caller reads the gap's
    // steps itself.
    parts.into_iter().flatten().collect()
}
