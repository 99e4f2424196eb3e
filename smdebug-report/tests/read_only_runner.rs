//! A runner told not to write into the run (`write_into_run(false)`, what `smdebug rules` and
//! `smdebug report` use) leaves every object of an object-store run as it was, `ProfilerReport`
//! included; the default (the follower beside a training job) keeps its summary in the run.

use std::collections::BTreeMap;

use smdebug_core::{Hook, Mode, SaveConfig, TensorView};
use smdebug_io::writer::Writer;
use smdebug_report::ReportWriter;
use smdebug_rules::runner::SUMMARY_FILE;
use smdebug_rules::{RuleRunner, RuleSpec, Status, read_summary};

fn record(location: &str) {
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(Writer::open(location).unwrap())
        .unwrap();
    hook.set_mode(Mode::Train);
    for step in 0..6u64 {
        let mut g = vec![0.5f32; 16];
        if step == 4 {
            g[1] = f32::INFINITY;
        }
        hook.save_tensor(
            "gradient/fc.weight",
            &TensorView::from_slice(&g, &[4, 4]).unwrap(),
            &["gradients"],
        );
        hook.step();
    }
    hook.close();
}

fn objects(location: &str) -> BTreeMap<String, Vec<u8>> {
    let store = smdebug_storage::open_storage(location).unwrap();
    store
        .list("")
        .unwrap()
        .into_iter()
        .map(|key| {
            let bytes = store.get(&key).unwrap().to_vec();
            (key, bytes)
        })
        .collect()
}

fn runner(location: &str) -> smdebug_rules::runner::RunnerBuilder {
    RuleRunner::builder(location)
        .spec(RuleSpec::parse("ExplodingTensor").unwrap())
        .spec(RuleSpec::parse("ProfilerReport").unwrap())
        .reporter(ReportWriter::into_run())
}

#[test]
fn a_runner_that_does_not_write_into_the_run_changes_no_object_of_it() {
    let location = "memory://read-only-runner/run";
    record(location);
    let before = objects(location);
    assert!(!before.is_empty());
    let summary = runner(location)
        .write_into_run(false)
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    assert_eq!(
        summary.rule("ExplodingTensor").unwrap().status,
        Status::IssuesFound
    );
    // A tensor-only run: none of ProfilerReport's rules had anything to check.
    let report = summary.rule("ProfilerReport").unwrap();
    assert_eq!(report.status, Status::NoData);
    assert!(report.message.contains("not written"), "{}", report.message);
    assert!(
        report.message.contains("11 had no data to check"),
        "{}",
        report.message
    );
    assert!(objects(location) == before, "the runner wrote into the run");

    // The default writes the summary (and the report) into the run.
    runner(location).build().unwrap().run_offline().unwrap();
    let after = objects(location);
    assert!(after.contains_key(SUMMARY_FILE));
    let stored = read_summary(location).unwrap().unwrap();
    assert_eq!(
        stored.rule("ExplodingTensor").unwrap().status,
        Status::IssuesFound
    );
    assert!(after.keys().any(|k| k.ends_with("profiler-report.html")));
}
