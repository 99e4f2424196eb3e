//! Ingestion of PyTorch profiler (Kineto) Chrome traces: operator and kernel breakdowns,
//! GPU busy/idle time, per rank.
//!
//! A trace is read as a stream (`.json` or gzip-compressed `.json.gz`, recognised by content):
//! serde seeds visit the top-level object key by key and `traceEvents` element by element, so
//! memory stays bounded by the number of distinct operator/kernel names and of disjoint GPU busy
//! intervals, however large the file.
//!
//! Definitions (all times in microseconds):
//! - Only complete events (`"ph": "X"`) count; metadata, instant, flow, counter and begin/end
//!   events are read past. A complete event without a numeric `ts` is skipped and counted in
//!   `skipped_event_count`; a missing `dur` counts as 0.
//! - `span_us`: earliest `ts` to latest `ts + dur` over complete events of every category.
//! - Categories: `kernel` → `gpu_kernels`, `gpu_memcpy` → `gpu_memcpy`, `gpu_memset` →
//!   `gpu_memset`, `cpu_op` → `cpu_operators`, `user_annotation` → `user_annotations`; each has
//!   its own table and its own `share` denominator.
//! - GPU activity is kernels, memcpys and memsets (not `cuda_sync` waits or
//!   `gpu_user_annotation` ranges). The device of an activity is `args.device`, else its `pid`.
//!   Per device, busy time is the length of the union of its activity intervals across all of
//!   its streams (overlapping or touching intervals merge), idle time is the device's activity
//!   span minus busy time; `gpu_busy_us` and `gpu_idle_us` sum these over devices.
//! - Rank: `distributedInfo.rank`, else `rank-N`/`rank_N` in the file name, else 0.

mod error;
mod parse;
mod report;
mod source;
mod stats;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::de::DeserializeSeed;
use serde_json::error::Category as JsonCategory;

pub use error::{KinetoError, Result};
pub use report::{GpuDeviceSummary, OpStats, RankSummary, TraceReport, render_text};

use parse::{Scratch, TraceSeed};
use source::{CountingReader, TraceSource};
use stats::Accumulator;

/// Summarizes each trace file (one per rank) into one report.
///
/// Files are read in parallel, one thread per file up to the machine's parallelism. Ranks are
/// sorted by rank number; files with equal ranks keep their input order. The first file (in
/// input order) that fails decides the error.
pub fn summarize_traces<I, P>(paths: I) -> Result<TraceReport>
where
    I: IntoIterator<Item = P>,
    P: AsRef<Path>,
{
    let paths: Vec<PathBuf> = paths
        .into_iter()
        .map(|p| p.as_ref().to_path_buf())
        .collect();
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(paths.len());
    let results: Vec<Option<Result<RankSummary>>> = if workers <= 1 {
        paths.iter().map(|p| Some(summarize_trace(p))).collect()
    } else {
        let slots: Vec<Mutex<Option<Result<RankSummary>>>> =
            paths.iter().map(|_| Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(path) = paths.get(i) else { break };
                        let summary = summarize_trace(path);
                        // A poisoned slot can only come from a panic in another worker, which
                        // the scope re-raises anyway; store through it regardless.
                        *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(summary);
                    }
                });
            }
        });
        slots
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
            .collect()
    };
    let mut ranks = Vec::with_capacity(results.len());
    for r in results.into_iter().flatten() {
        ranks.push(r?);
    }
    ranks.sort_by_key(|r| r.rank);
    Ok(TraceReport { ranks })
}

/// Summarizes one trace file, plain or gzip-compressed.
pub fn summarize_trace(path: impl AsRef<Path>) -> Result<RankSummary> {
    let path = path.as_ref();
    let source = TraceSource::open(path)?;
    let stream = source.stream_name();
    match source {
        TraceSource::Plain(r) => summarize_stream(r, path, stream),
        TraceSource::Gzip(r) => summarize_stream(r, path, stream),
    }
}

/// Summarizes an uncompressed Chrome-trace JSON stream. `name` stands in for the file name: it
/// appears in errors and in `RankSummary::file`, and supplies the rank when the trace has no
/// `distributedInfo.rank`.
pub fn summarize_reader<R: Read>(reader: R, name: &str) -> Result<RankSummary> {
    summarize_stream(reader, Path::new(name), "JSON text")
}

