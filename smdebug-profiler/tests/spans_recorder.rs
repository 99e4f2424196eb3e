//! Framework spans: guards and explicit API, files in smdebug's layout, rotation, the bounded
//! queue, and queries by time, step, node, worker and phase.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use smdebug_core::Mode;
use smdebug_format::trace::parse_trace_file_key;
use smdebug_profiler::spans::{Phase, SpanConfig, SpanRecorder};
use smdebug_profiler::system::NodeId;
use smdebug_read::profile::{ProfilerReader, SpanQuery};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;
use smdebug_storage::testing::wait_until;

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

fn config(worker: u32) -> SpanConfig {
    SpanConfig::default().node(NodeId::algo(1)).worker(worker)
}

fn run_training_loop(spans: &SpanRecorder, steps: std::ops::Range<u64>) {
    for step in steps {
        let _step = spans.step(Mode::Train, step);
        {
            let _load = spans.data_loading();
            // workload: each phase takes a little time, as a real one does.
            thread::sleep(Duration::from_millis(2));
        }
        {
            let _forward = spans.forward().named("mlp");
            // workload: the phase's time.
            thread::sleep(Duration::from_millis(1));
        }
        {
            let _backward = spans.backward();
            // workload: the phase's time.
            thread::sleep(Duration::from_millis(1));
        }
        let _optimizer = spans.optimizer();
    }
}

#[test]
fn guards_record_nested_phases_with_steps_in_absolute_time() {
    let dir = tempfile::tempdir().unwrap();
    let (spans, writer) = SpanRecorder::start_local(config(2), dir.path()).unwrap();
    let before = now_us();
    run_training_loop(&spans, 0..4);
    {
        let _eval = spans.step(Mode::Eval, 0);
        let _custom = spans.custom("metrics").named("accuracy");
    }
    let after = now_us();
    let report = writer.finish().unwrap();
    assert_eq!(
        (report.written, report.dropped, report.write_errors),
        (22, 0, 0)
    );

    let reader = ProfilerReader::open(dir.path()).unwrap();
    let all = reader.spans(&SpanQuery::default()).unwrap();
    assert_eq!(all.len(), 22);
    for span in &all {
        assert!(
            span.start_us >= before && span.end_us <= after + 1,
            "{span:?}"
        );
        assert_eq!((span.node.as_str(), span.worker), ("algo-1", Some(2)));
    }
    let train_steps: Vec<_> = all
        .iter()
        .filter(|s| s.phase == "Step:ModeKeys.TRAIN")
        .collect();
    assert_eq!(train_steps.len(), 4);
    for step in &train_steps {
        // Each step contains its own data loading, forward, backward and optimizer spans.
        let inside: Vec<_> = all
            .iter()
            .filter(|s| s.step == step.step && s.mode == Some(Mode::Train) && s.phase != step.phase)
            .collect();
        assert_eq!(inside.len(), 4, "{step:?}");
        for s in inside {
            assert!(
                s.start_us >= step.start_us && s.end_us <= step.end_us,
                "{s:?} outside {step:?}"
            );
        }
    }
    let forward = all.iter().find(|s| s.phase == "Forward").unwrap();
    assert_eq!(forward.name, "mlp");
    assert!(forward.duration_us() >= 1000);
    assert_eq!(forward.phase_kind(), Phase::Forward);
    let loading = all
        .iter()
        .find(|s| s.phase_kind() == Phase::DataLoading)
        .unwrap();
    assert_eq!(loading.name, "DataLoaderIter::GetNext");
    let custom = all.iter().find(|s| s.phase == "metrics").unwrap();
    assert_eq!(
        (custom.name.as_str(), custom.mode, custom.step),
        ("accuracy", Some(Mode::Eval), Some(0))
    );
}

