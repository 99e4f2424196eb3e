//! SageMaker's hook-config file (`debughookconfig.json`), read as Python smdebug 1.0.34 reads it:
//! every example under `tests/data/sagemaker/hook/` (SageMaker's documentation, smdebug's own
//! test configs; see the README there) parses, to the values smdebug's `json_config.py` reads
//! from it (run by `tests/interop/hook_config.py` with `$SMDEBUG_PYTHON`); a missing file is
//! `None`; broken ones are errors naming the file, the key and the value.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use smdebug_core::{HookConfig, Mode, ReductionConfig, SaveConfig};
use smdebug_io::sagemaker::{
    ConfigSources, DEFAULT_SAGEMAKER_TENSORS_DIR, HOOK_CONFIG_ENV, HookConfigFile,
};
use smdebug_storage::testing::python;

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sagemaker/hook");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 30,
        "{} fixtures in {}",
        files.len(),
        dir.display()
    );
    files
}

fn fixture(name: &str) -> HookConfig {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/sagemaker/hook")
        .join(name);
    HookConfigFile::read(&path)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .unwrap_or_else(|| panic!("{name} is missing"))
        .config()
        .clone()
}

fn steps_saved(save: &SaveConfig, mode: Mode, steps: &[u64]) -> Vec<u64> {
    steps
        .iter()
        .copied()
        .filter(|s| save.should_save(mode, *s))
        .collect()
}

/// The mode steps both sides are asked about.
fn probe_steps() -> Vec<u64> {
    let mut steps: Vec<u64> = (0..=60).collect();
    steps.extend([99, 100, 500, 999, 1000, 1998, 5000, 999_999, 1_000_000]);
    steps
}

fn reductions_json(r: &ReductionConfig) -> Value {
    let mut names: Vec<String> = r.reductions.iter().map(|r| r.tensor_name_part()).collect();
    names.sort();
    json!({"save_raw_tensor": r.save_raw_tensor, "save_shape": r.save_shape, "reductions": names})
}

fn schedule_json(save: &SaveConfig, steps: &[u64]) -> Value {
    Value::Object(
        Mode::ALL
            .into_iter()
            .map(|m| (m.name().to_string(), json!(steps_saved(save, m, steps))))
            .collect(),
    )
}

