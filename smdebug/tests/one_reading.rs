//! A process whose rules and dashboard follow the same run reads each of its files once: both
//! read its profiler files through one `ProfilerSource` and its index and event files through
//! one `TensorSource`, as a `Session` with rules and a dashboard wires them.

use std::collections::BTreeMap;
use std::sync::Arc;

use smdebug_testkit::pages::scalars_section;
use std::time::Duration;

use smdebug::Session;
use smdebug::prelude::SaveConfig;
use smdebug::profiler::spans::SpanConfig;
use smdebug::profiler::system::SamplerConfig;
use smdebug::read::follow::{ProfilerFollower, ProfilerSource};
use smdebug::read::profile::ProfilerReader;
use smdebug::read::trial::{TensorSource, TensorSubscription};
use smdebug::rules::report::{DEFAULT_REPORT_DIR, REPORT_FILE};
use smdebug::rules::{RuleRunner, RuleSpec};
use smdebug::serve::{ServeOptions, Server};
use smdebug::storage::LocalStorage;
use smdebug::storage::Storage;
use smdebug::storage::testing::{CountingStorage, FileReads, wait_until};

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

/// Reads per file of the run's collections, index and event folders.
fn tensor_reads(storage: &CountingStorage) -> BTreeMap<String, u64> {
    storage
        .file_reads()
        .into_iter()
        .filter(|(path, _)| TENSOR_FOLDERS.iter().any(|f| path.starts_with(f)))
        .map(|(path, r)| (path, r.reads))
        .collect()
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
    let apart = Arc::new(CountingStorage::new(Arc::clone(&local)));
    let rules_source = TensorSource::new(apart.clone());
    let dashboard_source = TensorSource::new(apart.clone());
    let separate = rules_and_dashboard(
        &run,
        apart.clone(),
        rules_source.subscribe(),
        dashboard_source.subscribe(),
    );
    let reads_apart = tensor_reads(&apart);

    // Together, as a `Session` with rules and the dashboard wires them.
    let together = Arc::new(CountingStorage::new(Arc::clone(&local)));
    let source = TensorSource::new(together.clone());
    let (for_rules, for_dashboard) = (source.subscribe(), source.subscribe());
    let shared = rules_and_dashboard(&run, together.clone(), for_rules, for_dashboard);
    let reads_together = tensor_reads(&together);
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

/// A file of the run as the reads of a process are counted: what kind it is.
fn kind(path: &str) -> &'static str {
    let folder = path.split('/').next().unwrap_or(path);
    match folder {
        "collections" => "collections",
        "index" => "index",
        "events" => "events",
        "framework" => "trace",
        "system" => "system",
        "progress" => "progress",
        "jobs" => "jobs",
        "rules" => "rules",
        _ if path == smdebug_format::layout::END_MARKER => "end marker",
        _ => "other",
    }
}

/// The kinds of file each reader of the run must read at most once (each byte at most once for
/// a system file, which grows as the sampler publishes it; each version at most once for a
/// collections file, which the hook writes again when a tensor joins a collection).
const READ_ONCE: [&str; 6] = [
    "collections",
    "index",
    "events",
    "trace",
    "system",
    "end marker",
];

/// Per kind of file: how many there are, how many times they were read, the bytes read and
/// the bytes they hold.
type ReadsByKind = BTreeMap<&'static str, (u64, u64, u64, u64)>;

/// The reads of `storage` by kind of file ([`ReadsByKind`]).
fn reads_by_kind(storage: &CountingStorage, local: &dyn Storage) -> ReadsByKind {
    let mut kinds = BTreeMap::<&str, (u64, u64, u64, u64)>::new();
    for (path, reads) in storage.file_reads() {
        let size = local.size(&path).unwrap().unwrap_or(0);
        let k = kinds.entry(kind(&path)).or_default();
        k.0 += 1;
        k.1 += reads.reads;
        k.2 += reads.bytes;
        k.3 += size;
    }
    kinds
}

