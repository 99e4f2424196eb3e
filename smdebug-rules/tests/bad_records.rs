//! Rules survive bad records (issue 42): a record a debugging rule reads that cannot be read —
//! one bit flipped in its payload, so its checksum fails, or a tensor over the reader's budget —
//! is left out as a tensor not saved at that step and listed in the rule's status (the tensor,
//! the step, why), and the rule goes on judging: each of the twenty debugging rules reports the
//! finding it reports on the undamaged copy, first at the same step, with the bad record listed.
//!
//! The runs are the hook corpus (written by Python smdebug 1.0.34's real hooks) where a rule
//! fires there, and runs written by this crate's real hook and writer where it needs another
//! (a condition that appears mid-run).

mod support;

use std::path::{Path, PathBuf};

use smdebug_core::{Hook, Mode, SaveConfig, TensorView};
use smdebug_io::crafted::{flip_payload_bit, oversized_record};
use smdebug_rules::{RuleStatus, Status, Summary};
use smdebug_storage::testing::wait_until;
use smdebug_testkit::files::copy_tree;
use support::{check, hook_for};
use tempfile::tempdir;

fn corpus(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../smdebug-io/tests/data/hooks")
        .join(name)
}

/// How a record is damaged.
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// One payload bit flipped (with the record's real checksum in place first).
    FlipBit,
    /// The index entry pointed at a record claiming 2^20 x 2^20 `f32` values (4 TiB).
    OverBudget,
}

/// Where a run comes from.
enum Source {
    /// A run of the hook corpus, copied.
    Corpus(&'static str),
    /// A run written into the directory by this function.
    Written(fn(&Path)),
}

/// One rule's case: the rule, its run, and the record damaged.
struct Case {
    spec: String,
    source: Source,
    /// The damaged tensor's stored name (worker_0's record).
    tensor: &'static str,
    /// The damaged record's global step.
    step: u64,
    damage: Damage,
}

impl Case {
    fn new(spec: impl Into<String>, source: Source, tensor: &'static str, step: u64) -> Case {
        Case {
            spec: spec.into(),
            source,
            tensor,
            step,
            damage: Damage::FlipBit,
        }
    }

    fn over_budget(mut self) -> Case {
        self.damage = Damage::OverBudget;
        self
    }

    fn rule(&self) -> &str {
        self.spec.split(':').next().unwrap()
    }

    /// A fresh copy of the run in `dir`.
    fn make(&self, dir: &Path) -> PathBuf {
        let run = dir.join("run");
        match &self.source {
            Source::Corpus(name) => copy_tree(&corpus(name), &run),
            Source::Written(write) => write(&run),
        }
        run
    }

    fn evaluate(&self, run: &Path) -> RuleStatus {
        let summary: Summary = check(run, &self.spec);
        // What the summary file holds reads back as the same status.
        let json = serde_json::to_string(&summary).unwrap();
        let back: Summary = serde_json::from_str(&json).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), json);
        summary.rule(self.rule()).unwrap().clone()
    }

    /// The control (undamaged) and the damaged run's statuses.
    fn statuses(&self) -> (RuleStatus, RuleStatus) {
        let control_dir = tempdir().unwrap();
        let control = self.evaluate(&self.make(control_dir.path()));
        let damaged_dir = tempdir().unwrap();
        let run = self.make(damaged_dir.path());
        match self.damage {
            Damage::FlipBit => {
                flip_payload_bit(&run, self.step, "worker_0", self.tensor);
            }
            Damage::OverBudget => oversized_record(
                &run,
                self.step,
                "worker_0",
                self.tensor,
                &[1 << 20, 1 << 20],
            ),
        }
        (control, self.evaluate(&run))
    }

    /// The damaged run's verdict is the control's, with the bad record listed.
    #[track_caller]
    fn check(&self) {
        let rule = self.rule();
        let (control, damaged) = self.statuses();
        assert_eq!(
            control.status,
            Status::IssuesFound,
            "{rule} control: {control:#?}"
        );
        assert_eq!(control.unreadable_records, 0, "{control:#?}");
        let first = control.first_fired_step.unwrap();
        assert!(
            self.step <= first,
            "{rule}: the damaged step {} comes after the finding at {first}",
            self.step
        );
        let what = format!(
            "{rule} with `{}` at step {} damaged ({:?})",
            self.tensor, self.step, self.damage
        );
        assert_eq!(
            (damaged.status, damaged.first_fired_step),
            (Status::IssuesFound, Some(first)),
            "{what}: {damaged:#?}"
        );
        assert!(damaged.unreadable_records >= 1, "{what}: {damaged:#?}");
        // Listed: the tensor, the step's event file, and why.
        let listed = &damaged.warnings[0];
        let why = match self.damage {
            Damage::FlipBit => "corrupt record",
            Damage::OverBudget => "more than the reader's limit",
        };
        assert!(
            listed.starts_with(&format!("`{}` at ", self.tensor))
                && listed.contains(&format!("events/{:012}/", self.step))
                && listed.contains(why),
            "{what}: {listed}"
        );
        // The message gives the finding, then what was left out.
        assert!(
            damaged
                .message
                .contains("1 record it reads was unreadable and left out: `")
                || damaged
                    .message
                    .contains("records it reads were unreadable and left out"),
            "{what}: {}",
            damaged.message
        );
        assert!(damaged.datapoints > 0 && damaged.datapoints <= control.datapoints);
    }
}

