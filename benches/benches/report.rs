//! Profiling report generation for a 1-hour job: system metrics sampled every 500 ms on one
//! node with 8 cores and 2 GPUs (7,200 samples × 36 records), and 10,000 training steps with
//! data-loading, forward, backward and optimizer spans (50,000 spans), written in this crate's
//! own layout by its own writers. Measured: loading the run and rendering the page (the
//! target is under 5 s), rendering alone, and the whole of `smdebug report` (the eleven
//! profiler rules over the hour, then the page and the rules' JSON files).
//!
//! `cargo bench -p smdebug-benches --bench report` (one quick pass: append `-- --test`; set
//! `SMDEBUG_REPORT_BENCH_HTML=<path>` to keep the page).

#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant, UNIX_EPOCH};

use criterion::{Criterion, criterion_group, criterion_main};
use smdebug_core::Mode;
use smdebug_format::system::system_file_key;
use smdebug_profiler::spans::{Phase, SpanConfig, SpanRecorder};
use smdebug_profiler::system::NodeId;
use smdebug_report::{LoadOptions, ReportInput, ReportWriter, render_html};
use smdebug_rules::{RuleRunner, RuleSpec, Status};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;

const START_S: u64 = 1_700_000_000;
const DURATION_S: u64 = 3_600;
const INTERVAL_MS: u64 = 500;
const CORES: usize = 8;
const GPUS: usize = 2;
const STEPS: u64 = 10_000;
/// Seconds before the first step and after the last one.
const INIT_S: u64 = 90;
const FINAL_S: u64 = 30;

/// A small deterministic generator (xorshift) for plausible, varied values.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn record(out: &mut String, t: f64, kind: &str, name: &str, dimension: &str, value: f64) {
    let _ = writeln!(
        out,
        r#"{{"Type":"{kind}","Name":"{name}","Dimension":"{dimension}","Value":{value:.2},"NodeId":"algo-1","Timestamp":{t:.3}}}"#
    );
}

/// System-metrics files, one per minute, in the sampler's layout and vocabulary.
fn write_system(run: &Path) {
    let store = LocalStorage::new(run).unwrap();
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    let per_file = 60_000 / INTERVAL_MS;
    let samples = DURATION_S * 1000 / INTERVAL_MS;
    let mut text = String::new();
    for i in 0..samples {
        let t = START_S as f64 + (i * INTERVAL_MS) as f64 / 1000.0;
        let training =
            t >= (START_S + INIT_S) as f64 && t < (START_S + DURATION_S - FINAL_S) as f64;
        let mut total = 0.0;
        let mut wait = 0.0;
        for core in 0..CORES {
            let busy = if training {
                55.0 + 40.0 * noise.next()
            } else {
                5.0 * noise.next()
            };
            let io = 3.0 * noise.next();
            total += busy;
            wait += io;
            record(
                &mut text,
                t,
                "cpu",
                &format!("cpu{core}"),
                "CPUUtilization",
                busy,
            );
            record(
                &mut text,
                t,
                "cpu",
                &format!("cpu{core}"),
                "I/OWaitPercentage",
                io,
            );
        }
        record(
            &mut text,
            t,
            "cpu",
            "total",
            "CPUUtilization",
            total / CORES as f64,
        );
        record(
            &mut text,
            t,
            "cpu",
            "total",
            "I/OWaitPercentage",
            wait / CORES as f64,
        );
        for gpu in 0..GPUS {
            let name = format!("gpu{gpu}");
            let util = if training {
                60.0 + 38.0 * noise.next() - 20.0 * gpu as f64
            } else {
                0.0
            };
            let mem = if training {
                35.0 + gpu as f64 * 10.0 + 2.0 * noise.next()
            } else {
                1.0
            };
            record(&mut text, t, "gpu", &name, "GPUUtilization", util.max(0.0));
            record(&mut text, t, "gpu", &name, "GPUMemoryUtilization", mem);
            record(&mut text, t, "gpu", &name, "GPUMemoryUsedBytes", mem * 8e8);
            record(
                &mut text,
                t,
                "gpu",
                &name,
                "GPUPowerWatts",
                80.0 + util * 2.0,
            );
            record(
                &mut text,
                t,
                "gpu",
                &name,
                "GPUTemperatureCelsius",
                40.0 + util * 0.3,
            );
        }
        record(
            &mut text,
            t,
            "memory",
            "MemoryUsedPercent",
            "",
            30.0 + 5.0 * noise.next(),
        );
        record(
            &mut text,
            t,
            "memory",
            "MemoryUsedBytes",
            "",
            2e10 + 1e9 * noise.next(),
        );
        record(&mut text, t, "memory", "MemoryTotalBytes", "", 6.4e10);
        record(
            &mut text,
            t,
            "i/o",
            "ReadThroughputInBytesPerSecond",
            "",
            5e7 * noise.next(),
        );
        record(
            &mut text,
            t,
            "i/o",
            "WriteThroughputInBytesPerSecond",
            "",
            1e6 * noise.next(),
        );
        record(&mut text, t, "i/o", "IOPS", "", 400.0 * noise.next());
        record(
            &mut text,
            t,
            "network",
            "ReceiveBytesPerSecond",
            "Algorithm",
            1e6 * noise.next(),
        );
        record(
            &mut text,
            t,
            "network",
            "TransmitBytesPerSecond",
            "Algorithm",
            1e6 * noise.next(),
        );
        if (i + 1) % per_file == 0 || i + 1 == samples {
            let window = START_S + (i / per_file) * 60;
            store
                .put(
                    &system_file_key(window, "algo-1"),
                    std::mem::take(&mut text).into_bytes().into(),
                )
                .expect("system file written");
            text.clear();
        }
    }
}

