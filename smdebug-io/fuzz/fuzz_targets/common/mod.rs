//! What the read-path targets share: an in-memory run and the oracle that says which value an
//! index entry may give.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use prost::Message;
use smdebug_format::proto::{Event, event, summary};
use smdebug_format::record::{PayloadCrcPolicy, decode_exact_record};
use smdebug_format::{IndexFile, layout, tensor};
use smdebug_storage::{Error, Result, Storage};

/// The budget the targets read with: small, so that `-malloc_limit_mb=64` catches any
/// allocation a record's claim could drive.
pub const BUDGET: u64 = 1 << 20;

#[derive(Debug, Default)]
pub struct MemRun {
    files: Mutex<BTreeMap<String, Bytes>>,
}

impl MemRun {
    fn not_found(path: &str) -> Error {
        Error::NotFound {
            location: "fuzz".to_string(),
            path: path.to_string(),
        }
    }
}

impl Storage for MemRun {
    fn describe(&self) -> &str {
        "fuzz"
    }

    fn put_parts(&self, path: &str, parts: Vec<Bytes>) -> Result<()> {
        let joined: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
        self.files
            .lock()
            .unwrap()
            .insert(path.to_string(), joined.into());
        Ok(())
    }

    fn get(&self, path: &str) -> Result<Bytes> {
        self.files
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .ok_or_else(|| Self::not_found(path))
    }

    fn get_range(&self, path: &str, range: Range<u64>) -> Result<Bytes> {
        if range.start >= range.end {
            return Ok(Bytes::new());
        }
        let file = self.get(path)?;
        let len = file.len() as u64;
        if range.start >= len {
            return Err(Error::Failed {
                location: "fuzz".to_string(),
                op: "get_range",
                path: path.to_string(),
                source: "range starts past the end".into(),
            });
        }
        Ok(file.slice(range.start as usize..range.end.min(len) as usize))
    }

    fn size(&self, path: &str) -> Result<Option<u64>> {
        Ok(self.files.lock().unwrap().get(path).map(|f| f.len() as u64))
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let dir = format!("{}/", prefix.trim_matches('/'));
        Ok(self
            .files
            .lock()
            .unwrap()
            .keys()
            .filter(|k| k.starts_with(&dir))
            .cloned()
            .collect())
    }

    fn list_after(&self, prefix: &str, offset: &str) -> Result<Vec<String>> {
        Ok(self
            .list(prefix)?
            .into_iter()
            .filter(|k| k.as_str() > offset)
            .collect())
    }

    fn delete(&self, path: &str) -> Result<()> {
        self.files.lock().unwrap().remove(path);
        Ok(())
    }
}

/// The value an index entry named `name` may give: the one tensor value tagged `name` in the
/// record the index points at (its last entry of that name, when it lists the name twice: the
/// reader takes the later entry, as Python smdebug does). `None` when there is no such single
/// value, or when that last entry locates no record (a read must fail).
pub fn oracle(
    index: &IndexFile,
    events: &Bytes,
    step: u64,
    name: &str,
) -> Option<smdebug_core::Tensor> {
    // The positions in the file of the usable entries (those not set aside as unusable).
    let unusable: Vec<usize> = index.unusable_entries.iter().map(|e| e.position).collect();
    let positions = (0usize..).filter(|p| !unusable.contains(p));
    let last_usable = index
        .tensor_payload
        .iter()
        .zip(positions)
        .filter(|(l, _)| l.tensorname == name)
        .last();
    let last_unusable = index
        .unusable_entries
        .iter()
        .filter(|e| e.tensorname == name)
        .map(|e| e.position)
        .max();
    let (loc, at) = last_usable?;
    if last_unusable.is_some_and(|u| u > at) {
        return None;
    }
    let end = usize::try_from(loc.end()?).ok()?;
    let bytes = events.get(loc.start_idx as usize..end)?;
    let rec =
        decode_exact_record(bytes, "oracle", loc.start_idx, PayloadCrcPolicy::AcceptBoth).ok()?;
    let ev = Event::decode(rec.payload).ok()?;
    if u64::try_from(ev.step).ok()? != step {
        return None;
    }
    let Some(event::What::Summary(s)) = ev.what else {
        return None;
    };
    let mut tagged = s
        .value
        .into_iter()
        .filter(|v| v.tag == name && matches!(v.value, Some(summary::value::Value::Tensor(_))));
    let (one, None) = (tagged.next()?, tagged.next()) else {
        return None;
    };
    let Some(summary::value::Value::Tensor(proto)) = one.value else {
        return None;
    };
    tensor::tensor_from_proto(proto, BUDGET).ok()
}

/// The run an input describes: `u16 LE n | n bytes: an index file | the rest: an event file`.
/// The index file is stored for the step and worker of the event file it names (step 0,
/// worker_0 when that name is not an event file's), the event bytes under that name and under
/// step 0's. Returns the run, the index's step, the event bytes and the parsed index (`None`
/// when it does not parse).
pub fn run_of(data: &[u8]) -> Option<(Arc<MemRun>, u64, Bytes, Option<IndexFile>)> {
    if data.len() < 2 {
        return None;
    }
    let n = usize::from(u16::from_le_bytes([data[0], data[1]])).min(data.len() - 2);
    let index_bytes = &data[2..2 + n];
    let events = Bytes::copy_from_slice(&data[2 + n..]);
    // The index goes where the event file it names says (step and worker), so seeds keep their
    // own names; the event bytes are stored under that name and under step 0's.
    let event_name = IndexFile::parse(index_bytes, "probe")
        .ok()
        .and_then(|i| i.meta.event_file_name)
        .filter(|name| layout::parse_event_file(name).is_some());
    let (step, worker) = event_name
        .as_deref()
        .and_then(layout::parse_event_file)
        .unwrap_or((0, "worker_0".to_string()));
    let run = Arc::new(MemRun::default());
    let index_path = layout::index_file(step, &worker);
    run.put(&index_path, Bytes::copy_from_slice(index_bytes))
        .unwrap();
    run.put(&layout::event_file(0, "worker_0"), events.clone())
        .unwrap();
    if let Some(name) = &event_name {
        // Storage refuses names that are not plain relative paths; so be it.
        let _ = run.put(name, events.clone());
    }
    let parsed = IndexFile::parse(index_bytes, &index_path).ok();
    Some((run, step, events, parsed))
}
