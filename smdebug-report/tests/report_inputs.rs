//! The profiling report on awkward and foreign inputs: no profiler data at all, a corrupt
//! metrics line, a run still being written, a run written by Python smdebug's timeline writer,
//! Kineto traces (one of them missing), figures checked against an independent computation,
//! and the rule files beside the page.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use smdebug_analysis::stats::SKETCH_RELATIVE_ERROR;
use smdebug_format::system::system_file_key;
use smdebug_format::trace::trace_file_key;
use smdebug_read::kineto::summarize_trace;
use smdebug_report::{
    LoadOptions, NoteArea, ReportInput, RuleFile, SECTIONS, render_html, write_report_to,
    write_rule_files_to,
};
use smdebug_rules::{Parameters, RuleDetails, RuleInput, RuleStatus, Status};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;
use support::section;

const T0: f64 = 1_700_000_000.0;

fn shared_trace(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../smdebug-read/tests/data/pytorch-profiler-traces")
        .join(name)
}

fn assert_sections_in_order(html: &str) {
    let mut at = 0;
    for (id, _) in SECTIONS {
        at += html[at..]
            .find(&format!("<section id=\"{id}\""))
            .unwrap_or_else(|| panic!("section {id} missing or out of order"));
    }
}

fn line(t: f64, metric_type: &str, name: &str, dimension: &str, value: f64) -> String {
    json!({"Type": metric_type, "Name": name, "Dimension": dimension, "Value": value,
           "NodeId": "algo-1", "Timestamp": t})
    .to_string()
}

/// A Python-timeline trace file of TRAIN steps with the given durations (µs), back to back.
fn write_steps(store: &LocalStorage, durations_us: &[u64]) {
    let base = (T0 * 1e6) as u64;
    let mut events = vec![
        json!({"name": "process_name", "ph": "M", "pid": 0,
               "args": {"start_time_since_epoch_in_micros": base}}),
        json!({"name": "process_name", "ph": "M", "pid": 0,
               "args": {"name": "Step:ModeKeys.TRAIN"}}),
    ];
    let mut ts = 0;
    for (step, d) in durations_us.iter().enumerate() {
        events.push(json!({"name": "Step:ModeKeys.TRAIN", "ph": "X", "pid": 0, "tid": 0,
                           "ts": ts, "dur": d, "args": {"step_num": step.to_string(), "mode": "TRAIN"}}));
        ts += d + 100;
    }
    let key = trace_file_key(base + ts, 0, "algo-1");
    store
        .put(&key, serde_json::to_vec(&events).unwrap().into())
        .unwrap();
}

#[test]
fn a_run_without_profiler_data_gets_a_report_saying_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    fs::create_dir_all(&run).unwrap();
    let input = ReportInput::load(&run, &LoadOptions::default());
    let areas: Vec<NoteArea> = input.notes.iter().map(|n| n.area).collect();
    for area in [
        NoteArea::Run,
        NoteArea::System,
        NoteArea::Spans,
        NoteArea::Tensors,
    ] {
        assert!(
            areas.contains(&area),
            "no {area:?} note: {:#?}",
            input.notes
        );
    }
    let written = write_report_to(&input, &dir.path().join("report/index.html")).unwrap();
    assert!(written.rule_files.is_empty());
    let html = fs::read_to_string(&written.html).unwrap();
    assert_sections_in_order(&html);
    assert!(!html.contains("<figure"), "a chart without data");
    for (id, _) in &SECTIONS[..SECTIONS.len() - 1] {
        assert!(
            section(&html, id).contains("class=\"missing\""),
            "section {id} does not say what is missing"
        );
    }
    // Every note is listed in the last section.
    let notes = section(&html, "data-notes");
    assert_eq!(notes.matches("<li>").count(), input.notes.len());

    // A location where nothing exists at all is no different.
    let nowhere = ReportInput::load(dir.path().join("no/such/run"), &LoadOptions::default());
    assert!(!nowhere.notes.is_empty());
    assert_sections_in_order(&render_html(&nowhere));

    // Text that names no location is a note naming it, not a folder looked for.
    let ill_formed = ReportInput::load("s3:/bucket/run", &LoadOptions::default());
    assert!(
        ill_formed.notes[0].message.contains("s3:/bucket/run"),
        "{:?}",
        ill_formed.notes
    );
    assert_eq!(ill_formed.location, "s3:/bucket/run");
}