fn summarize_stream<R: Read>(reader: R, path: &Path, stream: &'static str) -> Result<RankSummary> {
    let mut counting = CountingReader::new(reader);
    let mut acc = Accumulator::new();
    let mut scratch = Scratch::default();
    let parsed = {
        let mut de = serde_json::Deserializer::from_reader(&mut counting);
        TraceSeed {
            acc: &mut acc,
            scratch: &mut scratch,
        }
        .deserialize(&mut de)
        .and_then(|top| de.end().map(|()| top))
    };
    let top = parsed.map_err(|e| json_error(e, path, &counting, stream))?;
    if !top.saw_events {
        return Err(KinetoError::MissingTraceEvents {
            path: path.to_path_buf(),
        });
    }
    let file = path.display().to_string();
    let rank = top
        .rank
        .or_else(|| {
            path.file_name()
                .and_then(|n| rank_from_file_name(&n.to_string_lossy()))
        })
        .unwrap_or(0);
    let gpu_devices = acc.device_summaries();
    Ok(RankSummary {
        rank,
        span_us: acc.span(),
        gpu_busy_us: gpu_devices.iter().map(|d| d.busy_us).sum(),
        gpu_idle_us: gpu_devices.iter().map(|d| d.idle_us).sum(),
        gpu_kernels: acc.kernels.rows(),
        cpu_operators: acc.cpu_ops.rows(),
        file,
        gpu_memcpy: acc.memcpy.rows(),
        gpu_memset: acc.memset.rows(),
        user_annotations: acc.annotations.rows(),
        gpu_kernel_total_us: acc.kernels.total(),
        gpu_memcpy_total_us: acc.memcpy.total(),
        gpu_memset_total_us: acc.memset.total(),
        cpu_operator_total_us: acc.cpu_ops.total(),
        user_annotation_total_us: acc.annotations.total(),
        gpu_devices,
        event_count: acc.events,
        complete_event_count: acc.complete_events,
        skipped_event_count: acc.skipped_events,
    })
}

/// Turns a serde_json error into a [`KinetoError`] whose offset is that of the offending byte
/// (for premature end of input: the length of the input).
fn json_error<R: Read>(
    e: serde_json::Error,
    path: &Path,
    reader: &CountingReader<R>,
    stream: &'static str,
) -> KinetoError {
    let path = path.to_path_buf();
    let (line, column) = (e.line(), e.column());
    // serde_json's column counts the offending byte itself, except at end of input, where
    // there is no such byte.
    let offset = match e.classify() {
        JsonCategory::Io => reader.offset(),
        JsonCategory::Eof => reader.offset_of(line, column),
        _ => reader.offset_of(line, column).saturating_sub(1),
    };
    match e.classify() {
        JsonCategory::Io => KinetoError::Read {
            path,
            offset,
            stream,
            source: e.into(),
        },
        JsonCategory::Data => KinetoError::NotATrace {
            path,
            offset,
            line,
            column,
            message: e.to_string(),
        },
        // Syntax errors and premature end of input; any future category is also a JSON-level
        // problem.
        _ => KinetoError::Malformed {
            path,
            offset,
            line,
            column,
            message: e.to_string(),
        },
    }
}

