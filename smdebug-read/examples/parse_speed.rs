//! Times the profiler reader's parsers over a run's files: every system-metrics file through
//! `parse_system_chunk` and every framework trace file through `parse_trace`, then the spans
//! into a `SpanStore`. Files are read into memory first, so only parsing is timed.
//!
//! `cargo run --release -p smdebug-read --example parse_speed -- RUN [ROUNDS]`
//!
//! Prints the thread's CPU seconds per round (the best of `ROUNDS`, 3 by default), the peak
//! heap one system file's parse takes and what it returns, the peak heap one trace file's
//! parse takes beyond its input and output, and the bytes the `SpanStore` holds (counted by
//! this example's allocator); then the whole run once through `ProfilerFollower::read_to_end`
//! into a `ProfileData`, with its CPU seconds and peak heap.

use std::path::{Path, PathBuf};
use std::time::Instant;

use smdebug_format::trace::parse_trace_file_key;
use smdebug_read::follow::ProfilerFollower;
use smdebug_read::profile::{ProfileData, Span, SpanStore, parse_system_chunk, parse_trace};
use smdebug_testkit::alloc;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

/// This thread's CPU time in seconds (wall time off Linux).
fn cpu_seconds() -> f64 {
    #[cfg(target_os = "linux")]
    {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid timespec for the call to fill.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::sync::OnceLock;
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_secs_f64()
    }
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// `(key relative to the run, bytes)` of every file under `run/area`.
fn read_area(run: &Path, area: &str) -> Vec<(String, Vec<u8>)> {
    let mut paths = Vec::new();
    files_under(&run.join(area), &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let key = p.strip_prefix(run).unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(&p).unwrap();
            (key, bytes)
        })
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let run = PathBuf::from(args.next().expect("usage: parse_speed RUN [ROUNDS]"));
    let rounds: usize = args.next().map_or(3, |r| r.parse().expect("ROUNDS"));
    let system = read_area(&run, "system");
    let traces: Vec<_> = read_area(&run, "framework")
        .into_iter()
        .filter_map(|(key, bytes)| parse_trace_file_key(&key).map(|f| (f, bytes)))
        .collect();
    let system_bytes: usize = system.iter().map(|(_, b)| b.len()).sum();
    let trace_bytes: usize = traces.iter().map(|(_, b)| b.len()).sum();
    println!(
        "{} system files ({:.1} MB), {} trace files ({:.1} MB)",
        system.len(),
        system_bytes as f64 / 1e6,
        traces.len(),
        trace_bytes as f64 / 1e6
    );

    let mut best_system = f64::INFINITY;
    let mut best_traces = f64::INFINITY;
    let mut samples = 0;
    let mut spans: Vec<Span> = Vec::new();
    let mut per_file: Vec<usize> = Vec::new();
    for _ in 0..rounds {
        let t = cpu_seconds();
        samples = 0;
        for (key, bytes) in &system {
            let chunk = parse_system_chunk(key, bytes, 0);
            samples += chunk.samples.len();
            std::hint::black_box(&chunk);
        }
        best_system = best_system.min(cpu_seconds() - t);

        spans.clear();
        per_file.clear();
        let t = cpu_seconds();
        for (file, bytes) in &traces {
            let parsed = parse_trace(file, bytes).unwrap();
            per_file.push(parsed.len());
            spans.extend(parsed);
        }
        best_traces = best_traces.min(cpu_seconds() - t);
    }
    println!("system: {samples} samples, {best_system:.3} CPU-s (best of {rounds})");
    println!(
        "traces: {} spans, {best_traces:.3} CPU-s (best of {rounds})",
        spans.len()
    );

    // The heap one system file's parse takes: its peak and what it returns.
    if let Some((key, bytes)) = system.iter().max_by_key(|(_, b)| b.len()) {
        let before = alloc::live();
        alloc::reset_peak();
        let chunk = parse_system_chunk(key, bytes, 0);
        let kept = alloc::live() - before;
        let peak = alloc::peak() - before;
        println!(
            "one system file ({:.2} MB, {} samples): {:.1} MB peak, {:.1} MB returned",
            bytes.len() as f64 / 1e6,
            chunk.samples.len(),
            peak as f64 / 1e6,
            kept as f64 / 1e6
        );
    }

    // The transient of one trace file's parse: peak live bytes during it beyond what was
    // live before and what it returns.
    if let Some((file, bytes)) = traces.iter().max_by_key(|(_, b)| b.len()) {
        let before = alloc::live();
        alloc::reset_peak();
        let out = parse_trace(file, bytes).unwrap();
        let kept = alloc::live() - before;
        let transient = alloc::peak() - before - kept;
        println!(
            "one trace file ({:.2} MB, {} spans): {:.1} MB transient, {:.1} MB of spans",
            bytes.len() as f64 / 1e6,
            out.len(),
            transient as f64 / 1e6,
            kept as f64 / 1e6
        );
    }

    let before = alloc::live();
    alloc::reset_peak();
    let t = Instant::now();
    let mut store = SpanStore::default();
    // As the dashboard adds them: a batch a file.
    let mut files = Vec::new();
    let mut at = 0;
    for n in per_file {
        files.push(&spans[at..at + n]);
        at += n;
    }
    for file in &files {
        store.extend(*file);
    }
    let held = alloc::live() - before;
    println!(
        "SpanStore: {} spans, {:.1} MB held ({:.1} bytes a span), {:.1} MB peak while filling, {:.2} s",
        store.len(),
        held as f64 / 1e6,
        held as f64 / store.len().max(1) as f64,
        (alloc::peak() - before) as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );

    drop(store);

    // Files in reverse order: every batch is merged in front of what is held.
    let before = alloc::live();
    alloc::reset_peak();
    let t = Instant::now();
    let mut store = SpanStore::default();
    for file in files.iter().rev() {
        store.extend(*file);
    }
    let held = alloc::live() - before;
    println!(
        "SpanStore, files in reverse order: {:.1} MB held, {:.1} MB peak while filling, {:.2} s",
        held as f64 / 1e6,
        (alloc::peak() - before) as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );

    drop(store);

    // The whole run as `smdebug report` reads it: one `ProfilerFollower::read_to_end` into a
    // `ProfileData` (files read from disk here, so CPU includes reading them).
    drop(files);
    drop((system, traces, spans));
    let before = alloc::live();
    alloc::reset_peak();
    let t = cpu_seconds();
    let mut follower = ProfilerFollower::open(run.as_path()).expect("run");
    let increment = follower.read_to_end();
    let mut data = ProfileData::default();
    data.add_system_samples(&increment.samples);
    data.add_spans(&increment.spans);
    let cpu = cpu_seconds() - t;
    let peak = alloc::peak() - before;
    drop(increment);
    let held = alloc::live() - before;
    println!(
        "ProfilerFollower::read_to_end into ProfileData: {} samples, {} spans, {cpu:.2} CPU-s, {:.1} MB peak heap, {:.1} MB held",
        data.sample_count(),
        data.spans().len(),
        peak as f64 / 1e6,
        held as f64 / 1e6
    );
}
