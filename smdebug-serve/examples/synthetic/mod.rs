//! The synthetic run's writer, shared by the `synthetic_run` example and the dashboard's
//! chart-craft browser test (a few minutes of it): one node with 16 cores and 8 GPUs sampled
//! every 100 ms, training steps with their data-loading, forward, backward and optimizer spans
//! (every 1000th step's backward three times as long), 50 scalars a step, written by the real
//! writers (see `synthetic_run.rs`).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use smdebug_core::{Hook, Mode, SaveConfig};
use smdebug_format::system::system_file_key;
use smdebug_io::writer::{OverflowPolicy, Writer};
use smdebug_profiler::spans::{Phase, SpanConfig, SpanRecorder};
use smdebug_profiler::system::NodeId;
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;

const CORES: usize = 16;
const GPUS: usize = 8;
const TENSORS: usize = 50;

/// Writes the synthetic run into `out`: `minutes` of system metrics ending at the last whole
/// minute before now, `steps` training steps spread over them, 50 scalars a step.
pub fn write(out: &str, steps: u64, minutes: u64) -> Result<(), Box<dyn std::error::Error>> {
    let span_s = minutes.max(1) * 60;
    std::fs::create_dir_all(out)?;
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(out)?);
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let start_s = now - now % 60 - span_s;
    let started = Instant::now();

    // System metrics: one file a minute, 600 samples of 55 records each.
    let mut lines = 0u64;
    for minute in 0..span_s / 60 {
        let file_start = start_s + minute * 60;
        let mut text = String::with_capacity(600 * 55 * 120);
        for i in 0..600u64 {
            let t = file_start as f64 + i as f64 * 0.1;
            let k = (minute * 600 + i) as f64;
            let mut push = |ty: &str, name: &str, dim: &str, v: f64| {
                text.push_str(&format!(
                    "{{\"Type\":\"{ty}\",\"Name\":\"{name}\",\"Dimension\":\"{dim}\",\"Value\":{v:.2},\"NodeId\":\"algo-1\",\"Timestamp\":{t:.1}}}\n"
                ));
                lines += 1;
            };
            for c in 0..CORES {
                let busy = 40.0 + 30.0 * ((k / 50.0 + c as f64).sin()) + (c * 3) as f64 % 10.0;
                push(
                    "cpu",
                    &format!("cpu{c}"),
                    "CPUUtilization",
                    busy.clamp(0.0, 100.0),
                );
                push(
                    "cpu",
                    &format!("cpu{c}"),
                    "I/OWaitPercentage",
                    (k % 7.0) * 0.5,
                );
            }
            push(
                "cpu",
                "total",
                "CPUUtilization",
                45.0 + 10.0 * (k / 300.0).sin(),
            );
            push("cpu", "total", "I/OWaitPercentage", 1.5);
            for g in 0..GPUS {
                let util = if (k as u64 + g as u64 * 13) % 97 < 5 {
                    5.0
                } else {
                    92.0
                };
                push("gpu", &format!("gpu{g}"), "GPUUtilization", util);
                push(
                    "gpu",
                    &format!("gpu{g}"),
                    "GPUMemoryUtilization",
                    60.0 + g as f64,
                );
            }
            push(
                "memory",
                "MemoryUsedPercent",
                "",
                35.0 + k / (span_s * 10) as f64 * 10.0,
            );
            push("network", "ReceiveBytesPerSecond", "Algorithm", 1.2e8);
            push("network", "TransmitBytesPerSecond", "Algorithm", 1.1e8);
            push("i/o", "ReadThroughputInBytesPerSecond", "", 3.0e7);
            push("i/o", "WriteThroughputInBytesPerSecond", "", 1.0e6);
        }
        storage.put(
            &system_file_key(file_start, "algo-1"),
            text.into_bytes().into(),
        )?;
    }
    eprintln!(
        "system metrics: {lines} records in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // Spans: steps spread over the hour.
    let (spans, guard) = SpanRecorder::start(
        SpanConfig::default()
            .node(NodeId::algo(1))
            .worker(0)
            .queue_capacity(1 << 22),
        Arc::clone(&storage),
    )?;
    let step_us = span_s * 1_000_000 / steps.max(1);
    let at = |us: u64| UNIX_EPOCH + Duration::from_micros(start_s * 1_000_000 + us);
    let mut recorded = 0u64;
    for step in 0..steps {
        let t0 = 60_000_000 / 2 + step * step_us * 9 / 10;
        let d = step_us * 9 / 10 / 10;
        let long = if step % 1000 == 999 { 3 } else { 1 };
        let parts = [
            (Phase::DataLoading, 0, 2 * d),
            (Phase::Forward, 2 * d, 3 * d),
            (Phase::Backward, 5 * d, 3 * d * long),
            (Phase::Optimizer, 5 * d + 3 * d * long, d),
        ];
        let total = 6 * d + 3 * d * long;
        spans.record(
            Phase::Step(Mode::Train),
            None,
            at(t0),
            Duration::from_micros(total),
            Some((Mode::Train, step)),
        );
        for (phase, offset, len) in parts {
            spans.record(
                phase,
                None::<Cow<'static, str>>,
                at(t0 + offset),
                Duration::from_micros(len),
                Some((Mode::Train, step)),
            );
        }
        recorded += 5;
        // One trace file a minute of the run, as the recorder's 60 s close interval makes them
        // in a real one-hour job (each flush closes the open file).
        if (step + 1) % (steps / minutes.max(1)).max(1) == 0 {
            spans.flush()?;
        }
    }
    let report = guard.finish()?;
    eprintln!(
        "spans: {recorded} recorded, {} dropped, {:.1} s",
        report.dropped,
        started.elapsed().as_secs_f64()
    );

    // Tensors: 50 scalars a step.
    let writer = Writer::builder(Arc::clone(&storage))
        .overflow(OverflowPolicy::Block)
        .build()?;
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .export_tensorboard(true)
        .build(writer)?;
    let names: Vec<String> = (0..TENSORS)
        .map(|i| match i {
            0 => "loss".to_owned(),
            1 => "accuracy".to_owned(),
            _ => format!("metric_{i:02}"),
        })
        .collect();
    hook.set_mode(Mode::Train);
    for step in 0..steps {
        let x = step as f64;
        for (i, name) in names.iter().enumerate() {
            let collection = if i == 0 { "losses" } else { "metrics" };
            let value = match i {
                0 => 2.0 / (1.0 + x / 1000.0),
                1 => 1.0 - 1.0 / (1.0 + x / 500.0),
                _ => (x / (100.0 + i as f64)).sin() * i as f64,
            };
            hook.save_scalar(name, value, &[collection]);
        }
        hook.step();
        if step % 10_000 == 9_999 {
            eprintln!(
                "tensors: step {} at {:.1} s",
                step + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }
    hook.close();
    eprintln!("done in {:.1} s: {out}", started.elapsed().as_secs_f64());
    Ok(())
}
