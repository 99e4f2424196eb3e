//! The README's main command, as a user runs it: a healthy run goes to the end with every rule
//! quiet that stops jobs; with `--bug exploding` the rules following the run stop it early and
//! say why; both write the profiling report and the rules' summary.

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use smdebug_core::EndReason;
use smdebug_read::trial::Trial;
use smdebug_storage::testing::wait_until;

fn demo(out: &Path, extra: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(["--out", out.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn summary(run: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(run.join("rules/rule_job_summary.json")).unwrap())
        .unwrap()
}

fn rule<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == name)
        .unwrap_or_else(|| panic!("{name} missing"))
}

#[test]
fn a_healthy_run_goes_to_the_end_with_capture_profiling_rules_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let stdout = demo(&run, &["--epochs", "3"]);
    assert!(stdout.contains("the job ran to the end"), "{stdout}");
    let s = summary(&run);
    assert_eq!(s["finished"], true);
    for name in ["VanishingGradient", "ExplodingTensor", "DeadRelu"] {
        assert_eq!(rule(&s, name)["status"], "NoIssuesFound", "{name}");
        assert!(rule(&s, name)["datapoints"].as_u64().unwrap() > 0, "{name}");
    }
    assert!(
        rule(&s, "OverallFrameworkMetrics")["datapoints"]
            .as_u64()
            .unwrap()
            > 0
    );
    // The loss's inputs on the evaluation data: ClassImbalance judged them in the session, and
    // Confusion, run on the run afterwards, reads the same tensors; both equal the labels and
    // the logits the demo's model gives on the held-out images.
    let imbalance = rule(&s, "ClassImbalance");
    assert_eq!(imbalance["status"], "NoIssuesFound", "{imbalance}");
    assert!(imbalance["datapoints"].as_u64().unwrap() > 0, "{imbalance}");
    let confusion = smdebug_rules::RuleRunner::builder(&run)
        .write_into_run(false)
        .spec(smdebug_rules::RuleSpec::new("Confusion"))
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let confusion = confusion.rule("Confusion").unwrap();
    assert!(confusion.datapoints > 0, "{confusion:?}");
    check_loss_inputs(&run);
    let report = run.join("report/profiler-report.html");
    assert!(stdout.contains(&report.display().to_string()), "{stdout}");
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("id=\"step-durations\""));
    assert!(run.join("report/ExplodingTensor.json").exists());
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    assert_eq!(trial.end_reason().unwrap(), Some(EndReason::Completed));
    // 3 epochs of 45 training steps, plus 12 evaluation steps each.
    assert_eq!(trial.global_steps(None).unwrap().len(), 3 * (45 + 12));

    // The detailed profiling window (global steps 50-54) holds a span per layer, named as the
    // layers' tensors are, and none outside it. Global step 50 is the second epoch's 6th
    // evaluation step (45 training steps, then 12 evaluation steps an epoch): the spans carry
    // the mode and the step within it, EVAL 5-9.
    let reader = smdebug_read::profile::ProfilerReader::open(&run).unwrap();
    let spans = reader
        .spans(&smdebug_read::profile::SpanQuery::default())
        .unwrap();
    let layer_steps = |layer: &str| -> Vec<u64> {
        let mut steps: Vec<u64> = spans
            .iter()
            .filter(|s| s.name == layer && s.mode == Some(smdebug_core::Mode::Eval))
            .filter_map(|s| s.step)
            .collect();
        steps.dedup();
        steps
    };
    for layer in ["fc1", "relu1", "fc2"] {
        assert_eq!(layer_steps(layer), (5..10).collect::<Vec<u64>>(), "{layer}");
        assert_eq!(
            spans.iter().filter(|s| s.name == layer).count(),
            5,
            "{layer}"
        );
    }

    // One figure per fact: each profiler rule's verdict quotes what its section's tables show,
    // over the window it names (the demo's Dataloader quoted its first firing's share of the
    // loop above a table with the whole run's).
    let written: smdebug_rules::Summary = serde_json::from_value(s).unwrap();
    // A profiler rule's firing step is the step span of the trace files that started last at
    // or before the firing, numbered as that span's mode numbers its steps (the summary names
    // the mode: TRAIN step 9 is not global step 9).
    let mut placed = 0;
    for r in &written.rules {
        let (smdebug_rules::RuleInput::Profiler, Some(t)) = (r.kind, r.first_fired_time_us) else {
            continue;
        };
        let span = spans
            .iter()
            .filter(|s| s.start_us <= t)
            .filter_map(|s| match s.phase_kind() {
                smdebug_core::phase::Phase::Step(mode) => Some((s.start_us, s.step, mode)),
                _ => None,
            })
            .max_by_key(|(start, ..)| *start);
        let expected = span.map_or((None, None), |(_, step, mode)| (step, Some(mode)));
        assert_eq!(
            (r.first_fired_step, r.first_fired_mode),
            expected,
            "{}",
            r.rule
        );
        // Its evidence names steps of a mode too (MaxInitializationTime's measures the time
        // before the first step, of no mode).
        if r.rule != "MaxInitializationTime" {
            for e in &r.evidence {
                assert!(e.mode.is_some(), "{}: {e:?}", r.rule);
            }
        }
        placed += 1;
    }
    assert!(
        placed > 0,
        "no profiler rule fired in the demo: {written:#?}"
    );
    let quoted = figures::check_page(&html, &written, &run.join("report"));
    for rule in ["Dataloader", "StepOutlier", "MaxInitializationTime"] {
        assert!(
            quoted.iter().any(|(n, figures)| n == rule && *figures > 0),
            "{rule} quoted no figure: {quoted:?}"
        );
    }
}

