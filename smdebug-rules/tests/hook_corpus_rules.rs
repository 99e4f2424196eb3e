//! Every built-in rule on runs written by Python smdebug 1.0.34's real framework hooks (the hook
//! corpus in smdebug-io/tests/data/hooks, made by make_hook_runs.py): with its default
//! selection, the rule finds the tensors it is meant for under the names the hooks write, fires
//! on the run where the bug was injected, and stays silent on the healthy one (having checked
//! something there).
//!
//! PyTorch: `pt_healthy` (fc1-relu1-fc2-tanh1-fc3 on separable blobs, TRAIN and EVAL),
//! `pt_bugs` (the same loop with lr 0, fc1 biases at -10: dead ReLUs and zero fc1 gradients,
//! fc2 biases at ±30: saturated tanh), `pt_exploding` (weights to Inf/NaN), `pt_overfit`
//! (memorising random labels), `pt_two_workers` (gradients saved as reductions only).
//! XGBoost: `xgb_healthy`, `xgb_bugs` (imbalanced classes, a leaking feature, max_depth 3,
//! learning rate 0).

mod support;

use std::path::PathBuf;

use smdebug_rules::{RuleStatus, Status};
use smdebug_testkit::files::copy_tree;
use support::check;
use tempfile::tempdir;

fn run(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../smdebug-io/tests/data/hooks")
        .join(name)
}

fn status(run_name: &str, spec: &str) -> RuleStatus {
    // A copy, so the committed run stays as the hook wrote it.
    let dir = tempdir().unwrap();
    let copy = dir.path().join(run_name);
    copy_tree(&run(run_name), &copy);
    let summary = check(&copy, spec);
    let rule = spec.split(':').next().unwrap();
    summary
        .rule(rule)
        .unwrap_or_else(|| panic!("no status for {rule}"))
        .clone()
}

/// The rule fires on `run_name`, and its message or evidence names `tensor`.
#[track_caller]
fn fires(run_name: &str, spec: &str, tensor: &str) {
    let st = status(run_name, spec);
    assert_eq!(
        st.status,
        Status::IssuesFound,
        "{spec} on {run_name}: {st:?}"
    );
    assert!(st.datapoints > 0, "{spec} on {run_name}: {st:?}");
    assert!(
        st.message.contains(tensor) || st.evidence.iter().any(|e| e.tensor.contains(tensor)),
        "{spec} on {run_name} should name {tensor}: {st:?}"
    );
}

/// The rule checks something on `run_name` and never fires.
#[track_caller]
fn silent(run_name: &str, spec: &str) {
    let st = status(run_name, spec);
    assert_eq!(
        st.status,
        Status::NoIssuesFound,
        "{spec} on {run_name}: {st:?}"
    );
    assert!(
        st.datapoints > 0,
        "{spec} had nothing to check on {run_name}: {st:?}"
    );
}

#[test]
fn vanishing_gradient_reads_the_pytorch_hooks_gradient_names_and_reductions() {
    fires("pt_bugs", "VanishingGradient", "gradient/Net_fc1.weight");
    silent("pt_healthy", "VanishingGradient");
    // Only abs_mean/mean/max/l2 reductions of the gradients were saved there.
    silent("pt_two_workers", "VanishingGradient");
}

#[test]
fn exploding_tensor_fires_when_the_weights_reach_inf_and_nan() {
    fires("pt_exploding", "ExplodingTensor", "Net_fc");
    silent("pt_healthy", "ExplodingTensor");
}

#[test]
fn poor_weight_initialization_reads_relu_and_tanh_inputs() {
    fires("pt_bugs", "PoorWeightInitialization", "");
    silent("pt_healthy", "PoorWeightInitialization");
}

#[test]
fn saturated_activation_reads_the_tanh_module_tensors() {
    fires("pt_bugs", "SaturatedActivation", "tanh1_");
    silent("pt_healthy", "SaturatedActivation");
}

#[test]
fn dead_relu_reads_the_relu_module_outputs() {
    fires("pt_bugs", "DeadRelu", "relu1_output_0");
    silent("pt_healthy", "DeadRelu");
}

