//! `parse_trace` (event by event, no document tree) against the document-tree walk it
//! replaced, kept here as the reference: the same spans in the same order, or the same error,
//! on real Kineto traces, a pythontimeline written by this crate and odd hand-made inputs.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use serde_json::{Map, Value};
use smdebug_core::Mode;
use smdebug_core::phase::Phase;

use super::spans::parse_trace_without_args;
use super::{Span, parse_trace};
use crate::profile::error::{ProfileError, Result};
use smdebug_format::trace::{TraceFileName, parse_trace_file_key};
use smdebug_profiler::testing::{SpanEvent, TraceFileBuilder};

/// The reader as it was before: the whole file as a `serde_json::Value`, then walked.
fn dom_parse_trace(file: &TraceFileName, bytes: &[u8]) -> Result<Vec<Span>> {
    fn malformed(
        key: &str,
        line: usize,
        column: usize,
        message: impl Into<String>,
    ) -> ProfileError {
        ProfileError::MalformedTrace {
            key: key.to_owned(),
            line,
            column,
            message: message.into(),
        }
    }
    fn number_i128(value: Option<&Value>) -> Option<i128> {
        let value = value?;
        value
            .as_i64()
            .map(i128::from)
            .or_else(|| value.as_u64().map(i128::from))
            .or_else(|| {
                value
                    .as_f64()
                    .filter(|f| f.is_finite())
                    .map(|f| f.round() as i128)
            })
    }
    fn to_epoch_us(base: i128, ts: i128) -> u64 {
        u64::try_from((base + ts).max(0)).unwrap_or(u64::MAX)
    }
    struct RawSpan {
        name: String,
        start: i128,
        end: i128,
        args: Map<String, Value>,
    }
    fn into_span(
        raw: RawSpan,
        file: &TraceFileName,
        phases: &HashMap<i64, String>,
        pid: i64,
        base: i128,
    ) -> Span {
        let RawSpan {
            name,
            start,
            end,
            args,
        } = raw;
        let phase = phases
            .get(&pid)
            .cloned()
            .unwrap_or_else(|| "Unknown".to_owned());
        let step = args.get("step_num").and_then(|v| {
            v.as_u64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
        });
        let args_mode = args
            .get("mode")
            .and_then(Value::as_str)
            .and_then(Mode::from_name);
        let mode = args_mode.or_else(|| phase.strip_prefix("Step:").and_then(Mode::from_name));
        let args_worker = args
            .get("worker")
            .and_then(Value::as_u64)
            .and_then(|w| u32::try_from(w).ok());
        let worker = args_worker.or(file.worker);
        // The entries read into the span's fields are not kept in its `args`.
        let mut args = args;
        for (key, read) in [
            ("step_num", step.is_some()),
            ("mode", args_mode.is_some()),
            ("worker", args_worker.is_some()),
        ] {
            if read {
                args.remove(key);
            }
        }
        Span {
            phase,
            name,
            start_us: to_epoch_us(base, start),
            end_us: to_epoch_us(base, end),
            node: file.node.clone(),
            worker,
            step,
            mode,
            args,
        }
    }

    let key = file.key.as_str();
    let root: Value = serde_json::from_slice(bytes)
        .map_err(|e| malformed(key, e.line(), e.column(), e.to_string()))?;
    let events = match root {
        Value::Array(events) => events,
        Value::Object(mut object) => match object.remove("traceEvents") {
            Some(Value::Array(events)) => events,
            _ => return Err(malformed(key, 0, 0, "object without a `traceEvents` array")),
        },
        _ => return Err(malformed(key, 0, 0, "neither an array nor an object")),
    };
    let mut base: i128 = 0;
    let mut phases: HashMap<i64, String> = HashMap::new();
    let mut open: HashMap<(i64, i64), Vec<RawSpan>> = HashMap::new();
    let mut spans = Vec::new();
    for event in events {
        let Value::Object(mut event) = event else {
            continue;
        };
        let pid = event.get("pid").and_then(Value::as_i64).unwrap_or(0);
        let tid = event.get("tid").and_then(Value::as_i64).unwrap_or(0);
        let args = match event.remove("args") {
            Some(Value::Object(args)) => args,
            _ => Map::new(),
        };
        let name = event
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let ts = number_i128(event.get("ts"));
        match event.get("ph").and_then(Value::as_str) {
            Some("M") if name == "process_name" => {
                if let Some(phase) = args.get("name").and_then(Value::as_str) {
                    phases.insert(pid, phase.to_owned());
                }
                if let Some(start) = number_i128(args.get("start_time_since_epoch_in_micros")) {
                    base = start;
                }
            }
            Some("X") => {
                let Some(ts) = ts else { continue };
                let dur = number_i128(event.get("dur")).unwrap_or(0).max(0);
                let raw = RawSpan {
                    name,
                    start: ts,
                    end: ts + dur,
                    args,
                };
                spans.push(into_span(raw, file, &phases, pid, base));
            }
            Some("B") => {
                if let Some(ts) = ts {
                    open.entry((pid, tid)).or_default().push(RawSpan {
                        name,
                        start: ts,
                        end: ts,
                        args,
                    });
                }
            }
            Some("E") => {
                let (Some(ts), Some(mut raw)) = (ts, open.get_mut(&(pid, tid)).and_then(Vec::pop))
                else {
                    continue;
                };
                raw.end = ts.max(raw.start);
                raw.args.extend(args);
                spans.push(into_span(raw, file, &phases, pid, base));
            }
            _ => {}
        }
    }
    Ok(spans)
}

