//! Runs written by Python smdebug 1.0.34's real framework hooks (committed under
//! tests/data/hooks, made by tests/interop/make_hook_runs.py with torch 2.2.2, tensorflow-cpu
//! 2.11.1 and xgboost 1.7.6) read back through our Trial with the names, steps, modes, workers, collections and
//! values Python's `create_trial` reads from them. The collections files hold the hooks' Python
//! regexes, look-arounds included (`^(?!gradient).*weight`, `[Ll]oss_(?!input).*output`,
//! `^[a-zA-z]+-.+(?<!(auc|map))$`).

mod support;

use smdebug_core::{DType, Mode};
use smdebug_read::trial::Trial;
use support::{check_run, expected_run};

fn open(name: &str) -> Trial {
    let (path, _) = expected_run("hooks", name);
    Trial::open(path.to_str().unwrap()).unwrap()
}

#[test]
fn reads_pytorch_hook_run_with_train_and_eval() {
    let checked = check_run("hooks", "pt_healthy");
    assert_eq!(checked.dtypes.into_iter().collect::<Vec<_>>(), [DType::F32]);
    let trial = open("pt_healthy");
    assert_eq!(trial.modes().unwrap(), [Mode::Train, Mode::Eval]);
    // The names the PyTorch hook gives module parameters, gradients and module outputs.
    let weights = trial.tensor_names_filtered(Some("weights"), None).unwrap();
    assert_eq!(
        weights,
        ["Net_fc1.weight", "Net_fc2.weight", "Net_fc3.weight"],
        "^(?!gradient).*weight must not take the gradients"
    );
    let losses = trial.tensor_names_filtered(Some("losses"), None).unwrap();
    assert_eq!(losses, ["CrossEntropyLoss_output_0"]);
    let relu = trial
        .tensor_names_filtered(Some("relu_activations"), None)
        .unwrap();
    assert_eq!(relu, ["relu1_input_0", "relu1_output_0"]);
}

#[test]
fn reads_pytorch_hook_runs_with_injected_bugs() {
    check_run("hooks", "pt_bugs");
    // NaN and Inf as the hook wrote them (NaN with its sign bit set, from 0 * Inf on x86).
    check_run("hooks", "pt_exploding");
}

#[test]
fn reads_pytorch_hook_run_with_only_default_collections() {
    check_run("hooks", "pt_overfit");
    let trial = open("pt_overfit");
    assert_eq!(trial.tensor_names().unwrap(), ["CrossEntropyLoss_output_0"]);
}

#[test]
fn reads_two_gloo_workers_with_reductions() {
    check_run("hooks", "pt_two_workers");
    let trial = open("pt_two_workers");
    assert_eq!(trial.num_workers().unwrap(), 2);
    assert_eq!(trial.workers().unwrap(), ["worker_0", "worker_1"]);
    // The gradients collection has a ReductionConfig: only reductions were saved, and they are
    // listed under the gradient's name, as Python lists them.
    let g = trial.tensor("gradient/Net_fc1.weight").unwrap();
    let abs_mean = g
        .reduction_value(2, "abs_mean".parse().unwrap(), None, Some("worker_1"))
        .unwrap();
    assert!(abs_mean > 0.0, "{abs_mean}");
    let err = g.raw(2, None, Some("worker_1")).unwrap_err().to_string();
    assert!(err.contains("gradient/Net_fc1.weight"), "{err}");
}

#[test]
fn reads_keras_hook_run_with_train_and_eval() {
    let checked = check_run("hooks", "tf_keras");
    // Keras logs: float32 in TRAIN, float64 at the end of validation; `batch` is int64.
    assert_eq!(
        checked.dtypes.into_iter().collect::<Vec<_>>(),
        [DType::F32, DType::F64, DType::I64]
    );
    let trial = open("tf_keras");
    assert_eq!(
        trial.tensor_names_filtered(Some("biases"), None).unwrap(),
        [
            "dense/weights/dense/bias:0",
            "dense_1/weights/dense_1/bias:0"
        ]
    );
    // The hook writes each epoch's metrics twice in the epoch's last step (steps 4 and 9): one
    // warning per name, not one per index file.
    let repeated = trial.repeated_names().unwrap();
    let names: Vec<&str> = repeated.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["accuracy", "batch", "loss"]);
    let mut files = Vec::new();
    for r in &repeated {
        assert!(
            r.first.contains("000000000004_worker_0.json"),
            "{}",
            r.first
        );
        assert!(r.first.starts_with("index/") && r.first.contains(&format!("`{}`", r.name)));
        files.push(r.index_files);
    }
    assert_eq!(files, [2, 2, 2]);
    let warnings = trial.warnings().unwrap();
    assert_eq!(warnings.len(), 3, "{warnings:#?}");
    for (w, r) in warnings.iter().zip(&repeated) {
        let more = format!(
            "{} (1 more index file lists `{}` twice; its later entry is read too)",
            r.first, r.name
        );
        assert_eq!(w, &more);
    }
    // A refresh lists the files again: nothing is counted twice.
    trial.refresh().unwrap();
    assert_eq!(trial.repeated_names().unwrap(), repeated);
}

#[test]
fn reads_xgboost_hook_runs_with_every_collection() {
    for name in ["xgb_healthy", "xgb_bugs"] {
        let checked = check_run("hooks", name);
        // trees/ID, Feature, Yes, No, Missing and Category are DT_STRING: listed with their
        // steps, but not readable as numbers.
        assert!(checked.string_tensors > 0, "{name}");
        assert!(checked.dtypes.contains(&DType::F32), "{name}");
        assert!(checked.dtypes.contains(&DType::F64), "{name}");
        assert!(checked.dtypes.contains(&DType::I64), "{name}");
    }
    let trial = open("xgb_healthy");
    // The XGBoost hook never sets a mode: every step is GLOBAL.
    assert_eq!(trial.modes().unwrap(), [Mode::Global]);
    let losses = trial.tensor_names_filtered(Some("losses"), None).unwrap();
    assert_eq!(
        losses,
        [
            "train-merror",
            "train-mlogloss",
            "validation-merror",
            "validation-mlogloss"
        ]
    );
}
