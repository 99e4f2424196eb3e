//! Reading a whole run step by step: [`Trial::read_steps`](super::Trial::read_steps).
//!
//! Reading every value of a run tensor by tensor visits each step's event file once per
//! tensor, so each file must be kept (mapped) between the sweeps. Read step by step, each file
//! is needed once: a few threads read the step files ahead of the caller, a chunk of steps at
//! a time, each file into a buffer taken from a small pool and given back when the caller drops
//! the step's values, and decode their records there. Nothing is mapped or kept, and the caller
//! gets the steps in order.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use bytes::Bytes;
use smdebug_core::Mode;

use super::records;
use super::source::{self, EventFile, InOrder, Location, Slot};
use super::value::TensorBytes;
use crate::error::{Error, Result};
use smdebug_storage::Storage;

/// Every value one step saved, in the order its workers' index files list them.
#[derive(Debug)]
pub struct StepValues {
    /// The global step.
    pub step: u64,
    /// The step's mode.
    pub mode: Mode,
    /// The step's number within its mode.
    pub mode_step: u64,
    /// The values, worker by worker (workers in name order).
    pub values: Vec<StepValue>,
}

/// One saved value of a step.
#[derive(Debug)]
pub struct StepValue {
    /// The tensor name as stored: a saved reduction keeps its `smdebug/reductions/...` name.
    pub name: Arc<str>,
    /// The worker that saved it.
    pub worker: Arc<str>,
    /// The value, its bytes not copied (a slice of the step file as read); or why this record
    /// gives none: damaged, cut short, not the tensor its index names, an index entry that
    /// locates no record, or strings. The step's other values are read all the same.
    pub value: Result<TensorBytes>,
}

/// One event file to read for a step, and the records wanted from it.
struct PlannedFile {
    file: Arc<EventFile>,
    entries: Vec<(Arc<str>, Slot)>,
}

/// One step to read.
pub(super) struct PlannedStep {
    pub step: u64,
    pub mode: Mode,
    pub mode_step: u64,
    files: Vec<PlannedFile>,
}

impl PlannedStep {
    /// A step with nothing planned yet.
    pub fn new(step: u64, mode: Mode, mode_step: u64) -> PlannedStep {
        PlannedStep {
            step,
            mode,
            mode_step,
            files: Vec::new(),
        }
    }

    /// Adds a worker's file with the records wanted from it (nothing when none is wanted).
    pub fn add_file(&mut self, file: Arc<EventFile>, entries: Vec<(Arc<str>, Slot)>) {
        if !entries.is_empty() {
            self.files.push(PlannedFile { file, entries });
        }
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// Steps a reader thread reads and hands over together (at most): one hand-over per step would
/// wake the caller (and switch threads) per step, as costly as reading a small step file.
const CHUNK_STEPS: usize = 32;

/// Bytes of step files a chunk holds (at most, unless one step alone holds more): what each
/// thread reads ahead is bounded by bytes, whatever the size of a step.
const CHUNK_BYTES: u64 = 4 << 20;

/// Chunks each reader thread may have read ahead of the caller.
const READ_AHEAD: usize = 2;

/// The plan cut into chunks of consecutive steps (see [`CHUNK_STEPS`] and [`CHUNK_BYTES`]).
fn chunks(plan: &[PlannedStep]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (i, step) in plan.iter().enumerate() {
        let len: u64 = step.files.iter().map(|f| f.file.len).sum();
        if i > start && (i - start == CHUNK_STEPS || bytes.saturating_add(len) > CHUNK_BYTES) {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes = bytes.saturating_add(len);
    }
    if start < plan.len() {
        out.push(start..plan.len());
    }
    out
}

/// Bytes of buffers the pool keeps for reuse.
const POOL_BYTES: usize = 64 << 20;

/// What the reader threads share: where the files are and how large a record may be.
struct Source {
    storage: Arc<dyn Storage>,
    local_root: Option<PathBuf>,
    max_tensor_bytes: u64,
    pool: Arc<Pool>,
}

/// Buffers given back by dropped steps, for the next files, up to [`POOL_BYTES`] of them.
#[derive(Default)]
struct Pool(Mutex<(Vec<Vec<u8>>, usize)>);

impl Pool {
    fn take(&self) -> Vec<u8> {
        let Ok(mut pool) = self.0.lock() else {
            return Vec::new();
        };
        let (buffers, bytes) = &mut *pool;
        buffers
            .pop()
            .inspect(|b| *bytes -= b.len())
            .unwrap_or_default()
    }

    fn give_back(&self, buf: Vec<u8>) {
        if let Ok(mut pool) = self.0.lock() {
            let (buffers, bytes) = &mut *pool;
            if *bytes + buf.len() <= POOL_BYTES {
                *bytes += buf.len();
                buffers.push(buf);
            }
        }
    }
}

/// A step file's bytes in a pooled buffer: the buffer goes back to the pool when the last
/// value sliced from it is dropped.
struct Pooled {
    buf: Vec<u8>,
    len: usize,
    pool: Arc<Pool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.buf));
    }
}