/// `loss.labels` at each EVAL step where it was saved are the evaluation set's labels in the
/// demo's batch order, and `loss.predictions` has one row of 10 scores per label, whose argmax
/// agrees with the saved accuracy of that step.
fn check_loss_inputs(run: &Path) {
    use smdebug_examples::digits::{Digits, default_path};
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    let labels = trial.tensor("loss.labels").unwrap();
    let predictions = trial.tensor("loss.predictions").unwrap();
    let steps = labels.steps(Some(smdebug_core::Mode::Eval)).unwrap();
    assert!(!steps.is_empty());
    // The demo's split, and its evaluation batches: the set in order, 12 batches an epoch,
    // EVAL steps counted on across epochs.
    let (_, eval) = Digits::load(&default_path()).unwrap().split(0.2, 1);
    let batch = smdebug_examples::TrainConfig::default().batch_size;
    let per_epoch = eval.len().div_ceil(batch);
    assert_eq!(per_epoch, 12);
    for step in steps {
        let l = labels
            .value(step, Some(smdebug_core::Mode::Eval), None)
            .unwrap();
        let p = predictions
            .value(step, Some(smdebug_core::Mode::Eval), None)
            .unwrap();
        assert_eq!(p.shape(), [l.len(), 10], "step {step}");
        let first = (step as usize % per_epoch) * batch;
        let want: Vec<f64> = eval
            .labels
            .iter()
            .skip(first)
            .take(l.len())
            .map(|&c| c as f64)
            .collect();
        assert_eq!(l.iter().copied().collect::<Vec<f64>>(), want, "step {step}");
        let hits = p
            .rows()
            .into_iter()
            .zip(l.iter())
            .filter(|(row, label)| {
                let best = row
                    .iter()
                    .enumerate()
                    .fold(
                        (0, f64::NEG_INFINITY),
                        |b, (i, &x)| if x > b.1 { (i, x) } else { b },
                    );
                best.0 as f64 == **label
            })
            .count();
        let accuracy = trial
            .tensor("accuracy")
            .unwrap()
            .value(step, Some(smdebug_core::Mode::Eval), None)
            .unwrap();
        assert!(
            (hits as f64 / l.len() as f64 - accuracy.iter().next().unwrap()).abs() < 1e-6,
            "step {step}: {hits} of {} right, accuracy {accuracy}",
            l.len()
        );
    }
}

#[path = "../../smdebug-report/tests/support/figures.rs"]
mod figures;

