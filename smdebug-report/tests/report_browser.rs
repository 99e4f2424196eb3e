//! The profiling report opened in a real browser (Debian's chromium, headless): every section
//! renders in order, every chart draws, the page's self-check records no script error and no
//! Content-Security-Policy violation, and nothing outside the file is referenced.
//!
//! Needs `/usr/bin/chromium` (`apt-get install -y chromium`); set `SMDEBUG_SKIP_BROWSER=1` to
//! skip the browser part on a machine without it. A screenshot and a copy of the page are left
//! under cargo's target directory (`target/tmp/report_browser/`), never in the repository.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use smdebug_core::Mode;
use smdebug_format::system::system_file_key;
use smdebug_profiler::code::{CodeProfileConfig, CodeProfiler};
use smdebug_profiler::spans::{SpanConfig, SpanRecorder};
use smdebug_profiler::system::{NodeId, SamplerConfig, SystemSampler};
use smdebug_report::{
    LoadOptions, ReportInput, RuleFile, SECTIONS, write_report_to, write_rule_files_to,
};
use smdebug_rules::{Parameters, RuleDetails, RuleInput, RuleStatus, Status};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;
use smdebug_testkit::chromium;
use smdebug_testkit::runs::every_step_hook;
use support::section;

fn shared_trace(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../smdebug-read/tests/data/pytorch-profiler-traces")
        .join(name)
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Some CPU work so the sampler sees a busy core.
fn spin(duration: Duration) -> u64 {
    let end = Instant::now() + duration;
    let mut x = 1u64;
    while Instant::now() < end {
        for i in 0..10_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
    }
    x
}

/// A real run: the system sampler at 100 ms, spans of a small training loop with scalars saved
/// through the hook, a code-profile window over steps 10–29, then synthetic GPU records (two
/// GPUs) in the sampler's own format.
fn record_run(run: &Path) {
    let sampler = SystemSampler::start_local(
        SamplerConfig::default()
            .interval(Duration::from_millis(100))
            .node(NodeId::algo(1))
            .gpu(false),
        run,
    )
    .unwrap();
    let (spans, span_writer) =
        SpanRecorder::start_local(SpanConfig::default().node(NodeId::algo(1)).worker(0), run)
            .unwrap();
    let code = CodeProfiler::start(
        CodeProfileConfig::default().node(NodeId::algo(1)),
        std::sync::Arc::new(LocalStorage::new(run).unwrap()),
    )
    .unwrap();
    let mut hook = every_step_hook(run);
    let start = now_s();
    // workload: the run's initialization, a stage the report shows.
    thread::sleep(Duration::from_millis(250));
    let mut sink = 0u64;
    for step in 0..40u64 {
        hook.set_mode(Mode::Train);
        if step == 10 {
            code.begin(Some((Mode::Train, step))).unwrap();
        }
        if step == 30 {
            code.end(Some((Mode::Train, step - 1))).unwrap();
        }
        {
            let _step = spans.step(Mode::Train, step);
            {
                let _load = spans.data_loading();
                // workload: waiting for a batch, slow every 13th step.
                thread::sleep(Duration::from_millis(if step % 13 == 12 { 40 } else { 5 }));
            }
            {
                let _forward = spans.forward();
                sink ^= spin(Duration::from_millis(10));
            }
            {
                let _backward = spans.backward();
                sink ^= spin(Duration::from_millis(18));
            }
            let _optimizer = spans.optimizer();
            sink ^= spin(Duration::from_millis(3));
        }
        hook.save_scalar("loss", 2.0 / (step + 1) as f64, &["losses"]);
        hook.save_scalar("accuracy", step as f64 / 40.0, &["metrics"]);
        hook.step();
        if step % 10 == 9 {
            hook.set_mode(Mode::Eval);
            {
                let _eval = spans.step(Mode::Eval, step / 10);
                sink ^= spin(Duration::from_millis(15));
            }
            hook.save_scalar("loss", 2.5 / (step + 1) as f64, &["losses"]);
            hook.step();
        }
    }
    {
        let _custom = spans.custom("<checkpoint & \"save\">");
        // workload: the custom span's length.
        thread::sleep(Duration::from_millis(30));
    }
    assert_ne!(sink, 42);
    assert_eq!(code.finish().unwrap().written, 1);
    hook.close();
    let report = span_writer.finish().unwrap();
    assert_eq!(report.dropped, 0);
    // workload: the run's finalization, a stage the report shows.
    thread::sleep(Duration::from_millis(200));
    let end = now_s();
    sampler.stop().unwrap();

    // Two synthetic GPUs at 100 ms: gpu0 busy, gpu1 mostly idle with memory creeping up.
    let mut lines = String::new();
    let samples = ((end - start) * 10.0) as usize;
    for i in 0..samples {
        let t = start + i as f64 * 0.1;
        let records = [
            ("gpu0", "GPUUtilization", 80.0 + (i % 7) as f64 * 2.5),
            ("gpu0", "GPUMemoryUtilization", 40.0),
            (
                "gpu1",
                "GPUUtilization",
                if i % 5 == 0 { 60.0 } else { 3.0 },
            ),
            ("gpu1", "GPUMemoryUtilization", 10.0 + i as f64 * 0.5),
        ];
        for (name, dimension, value) in records {
            lines.push_str(
                &json!({"Type": "gpu", "Name": name, "Dimension": dimension, "Value": value,
                        "NodeId": "algo-1", "Timestamp": t})
                .to_string(),
            );
            lines.push('\n');
        }
    }
    let store = LocalStorage::new(run).unwrap();
    let taken = store.list("system").unwrap();
    let mut window = start as u64 - 1;
    while taken.contains(&system_file_key(window, "algo-1")) {
        window -= 1;
    }
    store
        .put(
            &system_file_key(window, "algo-1"),
            lines.into_bytes().into(),
        )
        .unwrap();
}

fn status(name: &str, kind: RuleInput, status: Status, message: &str) -> RuleStatus {
    let fired = status == Status::IssuesFound;
    RuleStatus {
        rule: name.into(),
        kind,
        status,
        parameters: Parameters::decode(name, smdebug_rules::find_builtin(name).unwrap().defaults),
        actions: Vec::new(),
        first_fired_step: fired.then_some(7),
        last_fired_step: fired.then_some(9),
        first_fired_mode: (fired && kind == RuleInput::Profiler)
            .then_some(smdebug_core::Mode::Train),
        last_fired_mode: (fired && kind == RuleInput::Profiler)
            .then_some(smdebug_core::Mode::Train),
        first_fired_time_us: None,
        last_fired_time_us: None,
        fired_count: u64::from(fired) * 3,
        steps_evaluated: 10,
        datapoints: 120,
        steps_judged: 10,
        steps_in_scope: 10,
        message: message.into(),
        evidence: Vec::new(),
        action_errors: Vec::new(),
        details: RuleDetails::None,
        window: None,
        warnings: Vec::new(),
        unreadable_records: 0,
    }
}

fn rules() -> Vec<RuleStatus> {
    vec![
        status(
            "CPUBottleneck",
            RuleInput::Profiler,
            Status::IssuesFound,
            "GPU idle while CPU busy <script>alert(1)</script>",
        ),
        status(
            "LoadBalancing",
            RuleInput::Profiler,
            Status::NoIssuesFound,
            "",
        ),
        status(
            "StepOutlier",
            RuleInput::Profiler,
            Status::InProgress,
            "still reading",
        ),
        status(
            "LossNotDecreasing",
            RuleInput::Tensors,
            Status::NoIssuesFound,
            "loss decreased",
        ),
    ]
}

/// The value of `data-selfcheck` on `<body>` in a dumped DOM, decoded.
fn selfcheck(dom: &str) -> Value {
    let start = dom.find("data-selfcheck=\"").unwrap_or_else(|| {
        panic!(
            "no self-check in the dumped DOM:\n{}",
            &dom[..dom.len().min(2000)]
        )
    }) + "data-selfcheck=\"".len();
    let end = start + dom[start..].find('"').unwrap();
    let raw = dom[start..end]
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    serde_json::from_str(&raw).unwrap_or_else(|e| panic!("bad self-check JSON {raw}: {e}"))
}

/// Every URL-ish thing in the page: only the SVG and XHTML namespaces may appear.
fn assert_references_nothing_outside(html: &str) {
    let allowed = ["http://www.w3.org/2000/svg", "http://www.w3.org/1999/xhtml"];
    for scheme in ["http://", "https://"] {
        for (at, _) in html.match_indices(scheme) {
            let rest = &html[at..];
            assert!(
                allowed.iter().any(|a| rest.starts_with(a)),
                "external URL in the page: {}",
                &rest[..rest.len().min(80)]
            );
        }
    }
    let lower = html.to_ascii_lowercase();
    // Images only from data: URIs (the code profile's flame graph).
    for (at, _) in lower.match_indices(" src=") {
        assert!(
            lower[at..].starts_with(" src=\"data:image/svg+xml;base64,"),
            "an image from elsewhere: {}",
            &html[at..(at + 80).min(html.len())]
        );
    }
    for forbidden in [
        "<link",
        "<iframe",
        "<object",
        "<embed",
        "url(",
        "@import",
        "fetch(",
        "xmlhttprequest",
        "websocket",
    ] {
        assert!(
            !lower.contains(forbidden),
            "the page contains `{forbidden}`"
        );
    }
    assert!(lower.contains("default-src 'none'"));
}

#[test]
fn report_renders_every_section_and_chart_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    record_run(&run);
    let options = LoadOptions {
        traces: vec![
            shared_trace("trace_filter__sampled_rank-0.json.gz"),
            shared_trace("cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"),
        ],
        ..LoadOptions::default()
    };
    let input = ReportInput::load(&run, &options).with_rules(rules());
    // The pieces all arrived: no note other than the missing end marker (the hook wrote one).
    assert!(input.notes.is_empty(), "{:#?}", input.notes);
    assert_eq!(input.run_complete, Some(true));
    assert_eq!(input.traces.len(), 2);
    let names: Vec<&str> = input.scalars.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["accuracy", "loss"]);
    let loss = &input.scalars[1];
    let modes: Vec<Mode> = loss.modes.iter().map(|m| m.0).collect();
    assert_eq!(modes, [Mode::Train, Mode::Eval]);
    assert_eq!((loss.modes[0].1.len(), loss.modes[1].1.len()), (40, 4));

    let html_path = dir.path().join("out/profiler-report.html");
    write_report_to(&input, &html_path).unwrap();
    let rule_files = write_rule_files_to(&input, html_path.parent().unwrap()).unwrap();
    assert_eq!(rule_files.len(), 4);
    for (file, rule) in rule_files.iter().zip(rules()) {
        assert_eq!(Path::new(file).parent(), html_path.parent());
        let back: RuleFile = serde_json::from_slice(&fs::read(file).unwrap()).unwrap();
        assert_eq!(back, RuleFile::of(&rule));
    }
    let html = fs::read_to_string(&html_path).unwrap();
    assert_references_nothing_outside(&html);
    assert!(!html.contains("<script>alert(1)"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&lt;checkpoint &amp; &quot;save&quot;&gt;"));
    // The code profile's window: the busy function leads its tables, its flame graph is an image.
    assert_eq!(input.code_profiles.len(), 1);
    let code = section(&html, "code-profile");
    assert!(code.contains("Window 1 of 1: TRAIN steps 10–29"), "{code}");
    // (The leaves of a debug build are the iterator's inlined functions; `spin` is their caller.
    // With line tables only, as the workspace's dev profile builds, names carry no module path.)
    let total_table = &code[code.find("code-top-total").unwrap()..];
    let total_table = &total_table[..total_table.find("</table>").unwrap()];
    // `spin`, or `record_run` that calls it: with a few dozen samples, frames of the test
    // harness that tie with them can fill the table's rows before `spin`.
    assert!(
        total_table.contains("report_browser::spin")
            || total_table.contains(">spin<")
            || total_table.contains("record_run"),
        "{code}"
    );
    assert!(code.contains("<img alt=\"Flame graph of window 1\" src=\"data:image/svg+xml;base64,"));
    // Sections in order in the source.
    let mut at = 0;
    for (id, _) in SECTIONS {
        let found = html[at..]
            .find(&format!("<section id=\"{id}\" class=\"report-section\""))
            .unwrap_or_else(|| panic!("section {id} missing or out of order"));
        at += found;
    }

    // Keep a copy and a screenshot under target/ for a human to look at.
    let artifacts = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report_browser");
    fs::create_dir_all(&artifacts).unwrap();
    fs::copy(&html_path, artifacts.join("profiler-report.html")).unwrap();

    let Some(browser) = chromium::binary() else {
        return;
    };
    let url = format!("file://{}", html_path.display());
    let (dom, stderr) = chromium::run_headless(
        &browser,
        &dir.path().join("profile-dom"),
        &["--dump-dom".into(), url.clone()],
    );
    let check = selfcheck(&dom);
    let ids: Vec<&str> = check["section_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let expected: Vec<&str> = SECTIONS.iter().map(|s| s.0).collect();
    assert_eq!(ids, expected, "{check}");
    assert_eq!(check["errors"], json!([]), "{check}");
    assert_eq!(check["csp_violations"], json!([]), "{check}");
    assert_eq!(check["empty_charts"], json!([]), "{check}");
    assert_eq!(check["flamegraphs"], 1, "{check}");
    assert_eq!(check["flamegraphs_loaded"], 1, "{check}");
    let charts = check["charts"].as_u64().unwrap();
    assert_eq!(check["charts_drawn"].as_u64().unwrap(), charts, "{check}");
    // Utilization, memory, disk/network, per-core boxes, donuts, step histogram and timeline,
    // GPU boxes and workload, bottleneck donuts, load balance, GPU memory, data loading, Kineto
    // bars, two scalars.
    assert!(charts >= 20, "only {charts} charts: {check}");
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "browser console output: {console:#?}");
    assert!(
        !stderr.contains("Refused to") && !stderr.contains("Uncaught"),
        "{stderr}"
    );

    let shot = artifacts.join("profiler-report.png");
    let _ = fs::remove_file(&shot);
    chromium::run_headless(
        &browser,
        &dir.path().join("profile-shot"),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1400,6000".into(),
            url,
        ],
    );
    let png = fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "{} bytes",
        png.len()
    );
}
