//! Collection and rule patterns are Python `re` patterns: every (pattern, name) pair matches
//! exactly as Python's `re.search` does, and runs whose collections files carry the patterns of
//! Python smdebug's own hooks open and list what Python's Trial lists.
//!
//! Python runs `tests/interop/python_regex.py` with `$SMDEBUG_PYTHON` (`bash .ci/test` sets it).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use smdebug_core::PyRegex;
use smdebug_read::trial::Trial;
use smdebug_storage::testing::python;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/python_regex.py")
}

fn run_script(args: &[&str], stdin: Option<&Value>) -> Value {
    let mut child = Command::new(python())
        .arg(script())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e} (set SMDEBUG_PYTHON)", python()));
    let mut input = child.stdin.take().unwrap();
    if let Some(v) = stdin {
        input.write_all(v.to_string().as_bytes()).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "python_regex.py {args:?} failed (pip install smdebug==1.0.34 'numpy<2' 'protobuf==3.20.3', \
         or bash .ci/setup-python):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // smdebug logs to stdout as well; the answer is the last line.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty());
    serde_json::from_str(last.unwrap_or_default())
        .unwrap_or_else(|e| panic!("python_regex.py printed no JSON ({e}):\n{stdout}"))
}

/// The default `include_regex` of Python smdebug's hooks (pytorch/, mxnet/, tensorflow/,
/// xgboost/ `collection.py`, tensorflow/keras.py, the PyTorch hook's module patterns), this
/// crate family's rule defaults, and the syntax that Python and the Rust engines read
/// differently.
const PATTERNS: &[&str] = &[
    // PyTorch
    "^(?!gradient).*weight",
    "^(?!gradient).*bias",
    "^gradient",
    "[Ll]oss_(?!input).*output",
    "fc1_input_",
    "fc1_output_",
    // MXNet
    ".*loss._(?!input).*output",
    // TensorFlow / Keras
    "bias",
    "^weights/.*/((?!bias).)*$",
    ".*loss.*",
    "dense/inputs/",
    "dense/outputs/",
    // XGBoost
    "^hyperparameters/.*$",
    "^[a-zA-z]+-[a-zA-z0-9]+$",
    "^[a-zA-z]+-.+(?<!(auc|map))$",
    "^predictions$",
    "^labels$",
    "^feature_importance/.*",
    "^average_shap/.*[^/bias]$",
    "^full_shap/.*[^/bias]$",
    "^trees/.*",
    // Rule defaults of smdebug-rules
    r"(?i)relu[^/]*[._]output",
    r"(?i)(tanh|sigmoid)[^/]*[._](input|output)",
    ".*labels",
    ".*predictions",
    r"(^|[/_.])(fc1|conv1)[._]input(_0)?$|hybridsequential0_input_0",
    r"(?i)embedding[^/]*[._]input",
    r"(?i)(relu|tanh|sigmoid)[^/]*[._]input",
    ".*feature_importance/weight",
    // Syntax Python and Rust read differently, and Python features users write
    r"loss\Z",
    r"^fc\d\.\w+\Z",
    "x[[]",
    "^a[&&b]$",
    "^a[~~]$",
    "^[+--]$",
    "^a]$",
    "^[]a]$",
    "^[^]a]$",
    r"fc(?# the first layer )1\.weight",
    r"(?P<layer>fc\d)\.(?P=layer)?weight",
    r"(\w+)/\1",
    "layer{a}",
    "^a{,2}b$",
    "(?i:RELU)_output",
    r"^(?=.*fc1).*weight$",
    r"(?<=gradient/)fc\d",
    r"^(?!.*bias$).*\.(weight|bias)$",
    r"\bfc1\b",
    r"(?x) fc1 \. weight  # verbose",
    "(?s)a.b",
    "(?>fc|f)c1",
    r"^\w+_\d$",
    "",
];

const NAMES: &[&str] = &[
    "fc1.weight",
    "fc1.bias",
    "fc2.weight",
    "gradient/fc1.weight",
    "gradient/fc1.bias",
    "CrossEntropyLoss_output_0",
    "CrossEntropyLoss_input_0",
    "fc1_input_0",
    "fc1_output_0",
    "loss",
    "train_loss",
    "loss_total",
    "softmaxcrossentropyloss0_output_0",
    "softmaxcrossentropyloss0_input_0_output",
    "weights/dense/kernel:0",
    "weights/dense/bias:0",
    "dense/inputs/0",
    "dense/outputs/0",
    "hyperparameters/max_depth",
    "train-rmse",
    "validation-auc",
    "train-map",
    "validation-mlogloss",
    "train-error@0.5",
    "eval_1-ndcg@3",
    "predictions",
    "labels",
    "feature_importance/weight/f0",
    "feature_importance/gain/f1",
    "average_shap/f0",
    "average_shap/bias",
    "full_shap/f1",
    "full_shap/bias",
    "trees/tree_0",
    "relu1_output_0",
    "model.ReLU_output",
    "layer.tanh_input_0",
    "Sigmoid_output",
    "conv1_input_0",
    "net/fc1.input",
    "embedding_input_0",
    "x[",
    "a&",
    "a~",
    ",",
    "a]",
    "]",
    "b",
    "ab",
    "aab",
    "relu/relu",
    "layer{a}",
    "a\nb",
    "loss\n",
    "Ünïcode_1",
];

