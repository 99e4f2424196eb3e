//! Index JSON and event-file bytes through the whole read path: a `Trial` over an in-memory run,
//! listing and reading every tensor, step, worker and reduction it finds.
//!
//! Input: `u16 LE n | n bytes: an index file | the rest: an event file`. The index file is stored
//! for the step and worker of the event file it names (step 0, worker_0 when that name is not an
//! event file's), the event bytes under that name and under step 0's.
//!
//! Never a panic or an allocation over the budget (run with `-malloc_limit_mb`); a value is only
//! ever returned when the record at the index's location carries exactly one tensor value under
//! the asked name, and it is that value.
#![no_main]

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use prost::Message;
use smdebug_core::Reduction;
use smdebug_io::format::proto::{Event, event, summary};
use smdebug_io::format::record::{PayloadCrcPolicy, decode_exact_record};
use smdebug_io::format::{IndexFile, layout, tensor};
use smdebug_io::storage::Storage;
use smdebug_io::trial::{StepSelector, Trial, TrialOptions};
use smdebug_io::{Error, Result};

/// The budget the target reads with: small, so that `-malloc_limit_mb=64` catches any
/// allocation a record's claim could drive.
const BUDGET: u64 = 1 << 20;

#[derive(Debug, Default)]
struct MemRun {
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
            return Err(Error::Storage {
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
fn oracle(
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

fn check_value(got: Result<smdebug_core::Tensor>, want: Option<&smdebug_core::Tensor>) {
    match (got, want) {
        (Ok(t), Some(w)) => {
            assert!(t.bytes().len() as u64 <= BUDGET);
            assert_eq!(t.dtype(), w.dtype());
            assert_eq!(t.shape(), w.shape());
            assert_eq!(t.bytes(), w.bytes());
        }
        (Ok(t), None) => panic!(
            "a value ({} {:?}) from a record that holds no single tensor under its name",
            t.dtype(),
            t.shape()
        ),
        (Err(_), _) => {}
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let n = usize::from(u16::from_le_bytes([data[0], data[1]])).min(data.len() - 2);
    let index_bytes = &data[2..2 + n];
    let events = Bytes::copy_from_slice(&data[2 + n..]);

    // The index goes where the event file it names says (step and worker), so seeds keep their
    // own names; the event bytes are stored under that name and under step 0's.
    let event_name = IndexFile::parse(index_bytes, "probe")
        .ok()
        .and_then(|i| i.meta.event_file_name)
        .filter(|name| smdebug_io::format::layout::parse_event_file(name).is_some());
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

    let options = TrialOptions {
        auto_refresh: false,
        max_tensor_bytes: BUDGET,
        ..TrialOptions::default()
    };
    let Ok(trial) = Trial::from_storage("fuzz", run.clone(), options) else {
        return;
    };
    let index = parsed.expect("a trial opened, so its one index file parsed");
    let names = trial.tensor_names().unwrap();
    let steps = trial.steps(None).unwrap();
    let workers = trial.workers().unwrap();
    for name in &names {
        let Ok(t) = trial.tensor(name) else { continue };
        for &at in &steps {
            for w in workers.iter().map(|w| Some(w.as_str())).chain([None]) {
                check_value(
                    t.raw(at, None, w),
                    oracle(&index, &events, step, name).as_ref(),
                );
            }
            for loc in &index.tensor_payload {
                let Some((reduction, base)) = Reduction::parse_tensor_name(&loc.tensorname) else {
                    continue;
                };
                if base != name {
                    continue;
                }
                let got = t.reduction_value(at, reduction, None, None);
                let want = oracle(&index, &events, step, &loc.tensorname);
                match (got, want) {
                    (Ok(v), Some(w)) => {
                        let values = w.to_f64_vec();
                        assert_eq!(values.len(), 1, "a reduction of several values was read");
                        assert!(v.to_bits() == values[0].to_bits());
                    }
                    (Ok(v), None) => panic!("reduction {v} from a record with no such tensor"),
                    (Err(_), _) => {}
                }
            }
        }
        if let Ok(records) = trial.tensor_records(name, StepSelector::All, None, None) {
            for r in records {
                assert_eq!(&r.name, name);
            }
        }
    }
});
