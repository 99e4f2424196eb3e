//! Rules ask for what they need: every built-in debugging rule declares capture requests, and a
//! hook that saves nothing but what the rules asked for, under the examples' ndarray MLP, gives
//! every rule that applies to such a network something to check. The rules that do not apply
//! (tree models, NLP inputs, labels and predictions the MLP does not save) say so.

mod support;

use std::path::Path;

use smdebug_core::{Collection, Hook, SaveConfig, SaveConfigMode};
use smdebug_examples::{Bug, TrainConfig, train};
use smdebug_io::writer::Writer;
use smdebug_rules::report::PROFILER_REPORT;
use smdebug_rules::{
    RULE_SAVE_INTERVAL, RuleRunner, RuleSpec, Status, Summary, builtin_profiler_rules,
    builtin_rules, capture_requests,
};
use support::data;

/// Every built-in debugging rule with the parameters it needs (the run to compare with for
/// SimilarAcrossRuns; these runs save at the rules' interval, so each TRAIN tensor twice and
/// 8 images at a time: UnchangedTensor compares 2 saved values, not 3, and CheckInputImages
/// judges 16 images, not 500).
fn debugging_specs(other_run: &Path) -> Vec<RuleSpec> {
    builtin_rules()
        .iter()
        .map(|b| match b.name {
            "UnchangedTensor" => RuleSpec::parse("UnchangedTensor:num_steps=2").unwrap(),
            "TensorVariance" => RuleSpec::parse("TensorVariance:max_threshold=1e9").unwrap(),
            "CheckInputImages" => RuleSpec::parse("CheckInputImages:threshold_samples=16").unwrap(),
            "SimilarAcrossRuns" => RuleSpec::new("SimilarAcrossRuns")
                .param("other_trials", other_run.to_str().unwrap()),
            name => RuleSpec::new(name),
        })
        .collect()
}

/// The rules that have nothing to read in the MLP's runs, whatever the hook saves.
const NOT_FOR_THE_MLP: [&str; 3] = [
    "NLPSequenceRatio",
    "FeatureImportanceOverweight",
    "TreeDepth",
];

#[test]
fn every_builtin_debugging_rule_asks_for_the_collections_it_reads() {
    let other = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../smdebug-io/tests/data/golden/pysmdebug_multi");
    for spec in debugging_specs(&other) {
        let requests = capture_requests(std::slice::from_ref(&spec)).unwrap();
        assert!(!requests.is_empty(), "{} asks for nothing", spec.name);
        for r in &requests {
            assert_eq!(r.requested_by, spec.name);
            assert!(!r.collection.trim().is_empty());
        }
    }
    let profiler: Vec<RuleSpec> = builtin_profiler_rules()
        .iter()
        .map(|b| RuleSpec::new(b.name))
        .chain([RuleSpec::new(PROFILER_REPORT)])
        .collect();
    assert!(capture_requests(&profiler).unwrap().is_empty());
    // SageMaker's collections_to_save, by the names it used.
    let of = |rule: &str| capture_requests(&[RuleSpec::new(rule)]).unwrap();
    assert_eq!(of("VanishingGradient")[0].collection, "gradients");
    assert_eq!(of("LossNotDecreasing")[0].collection, "losses");
    assert_eq!(of("WeightUpdateRatio")[0].collection, "weights");
    let dead_relu = &of("DeadRelu")[0];
    assert_eq!(dead_relu.collection, "relu_output");
    assert!(!dead_relu.include_regex.is_empty());
    assert!(
        of("PoorWeightInitialization")
            .iter()
            .any(|r| r.collection == "relu_input")
    );
    let every = SaveConfig::every(RULE_SAVE_INTERVAL);
    assert_eq!(of("VanishingGradient")[0].save_config, every);
    // LossNotDecreasing compares windows of `num_steps` (10) losses: it asks for them often
    // enough to have two by the rules' interval.
    assert_eq!(
        of("LossNotDecreasing")[0].save_config,
        SaveConfig::every(25)
    );
    // PoorWeightInitialization reads the first `steps` steps: it asks for each of them.
    let early = of("PoorWeightInitialization");
    let due: Vec<u64> = (0..20)
        .filter(|s| {
            early[0]
                .save_config
                .should_save(smdebug_core::Mode::Train, *s)
        })
        .collect();
    assert_eq!(due, (0..10).collect::<Vec<_>>());
    // A bad parameter is the same error the runner gives.
    assert!(capture_requests(&[RuleSpec::parse("DeadRelu:tensor_regex=relu[").unwrap()]).is_err());
}

/// What the hook saves for a run.
enum Requests<'a> {
    /// Nothing by default, and what these rules ask for.
    Rules(&'a [RuleSpec]),
    /// Nothing by default, and the losses on the user's own schedule (every step), no
    /// requests.
    LossesOnly,
}

