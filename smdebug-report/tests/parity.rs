//! What SageMaker's report has and ours must too: the notice that the findings are
//! informational, the forward-vs-backward pie, GPU memory per GPU as boxes (and "No GPU" said
//! when there is none), the pin-memory finding where the data loader records it, SageMaker's
//! folder layout, and the notebook (with the rules' summary it reads) beside the page. Runs
//! written by smdebug-profiler's real span writer and crafted system samples; the rules are
//! the real runner's. Expected figures are worked out from the crafted data.

mod support;

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use smdebug_core::Mode;
use smdebug_profiler::spans::{Phase, SpanConfig, SpanRecorder};
use smdebug_profiler::system::NodeId;
use smdebug_report::{NOTEBOOK_FILE, ReportWriter};
use smdebug_rules::profiler::Details;
use smdebug_rules::report::REPORT_FILE;
use smdebug_rules::{RuleRunner, RuleSpec, Summary};
use support::write_system_file;

const NODE: &str = "algo-1";
/// System samples, one every 100 ms.
const SAMPLES: u64 = 30;
/// Steps, each with a 10 ms forward and a 30 ms backward span.
const STEPS: u64 = 10;

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// CPU samples, and with `gpus` two GPUs: gpu0's memory at 10 %, 11 %, … 39 % (one value per
/// sample), gpu1's at 50 % throughout. Steps with forward and backward spans, and data-loading
/// spans whose loader says `pin_memory: false`.
fn record(run: &Path, gpus: bool) {
    let start = now_s() - 120;
    let samples = (0..SAMPLES).map(|i| {
        let t = start as f64 + i as f64 * 0.1;
        let mut metrics = vec![
            ("cpu", "total", "CPUUtilization", 40.0),
            ("cpu", "cpu0", "CPUUtilization", 40.0),
        ];
        if gpus {
            metrics.extend([
                ("gpu", "gpu0", "GPUUtilization", 70.0),
                ("gpu", "gpu0", "GPUMemoryUtilization", 10.0 + i as f64),
                ("gpu", "gpu1", "GPUUtilization", 70.0),
                ("gpu", "gpu1", "GPUMemoryUtilization", 50.0),
            ]);
        }
        (t, metrics)
    });
    write_system_file(run, start, NODE, samples);
    let config = SpanConfig::default().node(NodeId::new(NODE).unwrap());
    let (spans, guard) = SpanRecorder::start_local(config, run).unwrap();
    for step in 0..STEPS {
        let at = UNIX_EPOCH + Duration::from_secs(start) + Duration::from_millis(step * 100);
        let step_of = Some((Mode::Train, step));
        spans.record(
            Phase::Step(Mode::Train),
            None,
            at,
            Duration::from_millis(60),
            step_of,
        );
        spans.record(Phase::Forward, None, at, Duration::from_millis(10), step_of);
        let backward_at = at + Duration::from_millis(10);
        spans.record(
            Phase::Backward,
            None,
            backward_at,
            Duration::from_millis(30),
            step_of,
        );
        // A data-loading span of the loop's own loader, which does not pin its batches.
        spans
            .data_loading()
            .arg("pin_memory", serde_json::json!(false))
            .end();
    }
    guard.finish().unwrap();
}

fn section<'h>(html: &'h str, id: &str) -> &'h str {
    let start = html.find(&format!("<section id=\"{id}\"")).unwrap();
    let end = start + html[start..].find("</section>").unwrap();
    &html[start..end]
}

/// The rows of the table of class `class` in `html`, as cell texts.
fn rows(html: &str, class: &str) -> Vec<Vec<String>> {
    let start = html
        .find(&format!("<table class=\"{class}\">"))
        .unwrap_or_else(|| panic!("no table {class}"));
    let table = &html[start..start + html[start..].find("</table>").unwrap()];
    let body = &table[table.find("<tbody>").unwrap()..];
    body.split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let text = &cell[cell.find('>').unwrap() + 1..];
                    text[..text.find("</td>").unwrap()].to_owned()
                })
                .collect()
        })
        .collect()
}

