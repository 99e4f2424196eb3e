//! Following system-metrics files: each file is read on from where the last read stopped.
//!
//! A file grows while its window is current: SageMaker's monitor appends in place, this
//! crate's sampler republishes it with more lines (every 5 s by default). A file whose size
//! changed is read from the end of its last complete line (a byte-range read), so each byte is
//! decoded once; a file that shrank was rewritten and is read again from its start, with the
//! samples already handed out skipped. Once a later file of the same node exists and a file's
//! size did not change since, it is sealed: its size is looked at again only every
//! [`RECHECK_SEALED_EVERY`]th pass (on an object store, a size is a request).

use std::collections::BTreeMap;
use std::time::Instant;

use smdebug_io::Storage;

use super::problems::{DataArea, DataProblem};
use crate::reader::{SystemSamples, parse_system_chunk};
use crate::system::SystemFileName;

/// A sealed file's size is looked at again every this many passes.
pub(super) const RECHECK_SEALED_EVERY: u64 = 25;

/// What was read of one file.
#[derive(Debug, Default)]
struct FileCursor {
    /// Bytes decoded (every complete line).
    offset: u64,
    /// Newlines among them.
    newlines: usize,
    /// Samples handed out.
    samples: usize,
    /// Samples to skip: the file was rewritten shorter, and those were handed out already.
    skip: usize,
    /// Size at the last look.
    size: Option<u64>,
    /// A later file of the node exists and this one did not change since: no more lines.
    sealed: bool,
}

/// The system-metrics files read so far.
#[derive(Debug, Default)]
pub(super) struct SystemFiles {
    files: BTreeMap<String, FileCursor>,
    passes: u64,
}

/// What one pass over the files found.
pub(super) struct SystemRead {
    /// Files fetched (whole or a range).
    pub fetches: u64,
    /// Bytes fetched.
    pub bytes: u64,
    /// Whether the time budget ran out before every file was looked at.
    pub more: bool,
}

impl SystemFiles {
    /// Reads what is new in `files` (ordered by window start, then node) into `samples`, until
    /// `deadline` passes or `items` samples were read.
    pub(super) fn read(
        &mut self,
        storage: &dyn Storage,
        files: &[SystemFileName],
        deadline: Option<Instant>,
        items: Option<usize>,
        samples: &mut SystemSamples,
        problems: &mut Vec<DataProblem>,
    ) -> SystemRead {
        let mut newest: BTreeMap<&str, u64> = BTreeMap::new();
        for f in files {
            let n = newest.entry(f.node.as_str()).or_insert(f.start_s);
            *n = (*n).max(f.start_s);
        }
        let mut out = SystemRead {
            fetches: 0,
            bytes: 0,
            more: false,
        };
        self.passes += 1;
        let recheck = self.passes % RECHECK_SEALED_EVERY == 0;
        for file in files {
            let cursor = self.files.entry(file.key.clone()).or_default();
            if cursor.sealed && !recheck {
                continue;
            }
            if deadline.is_some_and(|d| Instant::now() >= d)
                || items.is_some_and(|n| samples.len() >= n)
            {
                out.more = true;
                break;
            }
            let superseded = newest
                .get(file.node.as_str())
                .is_some_and(|n| *n > file.start_s);
            let size = match storage.size(&file.key) {
                Ok(Some(size)) => size,
                // Gone between listing and looking: nothing to read.
                Ok(None) => continue,
                Err(e) => {
                    problems.push(unreadable(&file.key, e));
                    continue;
                }
            };
            if cursor.size == Some(size) {
                cursor.sealed = superseded;
                continue;
            }
            if size < cursor.offset {
                // Rewritten shorter: read it again, skipping what was handed out.
                *cursor = FileCursor {
                    skip: cursor.samples,
                    ..FileCursor::default()
                };
            }
            let start = cursor.offset;
            let fetched = if start == 0 {
                storage.get(&file.key)
            } else {
                storage.get_range(&file.key, start..size)
            };
            let bytes = match fetched {
                Ok(bytes) => bytes,
                Err(e) if e.is_not_found() => continue,
                Err(e) => {
                    problems.push(unreadable(&file.key, e));
                    continue;
                }
            };
            out.fetches += 1;
            out.bytes += bytes.len() as u64;
            let mut chunk = parse_system_chunk(&file.key, &bytes, cursor.newlines);
            if let Some((first_line, first_message)) = chunk.bad.first() {
                problems.push(DataProblem::BadLines {
                    key: file.key.clone(),
                    count: chunk.bad.len(),
                    first_line: *first_line,
                    first_message: first_message.clone(),
                });
            }
            let found = chunk.samples.len();
            let skipped = cursor.skip.min(found);
            cursor.skip -= skipped;
            chunk.samples.skip_first(skipped);
            samples.append(chunk.samples);
            cursor.samples += found - skipped;
            cursor.offset += chunk.consumed as u64;
            cursor.newlines += chunk.newlines;
            cursor.size = Some(start + bytes.len() as u64);
            cursor.sealed = superseded;
        }
        out
    }
}

fn unreadable(key: &str, e: smdebug_io::Error) -> DataProblem {
    DataProblem::Unreadable {
        area: DataArea::System,
        key: key.to_owned(),
        message: e.to_string(),
    }
}