impl Source {
    /// The bytes of `file` up to the length its index gives it (fewer when the file is
    /// shorter: the records past its end are then reported as cut short). A file the trial
    /// already keeps is not read again.
    fn read(&self, file: &EventFile, loc: &Location) -> Result<Bytes> {
        if let Some(kept) = file.kept() {
            return Ok(kept);
        }
        if let Some(root) = &self.local_root
            && smdebug_storage::check_relative("", &file.path()).is_ok()
            && let Ok(limit) = usize::try_from(file.len)
        {
            let mut buf = self.pool.take();
            // Growing with the data read, so an index claiming a huge file costs nothing.
            if let Ok(len) = source::read_whole(root, &file.path(), &mut buf, limit) {
                return Ok(Bytes::from_owner(Pooled {
                    buf,
                    len,
                    pool: self.pool.clone(),
                }));
            }
        }
        // Elsewhere, or the local read failed: storage fetches it, and reports a missing file.
        records::get_range(self.storage.as_ref(), loc, 0..file.len)
    }

    /// Reads and decodes one step, its values appended to `values`; how many there are.
    fn step(&self, planned: &PlannedStep, values: &mut Vec<StepValue>) -> Result<usize> {
        let before = values.len();
        for pf in &planned.files {
            let mut loc = Location {
                file: pf.file.clone(),
                step: planned.step,
                mode: planned.mode,
                mode_step: planned.mode_step,
                start: 0,
                length: 0,
            };
            let bytes = match self.read(&pf.file, &loc) {
                Ok(bytes) => bytes,
                Err(e) => {
                    values.truncate(before);
                    return Err(e);
                }
            };
            for (name, slot) in &pf.entries {
                let value = match slot {
                    Slot::Record(start, length) => {
                        (loc.start, loc.length) = (*start, *length);
                        records::tensor_bytes_in(&bytes, &loc, name, self.max_tensor_bytes.into())
                    }
                    Slot::Unusable(entry) => Err(entry.error(name)),
                };
                values.push(StepValue {
                    name: name.clone(),
                    worker: pf.file.worker.clone(),
                    value,
                });
            }
        }
        Ok(values.len() - before)
    }

    /// Reads and decodes a chunk of steps.
    fn chunk(&self, plan: &[PlannedStep]) -> Chunk {
        let wanted = plan
            .iter()
            .flat_map(|p| &p.files)
            .map(|f| f.entries.len())
            .sum();
        let mut values = Vec::with_capacity(wanted);
        let steps = plan.iter().map(|p| self.step(p, &mut values)).collect();
        Chunk {
            steps,
            values: values.into_iter(),
        }
    }
}

/// A chunk of steps as a reader thread hands it over: each step's value count (or the error
/// that cost the step its values), and all the values in one vector. The caller's thread makes
/// each step's own vector: memory one thread allocates and another frees makes the two threads
/// contend for the allocator, once per step otherwise.
struct Chunk {
    steps: Vec<Result<usize>>,
    values: std::vec::IntoIter<StepValue>,
}

/// The steps of a run in order, read ahead on a few threads
/// ([`Trial::read_steps`](super::Trial::read_steps)).
///
/// Each item is one step's values, or the error that kept that step's files from being read
/// (a file missing, storage failing): the steps after it are still read. A record that gives no
/// value is an error in its own [`StepValue`]. Dropping the stream stops the reader threads at
/// their next chunk.
pub struct StepStream {
    /// The chunks of the plan, from the reader threads in order.
    chunks: InOrder<Chunk>,
    threads: Vec<Option<JoinHandle<()>>>,
    /// The plan: each step's number and mode.
    plan: Arc<Vec<PlannedStep>>,
    /// The chunk being handed out, and where its first step is in the plan.
    chunk: Chunk,
    at: usize,
    remaining: usize,
}

