//! Kineto trace ingestion against the real shared traces and against broken inputs.
//!
//! Expected figures come from `tests/kineto/expected_figures.py`, an independent Python
//! computation over the same files; regenerate them with
//! `python3 tests/kineto/expected_figures.py tests/kineto/expected tests/data/pytorch-profiler-traces/*.gz`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;
use smdebug_read::kineto::{
    KinetoError, render_text, summarize_reader, summarize_trace, summarize_traces,
};

const TRACES: &[&str] = &[
    "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "critical_path__simple_add__benchmark_result_493459_1694039959_trace.json.gz",
    "trace_filter__sampled_rank-0.json.gz",
    "trace_filter__sampled_rank-1.json.gz",
];

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pytorch-profiler-traces")
}

fn trace(name: &str) -> PathBuf {
    data_dir().join(name)
}

fn expected(name: &str) -> Value {
    let stem = name.strip_suffix(".json.gz").unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/kineto/expected")
        .join(format!("{stem}.json"));
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn decompressed(name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(trace(name)).unwrap())
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// Checks that every field of `expected` is in `actual` with the same value; numbers agree
/// within 1e-9 relative (absolute near zero).
fn assert_matches(expected: &Value, actual: &Value, at: &str) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let av = a
                    .get(k)
                    .unwrap_or_else(|| panic!("{at}.{k}: missing in actual"));
                assert_matches(ev, av, &format!("{at}.{k}"));
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            assert_eq!(e.len(), a.len(), "{at}: array length");
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                assert_matches(ev, av, &format!("{at}[{i}]"));
            }
        }
        (Value::Number(e), Value::Number(a)) => {
            let (e, a) = (e.as_f64().unwrap(), a.as_f64().unwrap());
            let tol = 1e-9 * e.abs().max(a.abs()).max(1e-300);
            assert!((e - a).abs() <= tol, "{at}: expected {e}, got {a}");
        }
        (e, a) => assert_eq!(e, a, "{at}"),
    }
}

#[test]
fn real_traces_match_independent_computation() {
    for name in TRACES {
        let summary = summarize_trace(trace(name)).unwrap();
        let actual = serde_json::to_value(&summary).unwrap();
        assert_matches(&expected(name), &actual, name);
    }
}

#[test]
fn expected_figures_are_not_trivial() {
    // Guards the comparison above against vacuous expected files.
    let e = expected("trace_filter__sampled_rank-0.json.gz");
    assert!(e["gpu_kernels"].as_array().unwrap().len() > 100);
    assert!(e["cpu_operators"].as_array().unwrap().len() > 100);
    assert!(e["gpu_busy_us"].as_f64().unwrap() > 0.0);
    assert!(e["gpu_idle_us"].as_f64().unwrap() > 0.0);
}

#[test]
fn json_field_order_is_the_documented_contract() {
    let s = summarize_trace(trace(TRACES[3])).unwrap();
    let report = summarize_traces([trace(TRACES[3])]).unwrap();
    let text = serde_json::to_string(&report).unwrap();
    assert!(text.starts_with(
        "{\"ranks\":[{\"rank\":1,\"span_us\":3366398.0,\"gpu_busy_us\":580050.0,\"gpu_idle_us\":651136.0,\"gpu_kernels\":[{\"name\":"
    ));
    let k = &s.gpu_kernels[0];
    let row = serde_json::to_string(k).unwrap();
    let keys: Vec<&str> = [
        "name", "count", "total_us", "mean_us", "min_us", "max_us", "share",
    ]
    .into_iter()
    .collect();
    let mut last = 0;
    for key in keys {
        let at = row.find(&format!("\"{key}\":")).unwrap();
        assert!(at >= last, "{key} out of order in {row}");
        last = at;
    }
    let cpu_at = text.find("\"cpu_operators\":").unwrap();
    let file_at = text.find("\"file\":").unwrap();
    assert!(cpu_at < file_at);
}

#[test]
fn plain_json_gives_the_same_figures_as_gzip() {
    let name = TRACES[2];
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("sampled_rank-0.json");
    std::fs::write(&plain, decompressed(name)).unwrap();
    let from_plain = serde_json::to_value(summarize_trace(&plain).unwrap()).unwrap();
    assert_matches(&expected(name), &from_plain, "plain");
}

#[test]
fn ranks_are_sorted_and_texts_rendered() {
    let paths: Vec<PathBuf> = TRACES.iter().rev().map(|n| trace(n)).collect();
    let report = summarize_traces(&paths).unwrap();
    let ranks: Vec<u32> = report.ranks.iter().map(|r| r.rank).collect();
    assert_eq!(ranks, [0, 0, 1, 34]);
    // Equal ranks keep input order: rank-0 was given before critical_path.
    assert!(
        report.ranks[0]
            .file
            .ends_with("trace_filter__sampled_rank-0.json.gz")
    );
    let text = render_text(&report, 5);
    assert!(text.contains("== rank 34"));
    assert!(text.contains("GPU: no GPU activity in this trace"));
    assert!(text.contains("top 5 of 194 GPU kernels by total time"));
    let top = &report.ranks[0].gpu_kernels[0].name;
    assert!(text.contains(&top[..40]));
}