#[test]
fn every_example_hook_config_reads_as_python_smdebug_reads_it() {
    let files = fixtures();
    let steps = probe_steps();
    let step_arg = steps
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/hook_config.py");
    let out = Command::new(python())
        .arg(&script)
        .arg(&step_arg)
        .args(&files)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e} (set SMDEBUG_PYTHON)", python()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "hook_config.py failed (bash .ci/setup-python):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    let python: Value = serde_json::from_str(last).unwrap();

    let mut differences = Vec::new();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let py = &python[path.to_str().unwrap()];
        assert!(py.get("error").is_none(), "{name}: smdebug failed: {py}");
        let ours = HookConfigFile::read(path)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .unwrap();
        let cfg = ours.config();
        let raw: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let hook_params = raw.get("HookParameters").cloned().unwrap_or(json!({}));
        let mut check = |what: &str, ours: Value, theirs: &Value| {
            if ours != *theirs {
                differences.push(format!("{name}: {what}: ours {ours}, smdebug {theirs}"));
            }
        };
        let missing: Vec<&String> = py["collections"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|coll| !cfg.collections.iter().any(|c| c.name() == coll.as_str()))
            .collect();
        check("collections", json!(missing), &json!([]));

        check(
            "out_dir",
            json!(
                cfg.out_dir
                    .as_deref()
                    .unwrap_or(DEFAULT_SAGEMAKER_TENSORS_DIR)
            ),
            &py["out_dir"],
        );
        check("save_all", json!(cfg.save_all), &py["save_all"]);
        // Not stated: every worker saves here (this crate's default), `one` in smdebug.
        if hook_params.get("include_workers").is_some() {
            let ours = if cfg.save_all_workers { "all" } else { "one" };
            check("include_workers", json!(ours), &py["include_workers"]);
        } else {
            assert!(cfg.save_all_workers, "{name}");
        }
        check(
            "export_tensorboard",
            json!(cfg.export_tensorboard),
            &py["export_tensorboard"],
        );
        check(
            "tensorboard_dir",
            json!(cfg.tensorboard_dir),
            &py["tensorboard_dir"],
        );
        let theirs_included = py["include_collections"].as_array().map(|list| {
            let mut set: BTreeSet<String> = list
                .iter()
                .map(|n| n.as_str().unwrap().to_string())
                .collect();
            // smdebug's hook adds `default` when HookParameters has include_regex.
            if hook_params.get("include_regex").is_some() {
                set.insert("default".into());
            }
            set
        });
        let ours_included = cfg
            .include_collections
            .as_ref()
            .map(|l| l.iter().cloned().collect::<BTreeSet<_>>());
        check(
            "include_collections",
            json!(ours_included),
            &json!(theirs_included),
        );
        check(
            "hook schedule",
            schedule_json(&cfg.save_config, &steps),
            &py["hook"]["save"],
        );
        // smdebug reads `save_shape` only beside `reductions`, though its own test of this
        // file expects shapes saved; here it is read alone too (pinned below).
        let save_shape_alone = name == "smdebug_pytorch_test_hook_save_shape.json";
        let hook_reductions = if py["hook"]["reductions"].is_null() && !save_shape_alone {
            json!(cfg.reduction_config == ReductionConfig::default())
        } else {
            reductions_json(&cfg.reduction_config)
        };
        let expected = if save_shape_alone {
            json!({"save_raw_tensor": true, "save_shape": true, "reductions": []})
        } else if py["hook"]["reductions"].is_null() {
            json!(true)
        } else {
            py["hook"]["reductions"].clone()
        };
        check("hook reductions", hook_reductions, &expected);

        for (coll, theirs) in py["collections"].as_object().unwrap() {
            let Some(c) = cfg.collections.iter().find(|c| c.name() == coll) else {
                continue;
            };
            let save = c.save_config.as_ref().unwrap_or(&cfg.save_config);
            check(
                &format!("{coll} schedule"),
                schedule_json(save, &steps),
                &theirs["save"],
            );
            check(
                &format!("{coll} reductions"),
                c.reduction_config
                    .as_ref()
                    .map_or(Value::Null, reductions_json),
                &theirs["reductions"],
            );
            // Built-in patterns (our `gradients` matches `^gradient/`) come first here.
            let ours_regex: Vec<&String> = c
                .include_regex()
                .iter()
                .skip(c.include_regex().len() - theirs["include_regex"].as_array().unwrap().len())
                .collect();
            check(
                &format!("{coll} include_regex"),
                json!(ours_regex),
                &theirs["include_regex"],
            );
            check(
                &format!("{coll} save_histogram"),
                json!(c.save_histogram),
                &theirs["save_histogram"],
            );
        }
    }
    assert!(
        differences.is_empty(),
        "{} differences from smdebug:\n{}",
        differences.len(),
        differences.join("\n")
    );
}

#[test]
fn documentation_examples_parse_to_the_values_they_state() {
    // The AWS CLI training-job template: losses every 50th TRAIN step, only losses chosen.
    let cfg = fixture("docs_cli_training_job_losses.json");
    let losses = cfg
        .collections
        .iter()
        .find(|c| c.name() == "losses")
        .unwrap();
    let save = losses.save_config.as_ref().unwrap();
    assert_eq!(
        steps_saved(save, Mode::Train, &[0, 49, 50, 100]),
        [0, 50, 100]
    );
    assert_eq!(steps_saved(save, Mode::Eval, &[0, 50, 500]), [0, 500]);
    assert_eq!(
        cfg.include_collections.as_deref(),
        Some(&["losses".to_string()][..])
    );
    assert!(
        cfg.out_dir.is_none(),
        "S3OutputPath is SageMaker's upload target, not read"
    );

    // The custom-rule example: a new collection by regex, every 500th step until 5000.
    let cfg = fixture("docs_cli_custom_rule_relu_activations.json");
    let relu = cfg
        .collections
        .iter()
        .find(|c| c.name() == "relu_activations")
        .unwrap();
    assert!(relu.matches("layer1.relu_output_0") && !relu.matches("fc1.weight"));
    let save = relu.save_config.as_ref().unwrap();
    assert_eq!(
        steps_saved(save, Mode::Train, &[0, 500, 4500, 5000, 5500]),
        [0, 500, 4500]
    );
    assert!(cfg.includes("relu_activations") && !cfg.includes("weights"));

    // Boto3: gradients every 500th TRAIN and every 50th EVAL step.
    let cfg = fixture("docs_boto3_vanishing_gradient_gradients.json");
    let g = cfg
        .collections
        .iter()
        .find(|c| c.name() == "gradients")
        .unwrap();
    let save = g.save_config.as_ref().unwrap();
    assert_eq!(steps_saved(save, Mode::Train, &[50, 500]), [500]);
    assert_eq!(steps_saved(save, Mode::Eval, &[50, 500]), [50, 500]);

    // smdebug's own "full" example: reductions, include_regex, start and end steps.
    let cfg = fixture("smdebug_mxnet_test_hook_from_json_config_full.json");
    assert_eq!(
        cfg.out_dir.as_deref(),
        Some("/tmp/newlogsRunTest2/test_hook_from_json_config_full")
    );
    let names: Vec<String> = cfg
        .reduction_config
        .reductions
        .iter()
        .map(|r| r.tensor_name_part())
        .collect();
    assert_eq!(
        names,
        [
            "min",
            "max",
            "mean",
            "std",
            "abs_variance",
            "abs_sum",
            "abs_l2"
        ]
    );
    assert!(!cfg.reduction_config.save_raw_tensor);
    assert_eq!(
        steps_saved(&cfg.save_config, Mode::Train, &[0, 1, 4, 5, 100, 200]),
        [1, 4, 100, 200],
        "save_steps 1-4, then every 100th from step 1"
    );
    let default = cfg
        .collections
        .iter()
        .find(|c| c.name() == "default")
        .unwrap();
    assert_eq!(default.include_regex(), ["regexe1", "regex2"]);
}

