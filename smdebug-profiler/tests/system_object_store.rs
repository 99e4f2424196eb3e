//! Sampler and span files through smdebug-io's object-store backend (`memory://`), read back
//! through the same URL: every file arrives as one whole object.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use smdebug_core::Mode;
use smdebug_profiler::spans::{SpanConfig, SpanRecorder};
use smdebug_profiler::system::{NodeId, SamplerConfig, SystemSampler};
use smdebug_read::profile::{ProfilerReader, SpanQuery, SystemQuery, parse_system_lines};
use smdebug_storage::Storage;

#[test]
fn sampler_and_spans_write_through_an_object_store() {
    let location = "memory://smdebug-profiler-tests/run-1";
    let store: Arc<dyn Storage> = smdebug_storage::open_storage(location).unwrap();
    let sampler = SystemSampler::start(
        SamplerConfig::default()
            .interval(Duration::from_millis(100))
            .node(NodeId::algo(2)),
        Arc::clone(&store),
    )
    .unwrap();
    let (spans, writer) = SpanRecorder::start(
        SpanConfig::default().node(NodeId::algo(2)).worker(1),
        Arc::clone(&store),
    )
    .unwrap();
    for step in 0..3 {
        let _step = spans.step(Mode::Train, step);
        // workload: a training step's time, while the sampler samples.
        thread::sleep(Duration::from_millis(60));
    }
    let span_report = writer.finish().unwrap();
    let sampler_report = sampler.stop().unwrap();
    assert_eq!(
        (span_report.write_errors, sampler_report.write_errors),
        (0, 0)
    );

    let reader = ProfilerReader::open(location).unwrap();
    let samples = reader
        .system_samples(&SystemQuery::default().node("algo-2"))
        .unwrap();
    assert!(!samples.is_empty());
    assert_eq!(samples.len() as u64, sampler_report.records);
    for file in reader.system_files().unwrap() {
        let bytes = store.get(&file.key).unwrap();
        assert!(parse_system_lines(&file.key, &bytes).is_ok());
    }
    let steps = reader.spans(&SpanQuery::default().worker(1)).unwrap();
    assert_eq!(steps.len(), 3);
    assert!(
        steps
            .iter()
            .all(|s| s.node == "algo-2" && s.duration_us() >= 60_000)
    );
}

#[test]
fn an_unusable_location_is_an_error_naming_it() {
    let Err(err) = ProfilerReader::open("nosuchscheme://bucket/run") else {
        panic!("a location no backend can open was accepted");
    };
    assert!(
        err.to_string().contains("nosuchscheme://bucket/run"),
        "{err}"
    );
}
