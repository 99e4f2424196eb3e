//! The rule-authoring kit on a run Python smdebug wrote (the golden `pysmdebug_multi`): the
//! per-tensor loop yields exactly the selected tensors saved at each step, with their values,
//! and skips the rest.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;
use smdebug_core::{Reduction, ReductionOp};
use smdebug_read::trial::Trial;
use smdebug_rules::TensorSelection;

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../smdebug-io/tests/data/golden/{name}"))
}

/// (name, global step) of every tensor value the golden run's expectations list.
fn saved(expected: &Value) -> BTreeSet<(String, u64)> {
    expected["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["step"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn values_at_yields_the_selected_tensors_saved_at_each_step_and_skips_the_rest() {
    let run = golden("pysmdebug_multi");
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(run.with_extension("expected.json")).unwrap(),
    )
    .unwrap();
    let saved = saved(&expected);
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    let selection = TensorSelection::new(
        "Kit",
        &["weights".into(), "losses".into()],
        &["^gradient/".into()],
    )
    .unwrap();
    let selected = selection.names("Kit", &trial).unwrap();
    assert!(selected.contains(&"loss".to_string()), "{selected:?}");
    let steps = trial.global_steps(None).unwrap();
    let mut absent_seen = false;
    for &step in &steps {
        let want: Vec<&String> = selected
            .iter()
            .filter(|n| saved.contains(&((*n).clone(), step)))
            .collect();
        absent_seen |= want.len() < selected.len();
        let got: Vec<(String, _)> = selection
            .values_at("Kit", &trial, step)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let got_names: Vec<&String> = got.iter().map(|(n, _)| n).collect();
        assert_eq!(got_names, want, "step {step}");
        for (name, value) in &got {
            let direct = smdebug_rules::value_at("Kit", &trial, name, step)
                .unwrap()
                .unwrap();
            assert_eq!(value, &direct, "{name} at {step}");
        }
        let means: Vec<(String, f64)> = selection
            .reductions_at("Kit", &trial, step, Reduction::new(ReductionOp::Mean))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        // Every tensor with a value has its mean (a tensor saved only as reductions may add one).
        for (name, value) in &got {
            let mean = means.iter().find(|(n, _)| n == name).map(|(_, m)| *m);
            let m = value.iter().sum::<f64>() / value.len() as f64;
            assert!(
                mean.is_some_and(|mean| (mean - m).abs() <= 1e-6 * m.abs().max(1.0)),
                "{name} at {step}: {mean:?} vs {m}"
            );
        }
    }
    assert!(
        absent_seen,
        "the run has steps where some selected tensors are not saved"
    );
}

#[test]
fn an_emptied_only_selection_selects_nothing_and_an_empty_new_one_everything() {
    let trial = Trial::open(golden("pysmdebug_multi").to_str().unwrap()).unwrap();
    let nothing = TensorSelection::only("Kit", &[], &[]).unwrap();
    assert!(nothing.names("Kit", &trial).unwrap().is_empty());
    let everything = TensorSelection::new("Kit", &[], &[]).unwrap();
    assert_eq!(
        everything.names("Kit", &trial).unwrap().to_vec(),
        trial.tensor_names().unwrap()
    );
}