fn file() -> TraceFileName {
    parse_trace_file_key(
        "framework/pevents/2020071317/1594662624718694_7-algo-1_pythontimeline.json",
    )
    .unwrap()
}

/// Both readers on `bytes`: equal spans, or errors with equal text and position. Returns the
/// spans (or the error's text).
fn same(label: &str, bytes: &[u8]) -> std::result::Result<Vec<Span>, String> {
    let new = parse_trace(&file(), bytes);
    let old = dom_parse_trace(&file(), bytes);
    // Without the args: the same spans with none, or the same error.
    let lean = parse_trace_without_args(&file(), bytes);
    match (&new, &lean) {
        (Ok(new), Ok(lean)) => {
            let stripped: Vec<Span> = new
                .iter()
                .map(|s| Span {
                    args: Default::default(),
                    ..s.clone()
                })
                .collect();
            assert_eq!(&stripped, lean, "{label}: without args");
        }
        (Err(new), Err(lean)) => {
            assert_eq!(
                format!("{new:?}"),
                format!("{lean:?}"),
                "{label}: without args"
            )
        }
        (new, lean) => panic!("{label}: with args {new:?}, without {lean:?}"),
    }
    match (new, old) {
        (Ok(new), Ok(old)) => {
            assert_eq!(new.len(), old.len(), "{label}: span count");
            for (i, (n, o)) in new.iter().zip(&old).enumerate() {
                assert_eq!(n, o, "{label}: span {i}");
            }
            Ok(new)
        }
        (Err(new), Err(old)) => {
            assert_eq!(format!("{new:?}"), format!("{old:?}"), "{label}");
            Err(new.to_string())
        }
        (new, old) => panic!("{label}: new {new:?}, old {old:?}"),
    }
}

#[test]
fn the_shared_kineto_traces_read_as_the_document_walk_reads_them() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pytorch-profiler-traces");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(".json.gz") {
            continue;
        }
        let mut text = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
            .read_to_end(&mut text)
            .unwrap();
        let spans = same(&path.display().to_string(), &text).unwrap();
        assert!(
            spans.len() > 10,
            "{}: {} spans",
            path.display(),
            spans.len()
        );
        assert!(spans.iter().any(|s| !s.args.is_empty()));
        checked += 1;
    }
    assert_eq!(checked, 4, "traces in {}", dir.display());
}

