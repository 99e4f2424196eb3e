//! [`ProfilerFollower`] and the [`Increment`] each poll hands out (see the module docs of
//! `follow`).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use smdebug_storage::Storage;

use super::kineto::KinetoTraces;
use super::problems::{DataArea, DataProblem, DataProblems};
use super::system;

use crate::kineto::RankSummary;
use crate::profile::error::Result;
use crate::profile::{
    CodeProfileWindow, ProfilerReader, Span, SystemSamples, parse_trace, parse_trace_without_args,
};
use smdebug_format::code_profile::{CODE_PREFIX, SUMMARY_EXTENSION, parse_code_profile_key};
use smdebug_format::trace::TraceFileName;

/// A trace file read by a poll: its name and where its spans are in the
/// [`Increment::spans`] handed out with it (a reader that keeps no spans reads a window of
/// them again from the files that hold it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRead {
    /// The file.
    pub file: TraceFileName,
    /// Its spans: `Increment::spans[spans]`.
    pub spans: std::ops::Range<usize>,
}

/// What one poll found that was not handed out before.
#[derive(Clone, Debug, Default)]
pub struct Increment {
    /// New system samples grouped by series, in file order (files by window start, then
    /// node); [`SystemSamples::iter`] hands them out one by one.
    pub samples: SystemSamples,
    /// Spans of the trace files read for the first time, with their events' `args` unless
    /// the follower was told not to keep them ([`ProfilerFollower::span_args`]).
    pub spans: Vec<Span>,
    /// The trace files `spans` were read from, in the order read.
    pub traces: Vec<TraceRead>,
    /// Code-profile windows whose summaries appeared, ordered by start, node and worker.
    pub code_windows: Vec<CodeProfileWindow>,
    /// Every Kineto summary, ordered by rank, when one of the traces changed.
    pub kineto: Option<Vec<RankSummary>>,
    /// Problems met in this poll (each problem is also kept in
    /// [`ProfilerFollower::problems`], once).
    pub problems: Vec<DataProblem>,
    /// Whether the poll's time budget ran out with files left to read.
    pub more: bool,
}

impl Increment {
    /// Whether nothing new was found (problems aside).
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
            && self.spans.is_empty()
            && self.code_windows.is_empty()
            && self.kineto.is_none()
    }

    fn append(&mut self, mut other: Increment) {
        self.samples.append(other.samples);
        let offset = self.spans.len();
        self.traces
            .extend(other.traces.into_iter().map(|t| TraceRead {
                spans: t.spans.start + offset..t.spans.end + offset,
                file: t.file,
            }));
        self.spans.append(&mut other.spans);
        self.code_windows.append(&mut other.code_windows);
        if other.kineto.is_some() {
            self.kineto = other.kineto;
        }
        self.problems.append(&mut other.problems);
        self.more = other.more;
    }
}

/// Adds `new` windows to `held`, keeping them ordered by start, then node, worker and end.
pub fn merge_code_windows(held: &mut Vec<CodeProfileWindow>, new: Vec<CodeProfileWindow>) {
    held.extend(new);
    held.sort_by(|a, b| {
        let key = |w: &CodeProfileWindow| {
            (
                w.file.start_us,
                w.file.node.clone(),
                w.file.worker,
                w.file.end_us,
            )
        };
        key(a).cmp(&key(b))
    });
}

/// Reads a run's profiler data incrementally. See the module docs.
pub struct ProfilerFollower {
    storage: Arc<dyn Storage>,
    reader: ProfilerReader,
    system: system::SystemFiles,
    traces: BTreeSet<String>,
    code: BTreeSet<String>,
    kineto: KinetoTraces,
    budget: Option<Duration>,
    items: Option<usize>,
    span_args: bool,
    /// System files, trace files left unread by the next polls ([`ProfilerFollower::hold`]).
    hold_system: bool,
    hold_traces: bool,
    problems: DataProblems,
    fetches: u64,
    bytes: u64,
}

impl ProfilerFollower {
    /// A follower of the run `storage`.
    pub fn new(storage: Arc<dyn Storage>) -> ProfilerFollower {
        ProfilerFollower {
            reader: ProfilerReader::new(Arc::clone(&storage)),
            storage,
            system: system::SystemFiles::default(),
            traces: BTreeSet::new(),
            code: BTreeSet::new(),
            kineto: KinetoTraces::default(),
            budget: None,
            items: None,
            span_args: true,
            hold_system: false,
            hold_traces: false,
            problems: DataProblems::default(),
            fetches: 0,
            bytes: 0,
        }
    }

    /// A follower of the run at `location` (a local path or an object-store URL; text, a `Path`
    /// or a parsed `Location`).
    pub fn open(location: impl smdebug_storage::IntoLocation) -> Result<ProfilerFollower> {
        Ok(Self::new(smdebug_storage::open_storage(location)?))
    }

    /// Also summarizes these Kineto trace files (one per rank, plain or gzip-compressed).
    pub fn kineto_traces(mut self, paths: Vec<PathBuf>) -> ProfilerFollower {
        self.kineto = KinetoTraces::new(paths);
        self
    }

    /// Spends at most about `budget` on system files, and as much on trace files, per poll;
    /// the rest is read at the next polls ([`Increment::more`]). Without a budget a poll reads
    /// everything new.
    pub fn budget(mut self, budget: Duration) -> ProfilerFollower {
        self.budget = Some(budget);
        self
    }

    /// Hands out about `items` samples (and as many spans) per poll at most, the rest at the
    /// next polls ([`Increment::more`]): a consumer that takes a backlog in pieces holds
    /// a bounded number of parsed records at a time.
    pub fn items_per_poll(mut self, items: usize) -> ProfilerFollower {
        self.items = Some(items.max(1));
        self
    }