fn cases() -> Vec<Case> {
    use Source::*;
    vec![
        // Fires from step 0 on the vanishing fc1 gradients; fc3's gradient is unreadable there.
        Case::new(
            "VanishingGradient",
            Corpus("pt_bugs"),
            "gradient/Net_fc3.weight",
            0,
        ),
        // The issue's probe: a bad record at step 3, the weights non-finite from step 4.
        Case::new(
            "ExplodingTensor",
            Corpus("pt_exploding"),
            "Net_fc1.weight",
            3,
        ),
        Case::new(
            "ExplodingTensor",
            Corpus("pt_exploding"),
            "gradient/Net_fc2.weight",
            2,
        )
        .over_budget(),
        Case::new(
            "PoorWeightInitialization",
            Corpus("pt_bugs"),
            "relu1_input_0",
            0,
        ),
        Case::new("SaturatedActivation", Corpus("pt_bugs"), "tanh1_input_0", 0),
        Case::new("DeadRelu", Written(relus_die_at_step_5), "relu1_output", 2),
        Case::new(
            "WeightUpdateRatio",
            Corpus("pt_exploding"),
            "Net_fc1.weight",
            0,
        ),
        Case::new("AllZero", Corpus("pt_bugs"), "gradient/Net_fc3.weight", 0),
        Case::new("UnchangedTensor", Corpus("pt_bugs"), "Net_fc1.weight", 0),
        Case::new(
            "TensorVariance:max_threshold=1e6",
            Corpus("pt_exploding"),
            "Net_fc1.weight",
            0,
        ),
        Case::new(
            "LossNotDecreasing",
            Written(loss_turns_nan_at_step_20),
            "loss",
            3,
        ),
        Case::new(
            "Overfit",
            Corpus("pt_overfit"),
            "CrossEntropyLoss_output_0",
            0,
        ),
        Case::new(
            "Overtraining",
            Corpus("pt_overfit"),
            "CrossEntropyLoss_output_0",
            2,
        ),
        Case::new(
            format!(
                "SimilarAcrossRuns:other_trials={}",
                corpus("pt_bugs").display()
            ),
            Corpus("pt_healthy"),
            "Net_fc1.weight",
            0,
        ),
        Case::new(
            "ClassImbalance",
            Written(one_class_floods_at_step_10),
            "labels",
            2,
        ),
        Case::new("Confusion", Written(confused_from_step_5), "labels", 2),
        // Two of the four features hold 60 % of the weight from step 0; f5's weight is
        // unreadable there.
        Case::new(
            "FeatureImportanceOverweight:nfeatures=2,threshold=0.6",
            Corpus("xgb_bugs"),
            "feature_importance/weight/f5",
            0,
        ),
        // Without its string column `trees/ID` at step 0, the tree's depth is rebuilt from the
        // node numbering (`trees/Node`, `trees/Split`): still 3 where 4 is expected.
        Case::new("TreeDepth", Corpus("xgb_bugs"), "trees/ID", 0),
        Case::new(
            "CheckInputImages",
            Written(inputs_shift_at_step_10),
            "fc1.input",
            1,
        ),
        Case::new(
            "NLPSequenceRatio",
            Written(padding_from_step_5),
            "embedding.input",
            1,
        ),
    ]
}

