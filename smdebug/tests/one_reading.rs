//! A process whose rules and dashboard follow the same run reads each of its files once: both
//! read its profiler files through one `ProfilerSource` and its index and event files through
//! one `TensorSource`, as a `Session` with rules and a dashboard wires them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use smdebug::Session;
use smdebug::prelude::SaveConfig;
use smdebug::profiler::spans::SpanConfig;
use smdebug::profiler::system::SamplerConfig;
use smdebug::read::follow::{ProfilerFollower, ProfilerSource};
use smdebug::read::profile::ProfilerReader;
use smdebug::read::trial::{TensorSource, TensorSubscription};
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

/// Counts the reads (whole and by range) of each file, passing every call on; it has no local
/// root, so a reader reads every file through it.
#[derive(Debug)]
struct PathReads {
    inner: Arc<dyn Storage>,
    reads: Mutex<BTreeMap<String, u64>>,
}

impl PathReads {
    fn new(inner: Arc<dyn Storage>) -> Arc<PathReads> {
        Arc::new(PathReads {
            inner,
            reads: Mutex::default(),
        })
    }

    fn count(&self, path: &str) {
        *self
            .reads
            .lock()
            .unwrap()
            .entry(path.to_owned())
            .or_default() += 1;
    }

    /// Reads per file of the run's collections, index and event folders.
    fn tensor_reads(&self) -> BTreeMap<String, u64> {
        self.reads
            .lock()
            .unwrap()
            .iter()
            .filter(|(path, _)| TENSOR_FOLDERS.iter().any(|f| path.starts_with(f)))
            .map(|(path, n)| (path.clone(), *n))
            .collect()
    }
}

impl Storage for PathReads {
    fn describe(&self) -> &str {
        self.inner.describe()
    }
    fn put_parts(&self, path: &str, parts: Vec<bytes::Bytes>) -> smdebug::storage::Result<()> {
        self.inner.put_parts(path, parts)
    }
    fn get(&self, path: &str) -> smdebug::storage::Result<bytes::Bytes> {
        self.count(path);
        self.inner.get(path)
    }
    fn get_range(
        &self,
        path: &str,
        range: std::ops::Range<u64>,
    ) -> smdebug::storage::Result<bytes::Bytes> {
        self.count(path);
        self.inner.get_range(path, range)
    }
    fn size(&self, path: &str) -> smdebug::storage::Result<Option<u64>> {
        self.inner.size(path)
    }
    fn list(&self, prefix: &str) -> smdebug::storage::Result<Vec<String>> {
        self.inner.list(prefix)
    }
    fn list_after(&self, prefix: &str, offset: &str) -> smdebug::storage::Result<Vec<String>> {
        self.inner.list_after(prefix, offset)
    }
    fn delete(&self, path: &str) -> smdebug::storage::Result<()> {
        self.inner.delete(path)
    }
}

const TENSOR_STEPS: u64 = 150;

/// The folders of a run's tensor files.
const TENSOR_FOLDERS: [&str; 3] = ["collections/", "index/", "events/"];

/// A run of `TENSOR_STEPS` steps, each with a loss (flat after step 100: LossNotDecreasing
/// fires) and an accuracy.
fn record_tensors(run: &str) {
    let mut session = Session::builder(run)
        .save(SaveConfig::every(1))
        .start()
        .unwrap();
    for step in 0..TENSOR_STEPS {
        let loss = 10.0 / (1.0 + step.min(100) as f64);
        session.hook().save_scalar("loss", loss, &["losses"]);
        session
            .hook()
            .save_scalar("accuracy", step as f64 / 200.0, &["metrics"]);
        session.step().unwrap();
    }
    session.finish().unwrap();
}

