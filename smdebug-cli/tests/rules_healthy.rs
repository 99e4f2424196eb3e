//! `smdebug rules RUN` with its default set on real runs: a healthy training run raises no
//! debugging alarm, and a run with a bug planted is still caught, by the same rules, at the same
//! step or earlier than before the loss rules learned to tell noise from a trend.
//!
//! The runs are the demo's training loop (`smdebug_examples::train_in_session`) on the shipped
//! digits, captured the way the demo captures them (losses and metrics at every step; weights,
//! biases, gradients and activations at every 10th TRAIN step; inputs at step 0), plus the
//! hook corpus's healthy PyTorch run written by Python smdebug's real hook.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use smdebug::Session;
use smdebug_core::{Collection, Mode, SaveConfig, SaveConfigMode};
use smdebug_examples::digits::{self, Digits};
use smdebug_examples::{Bug, TrainConfig, train_in_session};
use smdebug_io::OverflowPolicy;
use smdebug_testkit::files::copy_tree;
use support::smdebug_command;
use tempfile::tempdir;

/// Trains `cfg` into `run` through a session capturing what the demo captures. The writer waits
/// for room rather than dropping, so every run of a configuration holds the same steps.
fn record(run: &Path, cfg: &TrainConfig) {
    std::fs::create_dir_all(run).unwrap();
    let every10 = SaveConfig::every(10).with_mode(Mode::Eval, SaveConfigMode::never());
    let mut session = Session::builder(run)
        .save(SaveConfig::every(1))
        .collection(Collection::new("weights").with_save_config(every10.clone()))
        .collection(Collection::new("biases").with_save_config(every10.clone()))
        .collection(Collection::new("gradients").with_save_config(every10.clone()))
        .collection(Collection::new("outputs").with_save_config(every10))
        .collection(
            Collection::new("inputs").with_save_config(SaveConfig::new(SaveConfigMode::steps([0]))),
        )
        .overflow(OverflowPolicy::Block)
        .start()
        .unwrap();
    let data = Digits::load(&digits::default_path()).unwrap();
    let (tr, ev) = data.split(0.2, 1);
    train_in_session(cfg, &tr, &ev, &mut session);
    let summary = session.finish().unwrap();
    assert!(summary.problems.is_empty(), "{summary}");
    assert_eq!(summary.records_dropped, 0, "{summary}");
}

/// The demo's default run (`--side 28`: 28×28 resampled digits, augmented while training).
fn demo(epochs: usize, bug: Option<Bug>) -> TrainConfig {
    TrainConfig {
        epochs,
        bug,
        input_side: Some(28),
        ..TrainConfig::default()
    }
}