/// The report of a crafted run, written by the runner in SageMaker's layout inside the run;
/// returns the folder it went to, the page and the summary.
fn report(gpus: bool) -> (tempfile::TempDir, std::path::PathBuf, String, Summary) {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    record(&run, gpus);
    let before = now_s();
    let summary = RuleRunner::builder(&run)
        .spec(RuleSpec::parse("ProfilerReport").unwrap())
        .reporter(ReportWriter::sagemaker_layout())
        .write_into_run(true)
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let after = now_s();
    // rule-output/ProfilerReport-<seconds>/profiler-output/, the seconds those of the writer's
    // making.
    let outputs: Vec<_> = std::fs::read_dir(run.join("rule-output"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    let seconds: u64 = outputs[0]
        .strip_prefix("ProfilerReport-")
        .unwrap()
        .parse()
        .unwrap();
    assert!((before..=after).contains(&seconds), "{seconds}");
    let folder = run
        .join("rule-output")
        .join(&outputs[0])
        .join("profiler-output");
    let html = std::fs::read_to_string(folder.join(REPORT_FILE)).unwrap();
    (dir, folder, html, summary)
}

#[test]
fn the_page_says_its_findings_are_informational_and_pies_forward_against_backward() {
    let (_dir, _, html, _) = report(false);
    let notice = &html[..html.find("<main>").unwrap()];
    assert!(
        notice.contains("The findings are informational."),
        "{notice}"
    );
    let framework = section(&html, "framework-metrics");
    let pie = framework
        .split("<figure")
        .find(|f| f.contains("Forward vs backward"))
        .expect("the forward-vs-backward pie");
    // 10 forward spans of 10 ms against 10 backward spans of 30 ms.
    assert!(
        pie.contains("Forward: 25.0%") && pie.contains("Backward: 75.0%"),
        "{pie}"
    );
}

#[test]
fn gpu_memory_is_boxed_per_gpu_and_a_job_without_gpu_says_so() {
    let (_dir, _, html, _) = report(true);
    let memory = section(&html, "gpu-memory");
    assert!(memory.contains("GPU memory per GPU: algo-1"));
    let spread = rows(memory, "gpu-memory-spread");
    assert_eq!(spread.len(), 2, "{spread:?}");
    let num = |s: &str| s.parse::<f64>().unwrap();
    // gpu0: 10, 11, … 39 %; percentile pN at rank round(N% · 29), within 1 %.
    let gpu0 = &spread[0];
    assert_eq!((gpu0[0].as_str(), gpu0[1].as_str()), ("algo-1", "gpu0"));
    assert_eq!(
        (num(&gpu0[2]), num(&gpu0[8]), num(&gpu0[9])),
        (10.0, 39.0, 30.0)
    );
    for (cell, q) in [(3, 0.05), (4, 0.25), (5, 0.5), (6, 0.75), (7, 0.95)] {
        let exact = 10.0 + (q * 29.0_f64).round();
        assert!(
            (num(&gpu0[cell]) - exact).abs() <= exact * 0.01 + 0.05,
            "{gpu0:?}"
        );
    }
    // gpu1: 50 % throughout.
    assert_eq!(spread[1][1], "gpu1");
    assert!(
        spread[1][2..9].iter().all(|v| num(v) == 50.0),
        "{:?}",
        spread[1]
    );

    let (_dir, _, html, _) = report(false);
    let memory = section(&html, "gpu-memory");
    assert!(memory.contains("No GPU:"), "{memory}");
    assert!(!memory.contains("<figure") && !memory.contains("gpu-memory-spread"));
}

#[test]
fn a_loader_that_does_not_pin_memory_is_a_finding_of_the_dataloader_rule() {
    let (_dir, _, html, summary) = report(false);
    let status = summary.rule("Dataloader").unwrap();
    let Ok(Some(Details::Dataloader(details))) = status.profiler_details() else {
        panic!("{:?}", status.details)
    };
    assert_eq!(details.nodes[NODE].pin_memory, Some(false));
    let loading = section(&html, "data-loading");
    assert!(
        loading.contains("does not pin its batches (pin_memory is off). No GPU was recorded"),
        "{loading}"
    );
    assert_eq!(rows(loading, "data-loading")[0][10], "no");
    // With GPUs, the finding says what to change.
    let (_dir, _, html, _) = report(true);
    assert!(section(&html, "data-loading").contains("turn pin_memory on in the data loader"));
}

#[test]
fn the_notebook_and_the_rules_summary_it_reads_are_beside_the_page() {
    let (dir, folder, _, summary) = report(true);
    let written: Summary =
        serde_json::from_slice(&std::fs::read(folder.join("profiler-report.rules.json")).unwrap())
            .unwrap();
    let names = |s: &Summary| s.rules.iter().map(|r| r.rule.clone()).collect::<Vec<_>>();
    assert_eq!(names(&written), names(&summary));
    assert_eq!(
        written.rule("GPUMemoryIncrease").unwrap().details,
        summary.rule("GPUMemoryIncrease").unwrap().details
    );
    let notebook: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join(NOTEBOOK_FILE)).unwrap()).unwrap();
    assert_eq!(notebook["nbformat"], 4);
    let parameters: String = notebook["cells"][1]["source"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    // The notebook names the run and the summary by absolute paths, so it runs from anywhere.
    let run = std::path::absolute(dir.path().join("run")).unwrap();
    let summary_file = std::path::absolute(folder.join("profiler-report.rules.json")).unwrap();
    assert!(
        parameters.contains(&format!("RUN = {:?}", run.display().to_string())),
        "{parameters}"
    );
    assert!(
        parameters.contains(&format!(
            "RULE_SUMMARY = {:?}",
            summary_file.display().to_string()
        )),
        "{parameters}"
    );
}

#[test]
fn a_report_to_a_file_has_its_notebook_beside_it_named_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    record(&run, false);
    let page = dir.path().join("out").join("mine.html");
    RuleRunner::builder(&run)
        .spec(RuleSpec::parse("ProfilerReport").unwrap())
        .reporter(ReportWriter::to_file(&page))
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let out = dir.path().join("out");
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    // Named after the page: nothing else of the folder's is touched.
    assert_eq!(files, ["mine.html", "mine.ipynb", "mine.rules.json"]);
}