#[test]
fn weight_update_ratio_fires_on_frozen_and_on_exploding_weights() {
    fires("pt_bugs", "WeightUpdateRatio", "Net_fc");
    fires("pt_exploding", "WeightUpdateRatio", "Net_fc");
    // The hook saves the weights at EVAL steps too (in the forward pre-hook), and the next TRAIN
    // step's saved weights are the same (the update comes after the save): the rule compares
    // TRAIN steps only, or it would report a ratio of 0 after every EVAL phase.
    silent("pt_healthy", "WeightUpdateRatio");
    silent("pt_two_workers", "WeightUpdateRatio");
}

#[test]
fn all_zero_fires_on_the_gradients_behind_dead_relus() {
    fires("pt_bugs", "AllZero", "gradient/Net_fc1.weight");
    silent("pt_healthy", "AllZero");
}

#[test]
fn unchanged_tensor_fires_when_the_learning_rate_is_zero() {
    fires("pt_bugs", "UnchangedTensor", "Net_fc");
    silent("pt_healthy", "UnchangedTensor");
}

#[test]
fn tensor_variance_fires_when_the_weights_blow_up() {
    fires("pt_exploding", "TensorVariance:max_threshold=1e6", "Net_fc");
    silent("pt_healthy", "TensorVariance:max_threshold=1e6");
}

#[test]
fn loss_not_decreasing_reads_the_pytorch_loss_module_output() {
    // pt_bugs trains at learning rate 0: its loss is stuck, but its 36 TRAIN losses swing
    // ±15 % with the batch, so two windows of 10 cannot tell the stall from noise and the rule
    // does not fire there (the other rules catch that run: VanishingGradient, AllZero, ...).
    // It reads the PyTorch loss module's output: on the healthy run it judged every TRAIN loss.
    silent("pt_healthy", "LossNotDecreasing");
}

#[test]
fn overfit_and_overtraining_compare_train_and_eval_losses() {
    fires("pt_overfit", "Overfit", "CrossEntropyLoss_output_0");
    silent("pt_healthy", "Overfit");
    fires("pt_overfit", "Overtraining", "CrossEntropyLoss_output_0");
    silent("pt_healthy", "Overtraining");
}

#[test]
fn similar_across_runs_fires_when_the_other_run_differs() {
    let other = run("pt_bugs");
    fires(
        "pt_healthy",
        &format!("SimilarAcrossRuns:other_trials={}", other.display()),
        "CrossEntropyLoss_output_0",
    );
    let same = run("pt_healthy");
    silent(
        "pt_healthy",
        &format!("SimilarAcrossRuns:other_trials={}", same.display()),
    );
}

#[test]
fn loss_not_decreasing_reads_xgboost_metrics() {
    fires("xgb_bugs", "LossNotDecreasing", "mlogloss");
    silent("xgb_healthy", "LossNotDecreasing");
}

#[test]
fn class_imbalance_and_confusion_read_xgboost_labels_and_predictions() {
    fires("xgb_bugs", "ClassImbalance", "labels");
    silent("xgb_healthy", "ClassImbalance");
    fires("xgb_bugs", "Confusion", "predictions");
    silent("xgb_healthy", "Confusion");
}

#[test]
fn feature_importance_overweight_reads_xgboost_importances() {
    fires(
        "xgb_bugs",
        "FeatureImportanceOverweight",
        "feature_importance/weight/f0",
    );
    silent("xgb_healthy", "FeatureImportanceOverweight");
}

#[test]
fn tree_depth_rebuilds_the_depth_of_xgboost_trees() {
    fires("xgb_bugs", "TreeDepth", "trees/Node");
    // Every tree there is 4 deep, but 11 of the 24 have 13 or 15 nodes: from the largest node
    // id alone (12 or 14) they would be 3 deep.
    silent("xgb_healthy", "TreeDepth");
}

/// Rules that expect numbers, pointed at every column of the XGBoost hook's trees (six of them
/// string tensors: `trees/ID`, `trees/Feature`, `trees/Yes`, ...): the strings are skipped, the
/// numeric columns checked, and no rule ends in an error.
#[test]
fn rules_that_expect_numbers_skip_string_tensors() {
    for spec in [
        "ExplodingTensor:tensor_regex=^trees/",
        "AllZero:tensor_regex=^trees/",
        "TensorVariance:tensor_regex=^trees/,max_threshold=1e30",
    ] {
        let st = status("xgb_healthy", spec);
        assert_ne!(st.status, Status::Error, "{spec}: {st:?}");
        assert!(st.datapoints > 0, "{spec} checked nothing: {st:?}");
    }
}
