//! A custom rule next to the built-in ones: fires when the training accuracy falls by more
//! than `drop` from its best value. Trains the example MLP, then evaluates the run offline.
//!
//! ```sh
//! cargo run -p smdebug-rules --example custom_rule
//! ```

use smdebug_core::{Hook, SaveConfig};
use smdebug_examples::digits::{self, Digits};
use smdebug_examples::{TrainConfig, train};
use smdebug_io::writer::Writer;
use smdebug_read::trial::Trial;
use smdebug_rules::select::scalar_at;
use smdebug_rules::{
    Evidence, Needs, Result, Rule, RuleResult, RuleRunner, RuleSpec, TensorRule, rule_identity,
};

/// Fires when the accuracy (metrics collection) is more than `drop` below its best so far.
struct AccuracyDrop {
    drop: f64,
    best: Option<f64>,
}

impl TensorRule for AccuracyDrop {
    rule_identity!(name: "AccuracyDrop", params: [drop]);

    /// Reads the tensor `accuracy`; a hook that applies this rule's capture requests saves it
    /// (in a collection `metrics`, where the loop puts it) at the rules' interval.
    fn needs(&self) -> Needs {
        Needs::tensors(self.name(), &["accuracy"], "metrics")
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        let Some(acc) = scalar_at(self.name(), trial, "accuracy", step, None)? else {
            return Ok(result); // not saved at this step
        };
        result.datapoints = 1;
        let best = *self.best.get_or_insert(acc);
        if acc < best - self.drop {
            result.fire(format!(
                "accuracy {acc:.3} is more than {} below its best {best:.3}",
                self.drop
            ));
            result.add_evidence(
                Evidence::new("accuracy", step, "accuracy", acc).limit(best - self.drop),
            );
        }
        self.best = Some(best.max(acc));
        Ok(result)
    }
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let run = dir.path().to_str().ok_or("temporary path is not UTF-8")?;
    let (train_set, eval_set) = Digits::load(&digits::default_path())?.split(0.2, 1);
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(Writer::open(run)?)?;
    train(
        &TrainConfig {
            epochs: 2,
            ..Default::default()
        },
        &train_set,
        &eval_set,
        Some(&mut hook),
    );
    hook.close();
    drop(hook);

    let summary = RuleRunner::builder(run)
        .rule(
            Rule::tensor(AccuracyDrop {
                drop: 0.5,
                best: None,
            }),
            Vec::new(),
        )
        .spec(RuleSpec::parse("LossNotDecreasing")?)
        .build()?
        .run_offline()?;
    println!("{}", serde_json::to_string_pretty(&summary.rules)?);
    Ok(())
}
