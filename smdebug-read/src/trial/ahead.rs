//! Reading event files ahead of a caller that reads one value at a time.
//!
//! A caller that asks for values one by one (Python's `for s in steps: tensor.value(s)`, the
//! notebook way) would otherwise wait for each step's event file to be opened and read on its
//! own thread: on a long run of small steps that is most of what a value costs. So when a
//! single read ([`Trial::locate`](super::Trial)) finds its tensor at a step, the event files of
//! the tensor's next steps (the same worker's) are read on rayon's pool, a window of them
//! ahead of the caller, and kept until the caller reads them. When it does, the file counts as
//! fetched by the caller ([`Files::fetched`]): the first time provisionally, let go when the
//! next first fetch comes, the second time for good, so memory is what it is without reading
//! ahead (one sweep over the run holds one file) plus the window. A caller going back (the next
//! tensor, from its first step), to another worker or past the window starts a new window; the
//! files read ahead that it skipped are let go.
//!
//! Reading ahead never decides what a read gives: a file it could not read (missing, cut short,
//! over the heap budget) is left alone and the caller reads it as it would have, with the same
//! error; a file it read is the one the caller would have read whole, checked by the caller as
//! any kept file is.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::source::{EventFile, Files, Location, WHOLE_FILE_MAX};
use super::state::State;
use smdebug_storage::Storage;

/// Files read ahead of the caller at most (a window's worth).
const WINDOW_FILES: usize = 256;

/// Bytes read ahead of the caller at most, within half the heap budget
/// ([`TrialOptions::file_cache_bytes`](super::TrialOptions::file_cache_bytes)).
const WINDOW_BYTES: u64 = 16 << 20;

/// The caller's position once its window has ended.
const ENDED: u64 = u64::MAX;

/// Files one task reads: a window is split among the pool's threads.
const TASK_FILES: usize = 32;

/// Where the caller is and which files are read ahead of it.
#[derive(Default)]
pub(crate) struct ReadAhead {
    window: Mutex<Window>,
}

#[derive(Default)]
struct Window {
    /// The worker whose files the window holds.
    worker: Option<Arc<str>>,
    /// The global step of the caller's last read, shared with the tasks: a file of an earlier
    /// step is not read any more (the caller read it itself).
    at: Arc<AtomicU64>,
    /// Files read (or being read) ahead and not read by the caller yet, in step order.
    ahead: VecDeque<Arc<EventFile>>,
    /// Their lengths, together.
    ahead_bytes: u64,
    /// Steps up to this one were scheduled (their files are in `ahead` or were read).
    scheduled_to: Option<u64>,
}

impl ReadAhead {
    /// The caller is about to read `loc` (tensor `name`). A caller reading the tensor's steps
    /// in order (or other tensors of the same step) moves the window along, and the next files
    /// are read when less than half a window is left ahead; any other read (back to an earlier
    /// step, the next tensor's first step, a stride, another worker) starts a new window, with
    /// nothing read ahead until the caller moves on in order again.
    pub(crate) fn follow(
        &self,
        st: &State,
        name: &str,
        loc: &Location,
        files: &Arc<Files>,
        storage: &Arc<dyn Storage>,
    ) {
        let Some(steps) = st.names.get(name) else {
            return;
        };
        let mut w = self.window.lock().unwrap_or_else(|p| p.into_inner());
        let at = w.at.load(Ordering::Relaxed);
        let next_after = |s: u64| match steps.search(s) {
            Ok(i) => i + 1,
            Err(i) => i,
        };
        let in_order = w.worker.as_deref() == Some(&*loc.file.worker)
            && (loc.step == at
                || (loc.step > at
                    && next_after(at) < steps.len()
                    && steps.get(next_after(at)) == loc.step));
        if !in_order {
            w.restart(files);
            w.worker = Some(loc.file.worker.clone());
            w.at.store(loc.step, Ordering::Relaxed);
            return;
        }
        w.at.store(loc.step, Ordering::Relaxed);
        // The files the caller is at or past leave the window; those it skipped are let go.
        while let Some(front) = w.ahead.front() {
            if front.step() > loc.step {
                break;
            }
            let front = w.ahead.pop_front().expect("front exists");
            w.ahead_bytes -= front.len;
            if front.step() < loc.step {
                front.let_go_ahead(files);
            }
        }
        // More when half the window is left.
        if w.ahead.len() > WINDOW_FILES / 2 || w.ahead_bytes > WINDOW_BYTES / 2 {
            return;
        }
        let from = w.scheduled_to.map_or(loc.step, |to| to.max(loc.step));
        let mut batch = Vec::new();
        let mut to = from;
        for i in next_after(from)..steps.len() {
            if w.ahead.len() >= WINDOW_FILES || w.ahead_bytes >= WINDOW_BYTES {
                break;
            }
            let g = steps.get(i);
            to = g;
            let Some(ws) = st
                .steps
                .get(&g)
                .and_then(|e| e.workers.get(&loc.file.worker))
            else {
                continue;
            };
            let file = &ws.file;
            if file.len > WHOLE_FILE_MAX || file.kept().is_some() {
                continue;
            }
            w.ahead_bytes += file.len;
            w.ahead.push_back(file.clone());
            batch.push(file.clone());
        }
        w.scheduled_to = Some(to);
        for chunk in batch.chunks(TASK_FILES) {
            let (chunk, files, storage, at) =
                (chunk.to_vec(), files.clone(), storage.clone(), w.at.clone());
            rayon_core::spawn(move || {
                for file in chunk {
                    // The caller is past it (it read the file itself) or started a new window.
                    if file.step() < at.load(Ordering::Relaxed) {
                        continue;
                    }
                    if !file.read_ahead(storage.as_ref(), &files) {
                        // Half the heap budget is spent: the caller reads the rest itself.
                        break;
                    }
                    if at.load(Ordering::Relaxed) == ENDED {
                        // The window ended while the file was read: nobody will ask for it.
                        file.let_go_ahead(&files);
                        break;
                    }
                }
            });
        }
    }
}

impl Window {
    /// A new window: the files read ahead that the caller did not read are let go.
    fn restart(&mut self, files: &Files) {
        // Tasks still running for the old window read no more of it, and let go of a file
        // they were reading (see `follow`).
        self.at.store(ENDED, Ordering::Relaxed);
        self.at = Arc::new(AtomicU64::new(0));
        for file in self.ahead.drain(..) {
            file.let_go_ahead(files);
        }
        self.ahead_bytes = 0;
        self.scheduled_to = None;
    }
}