/// `steps` TRAIN steps, written by the real hook and writer.
fn train_steps(run: &Path, steps: u64, mut save: impl FnMut(&mut Hook, u64)) {
    let mut hook: Hook = hook_for(run, SaveConfig::every(1));
    hook.set_mode(Mode::Train);
    for step in 0..steps {
        save(&mut hook, step);
        hook.step();
    }
    hook.close();
}

/// A loss falling from 2 to about 1 over 20 steps, then at 3 from step 20 on: the mean of
/// the last ten values is more than 5 % above its lowest at step 20.
fn loss_turns_nan_at_step_20(run: &Path) {
    // A rise is judged at the end of a window of 10 values, and a record left out moves those
    // ends by a step; a NaN is reported at its own step, with or without a record left out.
    train_steps(run, 30, |hook, step| {
        let loss = if step < 20 {
            2.0 / (1.0 + step as f64 / 20.0) + 0.01 * (step % 3) as f64
        } else {
            f64::NAN
        };
        hook.save_scalar("loss", loss, &["losses"]);
    });
}

/// Batches of 64 inputs of 4 features: zero-mean (±1) up to step 9, 640 samples in all; all
/// 40 from step 10 on, which moves the mean past 0.2 at once.
fn inputs_shift_at_step_10(run: &Path) {
    train_steps(run, 14, |hook, step| {
        let x: Vec<f32> = (0..64 * 4)
            .map(|i| {
                if step >= 10 {
                    40.0
                } else if (i / 4) % 2 == 0 {
                    1.0
                } else {
                    -1.0
                }
            })
            .collect();
        hook.save_tensor(
            "fc1.input",
            &TensorView::from_slice(&x, &[64, 4]).unwrap(),
            &["inputs"],
        );
    });
}

/// Labels of four classes, 25 samples each per step up to step 9 (1,000 in all), predicted
/// right; at step 10, 10,000 samples of class 0: the largest class then has 41 times the
/// samples of the smallest.
fn one_class_floods_at_step_10(run: &Path) {
    train_steps(run, 12, |hook, step| {
        let labels: Vec<i64> = if step == 10 {
            vec![0; 10_000]
        } else {
            (0..100).map(|i| i % 4).collect()
        };
        for name in ["labels", "predictions"] {
            hook.save_tensor(
                name,
                &TensorView::from_slice(&labels, &[labels.len()]).unwrap(),
                &[name],
            );
        }
    });
}

/// Token batches of 16 rows of 40 ids, a fifth padding up to step 4 and four fifths from
/// step 5 on (NLPSequenceRatio's limit is half).
fn padding_from_step_5(run: &Path) {
    train_steps(run, 10, |hook, step| {
        let padded = if step < 5 { 8 } else { 32 };
        let ids: Vec<i64> = (0..16 * 40)
            .map(|i| {
                if i % 40 >= 40 - padded {
                    0
                } else {
                    2 + (i + step as i64) % 50
                }
            })
            .collect();
        hook.save_tensor(
            "embedding.input",
            &TensorView::from_slice(&ids, &[16, 40]).unwrap(),
            &["inputs"],
        );
    });
}

/// A ReLU layer of 8 units over batches of 16: every unit active up to step 4, six of them
/// dead from step 5 on.
fn relus_die_at_step_5(run: &Path) {
    train_steps(run, 10, |hook, step| {
        let out: Vec<f32> = (0..16 * 8)
            .map(|i| {
                let unit = i % 8;
                if step >= 5 && unit < 6 {
                    0.0
                } else {
                    0.1 + ((i as u64 * 7 + step) % 13) as f32 / 10.0
                }
            })
            .collect();
        hook.save_tensor(
            "relu1_output",
            &TensorView::from_slice(&out, &[16, 8]).unwrap(),
            &["relu_output"],
        );
    });
}