#[test]
fn a_pythontimeline_written_by_this_crate_reads_as_the_document_walk_reads_it() {
    let mut builder = TraceFileBuilder::new(1_594_662_624_000_000, 3, "algo-1".into());
    let phases = [
        Phase::Step(Mode::Train),
        Phase::DataLoading,
        Phase::Forward,
        Phase::Backward,
        Phase::Optimizer,
        Phase::Step(Mode::Eval),
        Phase::Custom(Cow::Borrowed("Custom \"row\" \u{e9}")),
    ];
    for i in 0..2000u64 {
        let phase = phases[(i % 7) as usize].clone();
        builder.add(&SpanEvent {
            phase,
            name: Cow::Owned(format!("event-{}\t\\{}", i % 13, i % 3)),
            // Before and after the file's base: negative relative times.
            start_us: 1_594_662_623_990_000 + i * 37,
            dur_us: i % 11,
            step: (i % 5 != 0)
                .then_some((if i % 2 == 0 { Mode::Train } else { Mode::Eval }, i / 7)),
            args: if i % 4 == 0 {
                vec![
                    (Cow::Borrowed("num_workers"), serde_json::json!(i % 9)),
                    (Cow::Borrowed("pin_memory"), serde_json::json!(i % 2 == 0)),
                    (
                        Cow::Borrowed("nested"),
                        serde_json::json!({"a": [1, {"b": null}], "c": 1.5e-3}),
                    ),
                ]
            } else {
                Vec::new()
            },
        });
    }
    let (_, text) = builder.close().unwrap();
    let spans = same("pythontimeline", &text).unwrap();
    assert_eq!(spans.len(), 2000);
    assert!(spans.iter().any(|s| s.args.contains_key("num_workers")));
    assert!(
        spans
            .iter()
            .any(|s| s.mode == Some(Mode::Eval) && s.step.is_some())
    );
}

