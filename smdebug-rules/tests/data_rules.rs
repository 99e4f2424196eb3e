//! Rules for data and tree models: NLPSequenceRatio on token batches recorded through the real
//! hook and writer; FeatureImportanceOverweight and TreeDepth on runs written by Python
//! smdebug's own FileWriter with the tensor names of its XGBoost hook.

mod support;

use std::path::Path;
use std::process::Command;

use smdebug_core::{Mode, SaveConfig, TensorView};
use smdebug_rules::Status;
use support::{check, hook_for};
use tempfile::tempdir;

fn python() -> String {
    std::env::var("SMDEBUG_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn write_xgboost_run(dir: &Path, importances: &[Vec<f64>], depths: &[u32]) {
    write_xgboost_spec(
        dir,
        serde_json::json!({"importances": importances, "depths": depths}),
    );
}

/// Writes a run with `write_xgboost_run.py` from its JSON spec.
fn write_xgboost_spec(dir: &Path, spec: serde_json::Value) {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/interop/write_xgboost_run.py"
    );
    let out = Command::new(python())
        .arg(script)
        .arg(dir)
        .arg(spec.to_string())
        .output()
        .expect("python with smdebug (SMDEBUG_PYTHON)");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("OK:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn tree_rules_read_python_smdebug_xgboost_tensors() {
    let even = vec![1.0; 10];
    let skewed = {
        let mut v = vec![0.2; 10];
        v[3] = 6.0;
        v[7] = 2.0;
        v[0] = 1.0;
        v
    };
    let bad = tempdir().unwrap();
    // The importance concentrates at step 2; the tree built at step 3 is shallower.
    write_xgboost_run(
        bad.path(),
        &[even.clone(), even.clone(), skewed.clone(), skewed],
        &[4, 4, 4, 2],
    );
    let s = check(bad.path(), "FeatureImportanceOverweight");
    let st = s.rule("FeatureImportanceOverweight").unwrap();
    assert_eq!(
        (st.status, st.first_fired_step),
        (Status::IssuesFound, Some(2)),
        "{st:?}"
    );
    assert!(
        st.message.contains("feature_importance/weight/f3"),
        "{}",
        st.message
    );
    // (6 + 2 + 1) / 10.4 of the importance in the top three.
    assert!((st.evidence[0].value - 9.0 / 10.4).abs() < 1e-9);
    let s = check(bad.path(), "TreeDepth");
    let st = s.rule("TreeDepth").unwrap();
    assert_eq!(
        (st.status, st.first_fired_step, st.fired_count),
        (Status::IssuesFound, Some(3), 1)
    );
    assert_eq!(st.evidence[0].value, 2.0);
    // With the expected depth set to 2, steps 0-2 differ instead.
    let s = check(bad.path(), "TreeDepth:depth=2");
    assert_eq!(s.rule("TreeDepth").unwrap().fired_count, 3);

    let good = tempdir().unwrap();
    write_xgboost_run(good.path(), &[even.clone(), even.clone(), even], &[4, 4, 4]);
    for rule in ["FeatureImportanceOverweight", "TreeDepth"] {
        let s = check(good.path(), rule);
        let st = s.rule(rule).unwrap();
        assert_eq!(st.status, Status::NoIssuesFound, "{st:?}");
        assert!(st.datapoints > 0);
    }
}

/// With the trees' string columns (`trees/ID`, `trees/Feature`, `trees/Yes`, `trees/No`, which
/// Python smdebug writes as string tensors), TreeDepth walks each tree from its root.
#[test]
fn tree_depth_walks_the_string_columns_of_the_trees() {
    let dir = tempdir().unwrap();
    let even = vec![1.0; 4];
    write_xgboost_spec(
        dir.path(),
        serde_json::json!({"importances": [even, even, even], "depths": [3, 3, 1], "strings": true}),
    );
    let s = check(dir.path(), "TreeDepth:depth=3");
    let st = s.rule("TreeDepth").unwrap();
    assert_eq!(
        (st.status, st.first_fired_step, st.fired_count),
        (Status::IssuesFound, Some(2), 1),
        "{st:?}"
    );
    assert_eq!(st.evidence[0].value, 1.0);
    assert!(
        st.message.contains("walked from the root through trees/ID"),
        "{}",
        st.message
    );
    assert_eq!(st.datapoints, 3);
}

/// Without feature importances, FeatureImportanceOverweight counts the splits of the trees'
/// `trees/Feature` strings (XGBoost's `weight` importance) over the trees seen so far.
#[test]
fn feature_importance_overweight_counts_splits_without_importances() {
    let dir = tempdir().unwrap();
    let spread: Vec<String> = (0..7).map(|i| format!("f{i}")).collect();
    let skewed = ["f3", "f5"];
    write_xgboost_spec(
        dir.path(),
        serde_json::json!({
            "importances": [null, null, null, null, null, null],
            "depths": [3, 3, 3, 3, 3, 3],
            "strings": true,
            // Seven splits a tree: spread over f0-f6 twice, then f3, f5, f3, ... (4 on f3 and 3
            // on f5 a tree).
            "split_features": [spread, spread, skewed, skewed, skewed, skewed],
        }),
    );
    let s = check(dir.path(), "FeatureImportanceOverweight");
    let st = s.rule("FeatureImportanceOverweight").unwrap();
    // After k skewed trees: f3 2 + 4k, f5 2 + 3k, the five others 2 each, of 14 + 7k splits;
    // the top three hold (7k + 6) / (7k + 14), past 0.8 first at k = 4 (step 5): 34 / 42.
    assert_eq!(
        (st.status, st.first_fired_step, st.fired_count),
        (Status::IssuesFound, Some(5), 1),
        "{st:?}"
    );
    assert!((st.evidence[0].value - 34.0 / 42.0).abs() < 1e-12, "{st:?}");
    assert!(
        st.message.contains("splits on f3") && st.message.contains("splits on f5"),
        "{}",
        st.message
    );
    // Steps 0 and 1 alone (14 splits spread over 7 features) are healthy.
    let healthy = tempdir().unwrap();
    write_xgboost_spec(
        healthy.path(),
        serde_json::json!({
            "importances": [null, null],
            "depths": [3, 3],
            "strings": true,
            "split_features": [spread, spread],
        }),
    );
    let s = check(healthy.path(), "FeatureImportanceOverweight");
    let st = s.rule("FeatureImportanceOverweight").unwrap();
    assert_eq!(st.status, Status::NoIssuesFound, "{st:?}");
    // Seven features judged at each of the two steps.
    assert_eq!(st.datapoints, 14);
}

/// Token ids of this crate's own source lines (0 = padding, 1 = unknown word), batched 16
/// lines at a time and padded: to a fixed length (the bug) or to the batch's longest line after
/// sorting by length (bucketing). Returns the padding share of each batch.
fn record_token_batches(dir: &Path, fixed_len: Option<usize>) -> Vec<f64> {
    let text = [
        include_str!("../src/runner/persistence.rs"),
        include_str!("../src/runner/builder.rs"),
        include_str!("../src/runner/run.rs"),
        include_str!("../src/runner/evaluation.rs"),
        include_str!("../src/runner/feeding.rs"),
        include_str!("../src/runner/threads.rs"),
    ]
    .concat();
    let mut vocab = std::collections::HashMap::new();
    let mut lines: Vec<Vec<i64>> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.split_whitespace()
                .map(|w| {
                    let next = vocab.len() as i64 + 2;
                    *vocab
                        .entry(w.to_string())
                        .or_insert(if next < 200 { next } else { 1 })
                })
                .collect()
        })
        .collect();
    if fixed_len.is_none() {
        lines.sort_by_key(|l| l.len());
    }
    let mut hook = hook_for(dir, SaveConfig::every(1));
    hook.set_mode(Mode::Train);
    let mut shares = Vec::new();
    for batch in lines.chunks(16).take(12) {
        let len = fixed_len.unwrap_or_else(|| batch.iter().map(Vec::len).max().unwrap_or(1));
        let mut ids = vec![0i64; batch.len() * len];
        for (r, line) in batch.iter().enumerate() {
            for (c, id) in line.iter().take(len).enumerate() {
                ids[r * len + c] = *id;
            }
        }
        shares.push(ids.iter().filter(|i| **i == 0).count() as f64 / ids.len() as f64);
        hook.save_tensor(
            "embedding.input",
            &TensorView::from_slice(&ids, &[batch.len(), len]).unwrap(),
            &["inputs"],
        );
        hook.step();
    }
    hook.close();
    shares
}

#[test]
fn nlp_sequence_ratio_fires_on_batches_that_are_mostly_padding() {
    let bad = tempdir().unwrap();
    let shares = record_token_batches(bad.path(), Some(40));
    let expected = shares
        .iter()
        .position(|s| *s > 0.5)
        .expect("padding-heavy batches") as u64;
    let s = check(bad.path(), "NLPSequenceRatio");
    let st = s.rule("NLPSequenceRatio").unwrap();
    assert_eq!(
        (st.status, st.first_fired_step),
        (Status::IssuesFound, Some(expected)),
        "{st:?}"
    );
    let over = shares.iter().filter(|s| **s > 0.5).count() as u64;
    assert_eq!(st.fired_count, over);

    let good = tempdir().unwrap();
    let shares = record_token_batches(good.path(), None);
    assert!(shares.iter().all(|s| *s <= 0.5), "{shares:?}");
    let s = check(good.path(), "NLPSequenceRatio");
    let st = s.rule("NLPSequenceRatio").unwrap();
    assert_eq!(st.status, Status::NoIssuesFound, "{st:?}");
    assert!(st.datapoints > 0);
}