/// What the rules found and the dashboard shows of a run read by a runner and a server, each
/// subscribed to `rules` and `dashboard` (one source or two).
fn rules_and_dashboard(
    run: &str,
    storage: Arc<dyn Storage>,
    rules: TensorSubscription,
    dashboard: TensorSubscription,
) -> (serde_json::Value, serde_json::Value, serde_json::Value) {
    let mut options = ServeOptions::new(vec![run.to_owned()]);
    options.read_only = true;
    options
        .shared_tensors
        .add(&smdebug::storage::Location::parse(run).unwrap(), dashboard);
    let server = Server::start(options).unwrap();
    let summary = RuleRunner::builder(run)
        .storage(storage)
        .write_into_run(false)
        .spec(RuleSpec::parse("LossNotDecreasing").unwrap())
        .spec(RuleSpec::parse("ExplodingTensor").unwrap())
        .tensor_source(rules)
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let verdicts: Vec<serde_json::Value> = summary
        .rules
        .iter()
        .map(|r| {
            serde_json::json!([
                r.rule,
                format!("{:?}", r.status),
                r.first_fired_step,
                r.last_fired_step,
                r.fired_count,
                r.steps_evaluated,
                r.datapoints
            ])
        })
        .collect();
    let client = reqwest::blocking::Client::new();
    let get = |path: &str| -> serde_json::Value {
        let url = format!("{}api/{path}", server.url());
        client.get(&url).send().unwrap().json().unwrap()
    };
    let mut shown = serde_json::Value::Null;
    wait_until(
        Duration::from_secs(60),
        &format!("the dashboard to show {TENSOR_STEPS} steps, complete"),
        || {
            let run = &get("runs")["runs"][0];
            shown = serde_json::json!({
                "steps": run["steps"],
                "last_step": run["last_step"],
                "tensors": run["tensors"],
                "scalar_values": run["scalar_values"],
                "complete": run["complete"],
                "trial_open": run["trial_open"],
            });
            shown["steps"] == TENSOR_STEPS && shown["complete"] == true
        },
    );
    // The dashboard's own view of the scalars (from its follower, no trial of its own).
    let mut scalars = get("runs/0/scalars");
    scalars.as_object_mut().unwrap().remove("smoothing");
    assert_eq!(shown["trial_open"], false, "{shown}");
    drop(server);
    (serde_json::json!(verdicts), shown, scalars)
}

#[test]
fn rules_and_the_dashboard_share_one_reading_of_the_tensor_files() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run").to_str().unwrap().to_owned();
    record_tensors(&run);
    let local: Arc<dyn Storage> = Arc::new(LocalStorage::new(&run).unwrap());
    let files: Vec<String> = TENSOR_FOLDERS
        .iter()
        .flat_map(|dir| local.list(dir.trim_end_matches('/')).unwrap())
        .filter(|p| p.ends_with(".json") || p.ends_with(".tfevents"))
        .collect();
    // An index and an event file a step, and the collections file.
    assert_eq!(files.len() as u64, 2 * TENSOR_STEPS + 1, "{files:?}");

    // Apart: the rules and the dashboard each with a source of their own.
    let apart = PathReads::new(Arc::clone(&local));
    let rules_source = TensorSource::new(apart.clone());
    let dashboard_source = TensorSource::new(apart.clone());
    let separate = rules_and_dashboard(
        &run,
        apart.clone(),
        rules_source.subscribe(),
        dashboard_source.subscribe(),
    );
    let reads_apart = apart.tensor_reads();

    // Together, as a `Session` with rules and the dashboard wires them.
    let together = PathReads::new(Arc::clone(&local));
    let source = TensorSource::new(together.clone());
    let (for_rules, for_dashboard) = (source.subscribe(), source.subscribe());
    let shared = rules_and_dashboard(&run, together.clone(), for_rules, for_dashboard);
    let reads_together = together.tensor_reads();
    eprintln!(
        "reads of the {} collections, index and event files: apart {}, shared {}",
        files.len(),
        reads_apart.values().sum::<u64>(),
        reads_together.values().sum::<u64>()
    );

    // The same verdicts, steps and scalars either way.
    assert_eq!(shared.0, separate.0);
    assert_eq!(shared.1, separate.1);
    assert_eq!(shared.2, separate.2);
    let verdicts = shared.0.as_array().unwrap();
    assert_eq!(verdicts[0][1], "IssuesFound", "{verdicts:?}");
    assert!(
        verdicts[1][6].as_u64().unwrap() >= 2 * TENSOR_STEPS,
        "{verdicts:?}"
    );
    assert_eq!(
        shared.2["scalars"].as_array().unwrap().len(),
        2,
        "{}",
        shared.2
    );

    // Apart, every file is read by both; shared, each once.
    for file in &files {
        assert_eq!(reads_apart.get(file), Some(&2), "{file} apart");
        assert_eq!(reads_together.get(file), Some(&1), "{file} shared");
    }
    assert_eq!(reads_together.len(), files.len(), "{reads_together:?}");
    // Both subscribers are gone, and nothing is held for them.
    assert_eq!(source.subscribers(), 0);
    assert_eq!(source.held(), (0, 0, 0));
}
