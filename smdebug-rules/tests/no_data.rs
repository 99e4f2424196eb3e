//! A rule that checked nothing never claims a pass: on real runs, it ends in `NoData` with the
//! reason (its selection matched nothing, it needed more saved steps), a rule that checked
//! something keeps `NoIssuesFound`/`IssuesFound`, and while a live run goes on a rule with
//! nothing checked yet stays `InProgress`.

use std::path::PathBuf;
use std::time::Duration;

use smdebug_core::{CaptureRequest, Hook, SaveConfig, SaveConfigMode, TensorView};
use smdebug_format::system::system_file_key;
use smdebug_io::writer::Writer;
use smdebug_read::trial::Trial;
use smdebug_rules::{
    Error, Needs, ProfilerInput, ProfilerNeeds, ProfilerRule, ProfilerWindow, Result, Rule,
    RuleResult, RuleRunner, RuleSpec, Status, Summary, TensorRule,
};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;
use smdebug_storage::testing::wait_for;

fn hook_run(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../smdebug-io/tests/data/hooks")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

fn offline(location: &str, specs: &[&str]) -> Summary {
    let mut builder = RuleRunner::builder(location).write_into_run(false);
    for spec in specs {
        builder = builder.spec(RuleSpec::parse(spec).unwrap());
    }
    builder.build().unwrap().run_offline().unwrap()
}

/// The XGBoost hook's run has trees and feature importances but no gradients: VanishingGradient
/// checked nothing and says that its selection (the `gradients` collection) matched nothing;
/// the tree rules checked the trees.
#[test]
fn vanishing_gradient_on_the_xgboost_hook_run_has_no_data_naming_gradients() {
    let summary = offline(
        &hook_run("xgb_healthy"),
        &[
            "VanishingGradient",
            "TreeDepth",
            "FeatureImportanceOverweight",
        ],
    );
    let vanishing = summary.rule("VanishingGradient").unwrap();
    assert_eq!(vanishing.status, Status::NoData, "{vanishing:#?}");
    assert_eq!(vanishing.datapoints, 0);
    assert!(
        vanishing
            .message
            .contains("no tensor of this run matched the rule's selection")
            && vanishing.message.contains("`gradients`")
            && vanishing.message.contains("^gradient/"),
        "{}",
        vanishing.message
    );
    assert!(vanishing.steps_evaluated > 0, "the steps were there");
    for rule in ["TreeDepth", "FeatureImportanceOverweight"] {
        let st = summary.rule(rule).unwrap();
        assert!(
            matches!(st.status, Status::NoIssuesFound | Status::IssuesFound) && st.datapoints > 0,
            "{st:#?}"
        );
    }
    assert!(!summary.has_errors());
    assert_eq!(
        summary
            .no_data()
            .map(|r| r.rule.as_str())
            .collect::<Vec<_>>(),
        ["VanishingGradient"]
    );
}

/// A run that saved each weight once: its tensors match WeightUpdateRatio's selection, but the
/// rule compares two saved steps, and says so.
#[test]
fn a_rule_whose_tensors_were_saved_too_rarely_says_what_it_needed() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().to_str().unwrap();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::new(SaveConfigMode::steps([0])))
        .build(Writer::open(location).unwrap())
        .unwrap();
    let w = [0.5f32, -0.25, 1.0, 2.0];
    for _ in 0..4 {
        hook.save_tensor(
            "fc1.weight",
            &TensorView::from_slice(&w, &[2, 2]).unwrap(),
            &["weights"],
        );
        hook.step();
    }
    hook.close();
    drop(hook);
    let summary = offline(location, &["WeightUpdateRatio", "AllZero"]);
    let ratio = summary.rule("WeightUpdateRatio").unwrap();
    assert_eq!(ratio.status, Status::NoData, "{ratio:#?}");
    assert!(
        ratio.message.contains("`fc1.weight`")
            && ratio
                .message
                .contains("each weight at two saved TRAIN (or GLOBAL) steps"),
        "{}",
        ratio.message
    );
    // The same tensor at the same step is enough for a rule that looks at one step.
    let zero = summary.rule("AllZero").unwrap();
    assert_eq!(
        (zero.status, zero.datapoints),
        (Status::NoIssuesFound, 1),
        "{zero:#?}"
    );
}

/// Following a live run, a rule that has checked nothing yet is `InProgress`, not `NoData`: the
/// verdict comes when the run ends.
#[test]
fn a_rule_with_nothing_checked_stays_in_progress_until_the_run_ends() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().to_str().unwrap().to_string();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(Writer::open(&location).unwrap())
        .unwrap();
    for step in 0..3 {
        hook.save_scalar("loss", 1.0 / (step + 1) as f64, &["losses"]);
        hook.step();
    }
    let handle = RuleRunner::builder(&location)
        .spec(RuleSpec::new("VanishingGradient"))
        .spec(RuleSpec::parse("LossNotDecreasing:num_steps=1").unwrap())
        .poll_interval(Duration::from_millis(20))
        // The writer publishes the first steps on its own thread: wait for the run to appear.
        .open_timeout(Duration::from_secs(60))
        .spawn()
        .unwrap();
    // Wait until the runner has checked the loss at the steps written so far.
    let seen = wait_for(
        Duration::from_secs(60),
        "the runner to see the steps",
        || {
            handle.summary().filter(|s| {
                s.rule("LossNotDecreasing")
                    .is_some_and(|r| r.datapoints >= 2)
            })
        },
    );
    assert!(!seen.run_complete);
    for r in &seen.rules {
        assert_eq!(r.status, Status::InProgress, "{r:#?}");
    }
    hook.close();
    drop(hook);
    let done = handle.join().unwrap();
    assert!(done.run_complete && done.finished);
    assert_eq!(
        done.rule("VanishingGradient").unwrap().status,
        Status::NoData
    );
    assert_eq!(
        done.rule("LossNotDecreasing").unwrap().status,
        Status::NoIssuesFound
    );
}