/// `(rule, status, fired_count, first_fired_step, datapoints)` of every debugging rule of the
/// default set that had data, from `smdebug rules RUN --json`.
fn verdicts(run: &Path) -> Vec<(String, String, u64, Option<u64>, u64)> {
    let out = smdebug_command()
        .args(["rules", run.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let table: Vec<_> = summary["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "debugging" && r["status"] != "NoData")
        .map(|r| {
            (
                r["rule"].as_str().unwrap().to_string(),
                r["status"].as_str().unwrap().to_string(),
                r["fired_count"].as_u64().unwrap(),
                r["first_fired_step"].as_u64(),
                r["datapoints"].as_u64().unwrap(),
            )
        })
        .collect();
    eprintln!("{}:", run.display());
    for (rule, status, fired, first, points) in &table {
        eprintln!("  {rule:26} {status:14} fired {fired:4} first {first:?} datapoints {points}");
    }
    table
}

#[track_caller]
fn assert_no_alarm(run: &Path) {
    let table = verdicts(run);
    // Confusion holds each class to SageMaker's 90 % (right among the class's predictions and
    // among its labels, over the latest 500 evaluation pairs, beyond noise). The demo's small
    // CNN does not reach it on every class (class 8 of the digits stays near 60 % recall), so
    // its findings on the demo's runs are checked to be what the files hold instead
    // (`assert_confusion_is_in_the_files`).
    let judged_on_predictions = ["Confusion"];
    let fired: Vec<_> = table
        .iter()
        .filter(|r| r.1 != "NoIssuesFound" && !judged_on_predictions.contains(&r.0.as_str()))
        .collect();
    assert!(fired.is_empty(), "{}: {fired:?}", run.display());
    // The loss rules judged the run, they were not silent for lack of data.
    for rule in ["LossNotDecreasing", "Overtraining", "Overfit"] {
        let row = table.iter().find(|r| r.0 == rule);
        assert!(
            row.is_some_and(|r| r.4 > 0),
            "{rule} checked nothing on {}: {table:?}",
            run.display()
        );
    }
}

#[test]
fn the_default_demo_run_raises_no_debugging_alarm() {
    let dir = tempdir().unwrap();
    let run = dir.path().join("demo");
    // Before the loss rules weighed noise: LossNotDecreasing fired 283 times from step 93,
    // Overtraining 65 times from step 216.
    record(&run, &demo(10, None));
    assert_no_alarm(&run);
    let table = verdicts(&run);
    for rule in ["ClassImbalance", "Confusion"] {
        assert!(
            table.iter().any(|r| r.0 == rule && r.4 > 0),
            "{rule} judged nothing: {table:?}"
        );
    }
    assert_confusion_is_in_the_files(&run);
}

/// Each share Confusion's last finding on `run` names ("labelled class 8: 34 of 56 ...",
/// "predicted class 5: 51 of 65 right ...") counted again from the run's files: the loss's
/// labels and predictions (argmax of the logits) at the evaluation steps up to that step, the
/// latest 500 pairs.
#[track_caller]
fn assert_confusion_is_in_the_files(run: &Path) {
    let out = smdebug_command()
        .args([
            "rules",
            run.to_str().unwrap(),
            "--rule",
            "Confusion",
            "--json",
        ])
        .output()
        .unwrap();
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let status = &summary["rules"][0];
    let Some(step) = status["last_fired_step"].as_u64() else {
        return; // silent: nothing to check against the files
    };
    let message = status["message"].as_str().unwrap();
    let trial = smdebug_read::Trial::open(run.to_str().unwrap()).unwrap();
    let names = trial.tensor_names().unwrap();
    let find = |suffix: &str| names.iter().find(|n| n.ends_with(suffix)).unwrap().clone();
    let (labels, predictions) = (
        trial
            .tensor(&find(smdebug_core::collection::LABELS_SUFFIX))
            .unwrap(),
        trial
            .tensor(&find(smdebug_core::collection::PREDICTIONS_SUFFIX))
            .unwrap(),
    );
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for s in labels
        .steps(None)
        .unwrap()
        .into_iter()
        .filter(|s| *s <= step)
    {
        let l = labels.value(s, None, None).unwrap();
        let p = predictions.value(s, None, None).unwrap();
        let classes = p.len() / l.len();
        let p: Vec<f64> = p.iter().copied().collect();
        for (label, row) in l.iter().zip(p.chunks(classes)) {
            let argmax = (0..classes).fold(0, |b, i| if row[i] > row[b] { i } else { b });
            pairs.push((*label as usize, argmax));
        }
    }
    let latest = &pairs[pairs.len().saturating_sub(500)..];
    let mut checked = 0;
    // The diagonal shares; the off-diagonal ones ("... are class 7") are left out.
    for finding in message
        .split("; ")
        .filter(|f| f.contains(" of ") && !f.contains(" are class "))
    {
        // "<which> class <i>: <right> of <of> ..."
        let words: Vec<&str> = finding.split_whitespace().collect();
        let Some(at) = words.iter().position(|w| *w == "class") else {
            continue;
        };
        let (which, class) = (words[at - 1], words[at + 1].trim_end_matches(':'));
        if which != "predicted" && which != "labelled" || words.get(at + 3) != Some(&"of") {
            continue;
        }
        let class: usize = class.parse().unwrap();
        let (right, of): (usize, usize) = (
            words[at + 2].parse().unwrap(),
            words[at + 4].parse().unwrap(),
        );
        let side = |&&(l, p): &&(usize, usize)| {
            if which == "predicted" {
                p == class
            } else {
                l == class
            }
        };
        let in_class: Vec<_> = latest.iter().filter(side).collect();
        assert_eq!(
            (
                in_class.iter().filter(|(l, p)| l == p).count(),
                in_class.len()
            ),
            (right, of),
            "{finding} (from {} pairs up to step {step})",
            latest.len()
        );
        checked += 1;
    }
    assert!(checked > 0, "no share to check in {message:?}");
}

#[test]
fn the_raw_digits_run_raises_no_debugging_alarm() {
    // The 8×8 originals without augmentation, at `TrainConfig`'s defaults (10 epochs, learning
    // rate 0.1): before the loss rules weighed noise, LossNotDecreasing fired 184 times here,
    // Overtraining 61 and Overfit 18 (on the first, hardest batches of an evaluation pass).
    let dir = tempdir().unwrap();
    let run = dir.path().join("raw");
    record(&run, &TrainConfig::default());
    assert_no_alarm(&run);
}

#[test]
fn the_hook_corpus_healthy_run_raises_no_debugging_alarm() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../smdebug-io/tests/data/hooks");
    let dir = tempdir().unwrap();
    let run = dir.path().join("pt_healthy");
    copy_tree(&corpus.join("pt_healthy"), &run);
    assert_no_alarm(&run);
}

/// Each planted bug, the rules that caught it before this change and the step each first fired
/// at then (measured with the rules as they were, on these same deterministic runs): each must
/// still fire, at that step or earlier. Overtraining also caught the vanishing-gradient and
/// exploding-loss runs at step 9 before its training side weighed batch noise (their batches
/// swing by more than its 0.01 within a window of five); the other rules listed catch them at
/// step 0 to 19, as before.
#[test]
fn every_planted_bug_is_still_caught_as_early() {
    let cases: [(Bug, &[(&str, u64)]); 3] = [
        (
            Bug::VanishingGradients,
            &[
                ("VanishingGradient", 0),
                ("PoorWeightInitialization", 0),
                ("WeightUpdateRatio", 10),
                ("LossNotDecreasing", 19),
                ("UnchangedTensor", 20),
            ],
        ),
        (
            Bug::DeadRelu,
            &[
                ("VanishingGradient", 0),
                ("PoorWeightInitialization", 0),
                ("DeadRelu", 0),
                ("WeightUpdateRatio", 10),
                ("AllZero", 0),
                ("LossNotDecreasing", 19),
                ("Overtraining", 9),
                ("UnchangedTensor", 20),
            ],
        ),
        (
            Bug::ExplodingLoss,
            &[
                ("ExplodingTensor", 3),
                ("PoorWeightInitialization", 5),
                ("DeadRelu", 10),
                ("WeightUpdateRatio", 10),
                ("LossNotDecreasing", 3),
                ("Overfit", 45),
            ],
        ),
    ];
    let dir = tempdir().unwrap();
    for (bug, caught) in cases {
        let run = dir.path().join(format!("{bug:?}"));
        record(&run, &demo(2, Some(bug)));
        let table = verdicts(&run);
        for (rule, step) in caught {
            let row = table
                .iter()
                .find(|r| r.0 == *rule)
                .unwrap_or_else(|| panic!("{bug:?}: no verdict of {rule}: {table:?}"));
            assert_eq!(row.1, "IssuesFound", "{bug:?}: {row:?}");
            assert!(
                row.3.is_some_and(|s| s <= *step),
                "{bug:?}: {rule} first fired at {:?}, before the change at {step}",
                row.3
            );
        }
    }
}