#[test]
fn keys_of_the_sagemaker_files_not_applied_are_warnings_on_stderr_and_in_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let hook = dir.path().join("debughookconfig.json");
    let profiler = dir.path().join("profilerconfig.json");
    std::fs::write(
        &hook,
        r#"{"LocalPth": "/tmp/elsewhere", "S3OutputPath": "s3://bucket/tensors",
            "HookParameters": {"save_interval": "20", "eval.save_intervl": "5"}}"#,
    )
    .unwrap();
    std::fs::write(
        &profiler,
        r#"{"ProfilingIntervalInMilliseconds": 500, "S3OutputPath": "s3://bucket/profiler",
            "ProfilingParameters": {"ProfilerEnabled": true, "RotateMaxFileSizeInByte": 1000,
                "DataloaderProfilingConfig": "{'StartStep': 2, 'NumStep': 3}"}}"#,
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(["--out", run.to_str().unwrap(), "--epochs", "1"])
        .env("SMDEBUG_CONFIG_FILE_PATH", &hook)
        .env("SMPROFILER_CONFIG_PATH", &profiler)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    let (h, p) = (hook.display(), profiler.display());
    let expected = [
        format!("{h}: `LocalPth`: unknown key, did you mean `LocalPath`?"),
        format!(
            "{h}: `HookParameters.eval.save_intervl`: unknown key, did you mean \
             `eval.save_interval`?"
        ),
        format!("{p}: `ProfilingParameters.ProfilerEnabled`: ignored: not supported here"),
        format!(
            "{p}: `ProfilingParameters.RotateMaxFileSizeInByte`: unknown key, did you mean \
             `RotateMaxFileSizeInBytes`?"
        ),
        format!(
            "{p}: `ProfilingParameters.DataloaderProfilingConfig.NumStep`: unknown key, did \
             you mean `NumSteps`?"
        ),
    ];
    for warning in &expected {
        assert!(
            stderr.contains(&format!("smdebug: warning: {warning}\n")),
            "stderr lacks `{warning}`:\n{stderr}"
        );
        assert!(
            stdout.contains(&format!("configuration warning: {warning}\n")),
            "the summary lacks `{warning}`:\n{stdout}"
        );
    }
    assert_eq!(
        stderr.matches("smdebug: warning: ").count(),
        expected.len(),
        "{stderr}"
    );
    assert!(
        stdout.contains(&format!("configured by {h}, {p}\n")),
        "{stdout}"
    );
    // The misspelled LocalPth named nowhere: the run went to --out, whole.
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    assert_eq!(trial.end_reason().unwrap(), Some(EndReason::Completed));
}

#[test]
fn an_exploding_loss_is_stopped_early_by_the_rule_that_saw_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let stdout = demo(&run, &["--bug", "exploding"]);
    assert!(stdout.contains("STOPPED EARLY"), "{stdout}");
    let s = summary(&run);
    let exploding = rule(&s, "ExplodingTensor");
    assert_eq!(exploding["status"], "IssuesFound");
    assert_eq!(exploding["actions"][0], "stop_training");
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    match trial.end_reason().unwrap() {
        Some(EndReason::Stopped(cause)) => {
            assert!(cause.reason.contains("ExplodingTensor"), "{cause:?}");
            assert_eq!(cause.rule.as_deref(), Some("ExplodingTensor"), "{cause:?}");
        }
        other => panic!("the run should say it was stopped: {other:?}"),
    }
    // Stopped well before the 450 planned training steps.
    let train_steps = trial.steps(Some(smdebug_core::Mode::Train)).unwrap().len();
    assert!(train_steps < 450, "{train_steps} steps");
    let first = exploding["first_fired_step"].as_u64().unwrap();
    assert!((first as usize) < train_steps);
    let report = std::fs::read_to_string(run.join("report/profiler-report.html")).unwrap();
    assert!(report.contains("ExplodingTensor"));
}

/// The number after `label` in the demo's summary line
/// `profiler: N system samples (R records), S spans in F trace files`.
fn summary_count(stdout: &str, before: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("profiler:"))
        .unwrap_or_else(|| panic!("no profiler line in {stdout}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == before)
        .unwrap_or_else(|| panic!("no `{before}` in `{line}`"));
    words[at - 1]
        .trim_start_matches('(')
        .parse()
        .unwrap_or_else(|e| panic!("`{line}`: {e}"))
}

/// Tensor records the run's index files list (raw tensors and reductions, every worker).
fn indexed_tensor_records(run: &Path) -> u64 {
    let mut count = 0;
    let mut dirs = vec![run.join("index")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                let index: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                count += index["tensor_payload"].as_array().unwrap().len() as u64;
            }
        }
    }
    count
}

#[test]
fn a_python_compatible_run_is_read_whole_by_python_smdebug() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let stdout = demo(&run, &["--epochs", "1", "--python-compatible"]);
    let system_records = summary_count(&stdout, "records),");
    let spans = summary_count(&stdout, "spans");
    let tensors = indexed_tensor_records(&run);
    assert!(system_records > 0 && spans > 0 && tensors > 0, "{stdout}");

    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../smdebug-profiler/tests/interop_python/smdebug_readers.py");
    let python = smdebug_storage::testing::python();
    let out = Command::new(&python)
        .arg(script)
        .args(["count", run.to_str().unwrap()])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e} (set SMDEBUG_PYTHON)"));
    assert!(
        out.status.success(),
        "smdebug_readers.py count failed (bash .ci/setup-python): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // smdebug logs to stdout on import; the answer is the last line.
    let stdout_py = String::from_utf8_lossy(&out.stdout);
    let read: Value = serde_json::from_str(stdout_py.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout_py}"));
    assert_eq!(read["system"], system_records, "system records");
    assert_eq!(read["framework"], spans, "framework spans");
    assert_eq!(read["tensors"], tensors, "tensor records");
}