/// The `N` of the last `rank-N` or `rank_N` in a file name.
fn rank_from_file_name(name: &str) -> Option<u32> {
    let mut found = None;
    let mut rest = name;
    while let Some(i) = rest.find("rank") {
        let after = &rest[i + 4..];
        if let Some(digits) = after.strip_prefix(['-', '_']) {
            let end = digits
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(digits.len());
            if let Ok(n) = digits[..end].parse() {
                found = Some(n);
            }
        }
        rest = after;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_from_names() {
        assert_eq!(
            rank_from_file_name("trace_filter__sampled_rank-1.json.gz"),
            Some(1)
        );
        assert_eq!(
            rank_from_file_name("cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"),
            Some(34)
        );
        assert_eq!(rank_from_file_name("job_rank_7.json"), Some(7));
        assert_eq!(rank_from_file_name("ranking.json"), None);
        assert_eq!(rank_from_file_name("rank-.json"), None);
        assert_eq!(rank_from_file_name("trace.json"), None);
    }

    #[test]
    fn bare_event_array_is_a_trace() {
        let json = br#"[{"ph":"X","cat":"kernel","name":"k","pid":0,"ts":1,"dur":2}]"#;
        let s = summarize_reader(&json[..], "x_rank-3.json").unwrap();
        assert_eq!(s.rank, 3);
        assert_eq!(s.gpu_busy_us, 2.0);
        assert_eq!(s.gpu_kernels.len(), 1);
    }

    #[test]
    fn distributed_info_rank_wins_over_file_name() {
        let json = br#"{"distributedInfo":{"rank":"5"},"traceEvents":[]}"#;
        let s = summarize_reader(&json[..], "rank-3.json").unwrap();
        assert_eq!(s.rank, 5);
    }

    #[test]
    fn two_streams_on_one_device_are_not_double_counted() {
        let json = br#"{"traceEvents":[
            {"ph":"X","cat":"kernel","name":"a","pid":0,"tid":7,"ts":0,"dur":10,"args":{"device":0,"stream":7}},
            {"ph":"X","cat":"kernel","name":"b","pid":0,"tid":8,"ts":5,"dur":10,"args":{"device":0,"stream":8}},
            {"ph":"X","cat":"gpu_memcpy","name":"m","pid":0,"tid":7,"ts":20,"dur":5,"args":{"device":0}},
            {"ph":"X","cat":"kernel","name":"a","pid":1,"tid":7,"ts":0,"dur":4,"args":{"device":1}}
        ]}"#;
        let s = summarize_reader(&json[..], "t.json").unwrap();
        // device 0: [0,15] ∪ [20,25] = 20 busy over a 25 span; device 1: 4 busy, 0 idle.
        assert_eq!(s.gpu_busy_us, 24.0);
        assert_eq!(s.gpu_idle_us, 5.0);
        assert_eq!(s.gpu_devices.len(), 2);
        assert_eq!(s.gpu_kernels[0].name, "a");
        assert_eq!(s.gpu_kernels[0].count, 2);
        assert_eq!(s.gpu_kernels[0].total_us, 14.0);
        assert_eq!(s.gpu_memcpy[0].total_us, 5.0);
        assert_eq!(s.span_us, 25.0);
    }

    #[test]
    fn field_order_does_not_change_figures() {
        // Kineto order (cat first, so name/args of uninteresting events are skipped undecoded)
        // and the reverse order must give the same summary.
        let kineto = br#"{"traceEvents":[
            {"ph":"X","cat":"kernel","name":"k","pid":9,"ts":0,"dur":4,"args":{"device":3}},
            {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"ts":0,"dur":9,"args":{"device":5}},
            {"ph":"X","cat":"cpu_op","name":"op","pid":1,"ts":1,"dur":2,"args":{"device":4}}
        ]}"#;
        let reversed = br#"{"traceEvents":[
            {"args":{"device":3},"dur":4,"ts":0,"pid":9,"name":"k","cat":"kernel","ph":"X"},
            {"args":{"device":5},"dur":9,"ts":0,"pid":1,"name":"cudaLaunchKernel","cat":"cuda_runtime","ph":"X"},
            {"args":{"device":4},"dur":2,"ts":1,"pid":1,"name":"op","cat":"cpu_op","ph":"X"}
        ]}"#;
        let a = summarize_reader(&kineto[..], "t.json").unwrap();
        let b = summarize_reader(&reversed[..], "t.json").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.gpu_devices.len(), 1);
        assert_eq!(a.gpu_devices[0].device, 3);
        assert_eq!(a.cpu_operators[0].name, "op");
        assert_eq!(a.span_us, 9.0);
    }

    #[test]
    fn odd_field_types_are_tolerated() {
        let json = br#"{"traceEvents":[
            {"ph":"X","cat":"cpu_op","name":"op","ts":"100","dur":5,"pid":"Spans","args":[1,2]},
            {"ph":"X","cat":null,"name":{"x":1},"ts":110,"dur":null},
            {"ph":"X","cat":"cpu_op","name":"op","ts":true},
            {"ph":"M","name":"process_name","args":{"name":"p"}},
            {}
        ]}"#;
        let s = summarize_reader(&json[..], "t.json").unwrap();
        assert_eq!(s.event_count, 5);
        assert_eq!(s.complete_event_count, 2);
        assert_eq!(s.skipped_event_count, 1);
        assert_eq!(s.cpu_operators.len(), 1);
        assert_eq!(s.cpu_operators[0].total_us, 5.0);
        assert_eq!(s.span_us, 10.0);
    }
}
