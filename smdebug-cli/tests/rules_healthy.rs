//! `smdebug rules RUN` with its default set on real runs: a healthy training run raises no
//! debugging alarm, and a run with a bug planted is still caught, by the same rules, at the same
//! step or earlier than before the loss rules learned to tell noise from a trend.
//!
//! The runs are the demo's training loop (`smdebug_examples::train_in_session`) on the shipped
//! digits, captured the way the demo captures them (losses and metrics at every step; weights,
//! biases, gradients and activations at every 10th TRAIN step; inputs at step 0), plus the
//! hook corpus's healthy PyTorch run written by Python smdebug's real hook.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use smdebug::Session;
use smdebug_core::{Collection, Mode, SaveConfig, SaveConfigMode};
use smdebug_examples::digits::{self, Digits};
use smdebug_examples::{Bug, TrainConfig, train_in_session};
use smdebug_io::OverflowPolicy;
use smdebug_testkit::files::copy_tree;
use tempfile::tempdir;

/// Trains `cfg` into `run` through a session capturing what the demo captures. The writer waits
/// for room rather than dropping, so every run of a configuration holds the same steps.
fn record(run: &Path, cfg: &TrainConfig) {
    std::fs::create_dir_all(run).unwrap();
    let every10 = SaveConfig::every(10).with_mode(Mode::Eval, SaveConfigMode::never());
    let mut session = Session::builder(run.to_str().unwrap())
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
    let out = Command::new(env!("CARGO_BIN_EXE_smdebug"))
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
    // Confusion holds every evaluation batch to 90 % correct per predicted class (SageMaker's
    // bar, judged step by step): on 32-image batches, three or so a class, one mistake is under
    // it, and the healthy demo model (the README demo's evaluation accuracy: 0.64 after its
    // first epoch, 0.95 at best) fails it at 115 of its 120 evaluation batches. ClassImbalance's misprediction share counts from the first evaluation (SageMaker's
    // too): on the raw digits one class is still mostly mispredicted after the first epoch, and
    // the share crosses 70 % by the time 500 labels are in. Both judge the model's predictions,
    // not a broken job, and neither weighs how young the model is or how few samples a class
    // has yet; on the demo's runs they are checked to have judged the loss's inputs instead.
    let judged_on_predictions = ["Confusion", "ClassImbalance"];
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