/// The rules' verdicts as compared: each rule's status, its first and last firing, how often it
/// fired, the data points it read and, for a rule of the tensors, the steps it evaluated (a
/// profiler rule's evaluations are the passes that brought it data: a live runner makes more
/// than one reading the ended run).
fn verdicts(rules: &[smdebug::rules::RuleStatus]) -> serde_json::Value {
    rules
        .iter()
        .map(|r| {
            let profiler = r.rule == "StepOutlier";
            serde_json::json!([
                r.rule,
                format!("{:?}", r.status),
                r.first_fired_step,
                r.last_fired_step,
                r.fired_count,
                (!profiler).then_some(r.steps_evaluated),
                r.datapoints
            ])
        })
        .collect()
}

/// What the dashboard at `url` shows of its first run's tensors: the steps, the tensors and the
/// scalars' values, and its scalars view.
fn dashboard_tensors(client: &reqwest::blocking::Client, url: &str) -> serde_json::Value {
    let get = |path: &str| -> serde_json::Value {
        client
            .get(format!("{url}api/{path}"))
            .send()
            .unwrap()
            .json()
            .unwrap()
    };
    let run = &get("runs")["runs"][0];
    let mut scalars = get("runs/0/scalars");
    scalars.as_object_mut().unwrap().remove("smoothing");
    serde_json::json!({
        "steps": run["steps"],
        "last_step": run["last_step"],
        "tensors": run["tensors"],
        "scalar_values": run["scalar_values"],
        "scalars": scalars,
    })
}

/// The files of the kinds in [`READ_ONCE`] that `reads` has more than once (or, for a system
/// file, more bytes of than it holds): (path, reads, bytes read, bytes held).
fn read_more_than_once(
    reads: &BTreeMap<String, FileReads>,
    local: &dyn Storage,
) -> Vec<(String, u64, u64, u64)> {
    reads
        .iter()
        .filter(|(path, _)| READ_ONCE.contains(&kind(path)))
        .filter_map(|(path, reads)| {
            let size = local.size(path).unwrap().unwrap_or(0);
            let once = match kind(path) {
                "system" => reads.bytes <= size,
                // A hook writes its collections file again when a tensor joins a collection:
                // each version may be read once.
                "collections" => reads.reads <= reads.writes.max(1),
                _ => reads.reads == 1,
            };
            (!once).then(|| (path.clone(), reads.reads, reads.bytes, size))
        })
        .collect()
}

const SESSION_RULES: [&str; 3] = ["LossNotDecreasing", "VanishingGradient", "StepOutlier"];

/// A session over `run` through `counting`: every step saved, system sampling, spans and
/// [`SESSION_RULES`], the report into the run (the default).
fn session_builder(
    run: &std::path::Path,
    counting: &Arc<CountingStorage>,
) -> smdebug::SessionBuilder {
    Session::builder(run)
        .storage(counting.clone())
        .without_config_files()
        .save(SaveConfig::every(1))
        .system(
            SamplerConfig::default()
                .interval(Duration::from_millis(100))
                .publish_interval(Duration::from_millis(300)),
        )
        .spans(SpanConfig::default().close_interval(Duration::from_millis(300)))
        .rules(SESSION_RULES)
        .rules_poll_interval(Duration::from_millis(50))
        .rule_status_lines(None)
}