/// The demo on a disk that fills during the run: it exits non-zero, saying what was not
/// stored, within seconds (the rules do not wait out their timeout for an end marker that
/// cannot come), instead of printing "dropped 0" and exiting 0.
#[test]
fn a_disk_that_fills_during_the_run_makes_the_demo_fail_saying_what_was_lost() {
    let dir = tempfile::tempdir().unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=512k", "tmpfs"])
        .arg(dir.path())
        .output();
    match mounted {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            eprintln!(
                "SKIPPED: cannot mount a tmpfs ({}): this test needs root",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return;
        }
        Err(e) => {
            eprintln!("SKIPPED: cannot run mount ({e}): this test needs root");
            return;
        }
    }
    let started = std::time::Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(["--out", dir.path().join("run").to_str().unwrap()])
        .args(["--epochs", "3"])
        .output()
        .unwrap();
    let took = started.elapsed();
    let _ = Command::new("umount").arg(dir.path()).status();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the demo exited 0: {stderr}");
    assert!(
        stderr.contains("not stored") && stderr.contains("end marker"),
        "the demo says what was lost: {stderr}"
    );
    assert!(
        took < std::time::Duration::from_secs(90),
        "the demo took {took:?}"
    );
}

/// SageMaker's hook file moves the run (`LocalPath`): the demo reads back, reports and names
/// the run where the session wrote it, and nothing goes to `--out`.
#[test]
fn the_demo_follows_the_run_where_sagemakers_local_path_puts_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("asked");
    let moved = dir.path().join("moved");
    let hook = dir.path().join("debughookconfig.json");
    std::fs::write(
        &hook,
        serde_json::json!({ "LocalPath": moved.to_str().unwrap() }).to_string(),
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(["--out", out.to_str().unwrap(), "--epochs", "1"])
        .env("SMDEBUG_CONFIG_FILE_PATH", &hook)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    let moved_text = moved.display().to_string();
    assert!(
        stdout.contains(&format!("run directory: {moved_text}\n")),
        "{stdout}"
    );
    let report = moved.join("report/profiler-report.html");
    assert!(report.exists(), "{stdout}");
    assert!(
        stdout.contains(&format!("profiling report: {}", report.display())),
        "{stdout}"
    );
    let trial = Trial::open(&moved_text).unwrap();
    assert_eq!(trial.end_reason().unwrap(), Some(EndReason::Completed));
    // --out holds no run: the folder the demo made for it is empty.
    assert_eq!(std::fs::read_dir(&out).map(|d| d.count()).unwrap_or(0), 0);
}