#[test]
fn corrupt_lines_and_files_are_left_out_with_a_note_and_the_rest_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStorage::new(dir.path()).unwrap();
    let key = system_file_key(T0 as u64, "algo-1");
    let hostile = json!({"Type": "cpu", "Name": "total", "Dimension": "CPUUtilization",
                         "Value": 5.0, "NodeId": "<img src=x onerror=alert(1)>", "Timestamp": T0})
    .to_string();
    let text = format!(
        "{}\n{}\n{{not json at all\n{}\n{hostile}\n{{\"Type\":\"cpu\",\"Na",
        line(T0, "cpu", "total", "CPUUtilization", 10.0),
        line(T0 + 0.5, "cpu", "total", "CPUUtilization", 20.0),
        line(T0 + 1.0, "cpu", "total", "CPUUtilization", 30.0),
    );
    store.put(&key, text.as_bytes().to_vec().into()).unwrap();
    write_steps(&store, &[1000, 2000]);
    store
        .put(
            &trace_file_key((T0 * 1e6) as u64 + 9_000_000, 0, "algo-1"),
            b"[{\"name\": \"x\", \"ph\": ".to_vec().into(),
        )
        .unwrap();

    let input = ReportInput::load(dir.path(), &LoadOptions::default());
    let cpu = input
        .metrics()
        .find(|s| s.node == "algo-1" && s.name == "total")
        .unwrap();
    let values: Vec<(f64, f64, f64)> = cpu
        .line
        .slices()
        .map(|s| (s.min, s.mean(), s.max))
        .collect();
    assert_eq!(
        values,
        [(10.0, 10.0, 10.0), (20.0, 20.0, 20.0), (30.0, 30.0, 30.0)]
    );
    assert_eq!(
        (
            cpu.values.count(),
            cpu.values.sum(),
            cpu.values.min(),
            cpu.values.max()
        ),
        (3, 60.0, Some(10.0), Some(30.0))
    );
    assert_eq!(
        input.span_count(),
        2,
        "the good trace file's spans are kept"
    );
    let system_note = input
        .notes
        .iter()
        .find(|n| n.area == NoteArea::System)
        .expect("a note on the bad line");
    assert!(
        system_note.message.contains(&key) && system_note.message.contains("line 3"),
        "{}",
        system_note.message
    );
    assert!(
        input
            .notes
            .iter()
            .any(|n| n.area == NoteArea::Spans && n.message.contains("malformed trace")),
        "{:#?}",
        input.notes
    );
    let html = render_html(&input);
    assert!(section(&html, "system-usage").contains("line 3"));
    assert!(!html.contains("<img"), "data reached the page unescaped");
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
}

#[test]
fn a_run_still_being_written_is_reported_so_until_its_end_marker_appears() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStorage::new(dir.path()).unwrap();
    store
        .put(
            &system_file_key(T0 as u64, "algo-1"),
            format!("{}\n", line(T0, "cpu", "total", "CPUUtilization", 10.0))
                .into_bytes()
                .into(),
        )
        .unwrap();
    write_steps(&store, &[1000, 1000, 1000]);
    let live = ReportInput::load(dir.path(), &LoadOptions::default());
    assert_eq!(live.run_complete, Some(false));
    assert!(live.notes.iter().any(|n| n.area == NoteArea::Run));
    let html = render_html(&live);
    assert!(html.contains("still being written"));
    assert!(section(&html, "step-durations").contains("<figure"));

    fs::write(dir.path().join("training_job_end.ts"), b"").unwrap();
    let done = ReportInput::load(dir.path(), &LoadOptions::default());
    assert_eq!(done.run_complete, Some(true));
    assert!(!done.notes.iter().any(|n| n.area == NoteArea::Run));
    assert!(render_html(&done).contains("finished (end marker present)"));
}