/// Trains the examples' MLP (8 images a step, 6 epochs: 936 TRAIN steps, enough for the
/// rules' interval to save twice) through a hook configured by `requests`.
fn mlp_run(dir: &Path, bug: Option<Bug>, requests: Requests<'_>) {
    let (tr, ev) = data();
    let mut builder = Hook::builder().save_config(SaveConfig::new(SaveConfigMode::never()));
    match requests {
        Requests::Rules(specs) => {
            for request in capture_requests(specs).unwrap() {
                builder = builder.capture(request);
            }
        }
        Requests::LossesOnly => {
            builder = builder
                .collection(Collection::new("losses").with_save_config(SaveConfig::every(1)));
        }
    }
    let mut hook = builder
        .build(Writer::open(dir.to_str().unwrap()).unwrap())
        .unwrap();
    let cfg = TrainConfig {
        epochs: 6,
        batch_size: 8,
        bug,
        ..TrainConfig::default()
    };
    let summary = train(&cfg, tr, ev, Some(&mut hook));
    assert!(
        summary.steps > 2 * RULE_SAVE_INTERVAL,
        "{} steps",
        summary.steps
    );
    hook.close();
    drop(hook);
}

fn evaluate(dir: &Path, specs: &[RuleSpec]) -> Summary {
    let mut builder = RuleRunner::builder(dir).write_into_run(false);
    for spec in specs {
        builder = builder.spec(spec.clone());
    }
    builder.build().unwrap().run_offline().unwrap()
}

#[track_caller]
fn assert_checked(summary: &Summary, rule: &str) {
    let st = summary.rule(rule).unwrap();
    assert!(
        matches!(st.status, Status::NoIssuesFound | Status::IssuesFound) && st.datapoints > 0,
        "{rule} had nothing to check: {st:#?}"
    );
}

#[test]
fn a_hook_saving_only_what_the_rules_ask_for_gives_every_rule_data_on_the_mlp() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (first, relu, sigmoid) = (dirs[0].path(), dirs[1].path(), dirs[2].path());
    // SimilarAcrossRuns compares with a first run made the same way.
    let specs = debugging_specs(first);
    let without_similar: Vec<RuleSpec> = specs
        .iter()
        .filter(|s| s.name != "SimilarAcrossRuns")
        .cloned()
        .collect();
    mlp_run(first, None, Requests::Rules(&without_similar));
    mlp_run(relu, None, Requests::Rules(&specs));
    let summary = evaluate(relu, &specs);
    for b in builtin_rules() {
        let st = summary.rule(b.name).unwrap();
        if NOT_FOR_THE_MLP.contains(&b.name) {
            assert_eq!(st.status, Status::NoData, "{st:#?}");
            assert!(
                st.message
                    .contains("no tensor of this run matched the rule's selection"),
                "{st:#?}"
            );
        } else if b.name == "ClassImbalance" {
            // The loss's inputs, saved at the EVAL steps the rules asked for: 8 labels a step,
            // short of the 500 it counts before judging, which it says.
            assert_eq!(st.status, Status::NoData, "{st:#?}");
            assert!(
                st.message
                    .starts_with("read `loss.labels`, `loss.predictions` at ")
                    && st.message.contains("500 labels in all"),
                "{st:#?}"
            );
        } else if b.name == "SaturatedActivation" {
            // A ReLU network has no tanh or sigmoid.
            assert_eq!(st.status, Status::NoData, "{st:#?}");
        } else {
            assert_checked(&summary, b.name);
        }
    }
    // The sigmoid network (the vanishing-gradient bug) gives SaturatedActivation its tensors.
    let saturated = [RuleSpec::new("SaturatedActivation")];
    mlp_run(
        sigmoid,
        Some(Bug::VanishingGradients),
        Requests::Rules(&saturated),
    );
    assert_checked(&evaluate(sigmoid, &saturated), "SaturatedActivation");
}

/// The same loop with the losses saved on the user's schedule and no requests: the rules that
/// read anything else have nothing to check, and say which collection they missed.
#[test]
fn without_the_requests_the_rules_that_read_more_than_losses_have_no_data() {
    let dir = tempfile::tempdir().unwrap();
    mlp_run(dir.path(), None, Requests::LossesOnly);
    let summary = evaluate(
        dir.path(),
        &[
            RuleSpec::new("VanishingGradient"),
            RuleSpec::new("DeadRelu"),
            RuleSpec::new("LossNotDecreasing"),
        ],
    );
    let vanishing = summary.rule("VanishingGradient").unwrap();
    assert_eq!(vanishing.status, Status::NoData);
    assert!(
        vanishing.message.contains("`gradients`"),
        "{}",
        vanishing.message
    );
    let dead = summary.rule("DeadRelu").unwrap();
    assert_eq!(dead.status, Status::NoData);
    assert!(dead.message.contains("relu"), "{}", dead.message);
    assert_checked(&summary, "LossNotDecreasing");
}