/// `--sagemaker-layout`: the report in SageMaker's folder,
/// `rule-output/ProfilerReport-<timestamp>/profiler-output/`, with its notebook and the rules'
/// summary the notebook reads beside the page. The session records the process's start (in its
/// identity file, and as the `Process` span up to the session's start), so initialization is
/// counted from it; the demo's loader, which does not pin memory, says so on its data-loading
/// spans and the Dataloader rule and the page report it.
#[test]
fn the_demo_reports_in_sagemakers_layout_counting_initialization_from_the_process_start() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let secs = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let before = secs();
    let stdout = demo(&run, &["--epochs", "1", "--sagemaker-layout"]);
    let after = secs();
    let outputs: Vec<String> = std::fs::read_dir(run.join("rule-output"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    let stamp: u64 = outputs[0]
        .strip_prefix("ProfilerReport-")
        .unwrap()
        .parse()
        .unwrap();
    assert!((before..=after).contains(&stamp), "{stamp}");
    let folder = run
        .join("rule-output")
        .join(&outputs[0])
        .join("profiler-output");
    let page = folder.join("profiler-report.html");
    assert!(
        stdout.contains(&format!("profiling report: {}", page.display())),
        "{stdout}"
    );
    for file in [
        "profiler-report.ipynb",
        "profiler-report.rules.json",
        "Dataloader.json",
        "MaxInitializationTime.json",
    ] {
        assert!(folder.join(file).is_file(), "{file}");
    }
    assert!(!run.join("report").exists());
    let html = std::fs::read_to_string(&page).unwrap();

    // The process's start, in the identity file and as the first span of the run.
    let storage = smdebug_storage::LocalStorage::new(&run).unwrap();
    let (jobs, problems) = smdebug_io::jobs::read_jobs(&storage).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let job = &jobs[0];
    let process_started = job.process_started.expect("the process's start recorded");
    assert!(process_started <= job.started, "{job:?}");
    let spans = smdebug_read::profile::ProfilerReader::open(run.to_str().unwrap())
        .unwrap()
        .spans(&Default::default())
        .unwrap();
    let process: Vec<_> = spans.iter().filter(|s| s.phase == "Process").collect();
    assert_eq!(process.len(), 1, "one process-start span");
    let span = process[0];
    assert!(
        (span.start_us as f64 - process_started * 1e6).abs() < 1000.0,
        "{span:?} against {process_started}"
    );
    let first = spans.iter().map(|s| s.start_us).min().unwrap();
    assert_eq!(
        first, span.start_us,
        "the process's start is the run's first record"
    );
    let first_step = spans
        .iter()
        .filter(|s| s.phase.starts_with("Step:"))
        .map(|s| s.start_us)
        .min()
        .unwrap();
    assert!(span.end_us <= first_step);

    // MaxInitializationTime counts from it: from the process's start to the first step.
    let init = rule(&summary(&run), "MaxInitializationTime")["details"].clone();
    assert_eq!(init["job_start_us"], span.start_us, "{init}");
    assert_eq!(init["first_step_start_us"], first_step, "{init}");
    let seconds = init["initialization_s"].as_f64().unwrap();
    let expected = (first_step - span.start_us) as f64 / 1e6;
    assert!(
        (seconds - expected).abs() < 1e-4,
        "{seconds} against {expected}"
    );
    assert!(
        html.contains(&format!("Initialization</td><td>{seconds:.3} s")),
        "the page's initialization"
    );

    // The loader does not pin memory: the Dataloader rule's finding, on the page.
    let loading = rule(&summary(&run), "Dataloader")["details"].clone();
    let nodes = loading["nodes"].as_object().unwrap();
    assert_eq!(nodes.len(), 1, "{loading}");
    assert_eq!(
        nodes.values().next().unwrap()["pin_memory"],
        false,
        "{loading}"
    );
    assert!(html.contains("does not pin its batches"));

    // The run with its report in SageMaker's layout is a run: the demo replaces it (the
    // folder `rule-output/` is the run's own), and the earlier report goes with it.
    // Its folder is named by the second it is written in: the next run's, a second on.
    let unix_s = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let earlier = unix_s();
    wait_until(
        std::time::Duration::from_secs(10),
        "the clock to reach the next second",
        || unix_s() > earlier,
    );
    demo(&run, &["--epochs", "1", "--sagemaker-layout"]);
    let again: Vec<String> = std::fs::read_dir(run.join("rule-output"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(again.len(), 1, "{again:?}");
    assert_ne!(again, outputs);
}

/// `cargo run` builds the program in its own process and then `exec`s it: the process's kernel
/// start time is the build's. The demo's `Process` span (its initialization) starts no earlier
/// than its program was written. Reproduced here with a shell that waits, writes a copy of the
/// demo, and becomes it.
#[test]
fn a_program_execd_by_the_process_that_wrote_it_counts_from_when_it_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let copy = dir.path().join("demo-copy");
    let script = format!(
        "sleep 2; cp '{}' '{}'; exec '{}' --out '{}' --epochs 1",
        env!("CARGO_BIN_EXE_demo"),
        copy.display(),
        copy.display(),
        run.display()
    );
    let output = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let written = std::fs::metadata(&copy)
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let spans = smdebug_read::profile::ProfilerReader::open(run.to_str().unwrap())
        .unwrap()
        .spans(&Default::default())
        .unwrap();
    let process = spans.iter().find(|s| s.phase == "Process").unwrap();
    let started = process.start_us as f64 / 1e6;
    // From the copy's writing (to the file system's time resolution), not the shell's start
    // two seconds before.
    assert!(
        (started - written).abs() < 0.05,
        "the Process span starts at {started}, the program was written at {written}"
    );
    let initialization = (process.end_us - process.start_us) as f64 / 1e6;
    assert!(initialization < 2.0, "{initialization} s");
}
