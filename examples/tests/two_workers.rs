//! The two-worker example as a real multi-process job: two processes (RANK 0 and 1,
//! WORLD_SIZE 2) average gradients over TCP and write one run, on local disk and on a real S3
//! server (moto); the Trial shows both workers, marks steps complete only when both wrote them,
//! and the workers' models agree at every saved step; each worker's session adds its spans,
//! rank 0 the host's system metrics, the rules' summary and the report, in the same store.

use std::process::Command;
use std::sync::Arc;

use smdebug_core::Mode;
use smdebug_read::profile::{ProfilerReader, SpanQuery, SystemQuery};
use smdebug_read::trial::{StepState, Trial, TrialOptions};
use smdebug_storage::Storage;
use smdebug_storage::open_storage_with;
use smdebug_storage::testing::MotoServer;

const EXE: &str = env!("CARGO_BIN_EXE_two_workers");

fn run_job(out: &str, env: &[(&'static str, String)]) {
    let output = Command::new(EXE)
        .args(["--out", out, "--epochs", "1", "--save-interval", "4"])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .output()
        .expect("run the two-worker example");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the job failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    for rank in 0..2 {
        assert!(
            stdout.contains(&format!("worker {rank} of 2:")),
            "worker {rank} did not report: {stdout}"
        );
    }
}

/// What every two-worker run must show through the Trial.
fn check_run(trial: &Trial) {
    assert_eq!(trial.workers().unwrap(), vec!["worker_0", "worker_1"]);
    assert_eq!(trial.num_workers().unwrap(), 2);
    assert!(
        trial.is_complete().unwrap(),
        "both workers wrote end markers"
    );
    let steps = trial.steps(Some(Mode::Train)).unwrap();
    // 1,437 training examples, 718 per worker, batches of 32: 23 steps, every 4th saved for the
    // tensors and every step for the loss.
    assert_eq!(steps, (0..23).collect::<Vec<u64>>());
    for &s in &steps {
        assert_eq!(
            trial.has_passed_step(s, Some(Mode::Train)).unwrap(),
            StepState::Available,
            "step {s}"
        );
    }
    let weight = trial.tensor("fc1.weight").unwrap();
    let weight_steps = weight.steps(Some(Mode::Train)).unwrap();
    assert_eq!(weight_steps, vec![0, 4, 8, 12, 16, 20]);
    for s in weight_steps {
        assert_eq!(
            weight.workers(s, Some(Mode::Train)).unwrap(),
            vec!["worker_0", "worker_1"]
        );
        let w0 = weight
            .value(s, Some(Mode::Train), Some("worker_0"))
            .unwrap();
        let w1 = weight
            .value(s, Some(Mode::Train), Some("worker_1"))
            .unwrap();
        assert_eq!(
            w0, w1,
            "data parallel: one model on both workers at step {s}"
        );
        let g = trial.tensor("gradient/fc1.weight").unwrap();
        let g0 = g.value(s, Some(Mode::Train), Some("worker_0")).unwrap();
        let g1 = g.value(s, Some(Mode::Train), Some("worker_1")).unwrap();
        assert_eq!(g0, g1, "averaged gradients agree at step {s}");
        assert!(g0.iter().any(|x| *x != 0.0));
    }
    // The losses are each worker's own shard's: they differ.
    let loss = trial.tensor("loss").unwrap();
    let l0 = loss.value(0, Some(Mode::Train), Some("worker_0")).unwrap();
    let l1 = loss.value(0, Some(Mode::Train), Some("worker_1")).unwrap();
    assert_ne!(l0, l1);
    // The model learned something between the first and the last step on both workers.
    for w in ["worker_0", "worker_1"] {
        let first = loss.value(0, Some(Mode::Train), Some(w)).unwrap()[[]];
        let last = (18..23)
            .map(|s| loss.value(s, Some(Mode::Train), Some(w)).unwrap()[[]])
            .sum::<f64>()
            / 5.0;
        assert!(last < first, "{w}: loss {first} -> {last}");
    }
}

/// The run is one job's: an identity file per worker, both of one job, no warning.
fn one_job(trial: &Trial) {
    let jobs = trial.jobs().unwrap();
    let workers: Vec<&str> = jobs.iter().map(|j| j.worker.as_str()).collect();
    assert_eq!(workers, ["worker_0", "worker_1"], "{jobs:?}");
    assert_eq!(jobs[0].job, jobs[1].job);
    assert!(jobs.iter().all(|j| j.finished));
    assert!(
        trial.warnings().unwrap().is_empty(),
        "{:?}",
        trial.warnings()
    );
}

/// What every worker's session adds to the run: spans of both workers (one step span per
/// training step each), the host's system metrics (sampled once, by rank 0), the rules' summary
/// over both workers' data and the profiling report, all through the run's own storage.
fn check_profiling(storage: Arc<dyn Storage>) {
    let reader = ProfilerReader::new(storage.clone());
    let spans = reader.spans(&SpanQuery::default()).unwrap();
    for worker in [0, 1] {
        let steps: Vec<u64> = spans
            .iter()
            .filter(|s| s.worker == Some(worker) && s.phase == "Step:ModeKeys.TRAIN")
            .filter_map(|s| s.step)
            .collect();
        assert_eq!(steps, (0..23).collect::<Vec<u64>>(), "worker {worker}");
        for row in [
            "Forward",
            "Backward(post-forward)",
            "AllReduce",
            "DataLoaderIter",
        ] {
            let n = spans
                .iter()
                .filter(|s| s.worker == Some(worker) && s.phase == row)
                .count();
            assert_eq!(n, 23, "worker {worker}: {row} spans");
        }
    }
    let samples = reader.system_samples(&SystemQuery::default()).unwrap();
    assert!(!samples.is_empty(), "no system metrics");
    let nodes: std::collections::BTreeSet<&str> =
        samples.iter().map(|s| s.node_id.as_str()).collect();
    assert_eq!(nodes.len(), 1, "one sampler per host: {nodes:?}");
    let summary: serde_json::Value =
        serde_json::from_slice(&storage.get("rules/rule_job_summary.json").unwrap()).unwrap();
    assert_eq!(summary["finished"], true, "{summary}");
    let loss = summary["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == "LossNotDecreasing")
        .unwrap();
    assert!(loss["datapoints"].as_u64().unwrap() > 0, "{loss}");
    let report = storage
        .get("rules/ProfilerReport/profiler-output/profiler-report.html")
        .unwrap();
    assert!(String::from_utf8_lossy(&report).contains("<section id=\"step-durations\""));
}

#[test]
fn two_processes_write_one_local_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // Twice: the second job replaces the first's run (rank 0 deletes its files before any
    // worker writes), so the run is the second job's alone.
    run_job(out.to_str().unwrap(), &[]);
    run_job(out.to_str().unwrap(), &[]);
    let trial = Trial::open(out.to_str().unwrap()).unwrap();
    check_run(&trial);
    one_job(&trial);
    check_profiling(smdebug_storage::open_storage(out.to_str().unwrap()).unwrap());
    // The two workers' files sit side by side in one run.
    let events = std::fs::read_dir(out.join("events/000000000000"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect::<Vec<_>>();
    assert!(events.iter().any(|f| f.contains("worker_0")), "{events:?}");
    assert!(events.iter().any(|f| f.contains("worker_1")), "{events:?}");
    no_debugging_alarm(out.to_str().unwrap());
}

/// The default debugging rules find nothing on the job's healthy run (Overtraining once stalled
/// on its training loss for 8 steps while the batch losses swung by ±0.1 and fell;
/// CheckInputImages reported the raw pixels' mean of 0.30 before the example standardized them).
fn no_debugging_alarm(run: &str) {
    let mut builder = smdebug_rules::RuleRunner::builder(run);
    for spec in smdebug_rules::report::default_specs(false, false) {
        builder = builder.spec(spec);
    }
    let summary = builder.build().unwrap().run_offline().unwrap();
    let fired: Vec<String> = summary
        .rules
        .iter()
        .filter(|r| r.kind == smdebug_rules::RuleInput::Tensors)
        .filter(|r| {
            !matches!(
                r.status,
                smdebug_rules::Status::NoIssuesFound | smdebug_rules::Status::NoData
            )
        })
        .map(|r| format!("{} {:?}: {}", r.rule, r.status, r.message))
        .collect();
    assert!(fired.is_empty(), "{fired:#?}");
    let overtraining = summary.rule("Overtraining").unwrap();
    assert!(overtraining.datapoints > 0, "{overtraining:?}");
}

#[test]
fn two_processes_write_one_run_on_s3() {
    let moto = MotoServer::start();
    moto.create_bucket("jobs");
    let url = "s3://jobs/digits/two-workers";
    run_job(url, &moto.env());
    run_job(url, &moto.env());
    let storage: Arc<dyn Storage> = open_storage_with(url, &moto.options()).unwrap();
    let trial = Trial::from_storage(url, storage.clone(), TrialOptions::default()).unwrap();
    check_run(&trial);
    one_job(&trial);
    check_profiling(storage);
}