#[test]
fn tables_match_an_independent_computation() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStorage::new(dir.path()).unwrap();
    // CPU total takes each value 0..=100 once, in a scrambled order over time.
    let text: String = (0..101u32)
        .map(|i| {
            let value = f64::from((i * 37) % 101);
            line(
                T0 + f64::from(i) * 0.5,
                "cpu",
                "total",
                "CPUUtilization",
                value,
            ) + "\n"
        })
        .collect();
    store
        .put(
            &system_file_key(T0 as u64, "algo-1"),
            text.into_bytes().into(),
        )
        .unwrap();
    // Steps of 1..=100 ms, scrambled.
    let durations: Vec<u64> = (0..100u64).map(|i| ((i * 31) % 100 + 1) * 1000).collect();
    write_steps(&store, &durations);
    let html = render_html(&ReportInput::load(dir.path(), &LoadOptions::default()));

    // Counts, extremes and means are exact; a percentile pN is within the sketch's bound of
    // the value at rank round(N% · (n − 1)) of the sorted values.
    let bound = SKETCH_RELATIVE_ERROR;
    let close = |shown: f64, exact: f64, decimals: i32| {
        (shown - exact).abs() <= bound * exact.abs() + 0.5 * 10f64.powi(-decimals)
    };
    let at_rank = |sorted: &[f64], q: f64| sorted[(q * (sorted.len() - 1) as f64).round() as usize];
    let cpu: Vec<f64> = (0..=100).map(f64::from).collect();
    let row = numbers_after(
        section(&html, "system-usage"),
        "<td>algo-1</td><td>cpu: total CPUUtilization</td><td>%</td>",
    );
    // max, p99, p95, p50, min, samples
    assert_eq!((row[0], row[4], row[5]), (100.0, 0.0, 101.0), "{row:?}");
    for (shown, q) in [(row[1], 0.99), (row[2], 0.95), (row[3], 0.5)] {
        assert!(close(shown, at_rank(&cpu, q), 2), "p{q}: {shown} {row:?}");
    }

    // Steps: durations 1..=n ms. No StepOutlier result was given, so no outlier column: the
    // page judges no step itself.
    let n = 100.0_f64;
    let mean = (n + 1.0) / 2.0;
    let std = ((n * n - 1.0) / 12.0).sqrt();
    let steps: Vec<f64> = (1..=100).map(f64::from).collect();
    let row = numbers_after(
        section(&html, "step-durations"),
        "<td>algo-1 worker 0</td><td>TRAIN</td>",
    );
    // steps, mean, std, min, p50, p95, p99, max
    assert_eq!(row[0], 100.0, "{row:?}");
    let exact = [(row[1], mean), (row[2], std), (row[3], 1.0), (row[7], n)];
    for (shown, want) in exact {
        assert!((shown - want).abs() <= 0.0005, "{shown} vs {want}: {row:?}");
    }
    for (shown, q) in [(row[4], 0.5), (row[5], 0.95), (row[6], 0.99)] {
        assert!(close(shown, at_rank(&steps, q), 3), "p{q}: {shown} {row:?}");
    }
    assert!(section(&html, "step-durations").contains("within 0.99%"));
}

/// The numbers of the `<td class="num">` cells that follow `start` in its table row.
fn numbers_after(html: &str, start: &str) -> Vec<f64> {
    let at = html
        .find(start)
        .unwrap_or_else(|| panic!("no row {start} in {html}"));
    let row = &html[at + start.len()..];
    let row = &row[..row.find("</tr>").unwrap()];
    row.split("<td class=\"num\">")
        .skip(1)
        .map(|c| c[..c.find("</td>").unwrap()].parse().unwrap())
        .collect()
}

