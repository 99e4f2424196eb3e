//! Following system-metrics files: each file is read on from where the last read stopped.
//!
//! A file grows while its window is current: SageMaker's monitor appends in place, this
//! crate's sampler republishes it with more lines (every 5 s by default). A file whose size
//! changed is read from the end of its last complete line (a byte-range read), so each byte is
//! decoded once; a file that shrank was rewritten and is read again from its start, with the
//! samples already handed out skipped. Once a later file of the same node exists and a file's
//! size did not change since, it is sealed: its size is looked at again only every
//! [`RECHECK_SEALED_EVERY`]th pass (on an object store, a size is a request).
//!
//! A file is fetched [`READ_CHUNK`](crate::profile::SYSTEM_READ_CHUNK) bytes at a time, so what a reader holds of it is bounded
//! however large it is. A line longer than [`MAX_LINE_BYTES`](crate::profile::MAX_SYSTEM_LINE_BYTES) (a record is a few hundred
//! bytes) is skipped, named as a bad line: a file of one gigabyte without a newline is read
//! through once, in chunks, and costs no more memory than a chunk.

use std::collections::BTreeMap;
use std::time::Instant;

use smdebug_storage::Storage;

use super::problems::{DataArea, DataProblem};
use crate::profile::{
    MAX_SYSTEM_LINE_BYTES as MAX_LINE_BYTES, SYSTEM_READ_CHUNK as READ_CHUNK, SystemSamples,
    long_line, parse_system_chunk,
};
use smdebug_format::system::SystemFileName;

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
    /// The bytes up to `offset` end inside a line over [`MAX_LINE_BYTES`]: what follows up to
    /// its newline is skipped.
    in_long_line: bool,
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
        let recheck = self.passes.is_multiple_of(RECHECK_SEALED_EVERY);
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
            let done = read_file(
                storage, &file.key, cursor, size, &mut out, deadline, samples, problems,
            );
            if done {
                cursor.sealed = superseded;
            } else {
                out.more = true;
                break;
            }
        }
        out
    }
}

/// Reads file `key` of `size` bytes on from `cursor`, [`READ_CHUNK`] bytes a fetch, into
/// `samples`; `false` when `deadline` passed before its end.
#[allow(clippy::too_many_arguments)]
fn read_file(
    storage: &dyn Storage,
    key: &str,
    cursor: &mut FileCursor,
    size: u64,
    out: &mut SystemRead,
    deadline: Option<Instant>,
    samples: &mut SystemSamples,
    problems: &mut Vec<DataProblem>,
) -> bool {
    let mut fetched_any = false;
    while cursor.offset < size {
        if fetched_any && deadline.is_some_and(|d| Instant::now() >= d) {
            return false;
        }
        let start = cursor.offset;
        let end = size.min(start + READ_CHUNK);
        let fetched = if start == 0 && end == size {
            storage.get(key)
        } else {
            storage.get_range(key, start..end)
        };
        let bytes = match fetched {
            Ok(bytes) => bytes,
            // Gone, or cut short, since its size was taken: looked at again next time.
            Err(e) if e.is_not_found() => return true,
            Err(e) => {
                problems.push(unreadable(key, e));
                return true;
            }
        };
        if bytes.is_empty() {
            // Cut short since its size was taken: looked at again next time.
            return true;
        }
        fetched_any = true;
        out.fetches += 1;
        out.bytes += bytes.len() as u64;
        let end = start + bytes.len() as u64;
        let mut rest: &[u8] = &bytes;
        if cursor.in_long_line {
            match memchr::memchr(b'\n', rest) {
                Some(at) => {
                    cursor.in_long_line = false;
                    cursor.newlines += 1;
                    cursor.offset += at as u64 + 1;
                    rest = &rest[at + 1..];
                }
                None => {
                    cursor.offset = end;
                    cursor.size = Some(end);
                    continue;
                }
            }
        }
        // The lines before an over-long one are read; it is skipped (to its newline, perhaps
        // in a later fetch) and named.
        loop {
            let long = long_line(rest, MAX_LINE_BYTES);
            let lines = long.map_or(rest, |(at, _)| &rest[..at]);
            let consumed = take_lines(key, lines, cursor, samples, problems);
            let Some((at, newline)) = long else {
                break;
            };
            debug_assert_eq!(consumed, at);
            problems.push(DataProblem::BadLines {
                key: key.to_owned(),
                count: 1,
                first_line: cursor.newlines + 1,
                first_message: format!("a line longer than {MAX_LINE_BYTES} bytes; not read"),
            });
            match newline {
                Some(nl) => {
                    cursor.newlines += 1;
                    cursor.offset += nl as u64 + 1 - at as u64;
                    rest = &rest[nl + 1..];
                }
                None => {
                    cursor.in_long_line = true;
                    cursor.offset = end;
                    break;
                }
            }
        }
        cursor.size = Some(end);
        if end == size && cursor.offset < end && !cursor.in_long_line {
            // A last line still being written: read again when the file grows.
            break;
        }
    }
    true
}

/// Decodes `lines` (at the cursor's offset) into `samples`, moving the cursor past what was
/// taken; returns how many bytes that is.
fn take_lines(
    key: &str,
    lines: &[u8],
    cursor: &mut FileCursor,
    samples: &mut SystemSamples,
    problems: &mut Vec<DataProblem>,
) -> usize {
    if lines.is_empty() {
        return 0;
    }
    let mut chunk = parse_system_chunk(key, lines, cursor.newlines);
    if let Some((first_line, first_message)) = chunk.bad.first() {
        problems.push(DataProblem::BadLines {
            key: key.to_owned(),
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
    chunk.consumed
}

fn unreadable(key: &str, e: smdebug_storage::Error) -> DataProblem {
    DataProblem::Unreadable {
        area: DataArea::System,
        key: key.to_owned(),
        message: e.to_string(),
    }
}