/// Labels of four classes and a classifier's predictions: right up to step 4, classes 1 and 2
/// swapped from step 5 on.
fn confused_from_step_5(run: &Path) {
    train_steps(run, 10, |hook, step| {
        let labels: Vec<i64> = (0..40).map(|i| i % 4).collect();
        let predictions: Vec<i64> = labels
            .iter()
            .map(|&l| match l {
                1 if step >= 5 => 2,
                2 if step >= 5 => 1,
                l => l,
            })
            .collect();
        hook.save_tensor(
            "labels",
            &TensorView::from_slice(&labels, &[40]).unwrap(),
            &["labels"],
        );
        hook.save_tensor(
            "predictions",
            &TensorView::from_slice(&predictions, &[40]).unwrap(),
            &["predictions"],
        );
    });
}

/// Every debugging rule that reads tensors, with one record it reads damaged at or before its
/// first finding.
#[test]
fn every_debugging_rule_reports_its_finding_past_a_bad_record() {
    let cases = cases();
    let rules: std::collections::BTreeSet<&str> = cases.iter().map(Case::rule).collect();
    // All the built-in debugging rules but StalledTraining, which reads no record (below).
    assert_eq!(rules.len(), 19, "{rules:?}");
    let failed: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case.check()))
                .err()
                .map(|_| case.rule().to_string())
        })
        .collect();
    assert!(failed.is_empty(), "failed: {failed:?}");
}

/// A run with nothing to find: a bad record leaves the verdict `NoIssuesFound`, and the message
/// says what it was judged with.
#[test]
fn a_clean_verdict_says_which_record_was_left_out() {
    let dir = tempdir().unwrap();
    let run = dir.path().join("run");
    copy_tree(&corpus("pt_healthy"), &run);
    let (file, offset) = flip_payload_bit(&run, 4, "worker_0", "Net_fc1.weight");
    let summary = check(&run, "ExplodingTensor");
    let st = summary.rule("ExplodingTensor").unwrap();
    assert_eq!(st.status, Status::NoIssuesFound, "{st:#?}");
    assert_eq!(st.unreadable_records, 1, "{:#?}", st.warnings);
    let listed = format!("`Net_fc1.weight` at step 4: {file}: corrupt record at byte {offset}");
    assert!(st.warnings[0].starts_with(&listed), "{st:#?}");
    assert!(
        st.message.starts_with(&format!(
            "judged {} of {} steps; 1 record it reads was unreadable and left out: {listed}",
            st.steps_evaluated, st.steps_evaluated
        )),
        "{}",
        st.message
    );
}

/// A rule that could read none of what it reads checked nothing, and says why: `Error`, not a
/// pass and not a run without data.
#[test]
fn a_rule_whose_every_record_is_unreadable_fails() {
    let dir = tempdir().unwrap();
    let run = dir.path().join("run");
    train_steps(&run, 3, |hook, step| {
        hook.save_scalar("loss", 1.0 / (step + 1) as f64, &["losses"]);
    });
    for step in 0..3 {
        flip_payload_bit(&run, step, "worker_0", "loss");
    }
    let summary = check(&run, "LossNotDecreasing:num_steps=1");
    let st = summary.rule("LossNotDecreasing").unwrap();
    assert_eq!(st.status, Status::Error, "{st:#?}");
    assert_eq!((st.datapoints, st.unreadable_records), (0, 3));
    assert!(
        st.message.starts_with(
            "checked nothing: every record it reads was unreadable (3 of them, listed in its \
             warnings), the first: `loss` at step 0: "
        ),
        "{}",
        st.message
    );
    assert_eq!(st.warnings.len(), 3);
}