#[test]
fn kineto_traces_feed_the_operator_sections_and_a_missing_one_is_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let rank0 = shared_trace("trace_filter__sampled_rank-0.json.gz");
    let cpu_only = shared_trace("cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz");
    let missing = dir.path().join("rank-9.json.gz");
    let options = LoadOptions {
        traces: vec![cpu_only.clone(), missing, rank0.clone()],
        ..LoadOptions::default()
    };
    let input = ReportInput::load(dir.path(), &options);
    let ranks: Vec<u32> = input.traces.iter().map(|r| r.rank).collect();
    assert_eq!(ranks, [0, 34]);
    assert!(
        input
            .notes
            .iter()
            .any(|n| n.area == NoteArea::Traces && n.message.contains("rank-9.json.gz"))
    );
    let html = render_html(&input);
    let top = section(&html, "top-operators");
    let expected = summarize_trace(&rank0).unwrap();
    let kernel: String = expected.gpu_kernels[0].name.chars().take(60).collect();
    let kernel = kernel
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    assert!(top.contains(&kernel), "top kernel {kernel} not shown");
    let cpu_op = &summarize_trace(&cpu_only).unwrap().cpu_operators[0];
    assert!(top.contains(&format!("{:.3}", cpu_op.total_us / 1000.0)));
    assert!(top.contains("no GPU kernels"));
    let framework = section(&html, "framework-metrics");
    assert!(framework.contains(&format!(
        "<td class=\"num\">{:.3}</td>",
        expected.cpu_operator_total_us / 1000.0
    )));
    assert!(framework.contains("<figure"));
}