#[test]
fn a_missing_file_means_the_codes_settings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("debughookconfig.json");
    let sources = ConfigSources::new(&path, dir.path().join("profilerconfig.json"));
    assert!(sources.load_hook_config().unwrap().is_none());
}

#[test]
fn the_file_the_environment_names_is_laid_over_the_code() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hook.json");
    std::fs::write(
        &path,
        r#"{"LocalPath": "/data/run", "HookParameters": {"save_interval": "3"},
            "CollectionConfigurations": [{"CollectionName": "weights",
                                          "CollectionParameters": {"reductions": "abs_l2_norm"}}]}"#,
    )
    .unwrap();
    let env_value = path.display().to_string();
    let sources =
        ConfigSources::from_vars(|var| (var == HOOK_CONFIG_ENV).then(|| env_value.clone()));
    let file = sources.load_hook_config().unwrap().unwrap();
    assert_eq!(file.path(), path);
    let code = HookConfig {
        out_dir: Some("runs/code".into()),
        save_all: true,
        ..HookConfig::default()
    };
    let cfg = file.over(code).unwrap();
    assert_eq!(cfg.out_dir.as_deref(), Some("/data/run"));
    assert!(cfg.save_all, "not stated in the file: the code's");
    assert_eq!(
        steps_saved(&cfg.save_config, Mode::Train, &[0, 1, 3, 6]),
        [0, 3, 6]
    );
    assert!(cfg.includes("weights") && cfg.includes("all") && !cfg.includes("gradients"));
}

#[test]
fn broken_files_are_errors_naming_the_file_the_key_and_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("{\"HookParameters\": {", "EOF while parsing"),
        (
            r#"{"HookParameters": {"save_interval": "ten"}}"#,
            "HookParameters: `save_interval`: `ten`",
        ),
        (
            r#"{"HookParameters": {"reductions": "mean,median"}}"#,
            "unknown reduction `median`",
        ),
        (
            r#"{"CollectionConfigurations": [{"CollectionName": "acts",
                "CollectionParameters": {"include_regex": "relu("}}]}"#,
            "bad regex `relu(` in CollectionConfigurations[0]",
        ),
        (
            r#"{"HookParameters": {"save_histogram": "no"}, "CollectionConfigurations": [
                {"CollectionName": "w", "CollectionParameters": {"save_histogram": "perhaps"}}]}"#,
            "CollectionConfigurations[0]: `w`: `save_histogram`: `perhaps`",
        ),
        (
            r#"{"HookParameters": {"start_step": 10, "end_step": "5"}}"#,
            "end_step 5 is before start_step 10",
        ),
        (
            r#"{"HookParameters": {"export_tensorboard": 2}}"#,
            "`export_tensorboard`",
        ),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad{i}.json"));
        std::fs::write(&path, text).unwrap();
        let err = HookConfigFile::read(&path).unwrap_err().to_string();
        assert!(
            err.contains(&path.display().to_string()) && err.contains(needle),
            "`{text}` gave `{err}`, expected the file and `{needle}`"
        );
    }
}