/// 10,000 steps spread over the training loop, each with its four phases, recorded through
/// the span recorder's explicit-time API and written by its background writer.
fn write_spans(run: &Path) {
    let config = SpanConfig::default()
        .node(NodeId::algo(1))
        .worker(0)
        .queue_capacity(1 << 17);
    let (spans, writer) = SpanRecorder::start_local(config, run).expect("span recorder starts");
    let mut noise = Noise(0x2545_f491_4f6c_dd1d);
    let loop_us = (DURATION_S - INIT_S - FINAL_S) * 1_000_000;
    let step_us = loop_us / STEPS;
    let at = |us: u64| UNIX_EPOCH + Duration::from_micros(us);
    for step in 0..STEPS {
        let start = (START_S + INIT_S) * 1_000_000 + step * step_us;
        let slow = if step % 997 == 0 { 2 } else { 1 };
        let load = (step_us as f64 * (0.05 + 0.05 * noise.next())) as u64 * slow;
        let forward = (step_us as f64 * 0.22) as u64;
        let backward = (step_us as f64 * (0.45 + 0.05 * noise.next())) as u64;
        let optimizer = (step_us as f64 * 0.07) as u64;
        let total = load + forward + backward + optimizer;
        let key = Some((Mode::Train, step));
        let mut t = start;
        spans.record(
            Phase::Step(Mode::Train),
            None,
            at(t),
            Duration::from_micros(total),
            key,
        );
        for (phase, d) in [
            (Phase::DataLoading, load),
            (Phase::Forward, forward),
            (Phase::Backward, backward),
            (Phase::Optimizer, optimizer),
        ] {
            spans.record(phase, None, at(t), Duration::from_micros(d), key);
            t += d;
        }
    }
    let report = writer.finish().expect("spans written");
    assert_eq!(report.dropped, 0, "span queue overflowed");
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let made = Instant::now();
    write_system(&run);
    write_spans(&run);
    let location = run.to_str().unwrap().to_owned();
    let options = LoadOptions::default();

    let first = Instant::now();
    let input = ReportInput::load(&location, &options);
    let html = render_html(&input);
    eprintln!(
        "synthetic run written in {:.1?}; first load + render {:.2?}: {} series, {} spans, \
         notes {:?}, page {:.1} MiB",
        first - made,
        first.elapsed(),
        input.profile.series_count(),
        input.span_count(),
        input
            .notes
            .iter()
            .map(|n| n.message.as_str())
            .collect::<Vec<_>>(),
        html.len() as f64 / (1 << 20) as f64
    );
    assert_eq!(input.span_count(), STEPS * 5);
    // To look at the page: SMDEBUG_REPORT_BENCH_HTML=target/report-1h.html
    if let Some(path) = std::env::var_os("SMDEBUG_REPORT_BENCH_HTML") {
        std::fs::write(&path, &html).expect("page written");
    }

    let mut g = c.benchmark_group("report_1h_500ms_8cpu_2gpu_10k_steps");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.bench_function("load + render", |b| {
        b.iter(|| {
            let input = ReportInput::load(&location, &options);
            black_box(render_html(&input).len())
        })
    });
    g.bench_function("render only", |b| {
        b.iter(|| black_box(render_html(&input).len()))
    });
    // What `smdebug report RUN -o FILE` does on this run: every profiler rule over the whole
    // hour (ProfilerReport), then the report with the rules' results and one JSON per rule.
    let page = dir.path().join("out/profiler-report.html");
    g.bench_function("profiler rules + report (smdebug report)", |b| {
        b.iter(|| {
            let summary = RuleRunner::builder(&location)
                .spec(RuleSpec::new("ProfilerReport"))
                .reporter(ReportWriter::to_file(&page))
                .write_into_run(false)
                .build()
                .expect("runner")
                .run_offline()
                .expect("rules");
            assert!(summary.rules.iter().all(|r| r.status != Status::Error));
            black_box(summary.rules.len())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