#[test]
fn cpu_only_trace_has_no_gpu_figures() {
    let s = summarize_trace(trace(TRACES[0])).unwrap();
    assert_eq!(s.rank, 34);
    assert!(s.gpu_kernels.is_empty());
    assert!(s.gpu_devices.is_empty());
    assert_eq!(s.gpu_busy_us, 0.0);
    assert_eq!(s.gpu_idle_us, 0.0);
    assert!(!s.cpu_operators.is_empty());
    assert!(s.span_us > 0.0);
}

#[test]
fn empty_trace_events_is_an_empty_summary() {
    let s = summarize_reader(
        &br#"{"schemaVersion":1,"traceEvents":[]}"#[..],
        "empty.json",
    )
    .unwrap();
    assert_eq!(s.span_us, 0.0);
    assert_eq!(s.event_count, 0);
    assert!(s.gpu_kernels.is_empty() && s.cpu_operators.is_empty());
}

fn write_temp(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
    p
}

#[test]
fn truncated_gzip_is_an_error_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let gz = std::fs::read(trace(TRACES[2])).unwrap();
    for cut in [gz.len() - 4, gz.len() / 2, 11] {
        let p = write_temp(dir.path(), "cut.json.gz", &gz[..cut]);
        let err = summarize_trace(&p).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("cut.json.gz"), "{msg}");
        assert!(msg.contains("byte offset"), "{msg}");
        assert!(
            matches!(
                err,
                KinetoError::Read { .. } | KinetoError::Malformed { .. }
            ),
            "{err:?}"
        );
    }
    // Cut inside the gzip trailer: all JSON is there, only the checksum/length is missing.
    let p = write_temp(dir.path(), "cut.json.gz", &gz[..gz.len() - 4]);
    match summarize_trace(&p).unwrap_err() {
        KinetoError::Read { offset, .. } => {
            assert_eq!(offset, decompressed(TRACES[2]).len() as u64)
        }
        other => panic!("expected a read error, got {other:?}"),
    }
}

#[test]
fn truncated_json_is_an_error_with_the_offset() {
    let json = decompressed(TRACES[2]);
    let cut = json.len() / 3;
    let dir = tempfile::tempdir().unwrap();
    let p = write_temp(dir.path(), "cut.json", &json[..cut]);
    match summarize_trace(&p).unwrap_err() {
        KinetoError::Malformed { path, offset, .. } => {
            assert_eq!(path, p);
            assert_eq!(offset, cut as u64);
        }
        other => panic!("expected malformed JSON, got {other:?}"),
    }
}

#[test]
fn syntax_error_reports_its_offset() {
    let text = br#"{"traceEvents":[{"ph":"X","ts":1,}]}"#;
    match summarize_reader(&text[..], "bad.json").unwrap_err() {
        KinetoError::Malformed {
            offset,
            line,
            column,
            ..
        } => {
            // The offending '}' is byte 33 (0-based), column 34 (1-based).
            assert_eq!(offset, 33);
            assert_eq!((line, column), (1, 34));
        }
        other => panic!("expected malformed JSON, got {other:?}"),
    }
    // The same error on a later line, after enough data to force buffer refills.
    let mut text = String::from("{\"traceEvents\":[\n");
    let event = "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"op\",\"ts\":1,\"dur\":2},\n";
    for _ in 0..20_000 {
        text.push_str(event);
    }
    // The parser expects a colon and finds the opening quote of "X".
    let bad_at = text.len() + 6;
    text.push_str("{\"ph\" \"X\"}]}\n");
    match summarize_reader(text.as_bytes(), "bad.json").unwrap_err() {
        KinetoError::Malformed { offset, line, .. } => {
            assert_eq!(offset, bad_at as u64, "{}", &text[offset as usize..]);
            assert_eq!(line, 20_002);
        }
        other => panic!("expected malformed JSON, got {other:?}"),
    }
    // Trailing content after the document is also malformed.
    let text = br#"{"traceEvents":[]} x"#;
    assert!(matches!(
        summarize_reader(&text[..], "t.json"),
        Err(KinetoError::Malformed { .. })
    ));
}

#[test]
fn non_trace_json_is_rejected() {
    for (text, missing) in [
        (&br#"{"foo": 1, "bar": [1,2,3]}"#[..], true),
        (&b"42"[..], false),
        (&br#""traceEvents""#[..], false),
        (&br#"{"traceEvents": 5}"#[..], false),
        (&br#"{"traceEvents": [1, 2]}"#[..], false),
    ] {
        let err = summarize_reader(text, "other.json").unwrap_err();
        assert!(err.to_string().contains("other.json"), "{err}");
        if missing {
            assert!(
                matches!(err, KinetoError::MissingTraceEvents { .. }),
                "{err:?}"
            );
        } else {
            assert!(matches!(err, KinetoError::NotATrace { .. }), "{err:?}");
        }
    }
}

#[test]
fn missing_file_is_an_open_error() {
    let err = summarize_trace("/nonexistent/trace_rank-0.json").unwrap_err();
    assert!(matches!(err, KinetoError::Open { .. }), "{err:?}");
    let err =
        summarize_traces([trace(TRACES[2]), PathBuf::from("/nonexistent/x.json")]).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/x.json"));
}