/// Finishes `session` and reads back the report it wrote into the run; asserts that every rule
/// has a verdict, that `ProfilerReport` says where the report went, and that no file of the
/// kinds in [`READ_ONCE`] was read more than once through `counting`. Returns the summary, the
/// page and the reads by kind.
fn finish_and_count(
    session: Session,
    counting: &CountingStorage,
    local: &dyn Storage,
) -> (smdebug::SessionSummary, String, ReadsByKind) {
    let summary = session.finish().unwrap();
    assert!(summary.end_marker_written, "{summary}");
    assert_eq!(summary.rules.len(), SESSION_RULES.len(), "{summary}");
    // The report was written into the run, and ProfilerReport says where.
    let report_file = format!("{DEFAULT_REPORT_DIR}/{REPORT_FILE}");
    assert!(
        summary
            .report
            .as_deref()
            .is_some_and(|r| r.ends_with(&report_file)),
        "{summary}"
    );
    let report = String::from_utf8(local.get(&report_file).unwrap().to_vec()).unwrap();
    // Every file of the run read by the process, by kind.
    let kinds = reads_by_kind(counting, local);
    eprintln!("kind: files, reads, bytes read, bytes held");
    for (kind, (files, reads, bytes, size)) in &kinds {
        eprintln!("{kind}: {files}, {reads}, {bytes}, {size}");
    }
    let over = read_more_than_once(&counting.file_reads(), local);
    assert!(
        over.is_empty(),
        "read more than once (path, reads, bytes, size): {over:?}"
    );
    (summary, report, kinds)
}

/// Trains the digits MLP in `session` for about 360 steps: a few seconds, over which the system
/// file grows, trace files close and the rules (and the report's follower) look several times.
fn train_digits(session: &mut Session) {
    let (train, eval) =
        smdebug_examples::digits::Digits::load(&smdebug_examples::digits::default_path())
            .unwrap()
            .split(0.2, 1);
    let cfg = smdebug_examples::TrainConfig {
        epochs: 8,
        ..smdebug_examples::TrainConfig::default()
    };
    smdebug_examples::train_in_session(&cfg, &train, &eval, session);
}

/// The end-to-end proof through a real `Session` given its storage
/// (`SessionBuilder::storage`): a session with capture, system sampling, spans, rules and the
/// dashboard trains the digits MLP, and every read the process makes of its run is counted
/// per file. Each tensor and profiler file and the end marker is read at most once by the
/// whole process (a collections file once a version), while the rules and the dashboard both reach the last step, with the
/// verdicts and the view that separate readers of the finished run give, and the report
/// written into the run at the end, its scalars the dashboard's (those its "Download report"
/// draws).
#[test]
fn a_session_with_rules_and_the_dashboard_reads_each_file_of_its_run_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let local: Arc<dyn Storage> = Arc::new(LocalStorage::new(&run).unwrap());
    let counting = Arc::new(CountingStorage::new(Arc::clone(&local)));
    let mut session = session_builder(&run, &counting)
        // The report into the run (the default), its scalars the dashboard's summaries.
        .dashboard(ServeOptions::default())
        .start()
        .unwrap();
    assert!(std::ptr::addr_eq(
        Arc::as_ptr(session.storage()),
        Arc::as_ptr(&counting)
    ));
    let url = session.dashboard_url().unwrap().to_owned();
    train_digits(&mut session);

    // The dashboard reaches the last step before the session ends (it stops with it).
    let client = reqwest::blocking::Client::new();
    let mut shown = serde_json::Value::Null;
    let steps = session.hook().global_step();
    wait_until(
        Duration::from_secs(60),
        &format!("the session's dashboard to show its {steps} steps"),
        || {
            shown = dashboard_tensors(&client, &url);
            shown["last_step"] == steps - 1 && shown["steps"] == steps
        },
    );
    let (summary, report, kinds) = finish_and_count(session, &counting, local.as_ref());
    for kind in [
        "collections",
        "index",
        "events",
        "trace",
        "system",
        "end marker",
    ] {
        assert!(kinds.contains_key(kind), "no {kind} file read: {kinds:?}");
    }

    // Separate readers of the finished run: the same verdicts, and the same steps and scalars
    // in a dashboard of its own.
    let offline = SESSION_RULES
        .iter()
        .fold(
            RuleRunner::builder(run.as_path()).write_into_run(false),
            |runner, spec| runner.spec(RuleSpec::parse(spec).unwrap()),
        )
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    assert_eq!(verdicts(&summary.rules), verdicts(&offline.rules));
    // `smdebug serve RUN`: a dashboard alone, given the run's storage (counted), reads each file
    // once too.
    let counted = Arc::new(CountingStorage::new(Arc::clone(&local)));
    let mut options = ServeOptions::new([run.as_path()]);
    options.read_only = true;
    options.run_storage.add(
        &smdebug::storage::Location::Local(run.clone()),
        counted.clone(),
    );
    let apart = Server::start(options).unwrap();
    let mut alone = serde_json::Value::Null;
    wait_until(
        Duration::from_secs(60),
        "a dashboard of its own to show the ended run",
        || {
            alone = dashboard_tensors(&client, apart.url());
            let runs: serde_json::Value = client
                .get(format!("{}api/runs", apart.url()))
                .send()
                .unwrap()
                .json()
                .unwrap();
            alone["steps"] == steps && runs["runs"][0]["complete"] == true
        },
    );
    assert_eq!(shown, alone);
    let followed = counted.file_reads();
    let over = read_more_than_once(&followed, local.as_ref());
    assert!(
        over.is_empty(),
        "the dashboard alone read more than once: {over:?}"
    );

    // Its "Download report" is drawn from what the dashboard follows (the profiler data's
    // digest, the scalars' summaries): no file is read again for it.
    let page = client
        .get(format!("{}api/runs/0/report", apart.url()))
        .send()
        .unwrap();
    assert!(page.status().is_success(), "{}", page.status());
    let page = page.text().unwrap();
    assert!(page.contains("<html"));
    // The session's report drew its scalars from the same summaries as the download: the same
    // curves and last values.
    let (in_session, downloaded) = (scalars_section(&report), scalars_section(&page));
    assert!(
        downloaded.contains("<h3 class=\"scalar\">") && downloaded.contains("Last values: "),
        "{downloaded}"
    );
    assert_eq!(in_session, downloaded);
    let mut again = BTreeMap::<&str, (u64, u64)>::new();
    for (path, reads) in counted.file_reads() {
        let before = followed.get(&path).copied().unwrap_or_default();
        if reads.reads > before.reads {
            let k = again.entry(kind(&path)).or_default();
            k.0 += 1;
            k.1 += reads.reads - before.reads;
        }
    }
    eprintln!("read again for the report download (kind: files, reads): {again:?}");
    assert!(again.is_empty(), "read again: {again:?}");
}