#[test]
fn odd_inputs_read_as_the_document_walk_reads_them() {
    let meta = r#"{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "Forward", "start_time_since_epoch_in_micros": 1000}}"#;
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let events: &[(&str, String)] = &[
        ("string pid", format!(r#"[{meta}, {{"name": "a", "ph": "X", "pid": "1", "ts": 5, "dur": 2}}]"#)),
        (
            "odd pids",
            format!(
                r#"[{meta}, {{"name": "a", "ph": "X", "pid": 1.0, "ts": 5}}, {{"name": "b", "ph": "X", "pid": 18446744073709551615, "ts": 5}}, {{"name": "c", "ph": "X", "pid": -4, "ts": 5}}, {{"name": "d", "ph": "X", "pid": [1], "tid": {{"x": 1}}, "ts": 5}}, {{"name": "e", "ph": "X", "pid": null, "tid": true, "ts": 5}}]"#
            ),
        ),
        (
            "float and odd times",
            format!(
                r#"[{meta}, {{"name": "a", "ph": "X", "pid": 1, "ts": 12.5, "dur": 2.49}}, {{"name": "b", "ph": "X", "pid": 1, "ts": -3.5, "dur": -7}}, {{"name": "c", "ph": "X", "pid": 1, "ts": 1e3, "dur": "9"}}, {{"name": "d", "ph": "X", "pid": 1, "ts": 1e30, "dur": 1}}, {{"name": "e", "ph": "X", "pid": 1, "ts": -1e30}}, {{"name": "f", "ph": "X", "pid": 1, "ts": 18446744073709551615, "dur": 18446744073709551615}}, {{"name": "g", "ph": "X", "pid": 1, "ts": -9223372036854775808, "dur": 0.5}}]"#
            ),
        ),
        (
            "missing and wrong-typed ts",
            format!(
                r#"[{meta}, {{"name": "a", "ph": "X", "pid": 1}}, {{"name": "b", "ph": "X", "pid": 1, "ts": "5"}}, {{"name": "c", "ph": "B", "pid": 1}}, {{"name": "c", "ph": "B", "pid": 1, "ts": 4}}, {{"name": "c", "ph": "E", "pid": 1}}, {{"name": "c", "ph": "E", "pid": 1, "ts": [9]}}, {{"name": "c", "ph": "E", "pid": 1, "ts": 9}}]"#
            ),
        ),
        (
            "nested args and merges",
            format!(
                r#"[{meta}, {{"name": "a", "ph": "B", "pid": 1, "tid": 2, "ts": 1, "args": {{"step_num": "7", "deep": {{"x": [1, 2, {{"y": "z"}}], "e": 1.5e300}}, "worker": 5}}}}, {{"name": "ignored", "ph": "E", "pid": 1, "tid": 2, "ts": 6, "args": {{"step_num": 8, "mode": "EVAL", "worker": 4294967296, "pin_memory": true}}}}, {{"name": "n", "ph": "X", "pid": 1, "ts": 1, "args": {{"step_num": " 12 ", "mode": "bogus", "num_workers": 4}}}}, {{"name": "n", "ph": "X", "pid": 1, "ts": 1, "args": {{"step_num": 3.0, "worker": "2"}}}}, {{"name": "n", "ph": "X", "pid": 1, "ts": 1, "args": {{"step_num": -1, "worker": -1}}}}, {{"name": "n", "ph": "X", "pid": 1, "ts": 1, "args": 5}}, {{"name": "n", "ph": "X", "pid": 1, "ts": 1, "args": [1]}}, {{"name": "n", "ph": "X", "pid": 1, "ts": 1, "args": {{"a": 1}}, "args": {{"b": 2}}}}, {{"name": "n", "ph": "X", "pid": 1, "ts": 1, "args": {{"a": 1, "a": 2}}}}]"#
            ),
        ),
        (
            "unpaired begins and ends",
            format!(
                r#"[{meta}, {{"name": "e", "ph": "E", "pid": 1, "ts": 1}}, {{"name": "b1", "ph": "B", "pid": 1, "ts": 2}}, {{"name": "b2", "ph": "B", "pid": 1, "ts": 3}}, {{"name": "other", "ph": "B", "pid": 1, "tid": 1, "ts": 3}}, {{"name": "e", "ph": "E", "pid": 1, "ts": 4}}, {{"name": "e", "ph": "E", "pid": 1, "ts": 1}}, {{"name": "e", "ph": "E", "pid": 1, "ts": 9}}, {{"name": "dangling", "ph": "B", "pid": 2, "ts": 9}}]"#
            ),
        ),
        (
            "escaped strings",
            r#"[{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "Step:ModeKeys.\u0054RAIN"}}, {"n\u0061me": "a \"quoted\" \\ name \u00e9 \ud83d\ude00\n", "\u0070h": "\u0058", "pid": 0, "ts": 5, "args": {"mo\u0064e": "TRAIN", "k\"ey": "v\\al"}}]"#.to_owned(),
        ),
        (
            "non-object elements",
            format!(r#"[1, "x", null, true, [1, [2]], {meta}, -2.5, {{}}, {{"name": "a", "ph": "X", "pid": 1, "ts": 5}}, []]"#),
        ),
        (
            "object root with extra keys",
            format!(
                r#"{{"schemaVersion": 1, "deviceProperties": [{{"id": 0}}], "traceEvents": [{meta}, {{"name": "a", "ph": "X", "pid": 1, "ts": 5}}], "displayTimeUnit": "ms", "traceName": {{"x": [1, 2]}}}}"#
            ),
        ),
        (
            "repeated traceEvents",
            format!(
                r#"{{"traceEvents": [{{"name": "first", "ph": "X", "pid": 1, "ts": 5}}], "traceEvents": [{meta}, {{"name": "second", "ph": "X", "pid": 1, "ts": 6}}]}}"#
            ),
        ),
        (
            "traceEvents array then not",
            r#"{"traceEvents": [{"name": "a", "ph": "X", "pid": 1, "ts": 5}], "traceEvents": 5}"#.to_owned(),
        ),
        (
            "traceEvents not then array",
            r#"{"traceEvents": {"a": 1}, "traceEvents": [{"name": "a", "ph": "X", "pid": 1, "ts": 5}]}"#.to_owned(),
        ),
        ("traceEvents not an array", r#"{"traceEvents": "x"}"#.to_owned()),
        ("no traceEvents", r#"{"other": [1]}"#.to_owned()),
        ("empty object", "{}".to_owned()),
        ("empty array", " [ ] ".to_owned()),
        ("root number", "5".to_owned()),
        ("root string", "\"x\"".to_owned()),
        ("root null", "null".to_owned()),
        (
            "wrong-typed name and ph",
            format!(
                r#"[{meta}, {{"name": 5, "ph": "X", "pid": 1, "ts": 5}}, {{"name": "a", "ph": 88, "pid": 1, "ts": 5}}, {{"name": "a", "ph": ["X"], "pid": 1, "ts": 5}}, {{"name": {{"a": 1}}, "ph": "M", "pid": 1, "args": {{"name": "Other"}}}}, {{"name": "a", "ph": "x", "pid": 1, "ts": 5}}]"#
            ),
        ),
        (
            "repeated keys in an event",
            format!(r#"[{meta}, {{"name": "a", "ph": "B", "ph": "X", "pid": 2, "pid": 1, "ts": 5, "ts": 7, "dur": 1}}]"#),
        ),
        (
            "metadata forms",
            r#"[{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": 1.5e3}}, {"name": "a", "ph": "X", "pid": 0, "ts": 1}, {"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": "7", "name": 5}}, {"name": "a", "ph": "X", "pid": 0, "ts": 1}, {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "Step:ModeKeys.EVAL"}}, {"name": "a", "ph": "X", "pid": 0, "ts": 1}, {"name": "thread_name", "ph": "M", "pid": 0, "args": {"name": "Forward"}}, {"name": "process_name", "ph": "m", "pid": 0, "args": {"name": "Forward"}}, {"name": "a", "ph": "X", "pid": 0, "ts": 1}]"#.to_owned(),
        ),
        ("bad JSON mid-way", format!("[\n{meta},\n{{\"name\": \"a\", \"ph\": \"X\",, }}]")),
        ("trailing characters", "[] x".to_owned()),
        ("trailing comma", "[{\"a\": 1},]".to_owned()),
        ("truncated", "[\n{\"name\": ".to_owned()),
        ("deep nesting in an unknown key", format!(r#"[{{"name": "a", "ph": "X", "ts": 1, "cat": {deep}}}]"#)),
        ("deep nesting in args", format!(r#"[{{"name": "a", "ph": "X", "ts": 1, "args": {{"x": {deep}}}}}]"#)),
        ("deep nesting as an element", format!("[{deep}]")),
        (
            "a number out of range in an unknown key",
            r#"[{"name": "a", "ph": "X", "ts": 1, "cat": 1e400}]"#.to_owned(),
        ),
        (
            "a lone surrogate in an unknown key",
            r#"[{"name": "a", "ph": "X", "ts": 1, "cat": "\ud800"}]"#.to_owned(),
        ),
        ("a bad escape in a name", r#"[{"name": "a\q", "ph": "X", "ts": 1}]"#.to_owned()),
    ];
    let mut spans_seen = 0;
    for (label, text) in events {
        if let Ok(spans) = same(label, text.as_bytes()) {
            spans_seen += spans.len();
        }
    }
    assert!(spans_seen >= 34, "{spans_seen}");
    // Bytes that are not UTF-8, in an unknown key's string and in a name.
    for (label, bytes) in [
        (
            "bad UTF-8 in an unknown key",
            &b"[{\"name\": \"a\", \"ph\": \"X\", \"ts\": 1, \"cat\": \"\xff\"}]"[..],
        ),
        (
            "bad UTF-8 in a name",
            &b"[{\"name\": \"a\xc3\", \"ph\": \"X\", \"ts\": 1}]"[..],
        ),
    ] {
        assert!(same(label, bytes).is_err(), "{label}");
    }
    // A few spot checks that the inputs mean what their labels say.
    let text = |label: &str| &events.iter().find(|(l, _)| *l == label).unwrap().1;
    let escaped = same("escaped", text("escaped strings").as_bytes()).unwrap();
    assert_eq!(escaped[0].name, "a \"quoted\" \\ name \u{e9} \u{1f600}\n");
    assert_eq!(escaped[0].mode, Some(Mode::Train));
    let repeated = same("repeated", text("repeated traceEvents").as_bytes()).unwrap();
    assert_eq!(repeated.len(), 1);
    assert_eq!(repeated[0].name, "second");
    let deep = same("deep", text("deep nesting in args").as_bytes()).unwrap_err();
    assert!(deep.contains("recursion limit"), "{deep}");
}

#[test]
fn span_arguments_are_written_beside_the_recorder_keys_which_they_cannot_replace() {
    let mut builder = TraceFileBuilder::new(1_000_000, 2, "algo-1".into());
    builder.add(&SpanEvent {
        phase: Phase::DataLoading,
        name: Cow::Borrowed("DataLoaderIter::GetNext"),
        start_us: 1_000_100,
        dur_us: 50,
        step: Some((Mode::Train, 7)),
        args: vec![
            (Cow::Borrowed("num_workers"), serde_json::json!(8)),
            (Cow::Borrowed("worker"), serde_json::json!(99)),
        ],
    });
    let (key, text) = builder.close().unwrap();
    let spans = parse_trace(&parse_trace_file_key(&key).unwrap(), &text).unwrap();
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].args["num_workers"], 8);
    assert_eq!(spans[0].worker, Some(2));
    assert_eq!(spans[0].step, Some(7));
}