#[test]
fn queries_filter_by_step_time_worker_node_and_phase() {
    let dir = tempfile::tempdir().unwrap();
    for worker in [0, 1] {
        let (spans, writer) = SpanRecorder::start_local(config(worker), dir.path()).unwrap();
        run_training_loop(&spans, 0..6);
        writer.finish().unwrap();
    }
    let reader = ProfilerReader::open(dir.path()).unwrap();
    let steps_2_to_3 = reader
        .spans(&SpanQuery::default().steps(Mode::Train, 2..=3))
        .unwrap();
    assert_eq!(steps_2_to_3.len(), 2 * 2 * 5);
    assert!(steps_2_to_3.iter().all(|s| matches!(s.step, Some(2 | 3))));
    assert!(
        reader
            .spans(&SpanQuery::default().steps(Mode::Eval, 0..=10))
            .unwrap()
            .is_empty()
    );

    let worker_1_forward = reader
        .spans(&SpanQuery::default().worker(1).phase("Forward"))
        .unwrap();
    assert_eq!(worker_1_forward.len(), 6);
    assert!(worker_1_forward.iter().all(|s| s.worker == Some(1)));
    assert!(
        reader
            .spans(&SpanQuery::default().node("algo-9"))
            .unwrap()
            .is_empty()
    );

    // A time window around worker 0's step 4 catches the spans overlapping it.
    let step4 = reader
        .spans(
            &SpanQuery::default()
                .steps(Mode::Train, 4..=4)
                .worker(0)
                .phase("Step:ModeKeys.TRAIN"),
        )
        .unwrap();
    assert_eq!(step4.len(), 1);
    let window = reader
        .spans(
            &SpanQuery::default()
                .worker(0)
                .time_range(step4[0].start_us, step4[0].end_us),
        )
        .unwrap();
    assert!(
        window
            .iter()
            .all(|s| s.end_us >= step4[0].start_us && s.start_us <= step4[0].end_us)
    );
    assert!(
        window
            .iter()
            .any(|s| s.step == Some(4) && s.phase == "Optimizer")
    );
    let merged = reader
        .chrome_trace(
            &SpanQuery::default(),
            &smdebug_read::profile::SystemQuery::default(),
        )
        .unwrap();
    let events = merged["traceEvents"].as_array().unwrap();
    assert_eq!(events.iter().filter(|e| e["ph"] == "X").count(), 60);
    // Two workers times five phases, each its own named thread row.
    assert_eq!(
        events.iter().filter(|e| e["name"] == "thread_name").count(),
        10
    );
    let (start, end) = reader.step_time_range(Mode::Train, 1..=2).unwrap().unwrap();
    assert!(start < end);
    assert_eq!(reader.step_time_range(Mode::Predict, 0..=1).unwrap(), None);
}

#[test]
fn explicit_start_end_and_measured_spans() {
    let dir = tempfile::tempdir().unwrap();
    let (spans, writer) = SpanRecorder::start_local(config(0), dir.path()).unwrap();
    let open = spans
        .start_span(Phase::Custom("allreduce".into()))
        .at_step(Mode::Train, 9);
    // workload: the span's length, which it is measured at.
    thread::sleep(Duration::from_millis(3));
    assert!(spans.end_span(open));
    let start = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    assert!(spans.record(
        Phase::Optimizer,
        Some("adam".into()),
        start,
        Duration::from_micros(1500),
        Some((Mode::Eval, 1))
    ));
    writer.finish().unwrap();

    let all = ProfilerReader::open(dir.path())
        .unwrap()
        .spans(&SpanQuery::default())
        .unwrap();
    assert_eq!(all.len(), 2);
    let measured = &all[0];
    assert_eq!(
        (measured.start_us, measured.end_us),
        (1_700_000_000_000_000, 1_700_000_000_001_500)
    );
    assert_eq!(
        (measured.name.as_str(), measured.step, measured.mode),
        ("adam", Some(1), Some(Mode::Eval))
    );
    let allreduce = &all[1];
    assert_eq!(
        (allreduce.phase.as_str(), allreduce.step),
        ("allreduce", Some(9))
    );
    assert!(allreduce.duration_us() >= 3000);
}

#[test]
fn files_are_chrome_trace_arrays_in_smdebug_layout_and_rotate_by_size() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let (spans, writer) = SpanRecorder::start(
        config(0).max_file_bytes(4096),
        Arc::clone(&store) as Arc<dyn Storage>,
    )
    .unwrap();
    for step in 0..200 {
        let _step = spans.step(Mode::Train, step);
        let _forward = spans.forward();
    }
    let report = writer.finish().unwrap();
    assert_eq!(report.written, 400);
    let keys = store.list("framework/pevents").unwrap();
    assert!(keys.len() >= 5, "{} files", keys.len());
    assert_eq!(report.files as usize, keys.len());
    let mut complete_events = 0;
    let mut names = std::collections::BTreeSet::new();
    for key in &keys {
        let name = parse_trace_file_key(key).expect("smdebug trace file name");
        assert_eq!(
            (name.node_token.as_str(), name.suffix.as_str()),
            ("0-algo-1", "pythontimeline.json")
        );
        assert!(names.insert(name.end_us), "two files named {}", name.end_us);
        let bytes = store.get(key).unwrap();
        assert!(bytes.len() < 4096 + 1024, "{key}: {} bytes", bytes.len());
        let events: Vec<Value> = serde_json::from_slice(&bytes).expect("a complete JSON array");
        // The first event anchors absolute time, as smdebug's parser expects.
        assert_eq!(events[0]["ph"], "M");
        assert!(
            events[0]["args"]["start_time_since_epoch_in_micros"]
                .as_u64()
                .unwrap()
                > 1_600_000_000_000_000
        );
        let mut last_end = 0;
        for event in &events {
            let phase = event["ph"].as_str().unwrap();
            assert!(matches!(phase, "M" | "X"), "{event}");
            if phase == "X" {
                complete_events += 1;
                assert!(event["ts"].is_i64() && event["dur"].is_u64(), "{event}");
                assert!(event["args"]["step_num"].is_string(), "{event}");
                let base = events[0]["args"]["start_time_since_epoch_in_micros"]
                    .as_i64()
                    .unwrap();
                last_end = last_end
                    .max(base + event["ts"].as_i64().unwrap() + event["dur"].as_i64().unwrap());
            }
        }
        assert!(
            name.end_us >= last_end as u64,
            "{key} named before its last event ends"
        );
    }
    assert_eq!(complete_events, 400);
    assert_eq!(
        ProfilerReader::open(dir.path())
            .unwrap()
            .spans(&SpanQuery::default())
            .unwrap()
            .len(),
        400
    );
}