/// A custom rule reading tensors the run does not have: its own selection is named.
struct AttentionEntropy;

impl TensorRule for AttentionEntropy {
    fn name(&self) -> &str {
        "AttentionEntropy"
    }

    fn needs(&self) -> Needs {
        Needs::tensors(self.name(), &["layer0.attn.scores"], "attention")
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        if smdebug_rules::value_at(self.name(), trial, "layer0.attn.scores", step)?.is_some() {
            result.datapoints = 1;
        }
        Ok(result)
    }
}

#[test]
fn a_custom_rule_that_matched_nothing_names_its_own_selection() {
    let summary = RuleRunner::builder(hook_run("pt_healthy"))
        .write_into_run(false)
        .rule(Rule::tensor(AttentionEntropy), Vec::new())
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let st = summary.rule("AttentionEntropy").unwrap();
    assert_eq!(st.status, Status::NoData);
    assert!(
        st.message.contains("tensor `layer0.attn.scores`"),
        "{}",
        st.message
    );
}

/// A rule asking for a capture no hook can make fails when it is registered, naming itself.
struct AsksForTheImpossible(&'static str);

impl TensorRule for AsksForTheImpossible {
    fn name(&self) -> &str {
        self.0
    }

    fn needs(&self) -> Needs {
        Needs::default().capturing(
            CaptureRequest::new("broken", SaveConfig::every(1), self.0).with_regex("relu("),
        )
    }

    fn invoke_at_step(&mut self, _trial: &Trial, step: u64) -> Result<RuleResult> {
        Ok(RuleResult::new(step))
    }
}

#[test]
fn a_rule_that_cannot_be_registered_fails_when_the_runner_is_built() {
    let location = hook_run("pt_healthy");
    let err = RuleRunner::builder(&location)
        .rule(Rule::tensor(AsksForTheImpossible("Impossible")), Vec::new())
        .build()
        .err()
        .unwrap();
    assert!(
        matches!(&err, Error::Capture { rule, .. } if rule == "Impossible"),
        "{err}"
    );
    assert!(err.to_string().contains("relu("), "{err}");
    let unnamed = RuleRunner::builder(&location)
        .rule(Rule::tensor(AsksForTheImpossible(" ")), Vec::new())
        .spawn()
        .err()
        .unwrap();
    assert!(matches!(unnamed, Error::BadRule { .. }), "{unnamed}");
}

/// A custom profiler rule that counts what it is handed of the kind it declares, and never
/// says why it checked nothing: the runner says it from the declaration.
struct Counts(ProfilerNeeds);

impl ProfilerRule for Counts {
    fn name(&self) -> &str {
        "Counts"
    }

    fn needs(&self) -> ProfilerNeeds {
        self.0.clone()
    }

    fn invoke_on_window(&mut self, window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
        let mut r = RuleResult::at_time(0, window.now_us);
        if self.0.reads(ProfilerInput::SystemMetrics) {
            r.datapoints += window
                .samples
                .iter()
                .filter(|s| s.metric_type == "gpu")
                .count();
        }
        if self.0.reads(ProfilerInput::Spans) {
            r.datapoints += window.spans.len();
        }
        Ok(vec![r])
    }
}

/// A run with CPU metrics only (no spans, no tensors): a profiler rule reading spans has
/// nothing to check and the runner says the run has no framework spans; one reading system
/// metrics that needs GPU metrics says what it needed; neither passes.
#[test]
fn a_profiler_rule_that_checked_nothing_is_told_why_from_what_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let start_s = 1_700_000_000u64;
    let mut text = String::new();
    for i in 0..10 {
        text.push_str(&format!(
            "{{\"Type\":\"cpu\",\"Name\":\"total\",\"Dimension\":\"CPUUtilization\",\
             \"Value\":50,\"NodeId\":\"algo-1\",\"Timestamp\":{}}}\n",
            start_s as f64 + f64::from(i) + 0.5
        ));
    }
    LocalStorage::new(dir.path())
        .unwrap()
        .put(
            &system_file_key(start_s, "algo-1"),
            text.into_bytes().into(),
        )
        .unwrap();
    let summary = RuleRunner::builder(dir.path())
        .write_into_run(false)
        .rule(
            Rule::profiler(Counts(ProfilerNeeds::reading([
                ProfilerInput::Spans,
                ProfilerInput::StepTimeline,
            ]))),
            Vec::new(),
        )
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let st = summary.rule("Counts").unwrap();
    assert_eq!(st.status, Status::NoData, "{st:#?}");
    assert_eq!(
        st.message,
        "nothing to check: the rule reads framework spans and the step timeline and this run \
         has none (no framework spans under framework/pevents/)"
    );
    let summary = RuleRunner::builder(dir.path())
        .write_into_run(false)
        .rule(
            Rule::profiler(Counts(
                ProfilerNeeds::reading([ProfilerInput::SystemMetrics]).requiring("GPU metrics"),
            )),
            Vec::new(),
        )
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let st = summary.rule("Counts").unwrap();
    assert_eq!(st.status, Status::NoData, "{st:#?}");
    assert_eq!(st.message, "nothing to check: the rule needs GPU metrics");
    assert!(
        st.steps_evaluated > 0,
        "the rule was handed the CPU metrics"
    );
}