#[test]
fn patterns_match_exactly_what_python_re_search_matches() {
    let python = run_script(
        &["search"],
        Some(&json!({"patterns": PATTERNS, "names": NAMES})),
    );
    let mut differences = Vec::new();
    for pattern in PATTERNS {
        let expected = &python["results"][*pattern];
        let expected: Vec<bool> = serde_json::from_value(expected.clone()).unwrap_or_else(|_| {
            panic!("Python rejects `{pattern}` ({expected}): the table holds only valid patterns")
        });
        let regex = PyRegex::new(pattern).unwrap_or_else(|e| panic!("`{pattern}`: {e}"));
        for (name, want) in NAMES.iter().zip(expected) {
            // The one documented difference: Python's `$` also matches before a final newline.
            if name.ends_with('\n') && pattern.contains('$') {
                continue;
            }
            if regex.is_match(name) != want {
                differences.push(format!("re.search({pattern:?}, {name:?}) is {want}"));
            }
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// Tensor names a PyTorch and an XGBoost model would save, to be sorted into collections.
fn hook_names(framework: &str) -> &'static [&'static str] {
    match framework {
        "pytorch" => &[
            "fc1.weight",
            "fc1.bias",
            "gradient/fc1.weight",
            "gradient/fc1.bias",
            "CrossEntropyLoss_output_0",
            "CrossEntropyLoss_input_0",
            "relu1_output_0",
        ],
        _ => &[
            "train-rmse",
            "validation-auc",
            "validation-map",
            "train-error@0.5",
            "hyperparameters/max_depth",
            "predictions",
            "labels",
            "feature_importance/weight/f0",
            "average_shap/f0",
            "average_shap/bias",
            "full_shap/f1",
            "trees/tree_0",
        ],
    }
}

#[test]
fn runs_with_the_python_hooks_collections_list_what_python_lists() {
    for framework in ["pytorch", "xgboost", "mxnet"] {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let run_str = run.to_str().unwrap();
        let names = hook_names(framework);
        let mut args = vec!["hook-run", run_str, framework];
        args.extend_from_slice(names);
        let python = run_script(&args, None);
        let python: BTreeMap<String, Vec<String>> =
            serde_json::from_value(python["collections"].clone()).unwrap();

        let trial = Trial::open(run_str).unwrap_or_else(|e| panic!("{framework} run: {e}"));
        assert_eq!(trial.warnings().unwrap(), Vec::<String>::new());
        let ours: BTreeMap<String, Vec<String>> = trial
            .collections()
            .unwrap()
            .iter()
            .map(|c| {
                let names = trial.tensor_names_filtered(Some(c.name()), None).unwrap();
                (c.name().to_string(), names)
            })
            .collect();
        assert_eq!(ours, python, "{framework}: collection -> tensor names");
        assert!(
            python.values().any(|n| !n.is_empty()),
            "{framework}: the names fill some collection"
        );
    }
}

#[test]
fn a_pattern_no_engine_accepts_is_one_warning_and_the_run_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let run_str = run.to_str().unwrap();
    let mut args = vec!["hook-run", run_str, "pytorch"];
    args.extend_from_slice(hook_names("pytorch"));
    run_script(&args, None);
    // Python accepts `(?a)` (ASCII classes); the Rust engines do not. Two workers' files carry it.
    let file = run.join("collections/000000000/worker_0_collections.json");
    let mut json: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    json["collections"]["biases"]["include_regex"] = json!(["(?a)bias"]);
    json["collections"]["biases"]["tensor_names"] = json!(["fc1.bias"]);
    std::fs::write(&file, json.to_string()).unwrap();
    std::fs::write(
        file.with_file_name("worker_1_collections.json"),
        json.to_string(),
    )
    .unwrap();

    let trial = Trial::open(run_str).unwrap();
    let warnings = trial.warnings().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("`(?a)bias`") && warnings[0].contains("collection `biases`"),
        "{}",
        warnings[0]
    );
    assert_eq!(trial.info().unwrap().warnings, warnings);
    assert_eq!(
        trial.tensor_names_filtered(Some("biases"), None).unwrap(),
        ["fc1.bias"]
    );
    assert_eq!(
        trial.tensor_names_filtered(Some("weights"), None).unwrap(),
        ["fc1.weight"]
    );
    assert_eq!(
        trial.tensor_names().unwrap().len(),
        hook_names("pytorch").len()
    );
}

#[test]
fn a_bad_regex_given_to_the_trial_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let run_str = run.to_str().unwrap();
    let mut args = vec!["hook-run", run_str, "pytorch"];
    args.extend_from_slice(hook_names("pytorch"));
    run_script(&args, None);
    let trial = Trial::open(run_str).unwrap();
    let err = trial.tensor_names_filtered(None, Some("fc1(")).unwrap_err();
    assert!(err.to_string().contains("fc1("), "{err}");
    assert_eq!(
        trial
            .tensor_names_filtered(None, Some("^(?!gradient).*bias"))
            .unwrap(),
        ["fc1.bias"]
    );
}