    /// Whether spans keep their events' `args` (they do by default: the rules read a
    /// data-loading span's `worker_id` or `num_workers` and an operator's `cat` there). A
    /// consumer that holds spans in a [`SpanStore`](crate::profile::SpanStore), which keeps no
    /// `args`, turns them off: each file is then read with [`parse_trace_without_args`], which
    /// looks only at the entries a span is read from.
    pub fn span_args(mut self, keep: bool) -> ProfilerFollower {
        self.span_args = keep;
        self
    }

    /// Leaves the system files (`DataArea::System`) or the trace files (`DataArea::Spans`)
    /// unread by the next polls while `hold` (their [`Increment::more`] is then set): a consumer
    /// reading a backlog in pieces lets the kind of data that is behind in time catch up.
    /// Other areas are never held.
    pub fn hold(&mut self, area: DataArea, hold: bool) {
        match area {
            DataArea::System => self.hold_system = hold,
            DataArea::Spans => self.hold_traces = hold,
            DataArea::CodeProfiles | DataArea::Traces => {}
        }
    }

    /// The run's storage.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// Every problem met so far, each once.
    pub fn problems(&self) -> &DataProblems {
        &self.problems
    }

    /// Files fetched so far (whole or a byte range).
    pub fn fetches(&self) -> u64 {
        self.fetches
    }

    /// Bytes fetched so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes
    }

    /// Reads everything there is now, over as many polls as the budget needs.
    pub fn read_to_end(&mut self) -> Increment {
        let mut all = self.poll();
        while all.more {
            let next = self.poll();
            all.append(next);
        }
        all
    }

    /// Reads what is new since the last poll.
    pub fn poll(&mut self) -> Increment {
        let mut out = Increment::default();
        if self.hold_system {
            out.more = true;
        } else {
            self.poll_system(&mut out);
        }
        if self.hold_traces {
            out.more = true;
        } else {
            self.poll_traces(&mut out);
        }
        self.poll_code(&mut out);
        out.kineto = self.kineto.poll(&mut out.problems);
        out.problems
            .retain(|p| self.problems.push(p.clone()) || p.is_read_failure());
        out
    }

    fn deadline(&self) -> Option<Instant> {
        self.budget.map(|b| Instant::now() + b)
    }

    fn poll_system(&mut self, out: &mut Increment) {
        let files = match self.reader.system_files() {
            Ok(files) => files,
            Err(e) => {
                out.problems.push(DataProblem::Unlisted {
                    area: DataArea::System,
                    message: e.to_string(),
                });
                return;
            }
        };
        let read = self.system.read(
            self.storage.as_ref(),
            &files,
            self.deadline(),
            self.items,
            &mut out.samples,
            &mut out.problems,
        );
        self.fetches += read.fetches;
        self.bytes += read.bytes;
        out.more |= read.more;
    }

    fn poll_traces(&mut self, out: &mut Increment) {
        let files = match self.reader.trace_files() {
            Ok(files) => files,
            Err(e) => {
                out.problems.push(DataProblem::Unlisted {
                    area: DataArea::Spans,
                    message: e.to_string(),
                });
                return;
            }
        };
        let deadline = self.deadline();
        for file in files {
            if self.traces.contains(&file.key) {
                continue;
            }
            if deadline.is_some_and(|d| Instant::now() >= d)
                || self.items.is_some_and(|n| out.spans.len() >= n)
            {
                out.more = true;
                break;
            }
            let bytes = match self.storage.get(&file.key) {
                Ok(bytes) => bytes,
                Err(e) if e.is_not_found() => continue,
                Err(e) => {
                    out.problems.push(DataProblem::Unreadable {
                        area: DataArea::Spans,
                        key: file.key.clone(),
                        message: e.to_string(),
                    });
                    continue;
                }
            };
            self.fetches += 1;
            self.bytes += bytes.len() as u64;
            let parsed = if self.span_args {
                parse_trace(&file, &bytes)
            } else {
                parse_trace_without_args(&file, &bytes)
            };
            match parsed {
                Ok(spans) => {
                    let start = out.spans.len();
                    out.spans.extend(spans);
                    out.traces.push(TraceRead {
                        file: file.clone(),
                        spans: start..out.spans.len(),
                    });
                }
                Err(e) => out.problems.push(DataProblem::BadFile {
                    area: DataArea::Spans,
                    key: file.key.clone(),
                    message: e.to_string(),
                }),
            }
            self.traces.insert(file.key);
        }
    }

    fn poll_code(&mut self, out: &mut Increment) {
        let keys = match self.storage.list(CODE_PREFIX) {
            Ok(keys) => keys,
            Err(e) => {
                out.problems.push(DataProblem::Unlisted {
                    area: DataArea::CodeProfiles,
                    message: e.to_string(),
                });
                return;
            }
        };
        let mut new = Vec::new();
        for key in keys {
            let Some((file, extension)) = parse_code_profile_key(&key) else {
                continue;
            };
            if extension != SUMMARY_EXTENSION || self.code.contains(&key) {
                continue;
            }
            self.fetches += 1;
            match self.reader.code_profile_summary(&file) {
                Ok(summary) => new.push(CodeProfileWindow { file, summary }),
                Err(e) => out.problems.push(DataProblem::BadFile {
                    area: DataArea::CodeProfiles,
                    key: key.clone(),
                    message: e.to_string(),
                }),
            }
            self.code.insert(key);
        }
        merge_code_windows(&mut out.code_windows, new);
    }
}