/// A custom rule that reads the trial itself and passes an unreadable record's error on: that
/// step goes unjudged, the rule judges the others.
#[test]
fn a_custom_rule_passing_an_unreadable_record_on_loses_that_step_only() {
    use smdebug_read::trial::Trial;
    use smdebug_rules::{Error, Needs, Result, RuleResult, RuleRunner, TensorRule};

    struct LossAboveOne;
    impl TensorRule for LossAboveOne {
        fn name(&self) -> &str {
            "LossAboveOne"
        }
        fn needs(&self) -> Needs {
            Needs::tensors(self.name(), &["loss"], "losses")
        }
        fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
            let read = |e| Error::Read {
                rule: "LossAboveOne".into(),
                step,
                source: Box::new(e),
            };
            let loss = trial.tensor("loss").map_err(read)?;
            let v = loss.value(step, None, None).map_err(read)?;
            let mut r = RuleResult::new(step);
            r.datapoints = 1;
            if v.iter().any(|x| *x > 1.0) {
                r.fire(format!("loss {v} above 1"));
            }
            Ok(r)
        }
    }
    let dir = tempdir().unwrap();
    let run = dir.path().join("run");
    train_steps(&run, 6, |hook, step| {
        hook.save_scalar("loss", if step < 4 { 0.5 } else { 2.0 }, &["losses"]);
    });
    flip_payload_bit(&run, 1, "worker_0", "loss");
    let summary = RuleRunner::builder(&run)
        .rule(smdebug_rules::Rule::tensor(LossAboveOne), Vec::new())
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let st = &summary.rules[0];
    assert_eq!(
        (st.status, st.first_fired_step, st.steps_evaluated),
        (Status::IssuesFound, Some(4), 5),
        "{st:#?}"
    );
    // The lost step is one of the six it judges, one it had nothing at.
    assert_eq!((st.steps_judged, st.steps_in_scope), (5, 6), "{st:#?}");
    assert_eq!(st.unreadable_records, 1);
    assert!(
        st.warnings[0].starts_with("a record at step 1: events/000000000001/")
            && st.warnings[0].ends_with("(step 1 not judged)"),
        "{}",
        st.warnings[0]
    );
}

/// StalledTraining reads no record: following a live run with a bad record in it, it fires at
/// the pause as it does without one, and a rule that reads the bad record goes on beside it.
#[test]
fn stalled_training_fires_past_a_bad_record_in_a_live_run() {
    use std::sync::mpsc;
    use std::time::Duration;

    use smdebug_rules::{RuleRunner, RuleSpec};

    let dir = tempdir().unwrap();
    let run = dir.path().join("run");
    let (go, wait) = mpsc::channel::<()>();
    let trainer = {
        let run = run.clone();
        std::thread::spawn(move || {
            let mut hook = hook_for(&run, SaveConfig::every(1));
            hook.set_mode(Mode::Train);
            for step in 0..16 {
                hook.save_scalar("loss", 1.0 / (step + 1) as f64, &["losses"]);
                hook.step();
                if step == 4 {
                    // Until step 2's record is damaged and the runner follows.
                    wait.recv().unwrap();
                }
                let pause = if step == 9 { 2500 } else { 30 };
                // workload: 30 ms steps, and a hang after step 9 (which the runner must see).
                std::thread::sleep(Duration::from_millis(pause));
            }
            hook.close();
        })
    };
    let index = run.join("index/000000000/000000000004_worker_0.json");
    wait_until(Duration::from_secs(60), "step 4", || index.exists());
    flip_payload_bit(&run, 2, "worker_0", "loss");
    let handle = RuleRunner::builder(&run)
        .spec(RuleSpec::parse("StalledTraining:threshold=1.2").unwrap())
        .spec(RuleSpec::parse("LossNotDecreasing:num_steps=2").unwrap())
        .poll_interval(Duration::from_millis(50))
        .open_timeout(Duration::from_secs(10))
        .build()
        .unwrap()
        .spawn()
        .unwrap();
    go.send(()).unwrap();
    trainer.join().unwrap();
    let summary = handle.join().unwrap();
    let stalled = summary.rule("StalledTraining").unwrap();
    assert_eq!(
        (
            stalled.status,
            stalled.first_fired_step,
            stalled.fired_count
        ),
        (Status::IssuesFound, Some(9), 1),
        "{stalled:#?}"
    );
    assert_eq!(stalled.unreadable_records, 0);
    let losses = summary.rule("LossNotDecreasing").unwrap();
    assert_eq!(losses.status, Status::NoIssuesFound, "{losses:#?}");
    assert_eq!(losses.unreadable_records, 1, "{losses:#?}");
    assert!(
        losses.warnings[0].starts_with("`loss` at step 2: "),
        "{losses:#?}"
    );
}
