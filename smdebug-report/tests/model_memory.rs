//! The report's model holds a bounded amount however long the run: the live bytes a loaded
//! [`ReportInput`] keeps for a run of N steps and of 4N steps are about the same. Counted by
//! this binary's allocator (one test in the binary, so nothing else allocates meanwhile), not
//! timed.

use serde_json::json;
use smdebug_format::system::system_file_key;
use smdebug_format::trace::trace_file_key;
use smdebug_report::{LoadOptions, ReportInput, render_html};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;
use smdebug_testkit::alloc;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

const T0: f64 = 1_700_000_000.0;
/// Steps per trace file and per system file.
const PER_FILE: u64 = 2_500;
/// Each step: 30 ms apart.
const STEP_US: u64 = 30_000;

/// A run of `steps` steps: per step a step span, data loading, forward and backward spans
/// (durations varying within a fixed range), and four system samples (CPU total, a core,
/// a GPU's utilization and memory).
fn write_run(dir: &std::path::Path, steps: u64) {
    let store = LocalStorage::new(dir).unwrap();
    let base = (T0 * 1e6) as u64;
    for first in (0..steps).step_by(PER_FILE as usize) {
        let last = (first + PER_FILE).min(steps);
        let mut events = vec![json!({"name": "process_name", "ph": "M", "pid": 0,
                   "args": {"start_time_since_epoch_in_micros": base}})];
        for (pid, row) in [
            "Step:ModeKeys.TRAIN",
            "DataLoaderIter",
            "Forward",
            "Backward(post-forward)",
        ]
        .iter()
        .enumerate()
        {
            events.push(
                json!({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": row}}),
            );
        }
        let mut lines = String::new();
        for step in first..last {
            let ts = step * STEP_US;
            let d = 20_000 + (step * 7_919) % 8_000;
            for (pid, (at, dur)) in [
                (0, d),
                (10, d / 5),
                (d / 5 + 20, d / 3),
                (d / 5 + d / 3 + 40, d / 3),
            ]
            .into_iter()
            .enumerate()
            {
                events.push(json!({"name": "s", "ph": "X", "pid": pid, "tid": 0, "ts": ts + at,
                                   "dur": dur, "args": {"step_num": step.to_string(), "mode": "TRAIN"}}));
            }
            let t = T0 + (ts as f64) / 1e6;
            for (ty, name, dim, v) in [
                ("cpu", "total", "CPUUtilization", (step % 97) as f64),
                ("cpu", "cpu0", "CPUUtilization", (step % 89) as f64),
                ("gpu", "gpu0", "GPUUtilization", (step % 101) as f64),
                (
                    "gpu",
                    "gpu0",
                    "GPUMemoryUtilization",
                    40.0 + (step % 13) as f64,
                ),
            ] {
                lines.push_str(
                    &json!({"Type": ty, "Name": name, "Dimension": dim, "Value": v,
                            "NodeId": "algo-1", "Timestamp": t})
                    .to_string(),
                );
                lines.push('\n');
            }
        }
        let end = base + last * STEP_US;
        store
            .put(
                &trace_file_key(end, 0, "algo-1"),
                serde_json::to_vec(&events).unwrap().into(),
            )
            .unwrap();
        let start_s = (T0 as u64) + first * STEP_US / 1_000_000;
        store
            .put(
                &system_file_key(start_s, "algo-1"),
                lines.into_bytes().into(),
            )
            .unwrap();
    }
}

/// The live bytes a loaded input of a run of `steps` steps holds, and the input.
fn loaded(steps: u64) -> (isize, tempfile::TempDir, ReportInput) {
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path(), steps);
    let options = LoadOptions {
        tensors: false,
        ..LoadOptions::default()
    };
    let before = alloc::live();
    let input = ReportInput::load(dir.path(), &options);
    let held = alloc::live() - before;
    (held, dir, input)
}

#[test]
fn the_report_model_holds_as_much_for_4n_steps_as_for_n() {
    let n = 5_000;
    let (small, _a, small_input) = loaded(n);
    assert_eq!(small_input.span_count(), 4 * n);
    assert_eq!(small_input.profile.sample_count(), 4 * n);
    let small_html = render_html(&small_input);
    drop(small_input);
    let (large, _b, large_input) = loaded(4 * n);
    // Everything was read: the figures are the whole run's.
    assert_eq!(large_input.span_count(), 16 * n);
    assert_eq!(large_input.profile.sample_count(), 16 * n);
    let steps = &large_input.profile.steps();
    let durations = &steps.values().next().unwrap().durations;
    let exact: f64 = (0..4 * n)
        .map(|s| (20_000 + (s * 7_919) % 8_000) as f64)
        .sum();
    assert_eq!((durations.count(), durations.sum()), (4 * n, exact));
    let large_html = render_html(&large_input);
    assert!(large_html.contains("<figure") && small_html.contains("<figure"));
    // Flat: the model of 4N steps takes at most a tenth more than that of N (a few slices and
    // sketch buckets more), where the spans alone would take four times as much.
    assert!(
        large <= small + small / 10,
        "{small} bytes for {n} steps, {large} for {}",
        4 * n
    );
    assert!(small > 0);
    eprintln!(
        "report model: {small} bytes for {n} steps, {large} for {}",
        4 * n
    );
}
