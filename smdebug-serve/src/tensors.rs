//! The run's steps, tensor names and scalar values, followed in bulk from its index files.
//!
//! A step's index file lists every tensor record of the step's event file; the follower reads
//! each new index file once, fetches the step's event file once (whole when it is small, else
//! only the small records), and decodes the records that hold one number through smdebug-io's
//! format layer (the same decoder the `Trial` uses). Values are kept in compact columns per
//! scalar and mode, 16 bytes a value; nothing else of a step is kept but its mode.
//!
//! Why not the `Trial`: it keeps, for every step, a hash table of every tensor's name and
//! record location, and reading through it looks up and decodes one value at a time. On the
//! 100,000-step run of 50 tensors of BENCHMARKS.md the old follower (the `Trial` held, values in
//! rows) took 194 s to read the 5 million values and held 1.7 GB; this one 22–28 s and 224 MB. The `Trial` is still what the
//! server reads whole tensors with (the distribution and 2-D views), opened on demand.
//!
//! Which steps are complete, and so where listing resumes, is the `Trial`'s own
//! [`StepProgress`] (Python smdebug's rules: the collections file's `num_workers`, the last
//! complete step, the incomplete-step window). Values are drawn as they arrive, complete step or
//! not: a live view shows the first worker's value of a step as soon as it is there.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smdebug_core::{CollectionsFile, Mode, Reduction};
use smdebug_io::Storage;
use smdebug_io::format::index::IndexFile;
use smdebug_io::format::layout::{
    COLLECTIONS_DIR, INDEX_DIR, event_file, index_list_offset, parse_collections_file,
    parse_index_file,
};
use smdebug_io::format::read_tagged_tensor_record_ref;
use smdebug_io::format::record::PayloadCrcPolicy;
use smdebug_io::format::tensor::DEFAULT_MAX_TENSOR_BYTES;
use smdebug_io::trial::StepProgress;

/// A record longer than this cannot hold a single number (a scalar's record is ~100 bytes:
/// framing, tag, step, mode metadata, dtype, shape, 8 bytes of value).
const MAX_SCALAR_RECORD: u64 = 4096;

/// An event file up to this size is fetched whole; a larger one record by record (its small
/// records only).
const WHOLE_FILE_BYTES: u64 = 1 << 20;

/// Index files handled per batch (read on a few threads).
const BATCH: usize = 2048;

/// One scalar's values in one mode: `(global step, value)`, in step order.
pub(crate) type Column = Vec<(u64, f64)>;

/// What one pass found.
#[derive(Default)]
pub(crate) struct TensorUpdate {
    /// New global steps and their modes.
    pub steps: Vec<(u64, Mode)>,
    /// Names seen for the first time (reductions folded into their tensor).
    pub names: Vec<String>,
    /// New values per scalar and mode (handed to the sink after each batch).
    values: Vec<(String, Mode, Column)>,
    /// Whether any values were read.
    pub any_values: bool,
    /// Index files still to read after this pass (a backlog is read over several passes).
    pub pending: usize,
    /// Whether any index or collections file exists.
    pub found: bool,
    /// Problems worked around.
    pub warnings: Vec<String>,
}

/// The follower's memory of the run's index.
#[derive(Default)]
pub(crate) struct TensorCursor {
    collections: BTreeSet<String>,
    /// Which steps are complete and which index files were read (the `Trial`'s rules).
    progress: StepProgress,
    /// Every global step seen.
    seen_steps: BTreeSet<u64>,
    /// Names listed so far (reductions folded).
    names: BTreeSet<String>,
    /// Names known not to be scalars (a record too long, or more than one value).
    not_scalar: BTreeSet<String>,
    /// Index files listed but not read yet (the backlog), in key order.
    backlog: std::collections::VecDeque<(String, u64, String)>,
    /// Whether anything was ever found.
    found: bool,
}

impl TensorCursor {
    /// The first global step that listing resumes at (`None`: from the first).
    fn resume(&self) -> Option<u64> {
        self.progress
            .last_complete()
            .map(|_| self.progress.resume_step())
    }
}

/// One index file and the scalars read from its event file.
struct StepRead {
    step: u64,
    worker: String,
    mode: Mode,
    names: Vec<String>,
    scalars: Vec<(String, f64)>,
    /// Names whose record turned out not to be one number.
    not_scalar: Vec<String>,
    warnings: Vec<String>,
}

/// New values per scalar and mode, and about how many index files are still to read.
pub(crate) type Sink<'a> = dyn FnMut(Vec<(String, Mode, Column)>, usize) + 'a;

