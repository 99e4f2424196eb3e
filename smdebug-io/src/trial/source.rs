//! The trial's only contact with storage and the format: list, fetch and decode.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use smdebug_core::{Collection, CollectionsFile, Mode, Tensor};

use super::state::Location;
use crate::error::{Error, Result};
use crate::format::index::IndexFile;
use crate::format::layout;
use crate::format::record::PayloadCrcPolicy;
use crate::storage::{Storage, open_storage};

pub(crate) fn open(location: &str) -> Result<Arc<dyn Storage>> {
    open_storage(location)
}

/// The end marker: `None` while the run goes on; `Some(reason)` once it ended, with the reason
/// our writer stores in it (Python smdebug writes an empty marker).
pub(crate) fn end_marker(storage: &dyn Storage) -> Result<Option<Option<String>>> {
    match storage.get(layout::END_MARKER) {
        Ok(bytes) => {
            let reason = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v.get("reason").and_then(|r| r.as_str()).map(str::to_string));
            Ok(Some(reason))
        }
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// One worker's collections file.
pub(crate) struct WorkerCollections {
    pub worker: Option<String>,
    pub num_workers: usize,
    pub collections: Vec<Collection>,
}

/// Collections files not read yet.
pub(crate) fn new_collection_files(
    storage: &dyn Storage,
    seen: &BTreeSet<String>,
) -> Result<Vec<(String, WorkerCollections)>> {
    let mut out = Vec::new();
    for path in storage.list(layout::COLLECTIONS_DIR)? {
        let Some(worker) = layout::parse_collections_file(&path) else {
            continue;
        };
        if seen.contains(&path) {
            continue;
        }
        let bytes = storage.get(&path)?;
        let bad = |reason: String| Error::BadCollections {
            path: path.clone(),
            reason,
        };
        let json: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        let file = CollectionsFile::from_json(&json).map_err(|e| bad(e.to_string()))?;
        out.push((
            path.clone(),
            WorkerCollections {
                worker: Some(worker),
                num_workers: file.num_workers,
                collections: file.collections,
            },
        ));
    }
    Ok(out)
}

/// One index file, decoded.
pub(crate) struct IndexEntry {
    pub step: u64,
    pub worker: String,
    pub mode: Mode,
    pub mode_step: u64,
    pub event_file: String,
    pub tensors: HashMap<String, (u64, u64)>,
}

/// Index files of steps `>= from` (every index file when `from` is `None`), in key order.
pub(crate) fn index_files_from(
    storage: &dyn Storage,
    from: Option<u64>,
) -> Result<Vec<IndexEntry>> {
    let paths = match from {
        Some(step) => storage.list_after(layout::INDEX_DIR, &layout::index_list_offset(step))?,
        None => storage.list(layout::INDEX_DIR)?,
    };
    let mut out = Vec::with_capacity(paths.len());
    for path in paths {
        let Some((step, worker)) = layout::parse_index_file(&path) else {
            continue;
        };
        let bytes = storage.get(&path)?;
        let index = IndexFile::parse(&bytes, &path)?;
        let event_file = index
            .meta
            .event_file_name
            .clone()
            .unwrap_or_else(|| layout::event_file(step, &worker));
        let tensors = index
            .tensor_payload
            .into_iter()
            .map(|t| (t.tensorname, (t.start_idx, t.length)))
            .collect();
        out.push(IndexEntry {
            step,
            worker,
            mode: index.meta.mode,
            mode_step: index.meta.mode_step,
            event_file,
            tensors,
        });
    }
    Ok(out)
}

/// Reads one tensor record where the index says it is, checking its framing and checksums.
pub(crate) fn read_tensor(storage: &dyn Storage, loc: &Location) -> Result<Tensor> {
    let bytes = storage.get_range(&loc.event_file, loc.start..loc.start + loc.length)?;
    let event = crate::format::read_tensor_record(
        &bytes,
        &loc.event_file,
        loc.start,
        PayloadCrcPolicy::AcceptBoth,
    )?;
    Ok(event.tensor)
}