fn python_interpreter() -> String {
    std::env::var("SMDEBUG_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

#[test]
fn a_run_written_by_python_smdebug_timeline_writer_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../smdebug-profiler/tests/interop_python/smdebug_readers.py"
    );
    let python = python_interpreter();
    let output = Command::new(&python)
        .arg(script)
        .arg("write")
        .arg(dir.path())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{python}` (set SMDEBUG_PYTHON): {e}"));
    assert!(
        output.status.success(),
        "Python smdebug's TimelineFileWriter failed with `{python}` (set SMDEBUG_PYTHON to an \
         interpreter with smdebug 1.0.34): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let written: Value =
        serde_json::from_str(stdout.lines().rev().find(|l| !l.trim().is_empty()).unwrap()).unwrap();
    let steps = written
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e[0] == "Step:ModeKeys.TRAIN")
        .count();
    assert_eq!(steps, 4);

    let input = ReportInput::load(dir.path(), &LoadOptions::default());
    assert_eq!(input.span_count(), 8);
    let html = render_html(&input);
    let steps_section = section(&html, "step-durations");
    // Python wrote four 8 ms TRAIN steps (its writer rounds to whole microseconds).
    assert!(
        steps_section.contains("<td>TRAIN</td><td class=\"num\">4</td>"),
        "{steps_section}"
    );
    assert!(
        steps_section.contains("<td class=\"num\">8.000</td>"),
        "{steps_section}"
    );
    let framework = section(&html, "framework-metrics");
    assert!(
        framework.contains("<td>Forward</td><td class=\"num\">4</td>"),
        "{framework}"
    );
    assert!(section(&html, "system-usage").contains("class=\"missing\""));
}

#[test]
fn rule_results_are_written_beside_the_page_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let rule = |name: &str, status: Status| RuleStatus {
        rule: name.into(),
        kind: RuleInput::Profiler,
        status,
        parameters: Parameters::decode(name, json!({"threshold": 0.5})),
        actions: Vec::new(),
        first_fired_step: Some(3),
        last_fired_step: Some(3),
        first_fired_mode: Some(smdebug_core::Mode::Eval),
        last_fired_mode: Some(smdebug_core::Mode::Eval),
        first_fired_time_us: Some(4),
        last_fired_time_us: Some(4),
        fired_count: 1,
        steps_evaluated: 1,
        datapoints: 2,
        steps_judged: 1,
        steps_in_scope: 1,
        message: "m".into(),
        evidence: Vec::new(),
        action_errors: Vec::new(),
        details: RuleDetails::decode(name, json!({"gpus": [0, 1]})),
        window: None,
        warnings: Vec::new(),
        unreadable_records: 0,
    };
    let rules = vec![
        rule("LoadBalancing", Status::IssuesFound),
        rule("my rule/../x", Status::NoIssuesFound),
        rule("LoadBalancing", Status::Error),
    ];
    let input = ReportInput::default().with_rules(rules.clone());
    let out = dir.path().join("out");
    let html_path = out.join("report.html");
    let first = write_report_to(&input, &html_path).unwrap();
    // The page alone: a file named by the caller is the only thing written.
    assert!(first.rule_files.is_empty());
    let rule_files = write_rule_files_to(&input, &out).unwrap();
    let names: Vec<String> = rule_files
        .iter()
        .map(|p| {
            Path::new(p)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        names,
        [
            "LoadBalancing.json",
            "my_rule____x.json",
            "LoadBalancing-2.json"
        ]
    );
    for (path, rule) in rule_files.iter().zip(&rules) {
        let back: RuleFile = serde_json::from_slice(&fs::read(path).unwrap()).unwrap();
        assert_eq!(back, RuleFile::of(rule));
        assert_eq!(back.first_fired_mode, Some(smdebug_core::Mode::Eval));
    }
    // Regenerating (as `--follow` does) replaces the files and leaves no temporary behind.
    write_report_to(&input, &html_path).unwrap();
    write_rule_files_to(&input, &out).unwrap();
    let mut listed: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            "LoadBalancing-2.json",
            "LoadBalancing.json",
            "my_rule____x.json",
            "report.html"
        ]
    );
    let html = fs::read_to_string(&html_path).unwrap();
    let summary = section(&html, "rules-summary");
    assert_eq!(summary.matches("<td>LoadBalancing</td>").count(), 2);
    assert!(summary.contains("<span class=\"field\">threshold</span> 0.5"));
    // The load-balancing section shows the first matching verdict.
    assert!(section(&html, "load-balancing").contains("verdict IssuesFound"));
}

#[test]
fn the_tensor_budget_is_the_callers_and_a_value_over_it_is_a_note() {
    use smdebug_core::Mode;
    use smdebug_io::crafted::{scalar, write_step};
    let dir = tempfile::tempdir().unwrap();
    for step in 0..5u64 {
        write_step(
            dir.path(),
            step,
            "worker_0",
            Mode::Train,
            step,
            &[scalar("loss", 1.0 / (step + 1) as f32)],
        );
    }
    let location = dir.path().to_str().unwrap();
    let drawn = ReportInput::load(location, &LoadOptions::default());
    let loss = drawn
        .scalars
        .iter()
        .find(|s| s.name == "loss")
        .expect("loss drawn");
    assert_eq!(loss.modes[0].1.len(), 5);
    // A budget smaller than one float32 and its f64: no value is decoded, and the report says
    // why the curves are missing.
    let tight = ReportInput::load(
        location,
        &LoadOptions {
            max_tensor_bytes: 4,
            ..LoadOptions::default()
        },
    );
    assert!(tight.scalars.is_empty());
    let note = tight
        .notes
        .iter()
        .find(|n| n.message.contains("budget of 4 bytes"))
        .unwrap_or_else(|| panic!("no note names the budget: {:?}", tight.notes));
    assert!(note.message.contains("no scalar"), "{}", note.message);
}
