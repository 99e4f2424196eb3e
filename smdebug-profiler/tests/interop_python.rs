//! Our files read by Python smdebug's profiler readers, and Python smdebug's timeline writer's
//! files read by ours. Needs a Python with smdebug: `$SMDEBUG_PYTHON`, else `python3`.

use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::Duration;

use serde_json::Value;
use smdebug_core::Mode;
use smdebug_profiler::spans::{SpanConfig, SpanRecorder};
use smdebug_profiler::system::{NodeId, SamplerConfig, SystemSampler};
use smdebug_read::profile::{ProfilerReader, SpanQuery, SystemQuery};
use smdebug_storage::testing::wait_until;

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/interop_python/smdebug_readers.py"
);

fn python(action: &str, run: &Path) -> Value {
    let interpreter = std::env::var("SMDEBUG_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let probe = Command::new(&interpreter)
        .args(["-c", "import smdebug.profiler.system_metrics_reader"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{interpreter}` (set SMDEBUG_PYTHON): {e}"));
    assert!(
        probe.status.success(),
        "Python smdebug is not importable with `{interpreter}` (set SMDEBUG_PYTHON to an \
         interpreter with smdebug 1.0.34, numpy<2, protobuf 3.20): {}",
        String::from_utf8_lossy(&probe.stderr)
    );
    let output = Command::new(&interpreter)
        .arg(SCRIPT)
        .arg(action)
        .arg(run)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{SCRIPT} {action} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    // smdebug logs to stdout on import; the answer is the last line.
    let stdout = String::from_utf8(output.stdout).unwrap();
    let last = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("bad JSON from {SCRIPT}: {e}: {stdout}"))
}

#[test]
fn python_smdebug_readers_load_our_system_metrics_and_spans() {
    let dir = tempfile::tempdir().unwrap();
    // The library's compatible mode: node `algo-1`, which Python's system reader requires.
    let sampler = SystemSampler::start_local(
        SamplerConfig::default()
            .interval(Duration::from_millis(100))
            .publish_interval(Duration::from_millis(100))
            .node(NodeId::algo(1)),
        dir.path(),
    )
    .unwrap();
    let (spans, writer) = SpanRecorder::start_local(
        SpanConfig::default().node(NodeId::algo(1)).worker(0),
        dir.path(),
    )
    .unwrap();
    for step in 0..5 {
        let _step = spans.step(Mode::Train, step);
        {
            let _forward = spans.forward();
            // workload: the phase's time, as a real one takes.
            thread::sleep(Duration::from_millis(20));
        }
        let _backward = spans.backward();
        // workload: the phase's time.
        thread::sleep(Duration::from_millis(20));
    }
    writer.finish().unwrap();
    wait_until(
        Duration::from_secs(60),
        "more than 20 system records",
        || {
            ProfilerReader::open(dir.path())
                .unwrap()
                .system_samples(&SystemQuery::default())
                .unwrap()
                .len()
                > 20
        },
    );
    sampler.stop().unwrap();

    let seen = python("read", dir.path());
    let reader = ProfilerReader::open(dir.path()).unwrap();

    // System metrics: the same records, value for value.
    let ours = reader.system_samples(&SystemQuery::default()).unwrap();
    let mut theirs: Vec<(String, String, String, f64, String, f64)> = seen["system"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e[0].as_str().unwrap().to_owned(),
                e[1].as_str().unwrap_or_default().to_owned(),
                e[2].as_str().unwrap().to_owned(),
                e[3].as_f64().unwrap(),
                e[4].as_str().unwrap().to_owned(),
                e[5].as_f64().unwrap(),
            )
        })
        .collect();
    let mut expected: Vec<_> = ours
        .iter()
        .map(|s| {
            (
                s.metric_type.clone(),
                s.name.clone(),
                s.dimension.clone(),
                s.value,
                s.node_id.clone(),
                s.timestamp,
            )
        })
        .collect();
    assert!(expected.len() > 20, "{} records", expected.len());
    let order = |a: &(String, String, String, f64, String, f64),
                 b: &(String, String, String, f64, String, f64)| {
        a.5.total_cmp(&b.5)
            .then_with(|| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)))
    };
    theirs.sort_by(order);
    expected.sort_by(order);
    assert_eq!(theirs, expected);

    // Spans: same phases, names, absolute times and steps. smdebug shows the node as
    // `<node>-<worker>`.
    let ours = reader.spans(&SpanQuery::default()).unwrap();
    assert_eq!(ours.len(), 15);
    let mut theirs: Vec<(String, String, u64, u64, String, Option<u64>)> = seen["framework"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e[0].as_str().unwrap().to_owned(),
                e[1].as_str().unwrap().to_owned(),
                e[2].as_u64().unwrap(),
                e[3].as_u64().unwrap(),
                e[4].as_str().unwrap().to_owned(),
                e[5].as_str().and_then(|s| s.parse().ok()),
            )
        })
        .collect();
    let mut expected: Vec<_> = ours
        .iter()
        .map(|s| {
            (
                s.phase.clone(),
                s.name.clone(),
                s.start_us,
                s.end_us,
                "algo-1-0".to_owned(),
                s.step,
            )
        })
        .collect();
    theirs.sort();
    expected.sort();
    assert_eq!(theirs, expected);
    assert!(
        theirs
            .iter()
            .any(|t| t.0 == "Backward(post-forward)" && t.5 == Some(4))
    );
}

#[test]
fn our_reader_loads_python_smdebug_timeline_files() {
    let dir = tempfile::tempdir().unwrap();
    let written = python("write", dir.path());
    let expected: Vec<(String, String, u64, u64, u64)> = written
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e[0].as_str().unwrap().to_owned(),
                e[1].as_str().unwrap().to_owned(),
                e[2].as_u64().unwrap(),
                e[3].as_u64().unwrap(),
                e[4].as_u64().unwrap(),
            )
        })
        .collect();
    let reader = ProfilerReader::open(dir.path()).unwrap();
    let files = reader.trace_files().unwrap();
    assert_eq!(files.len(), 1);
    let spans = reader.spans(&SpanQuery::default()).unwrap();
    let mut ours: Vec<_> = spans
        .iter()
        .map(|s| {
            (
                s.phase.clone(),
                s.name.clone(),
                s.start_us,
                s.end_us,
                s.step.unwrap(),
            )
        })
        .collect();
    let mut expected = expected;
    ours.sort();
    expected.sort();
    // smdebug rounds the start to whole microseconds relative to its own start time: allow 1 µs.
    assert_eq!(ours.len(), expected.len());
    for (a, b) in ours.iter().zip(&expected) {
        assert_eq!((&a.0, &a.1, a.4), (&b.0, &b.1, b.4));
        assert!(
            a.2.abs_diff(b.2) <= 1 && a.3.abs_diff(b.3) <= 1,
            "{a:?} vs {b:?}"
        );
    }
    let train = reader
        .spans(
            &SpanQuery::default()
                .steps(Mode::Train, 2..=3)
                .phase("Step:ModeKeys.TRAIN"),
        )
        .unwrap();
    assert_eq!(train.len(), 2);
    assert!(
        train
            .iter()
            .all(|s| s.mode == Some(Mode::Train) && s.node == files[0].node)
    );
}