/// Without the dashboard: a session with capture, system sampling, spans, rules and the report
/// reads the run's scalars for its report beside the rules (`ReportWriter::follow_scalars`,
/// through the rules' `TensorSource`, on the runner's thread), so each tensor and profiler file
/// and the end marker is read at most once by the whole process, nothing again at the finish;
/// and the report's curves are those `smdebug report RUN` draws of the finished run.
#[test]
fn a_session_with_rules_and_the_report_but_no_dashboard_reads_each_file_of_its_run_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let local: Arc<dyn Storage> = Arc::new(LocalStorage::new(&run).unwrap());
    let counting = Arc::new(CountingStorage::new(Arc::clone(&local)));
    let mut session = session_builder(&run, &counting).start().unwrap();
    train_digits(&mut session);
    let (_, report, kinds) = finish_and_count(session, &counting, local.as_ref());
    for kind in ["collections", "index", "events", "end marker"] {
        assert!(kinds.contains_key(kind), "no {kind} file read: {kinds:?}");
    }

    // `smdebug report RUN` on the finished run: the same curves and last values.
    let html = dir.path().join("offline.html");
    let builder = SESSION_RULES.iter().fold(
        RuleRunner::builder(run.as_path()).write_into_run(false),
        |runner, spec| runner.spec(RuleSpec::parse(spec).unwrap()),
    );
    smdebug::report::offline_runner(
        builder,
        smdebug::report::ReportWriter::to_file(&html),
        Arc::clone(&local),
    )
    .build()
    .unwrap()
    .run_offline()
    .unwrap();
    let offline = std::fs::read_to_string(&html).unwrap();
    let (in_session, apart) = (scalars_section(&report), scalars_section(&offline));
    assert!(
        in_session.contains("<h3 class=\"scalar\">") && in_session.contains("Last values: "),
        "{in_session}"
    );
    assert_eq!(in_session, apart);
}
