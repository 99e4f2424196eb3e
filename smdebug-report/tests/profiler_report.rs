//! ProfilerReport through the runner with a ReportWriter attached: it runs every profiler rule,
//! takes their `<Rule>_<param>` overrides, and the report is drawn from the runner's state with
//! every rule's result — on local disk inside the run or at a chosen path, and into the store
//! itself for object-store runs.

use std::time::Duration;

use smdebug_core::{Hook, Mode, SaveConfig, TensorView};
use smdebug_io::writer::Writer;
use smdebug_profiler::spans::{SpanConfig, SpanRecorder};
use smdebug_profiler::system::{SamplerConfig, SystemSampler};
use smdebug_report::ReportWriter;
use smdebug_rules::report::{DEFAULT_REPORT_DIR, REPORT_FILE};
use smdebug_rules::{RuleInput, RuleRunner, RuleSpec, Status};

/// A short real run at `location`: 30 steps with a NaN gradient from step 20, the sampler at
/// 100 ms and step spans.
fn record(location: &str) {
    let store = smdebug_storage::open_storage(location).unwrap();
    let sampler = SystemSampler::start(
        SamplerConfig::default().interval(Duration::from_millis(100)),
        store.clone(),
    )
    .unwrap();
    let (spans, guard) = SpanRecorder::start(SpanConfig::default(), store).unwrap();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(Writer::open(location).unwrap())
        .unwrap();
    hook.set_mode(Mode::Train);
    for step in 0..30u64 {
        let _s = spans.step(Mode::Train, step);
        let mut g = vec![0.5f32; 16];
        if step >= 20 {
            g[0] = f32::NAN;
        }
        hook.save_tensor(
            "gradient/fc.weight",
            &TensorView::from_slice(&g, &[4, 4]).unwrap(),
            &["gradients"],
        );
        hook.save_scalar("loss", 1.0 / (step as f64 + 1.0), &["losses"]);
        hook.step();
        // workload: a training step's time.
        std::thread::sleep(Duration::from_millis(15));
    }
    drop(guard);
    sampler.stop().unwrap();
    hook.close();
}

#[test]
fn profiler_report_runs_every_profiler_rule_and_writes_the_report_into_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let location = run.to_str().unwrap().to_string();
    record(&location);
    let summary = RuleRunner::builder(&location)
        .spec(RuleSpec::parse("ExplodingTensor").unwrap())
        .spec(
            RuleSpec::parse("ProfilerReport:StepOutlier_n_outliers=0,StepOutlier_stddev=0.5")
                .unwrap(),
        )
        .reporter(ReportWriter::into_run())
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    // ExplodingTensor, ProfilerReport and the eleven profiler rules.
    assert_eq!(summary.rules.len(), 13);
    let outlier = summary.rule("StepOutlier").unwrap();
    let params = outlier
        .params::<smdebug_rules::profiler::StepOutlierParams>()
        .unwrap();
    assert_eq!((params.n_outliers, params.stddev), (0, 0.5));
    // ProfilerReport's status is its rules': IssuesFound when one of them found issues.
    let report = summary.rule("ProfilerReport").unwrap();
    let fired: Vec<&str> = summary
        .rules
        .iter()
        .filter(|r| r.kind == RuleInput::Profiler && r.rule != "ProfilerReport")
        .filter(|r| r.status == Status::IssuesFound)
        .map(|r| r.rule.as_str())
        .collect();
    if fired.is_empty() {
        assert_eq!(report.status, Status::NoIssuesFound, "{}", report.message);
    } else {
        assert_eq!(report.status, Status::IssuesFound, "{}", report.message);
        assert!(
            report
                .message
                .contains(&format!("found issues ({})", fired.join(", "))),
            "{}",
            report.message
        );
    }
    let page = run.join(DEFAULT_REPORT_DIR).join(REPORT_FILE);
    assert!(report.message.contains(&page.display().to_string()));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("ExplodingTensor"));
    // The rules that had nothing to check (Dataloader: no data-loading spans were recorded) are
    // in the page as NoData, with their reasons.
    let dataloader = summary.rule("Dataloader").unwrap();
    assert_eq!(dataloader.status, Status::NoData, "{dataloader:#?}");
    for r in summary.no_data() {
        let reason: String = r.message.chars().take(30).collect();
        assert!(
            html.contains(&reason),
            "{}: `{reason}` not in the page",
            r.rule
        );
    }
    assert!(html.contains("<td class=\"status NoData\""));
    assert!(html.contains("div class=\"verdict NoData\""));
    let exploding: serde_json::Value = serde_json::from_slice(
        &std::fs::read(run.join(DEFAULT_REPORT_DIR).join("ExplodingTensor.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(exploding["status"], "IssuesFound");
    assert_eq!(exploding["first_fired_step"], 20);
    assert!(
        run.join(DEFAULT_REPORT_DIR)
            .join("StepOutlier.json")
            .exists()
    );
    // The debugging rules' table shows ExplodingTensor's evidence as readable lines, the
    // figures of its status, not its JSON.
    let debugging = &html[html.find("id=\"debugging-rules\"").unwrap()..];
    let debugging = &debugging[..debugging.find("</section>").unwrap()];
    let status = summary.rule("ExplodingTensor").unwrap();
    assert!(!status.evidence.is_empty());
    for e in &status.evidence {
        let line = format!(
            "<span class=\"field\">evidence</span> step {}: {} {} = {}",
            e.step, e.tensor, e.measure, e.value
        );
        assert!(debugging.contains(&line), "{line} not in {debugging}");
    }
    assert!(!debugging.contains("&quot;evidence&quot;"), "{debugging}");
}

#[test]
fn an_object_store_run_gets_its_report_inside_the_store() {
    let location = "memory://profiler-report-test/run";
    record(location);
    let summary = RuleRunner::builder(location)
        .spec(RuleSpec::parse("ProfilerReport").unwrap())
        .reporter(ReportWriter::into_run())
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let report = summary.rule("ProfilerReport").unwrap();
    assert_eq!(report.status, Status::NoIssuesFound, "{}", report.message);
    let store = smdebug_storage::open_storage(location).unwrap();
    let html = store
        .get(&format!("{DEFAULT_REPORT_DIR}/{REPORT_FILE}"))
        .unwrap();
    let html = String::from_utf8(html.to_vec()).unwrap();
    assert!(html.contains("id=\"system-usage\""));
    assert!(
        store
            .get(&format!("{DEFAULT_REPORT_DIR}/OverallSystemUsage.json"))
            .is_ok()
    );
}

#[test]
fn a_report_that_cannot_be_written_is_the_report_rules_error_not_the_runners() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    record(run.to_str().unwrap());
    // A regular file where the report's folder should be.
    let blocker = dir.path().join("blocked");
    std::fs::write(&blocker, b"not a folder").unwrap();
    let summary = RuleRunner::builder(&run)
        .spec(RuleSpec::parse("ProfilerReport").unwrap())
        .reporter(ReportWriter::to_file(blocker.join("report.html")))
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let report = summary.rule("ProfilerReport").unwrap();
    assert_eq!(report.status, Status::Error);
    assert!(
        report.message.contains("could not be written"),
        "{}",
        report.message
    );
    // The other rules finished normally.
    assert_eq!(
        summary.rule("OverallSystemUsage").unwrap().status,
        Status::NoIssuesFound
    );
}
