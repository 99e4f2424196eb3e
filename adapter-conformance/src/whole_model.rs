//! What each adapter's whole-model tests (`tests/whole_model.rs`: a model registered with its
//! `layers`, trained on the digits) share: the hook configurations they train under, reading a
//! tensor back, comparing it with the framework's own, and the label rules run on the run.

use std::path::Path;

use smdebug_core::{Hook, HookBuilder, SaveConfig};
use smdebug_read::trial::Trial;
use smdebug_rules::{RuleRunner, RuleSpec, Status};

/// Only DeadRelu's collection (`relu_output`, by regex) besides the losses, every other step:
/// of a registered model's tensors only the ReLU's outputs are written.
pub fn relu_outputs_only() -> HookBuilder {
    Hook::builder()
        .save_config(SaveConfig::every(2))
        .include_collections(&["relu_output"])
        .include_regex("relu_output", r"relu\d*\.output$")
}

/// Only the loss's inputs (`labels`, `predictions`) besides the losses, every step.
pub fn loss_inputs_only() -> HookBuilder {
    Hook::builder()
        .save_config(SaveConfig::every(1))
        .include_collections(&["labels", "predictions"])
}

/// Every element of tensor `name` at global `step`, as f64.
pub fn value_at(trial: &Trial, name: &str, step: u64) -> Vec<f64> {
    trial
        .tensor(name)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .value(step, None, None)
        .unwrap_or_else(|e| panic!("{name} at step {step}: {e}"))
        .iter()
        .copied()
        .collect()
}

/// `got` equals `want` element by element within f32 rounding.
#[track_caller]
pub fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{what}: {g} vs {w}"
        );
    }
}

/// The run's tensor names, sorted.
pub fn sorted_names(run: &Path) -> Vec<String> {
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    let mut names = trial.tensor_names().unwrap();
    names.sort();
    names
}

/// ClassImbalance and Confusion, run on the run, judged the loss's inputs it holds (whatever
/// they found: the model is young).
#[track_caller]
pub fn assert_label_rules_judged(run: &Path) {
    let summary = RuleRunner::builder(run)
        .write_into_run(false)
        .spec(RuleSpec::new("ClassImbalance"))
        .spec(RuleSpec::new("Confusion"))
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    for rule in ["ClassImbalance", "Confusion"] {
        let st = summary.rule(rule).unwrap();
        assert!(
            matches!(st.status, Status::NoIssuesFound | Status::IssuesFound) && st.datapoints > 0,
            "{rule}: {st:#?}"
        );
    }
}