/// Reads what is new, spending about `budget` on index files (the rest on later passes). The
/// values of each batch of index files go to `sink` as soon as the batch is read, so that no
/// pass holds more than a batch of them twice.
pub(crate) fn follow_tensors(
    storage: &Arc<dyn Storage>,
    cursor: &mut TensorCursor,
    budget: Duration,
    sink: &mut Sink<'_>,
) -> TensorUpdate {
    let started = Instant::now();
    let mut update = TensorUpdate::default();
    read_collections(storage.as_ref(), cursor, &mut update);
    if cursor.backlog.is_empty() {
        let listed = match cursor.resume() {
            Some(step) => storage.list_after(INDEX_DIR, &index_list_offset(step)),
            None => storage.list(INDEX_DIR),
        };
        match listed {
            Ok(paths) => {
                for path in paths {
                    let Some((step, worker)) = parse_index_file(&path) else {
                        continue;
                    };
                    if !cursor.progress.has_read(step, &worker) {
                        cursor.backlog.push_back((path, step, worker));
                    }
                }
            }
            Err(e) => update
                .warnings
                .push(format!("cannot list the index files: {e}")),
        }
    }
    while !cursor.backlog.is_empty() {
        let take = cursor.backlog.len().min(BATCH);
        let batch: Vec<(String, u64, String)> = cursor.backlog.drain(..take).collect();
        let not_scalar = cursor.not_scalar.clone();
        for read in read_batch(storage.as_ref(), &batch, &not_scalar) {
            match read {
                Ok(read) => absorb(cursor, &mut update, read),
                // Index files are written after their event file, atomically: a bad one is
                // reported and left out.
                Err(message) => update.warnings.push(message),
            }
        }
        if !update.values.is_empty() {
            update.any_values = true;
            sink(std::mem::take(&mut update.values), cursor.backlog.len());
        }
        if started.elapsed() >= budget {
            break;
        }
    }
    if cursor.backlog.is_empty() {
        cursor.progress.listed();
    }
    update.pending = cursor.backlog.len();
    update.found = cursor.found;
    update
}

