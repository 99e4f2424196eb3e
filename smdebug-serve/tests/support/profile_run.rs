//! A finished run with profiler data only, for the tests of the dashboard's profile views: system
//! metrics and step spans written as the sampler and the span recorder write them.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use smdebug_core::Mode;
use smdebug_format::layout::END_MARKER;
use smdebug_format::system::system_file_key;
use smdebug_profiler::spans::{Phase, SpanConfig, SpanRecorder};
use smdebug_profiler::system::NodeId;
use smdebug_storage::{LocalStorage, Storage};

/// A run of `steps` steps (a step span and four phase spans each, a trace file a minute) over
/// `minutes` of system metrics, ended.
pub fn write_run(dir: &std::path::Path, steps: u64, minutes: u64) -> (u64, u64) {
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir).unwrap());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let start_s = now - now % 60 - minutes * 60;
    let mut samples = 0;
    for minute in 0..minutes {
        let file_start = start_s + minute * 60;
        let mut text = String::new();
        for i in 0..600u64 {
            let t = file_start as f64 + i as f64 * 0.1;
            let k = (minute * 600 + i) as f64;
            let mut push = |ty: &str, name: &str, dim: &str, v: f64| {
                text.push_str(&format!(
                    "{{\"Type\":\"{ty}\",\"Name\":\"{name}\",\"Dimension\":\"{dim}\",\"Value\":{v:.2},\"NodeId\":\"algo-1\",\"Timestamp\":{t:.1}}}\n"
                ));
                samples += 1;
            };
            for c in 0..2 {
                push(
                    "cpu",
                    &format!("cpu{c}"),
                    "CPUUtilization",
                    (k + c as f64) % 100.0,
                );
            }
            push("cpu", "total", "CPUUtilization", (k * 7.0) % 100.0);
            for g in 0..2 {
                push(
                    "gpu",
                    &format!("gpu{g}"),
                    "GPUUtilization",
                    (k * 3.0 + g as f64) % 100.0,
                );
            }
            push("memory", "MemoryUsedPercent", "", 30.0 + k / 1e4);
        }
        storage
            .put(
                &system_file_key(file_start, "algo-1"),
                text.into_bytes().into(),
            )
            .unwrap();
    }
    let (spans, guard) = SpanRecorder::start(
        SpanConfig::default()
            .node(NodeId::algo(1))
            .worker(0)
            .queue_capacity(1 << 20),
        Arc::clone(&storage),
    )
    .unwrap();
    let step_us = minutes * 60 * 1_000_000 / steps;
    let at = |us: u64| UNIX_EPOCH + Duration::from_micros(start_s * 1_000_000 + us);
    for step in 0..steps {
        let t0 = step * step_us;
        let d = step_us / 10 + step % 7;
        spans.record(
            Phase::Step(Mode::Train),
            None,
            at(t0),
            Duration::from_micros(8 * d),
            Some((Mode::Train, step)),
        );
        for (i, phase) in [
            Phase::DataLoading,
            Phase::Forward,
            Phase::Backward,
            Phase::Optimizer,
        ]
        .into_iter()
        .enumerate()
        {
            spans.record(
                phase,
                None::<std::borrow::Cow<'static, str>>,
                at(t0 + 2 * d * i as u64),
                Duration::from_micros(2 * d),
                Some((Mode::Train, step)),
            );
        }
        if (step + 1) % (steps / minutes) == 0 {
            spans.flush().unwrap();
        }
    }
    let report = guard.finish().unwrap();
    assert_eq!(report.dropped, 0);
    storage.put(END_MARKER, "completed".into()).unwrap();
    (samples, steps * 5)
}
