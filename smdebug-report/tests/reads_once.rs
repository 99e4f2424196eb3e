//! `smdebug report RUN` reads each file of the run's tensors once: the rules' trial and the
//! report's scalar curves read the run's collections, index and event files through one
//! `TensorSource` ([`smdebug_report::offline_runner`], what the command builds its runner
//! with), and the page's scalars are those a reader of their own gives.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use smdebug_testkit::pages::scalars_section;

use smdebug_core::{Mode, TensorView};
use smdebug_report::{LoadOptions, ReportInput, ReportWriter, offline_runner};
use smdebug_rules::report::default_specs;
use smdebug_rules::{RuleRunner, Status};
use smdebug_storage::testing::CountingStorage;
use smdebug_storage::{LocalStorage, Storage};

const STEPS: u64 = 300;

/// A finished run of `STEPS` steps, each with a loss (flat after step 200), an accuracy and a
/// small gradient (one infinity at step 250: ExplodingTensor fires).
fn record(run: &Path) {
    let mut hook = smdebug_testkit::runs::every_step_hook(run);
    hook.set_mode(Mode::Train);
    for step in 0..STEPS {
        let loss = 10.0 / (1.0 + step.min(200) as f64);
        hook.save_scalar("loss", loss, &["losses"]);
        hook.save_scalar("accuracy", step as f64 / 400.0, &["metrics"]);
        let mut g = vec![0.25f32 + step as f32 * 1e-3; 8];
        if step == 250 {
            g[3] = f32::INFINITY;
        }
        hook.save_tensor(
            "gradient/fc.weight",
            &TensorView::from_slice(&g, &[2, 4]).unwrap(),
            &["gradients"],
        );
        hook.step();
    }
    hook.close();
}

/// The kind of a file of the run, by its folder.
fn kind(path: &str) -> &str {
    path.split('/').next().unwrap_or(path)
}

#[test]
fn the_offline_report_reads_each_tensor_file_of_its_run_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    record(&run);
    let local: Arc<dyn Storage> = Arc::new(LocalStorage::new(&run).unwrap());
    let files: Vec<String> = ["collections", "index", "events"]
        .iter()
        .flat_map(|folder| local.list(folder).unwrap())
        .filter(|p| p.ends_with(".json") || p.ends_with(".tfevents"))
        .collect();
    // An index and an event file a step, and the collections file.
    assert_eq!(files.len() as u64, 2 * STEPS + 1, "{files:?}");

    // `smdebug report RUN --out page.html`, as the command builds its runner.
    let counting = Arc::new(CountingStorage::new(Arc::clone(&local)));
    let html = dir.path().join("page.html");
    let builder = default_specs(false, true).into_iter().fold(
        RuleRunner::builder(run.as_path()).write_into_run(false),
        |builder, spec| builder.spec(spec),
    );
    let summary = offline_runner(builder, ReportWriter::to_file(&html), counting.clone())
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let exploding = summary.rule("ExplodingTensor").unwrap();
    assert_eq!(exploding.status, Status::IssuesFound, "{exploding:?}");
    assert_eq!(exploding.first_fired_step, Some(250), "{exploding:?}");
    let loss = summary.rule("LossNotDecreasing").unwrap();
    assert_eq!(loss.status, Status::IssuesFound, "{loss:?}");

    // Every collections, index and event file was read, each once (the collections file once a
    // version: the hook writes it again when a tensor joins a collection).
    let reads: BTreeMap<String, u64> = counting
        .file_reads()
        .into_iter()
        .filter(|(path, _)| ["collections", "index", "events"].contains(&kind(path)))
        .map(|(path, r)| (path, r.reads))
        .collect();
    let not_once: Vec<(&String, Option<&u64>)> = files
        .iter()
        .map(|file| (file, reads.get(file)))
        .filter(|(_, n)| *n != Some(&1))
        .collect();
    assert!(
        not_once.is_empty(),
        "{} of {} files not read once (path, reads): {:?}",
        not_once.len(),
        files.len(),
        &not_once[..not_once.len().min(5)]
    );
    assert_eq!(reads.len(), files.len(), "{reads:?}");

    // The page's scalars are every point of the run's scalars, as a reader of their own reads
    // them (`ReportInput::load`).
    let page = std::fs::read_to_string(&html).unwrap();
    let alone = ReportInput::load(run.as_path(), &LoadOptions::default());
    assert_eq!(alone.scalars.len(), 2, "{:?}", alone.notes);
    for series in &alone.scalars {
        let points = &series.modes[0].1;
        assert_eq!(points.len() as u64, STEPS, "{}", series.name);
    }
    let drawn = smdebug_report::render_html(&alone);
    let section = scalars_section(&page);
    assert!(section.contains("<h3 class=\"scalar\">loss"), "{section}");
    assert_eq!(section, scalars_section(&drawn));
}

/// The report of `run` as `smdebug report RUN --rule <specs>` writes it (ProfilerReport added),
/// read through a counting storage: the page, and the reads of each tensor file.
fn report_with(run: &Path, specs: &[&str], html: &Path) -> (String, BTreeMap<String, u64>) {
    let local: Arc<dyn Storage> = Arc::new(LocalStorage::new(run).unwrap());
    let counting = Arc::new(CountingStorage::new(local));
    let builder = specs
        .iter()
        .chain(&["ProfilerReport"])
        .fold(RuleRunner::builder(run).write_into_run(false), |b, spec| {
            b.spec(smdebug_rules::RuleSpec::parse(spec).unwrap())
        });
    offline_runner(builder, ReportWriter::to_file(html), counting.clone())
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let reads = counting
        .file_reads()
        .into_iter()
        .filter(|(path, _)| ["collections", "index", "events"].contains(&kind(path)))
        .map(|(path, r)| (path, r.reads))
        .collect();
    (std::fs::read_to_string(html).unwrap(), reads)
}

#[test]
fn without_rules_of_the_tensors_the_curves_are_read_once_on_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    record(&run);
    // No rule reads tensors: the runner opens no trial and lets its subscription go; the
    // curves' follower, which would wait for it, reads the run alone.
    let (page, reads) = report_with(&run, &[], &dir.path().join("page.html"));
    assert_eq!(reads.len() as u64, 2 * STEPS + 1, "{reads:?}");
    assert!(reads.values().all(|&n| n == 1), "{reads:?}");
    let alone =
        smdebug_report::render_html(&ReportInput::load(run.as_path(), &LoadOptions::default()));
    assert_eq!(scalars_section(&page), scalars_section(&alone));
}

#[test]
fn the_curves_of_a_run_still_being_written_are_read_at_the_end_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    record(&run);
    std::fs::remove_file(run.join(smdebug_format::layout::END_MARKER)).unwrap();
    // What was read beside the rules may not be the run's whole: the curves are read again
    // once the rules are done, so that they hold every step written by then.
    let (page, reads) = report_with(&run, &["LossNotDecreasing"], &dir.path().join("page.html"));
    assert!(
        page.contains("no end marker"),
        "the page says the run goes on"
    );
    assert!(
        reads.values().all(|&n| n == 2),
        "read beside the rules and at the end: {reads:?}"
    );
    let alone =
        smdebug_report::render_html(&ReportInput::load(run.as_path(), &LoadOptions::default()));
    assert_eq!(scalars_section(&page), scalars_section(&alone));
}