fn read_collections(storage: &dyn Storage, cursor: &mut TensorCursor, update: &mut TensorUpdate) {
    let Ok(paths) = storage.list(COLLECTIONS_DIR) else {
        return;
    };
    for path in paths {
        let Some(worker) = parse_collections_file(&path) else {
            continue;
        };
        if cursor.collections.contains(&path) {
            continue;
        }
        let parsed = storage
            .get(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
            .and_then(|v| CollectionsFile::from_json(&v).map_err(|e| e.to_string()));
        match parsed {
            Ok(file) => {
                cursor
                    .progress
                    .collections_file(Some(&worker), file.num_workers);
                cursor.found = true;
            }
            Err(e) => update.warnings.push(format!("{path}: {e}")),
        }
        cursor.collections.insert(path);
    }
}

fn absorb(cursor: &mut TensorCursor, update: &mut TensorUpdate, read: StepRead) {
    cursor.found = true;
    if cursor.seen_steps.insert(read.step) {
        update.steps.push((read.step, read.mode));
    }
    // Python smdebug learns steps from tensors: an index file listing none is no step.
    if !read.names.is_empty() {
        cursor.progress.step_written(read.step, &read.worker);
    }
    for name in read.names {
        if !cursor.names.contains(&name) {
            cursor.names.insert(name.clone());
            update.names.push(name);
        }
    }
    for name in read.not_scalar {
        cursor.not_scalar.insert(name);
    }
    for (name, value) in read.scalars {
        if cursor.not_scalar.contains(&name) {
            continue;
        }
        match update
            .values
            .iter_mut()
            .rev()
            .find(|(n, m, _)| *n == name && *m == read.mode)
        {
            Some((_, _, column)) => column.push((read.step, value)),
            None => update
                .values
                .push((name, read.mode, vec![(read.step, value)])),
        }
    }
    update.warnings.extend(read.warnings);
}

/// Reads a batch of index files (and their scalars) on a few threads, results in key order.
fn read_batch(
    storage: &dyn Storage,
    batch: &[(String, u64, String)],
    not_scalar: &BTreeSet<String>,
) -> Vec<Result<StepRead, String>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8)
        .min(batch.len() / 64 + 1);
    let read_all = |chunk: &[(String, u64, String)]| -> Vec<Result<StepRead, String>> {
        chunk
            .iter()
            .map(|(path, step, worker)| read_step(storage, path, *step, worker, not_scalar))
            .collect()
    };
    if threads <= 1 {
        return read_all(batch);
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = batch
            .chunks(batch.len().div_ceil(threads))
            .map(|chunk| scope.spawn(move || read_all(chunk)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// One index file, and the single-number records of its event file.
fn read_step(
    storage: &dyn Storage,
    path: &str,
    step: u64,
    worker: &str,
    not_scalar: &BTreeSet<String>,
) -> Result<StepRead, String> {
    let bytes = storage.get(path).map_err(|e| e.to_string())?;
    let index = IndexFile::parse(&bytes, path).map_err(|e| e.to_string())?;
    let file = index
        .meta
        .event_file_name
        .clone()
        .unwrap_or_else(|| event_file(step, worker));
    let mut read = StepRead {
        step,
        worker: worker.to_owned(),
        mode: index.meta.mode,
        names: Vec::new(),
        scalars: Vec::new(),
        not_scalar: Vec::new(),
        warnings: Vec::new(),
    };
    // A name listed twice: the later entry is read, as Python smdebug does.
    let mut entries: HashMap<&str, (u64, u64)> = HashMap::new();
    let mut order: Vec<&str> = Vec::new();
    for t in &index.tensor_payload {
        if entries
            .insert(&t.tensorname, (t.start_idx, t.length))
            .is_none()
        {
            order.push(&t.tensorname);
        }
    }
    let mut candidates: Vec<(&str, u64, u64)> = Vec::new();
    for name in order {
        let (start, length) = entries[name];
        let reduction = Reduction::parse_tensor_name(name);
        read.names
            .push(reduction.map_or(name, |(_, base)| base).to_owned());
        if reduction.is_some() || not_scalar.contains(name) {
            continue;
        }
        if length > MAX_SCALAR_RECORD {
            read.not_scalar.push(name.to_owned());
            continue;
        }
        candidates.push((name, start, length));
    }
    if candidates.is_empty() {
        return Ok(read);
    }
    let file_len = index
        .tensor_payload
        .iter()
        .filter_map(|t| t.end())
        .max()
        .unwrap_or(0);
    let whole = if file_len <= WHOLE_FILE_BYTES {
        match storage.get(&file) {
            Ok(b) => Some(b),
            Err(e) => return Err(format!("{file}: {e}")),
        }
    } else {
        None
    };
    for (name, start, length) in candidates {
        let record = match &whole {
            Some(b) => {
                let (s, e) = (start as usize, (start + length) as usize);
                if e > b.len() {
                    read.warnings.push(format!(
                        "{file}: `{name}` at byte {start} ({length} bytes) is past the end of the \
                         file ({} bytes); left out",
                        b.len()
                    ));
                    continue;
                }
                b.slice(s..e)
            }
            None => match storage.get_range(&file, start..start + length) {
                Ok(b) => b,
                Err(e) => {
                    read.warnings.push(format!("{file}: {e}"));
                    continue;
                }
            },
        };
        match read_tagged_tensor_record_ref(
            &record,
            &file,
            start,
            name,
            PayloadCrcPolicy::AcceptBoth,
            DEFAULT_MAX_TENSOR_BYTES,
        ) {
            Ok(event) if event.shape.iter().product::<usize>() == 1 => match event.into_owned() {
                Ok(e) => {
                    if let Some(&v) = e.tensor.to_f64_vec().first() {
                        read.scalars.push((name.to_owned(), v));
                    }
                }
                Err(e) => read.warnings.push(format!("{file}: {e}")),
            },
            Ok(_) => read.not_scalar.push(name.to_owned()),
            // Strings (XGBoost's tree columns) are not numbers to draw.
            Err(smdebug_io::Error::StringTensor { .. }) => read.not_scalar.push(name.to_owned()),
            Err(e) => read.warnings.push(e.to_string()),
        }
    }
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 24's first case, as the dashboard's follower reads it: the collections file names
    /// `worker_0` and declares one worker, `algo-1` writes the steps. Every step is complete
    /// (the `Trial`'s rules), so the next listing resumes after the last one instead of reading
    /// the run from its start again.
    #[test]
    fn the_follower_takes_step_completeness_from_the_trials_rules() {
        let stages = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../smdebug-io/tests/data/scenarios/issue_workers_from_the_collections_file/stage_0",
        );
        let storage: Arc<dyn Storage> =
            Arc::new(smdebug_io::storage::LocalStorage::new(&stages).unwrap());
        let mut cursor = TensorCursor::default();
        let mut sunk = 0;
        let update = follow_tensors(
            &storage,
            &mut cursor,
            Duration::from_secs(60),
            &mut |values, _| sunk += values.len(),
        );
        assert_eq!(update.steps.len(), 4);
        assert!(
            sunk > 0 && update.warnings.is_empty(),
            "{:?}",
            update.warnings
        );
        assert_eq!(cursor.progress.last_complete(), Some(3));
        assert_eq!(cursor.progress.workers(), ["worker_0"]);
        assert_eq!(cursor.resume(), Some(4));
        // Nothing new: the next pass reads nothing.
        let again = follow_tensors(
            &storage,
            &mut cursor,
            Duration::from_secs(60),
            &mut |_, _| panic!("no new values"),
        );
        assert!(again.steps.is_empty() && again.pending == 0);
    }
}
