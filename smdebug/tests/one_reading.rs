//! A process whose rules and dashboard follow the same run reads each of its profiler files
//! once: both read through one `ProfilerSource`, as a `Session` with rules and a dashboard
//! wires them.

use std::sync::Arc;
use std::time::Duration;

use smdebug::Session;
use smdebug::profiler::spans::SpanConfig;
use smdebug::profiler::system::SamplerConfig;
use smdebug::read::follow::{ProfilerFollower, ProfilerSource};
use smdebug::read::profile::ProfilerReader;
use smdebug::rules::{RuleRunner, RuleSpec};
use smdebug::serve::{ServeOptions, Server};
use smdebug::storage::LocalStorage;
use smdebug::storage::Storage;
use smdebug::storage::testing::{CountingStorage, wait_until};

/// A real run: a session records steps with forward passes, spans and system metrics.
fn record(run: &str) {
    let mut session = Session::builder(run)
        .system(
            SamplerConfig::default()
                .interval(Duration::from_millis(100))
                .publish_interval(Duration::from_millis(300)),
        )
        .spans(SpanConfig::default().close_interval(Duration::from_millis(300)))
        .start()
        .unwrap();
    for _ in 0..60 {
        // workload: the forward pass's time; the spans and samples need time to pass.
        session.forward(|| std::thread::sleep(Duration::from_millis(20)));
        session.hook().save_scalar("loss", 1.0, &["losses"]);
        session.step().unwrap();
    }
    session.finish().unwrap();
}

#[test]
fn rules_and_the_dashboard_share_one_reading_of_the_profiler_files() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run").to_str().unwrap().to_owned();
    record(&run);
    let local: Arc<dyn Storage> = Arc::new(LocalStorage::new(&run).unwrap());
    let reader = ProfilerReader::new(Arc::clone(&local));
    let files = reader.system_files().unwrap().len() + reader.trace_files().unwrap().len();
    assert!(files >= 4, "{files} profiler files");
    let everything = ProfilerFollower::new(Arc::clone(&local)).read_to_end();
    let (samples, spans) = (everything.samples.len(), everything.spans.len());
    assert!(
        samples > 0 && spans >= 120,
        "{samples} samples, {spans} spans"
    );

    let counting = Arc::new(CountingStorage::new(Arc::clone(&local)));
    let source = ProfilerSource::new(counting.clone());
    let for_dashboard = source.subscribe();
    let for_rules = source.subscribe();
    let mut options = ServeOptions::new(vec![run.clone()]);
    options.read_only = true;
    options.shared_profiler.add(
        &smdebug::storage::Location::parse(&run).unwrap(),
        for_dashboard,
    );
    let server = Server::start(options).unwrap();
    // The served run took the subscription: a run that did not would have let it go.
    assert_eq!(source.subscribers(), 2);

    let summary = RuleRunner::builder(&run)
        .storage(counting.clone())
        .write_into_run(false)
        .spec(RuleSpec::parse("StepOutlier").unwrap())
        .profiler_source(for_rules)
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let rule = &summary.rules[0];
    assert!(rule.datapoints > 0, "{rule:?}");

    // The dashboard shows every sample and span of the run.
    let url = format!("{}api/runs", server.url());
    let client = reqwest::blocking::Client::new();
    let want = (Some(samples as u64), Some(spans as u64));
    wait_until(
        Duration::from_secs(60),
        &format!("the dashboard to show {samples} samples and {spans} spans"),
        || {
            let runs: serde_json::Value = client.get(&url).send().unwrap().json().unwrap();
            let run = &runs["runs"][0];
            (run["samples"].as_u64(), run["spans"].as_u64()) == want
        },
    );
    // The runner is done and gone; the dashboard still holds its place.
    assert_eq!(source.subscribers(), 1);
    // Each file was read once for both (a system file may be read in pieces while it grows;
    // this run had ended, so each is read whole).
    assert_eq!(source.fetches(), files as u64);
    drop(server);
}