impl StepStream {
    pub(super) fn start(
        storage: Arc<dyn Storage>,
        local_root: Option<PathBuf>,
        max_tensor_bytes: u64,
        plan: Vec<PlannedStep>,
    ) -> Result<StepStream> {
        let remaining = plan.len();
        let n = source::reader_threads(remaining);
        let source = Arc::new(Source {
            storage,
            local_root,
            max_tensor_bytes,
            pool: Arc::default(),
        });
        let chunks = Arc::new(chunks(&plan));
        let plan = Arc::new(plan);
        let (senders, in_order) = InOrder::new(n, READ_AHEAD);
        let mut threads = Vec::with_capacity(n);
        for (t, tx) in senders.into_iter().enumerate() {
            let (source, plan, chunks) = (source.clone(), plan.clone(), chunks.clone());
            let thread = std::thread::Builder::new()
                .name("smdebug-step-reader".into())
                .spawn(move || {
                    for chunk in chunks.iter().skip(t).step_by(n) {
                        if tx.send(source.chunk(&plan[chunk.clone()])).is_err() {
                            return; // The stream was dropped.
                        }
                    }
                })
                .map_err(|source| Error::Thread {
                    thread: "step reader",
                    source,
                })?;
            threads.push(Some(thread));
        }
        Ok(StepStream {
            chunks: in_order,
            threads,
            plan,
            chunk: Chunk {
                steps: Vec::new(),
                values: Vec::new().into_iter(),
            },
            at: 0,
            remaining,
        })
    }
}

impl Iterator for StepStream {
    type Item = Result<StepValues>;

    fn next(&mut self) -> Option<Result<StepValues>> {
        if self.remaining == 0 {
            return None;
        }
        if self.chunk.steps.is_empty() {
            match self.chunks.recv() {
                Ok(mut chunk) => {
                    // Taken from the back, so the first step goes last.
                    chunk.steps.reverse();
                    self.chunk = chunk;
                }
                Err(t) => {
                    // A thread ends before its last chunk only by panicking (a bug): re-raise it.
                    self.remaining = 0;
                    if let Some(Err(panic)) = self.threads[t].take().map(JoinHandle::join) {
                        std::panic::resume_unwind(panic);
                    }
                    return Some(Err(Error::Thread {
                        thread: "step reader",
                        source: std::io::Error::other("it ended before its last step"),
                    }));
                }
            }
        }
        let read = self.chunk.steps.pop()?;
        let planned = &self.plan[self.at];
        self.at += 1;
        self.remaining -= 1;
        Some(read.map(|n| StepValues {
            step: planned.step,
            mode: planned.mode,
            mode_step: planned.mode_step,
            values: self.chunk.values.by_ref().take(n).collect(),
        }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step_of(bytes: &[u64]) -> PlannedStep {
        let mut step = PlannedStep::new(0, Mode::Train, 0);
        for (i, len) in bytes.iter().enumerate() {
            let file = Arc::new(EventFile::new(
                format!("f{i}"),
                "i",
                0,
                Arc::from("w"),
                *len,
            ));
            step.add_file(file, vec![(Arc::from("t"), Slot::Record(0, *len))]);
        }
        step
    }

    /// Chunks cover the plan in order, each of at most CHUNK_STEPS steps and CHUNK_BYTES
    /// bytes, unless one step alone is larger.
    #[test]
    fn chunks_are_bounded_by_steps_and_by_bytes() {
        let small: Vec<_> = (0..100).map(|_| step_of(&[1000])).collect();
        assert_eq!(chunks(&small), [0..32, 32..64, 64..96, 96..100]);
        let mb = 1 << 20;
        let large: Vec<_> = [3 * mb, mb, mb, 10 * mb, 1, 2 * mb, 2 * mb, 1]
            .iter()
            .map(|b| step_of(&[*b / 2, *b - *b / 2]))
            .collect();
        assert_eq!(chunks(&large), [0..2, 2..3, 3..4, 4..6, 6..8]);
        assert!(chunks(&[]).is_empty());
    }
}