#[test]
fn files_rotate_by_age_and_flush_publishes_the_open_file() {
    let dir = tempfile::tempdir().unwrap();
    let (spans, writer) = SpanRecorder::start_local(
        config(0).close_interval(Duration::from_millis(200)),
        dir.path(),
    )
    .unwrap();
    let reader = ProfilerReader::open(dir.path()).unwrap();
    {
        let _a = spans.custom("a");
    }
    spans.flush().unwrap();
    assert_eq!(reader.spans(&SpanQuery::default()).unwrap().len(), 1);
    {
        let _b = spans.custom("b");
    }
    // No flush: the age limit (200 ms) closes the file.
    wait_until(
        Duration::from_secs(30),
        "the age limit to close the second file",
        || reader.trace_files().unwrap().len() >= 2,
    );
    assert_eq!(reader.trace_files().unwrap().len(), 2);
    let report = writer.finish().unwrap();
    assert_eq!(report.files, 2);
    assert!(
        spans.flush().is_err(),
        "flushing a finished writer must fail, not hang"
    );
}

#[test]
fn a_full_queue_drops_and_counts_instead_of_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let (spans, writer) =
        SpanRecorder::start_local(config(0).queue_capacity(1), dir.path()).unwrap();
    let mut queued = 0u64;
    for _ in 0..20_000 {
        if spans.end_span(spans.start_span(Phase::Forward)) {
            queued += 1;
        }
    }
    let dropped = spans.dropped();
    let report = writer.finish().unwrap();
    assert!(dropped > 0, "a 1-slot queue never filled");
    assert_eq!(report.recorded, 20_000);
    assert_eq!(report.dropped, dropped);
    assert_eq!(report.written, queued);
    assert_eq!(report.written + report.dropped, report.recorded);
    // After the writer stopped, spans are dropped too, never an error or a hang.
    assert!(!spans.end_span(spans.start_span(Phase::Forward)));
    let read = ProfilerReader::open(dir.path())
        .unwrap()
        .spans(&SpanQuery::default())
        .unwrap();
    assert_eq!(read.len() as u64, queued);
}

#[test]
fn invalid_span_configuration_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    for bad in [
        config(0).queue_capacity(0),
        config(0).max_file_bytes(100),
        config(0).close_interval(Duration::from_millis(10)),
    ] {
        assert!(SpanRecorder::start_local(bad, dir.path()).is_err());
    }
}

#[test]
fn opening_and_closing_a_span_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    let spans_per_round = 100_000u32;
    let (spans, writer) = SpanRecorder::start_local(
        config(0).queue_capacity(spans_per_round as usize),
        dir.path(),
    )
    .unwrap();
    let started = std::time::Instant::now();
    for _ in 0..spans_per_round {
        let _forward = spans.forward();
    }
    let elapsed = started.elapsed();
    let report = writer.finish().unwrap();
    println!(
        "span open+close: {:?} per span over {spans_per_round} spans ({} dropped, {} files)",
        elapsed / spans_per_round,
        report.dropped,
        report.files
    );
    assert_eq!(report.recorded, u64::from(spans_per_round));
    assert_eq!(report.written + report.dropped, report.recorded);
}

#[test]
fn the_resting_writer_is_woken_when_its_queue_is_half_full() {
    // The writer rests 100 ms between batches. Bursts of 5 spans every 50 ms into an 8-span
    // queue would overflow it within a rest, unless the fourth span of a burst (half the
    // queue) calls the writer early.
    let dir = tempfile::tempdir().unwrap();
    let (spans, writer) =
        SpanRecorder::start_local(config(0).queue_capacity(8), dir.path()).unwrap();
    for _ in 0..12 {
        for _ in 0..5 {
            spans.end_span(spans.start_span(Phase::Forward));
        }
        // workload: the gap between bursts, which is what the test is about.
        thread::sleep(Duration::from_millis(50));
    }
    let report = writer.finish().unwrap();
    assert_eq!(report.recorded, 60);
    assert_eq!(report.dropped, 0, "a burst found the queue full");
    assert_eq!(report.written, 60);
}
