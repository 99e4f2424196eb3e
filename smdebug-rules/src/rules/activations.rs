//! Rules about activations: DeadRelu, SaturatedActivation.

use ndarray::ArrayD;
use serde::{Deserialize, Serialize};
use smdebug_read::trial::Trial;

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::rule::{Evidence, Needs, RuleResult, TensorRule};
use crate::select::TensorSelection;

/// Per unit of an activation tensor `[batch, units...]`, the percentage of samples for which
/// `active` holds. A tensor of rank 0 or 1 is one sample.
fn unit_activity(v: &ArrayD<f64>, active: impl Fn(f64) -> bool) -> Vec<f64> {
    let (samples, units) = match v.ndim() {
        0 | 1 => (1, v.len()),
        _ => (v.shape()[0], v.len() / v.shape()[0].max(1)),
    };
    if samples == 0 || units == 0 {
        return Vec::new();
    }
    let mut counts = vec![0usize; units];
    for (i, x) in v.iter().enumerate() {
        if active(*x) {
            counts[i % units] += 1;
        }
    }
    counts
        .into_iter()
        .map(|c| c as f64 * 100.0 / samples as f64)
        .collect()
}

/// The two thresholds DeadRelu and SaturatedActivation share: percentages of samples and of
/// units.
fn check_activity_thresholds(rule: &str, inactivity: f64, layer: f64) -> Result<()> {
    let check = Check::new(rule);
    check.percent("threshold_inactivity", inactivity)?;
    check.percent("threshold_layer", layer)
}

/// Parameters of [`DeadRelu`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DeadReluParams {
    /// ReLU outputs. Default matches `relu1.output` (our adapters), `relu1_output_0` and
    /// `ReLU_output_0` (Python smdebug's PyTorch hook) and SageMaker's `relu_output`.
    #[serde(deserialize_with = "lenient::regexes")]
    pub tensor_regex: Vec<String>,
    /// A unit active (output > 0) for less than this percentage of the samples is dead.
    /// Default `1.0`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold_inactivity: f64,
    /// Fires when more than this percentage of a layer's units are dead. Default `50.0`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold_layer: f64,
}

impl Default for DeadReluParams {
    fn default() -> Self {
        DeadReluParams {
            tensor_regex: vec![r"(?i)relu[^/]*[._]output".into()],
            threshold_inactivity: 1.0,
            threshold_layer: 50.0,
        }
    }
}

/// **DeadRelu** — at each step, for each ReLU output tensor `[batch, units...]`: a unit is dead
/// when it is active (> 0) for fewer than `threshold_inactivity` % of the batch's samples; the
/// rule fires when more than `threshold_layer` % of a layer's units are dead.
///
/// When it fires: check the initialisation (biases pushed negative, too-large weights), lower
/// the learning rate (a large update can kill units for good), or use LeakyReLU/ELU/GELU.
pub struct DeadRelu {
    params: DeadReluParams,
    selection: TensorSelection,
}

impl DeadRelu {
    /// The rule's name.
    pub const NAME: &'static str = "DeadRelu";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: DeadReluParams) -> Result<Self> {
        check_activity_thresholds(
            Self::NAME,
            params.threshold_inactivity,
            params.threshold_layer,
        )?;
        Ok(DeadRelu {
            selection: TensorSelection::only(Self::NAME, &[], &params.tensor_regex)?,
            params,
        })
    }
}

impl TensorRule for DeadRelu {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        Needs::of(Self::NAME, &self.selection, "relu_output")
            .requiring("non-empty ReLU outputs")
            .step_by_step()
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        for reading in self.selection.values_at(Self::NAME, trial, step)? {
            let (name, v) = reading?;
            let activity = unit_activity(&v, |x| x > 0.0);
            if activity.is_empty() {
                continue;
            }
            result.datapoints += 1;
            let dead = activity
                .iter()
                .filter(|a| **a < self.params.threshold_inactivity)
                .count();
            let percent = dead as f64 * 100.0 / activity.len() as f64;
            if percent > self.params.threshold_layer {
                result.fire(format!(
                    "{name}: {dead} of {} units ({percent:.1} %) active in less than {} % of samples",
                    activity.len(),
                    self.params.threshold_inactivity
                ));
                result.evidence.push(
                    Evidence::new(&name, step, "dead_units_percent", percent)
                        .limit(self.params.threshold_layer),
                );
            }
        }
        Ok(result)
    }
}

/// Parameters of [`SaturatedActivation`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SaturatedActivationParams {
    /// Collections to check besides the regex. Default: none.
    #[serde(deserialize_with = "lenient::list")]
    pub collection_names: Vec<String>,
    /// tanh/sigmoid inputs or outputs. Default matches `sigmoid1.input`, `sigmoid1.output`,
    /// `tanh1_input_0`, `Sigmoid_output_0`, SageMaker's `tanh_input`/`sigmoid_input`. The kind
    /// (tanh or sigmoid) and the side (input or output) are read from the name.
    #[serde(deserialize_with = "lenient::regexes")]
    pub tensor_regex: Vec<String>,
    /// Default `-9.4999`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold_tanh_min: f64,
    /// Default `9.4999`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold_tanh_max: f64,
    /// Default `-23.0`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold_sigmoid_min: f64,
    /// Default `16.99999`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold_sigmoid_max: f64,
    /// A unit whose input lies inside (min, max) for less than this percentage of the samples
    /// is saturated. Default `1.0`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold_inactivity: f64,
    /// Fires when more than this percentage of a layer's units are saturated. Default `50.0`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold_layer: f64,
}

impl Default for SaturatedActivationParams {
    fn default() -> Self {
        SaturatedActivationParams {
            collection_names: Vec::new(),
            tensor_regex: vec![r"(?i)(tanh|sigmoid)[^/]*[._](input|output)".into()],
            threshold_tanh_min: -9.4999,
            threshold_tanh_max: 9.4999,
            threshold_sigmoid_min: -23.0,
            threshold_sigmoid_max: 16.99999,
            threshold_inactivity: 1.0,
            threshold_layer: 50.0,
        }
    }
}

/// **SaturatedActivation** — at each step, for each tanh/sigmoid tensor `[batch, units...]`: a
/// unit is saturated when its input lies inside (`threshold_*_min`, `threshold_*_max`) for
/// fewer than `threshold_inactivity` % of the samples (the defaults are where the derivative
/// drops below 1e-7); the rule fires when more than `threshold_layer` % of a layer's units are
/// saturated. Output tensors are checked against the function's values at the thresholds.
///
/// When it fires: inputs to the activation are too large: scale the initialisation down,
/// normalise inputs or add normalisation layers, lower the learning rate, or use ReLU-family
/// activations.
pub struct SaturatedActivation {
    params: SaturatedActivationParams,
    selection: TensorSelection,
}

impl SaturatedActivation {
    /// The rule's name.
    pub const NAME: &'static str = "SaturatedActivation";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: SaturatedActivationParams) -> Result<Self> {
        let check = Check::new(Self::NAME);
        for (param, value) in [
            ("threshold_tanh_min", params.threshold_tanh_min),
            ("threshold_tanh_max", params.threshold_tanh_max),
            ("threshold_sigmoid_min", params.threshold_sigmoid_min),
            ("threshold_sigmoid_max", params.threshold_sigmoid_max),
        ] {
            check.finite(param, value)?;
        }
        check_activity_thresholds(
            Self::NAME,
            params.threshold_inactivity,
            params.threshold_layer,
        )?;
        Ok(SaturatedActivation {
            selection: TensorSelection::only(
                Self::NAME,
                &params.collection_names,
                &params.tensor_regex,
            )?,
            params,
        })
    }

    /// The interval of unsaturated values for a tensor, from its name.
    fn bounds(&self, name: &str) -> Option<(f64, f64)> {
        let lower = name.to_ascii_lowercase();
        let p = &self.params;
        let output = lower.contains("output");
        if lower.contains("tanh") {
            let (lo, hi) = (p.threshold_tanh_min, p.threshold_tanh_max);
            Some(if output {
                (lo.tanh(), hi.tanh())
            } else {
                (lo, hi)
            })
        } else if lower.contains("sigmoid") {
            let (lo, hi) = (p.threshold_sigmoid_min, p.threshold_sigmoid_max);
            let s = |x: f64| 1.0 / (1.0 + (-x).exp());
            Some(if output { (s(lo), s(hi)) } else { (lo, hi) })
        } else {
            None
        }
    }
}

impl TensorRule for SaturatedActivation {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        Needs::of(Self::NAME, &self.selection, "tanh_sigmoid_activations")
            .requiring("non-empty tensors whose names say `tanh` or `sigmoid`")
            .step_by_step()
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        for name in self.selection.names(Self::NAME, trial)?.iter() {
            let Some((lo, hi)) = self.bounds(name) else {
                continue;
            };
            let Some(v) = crate::select::value_at(Self::NAME, trial, name, step)? else {
                continue;
            };
            let activity = unit_activity(&v, |x| x > lo && x < hi);
            if activity.is_empty() {
                continue;
            }
            result.datapoints += 1;
            let saturated = activity
                .iter()
                .filter(|a| **a < self.params.threshold_inactivity)
                .count();
            let percent = saturated as f64 * 100.0 / activity.len() as f64;
            if percent > self.params.threshold_layer {
                result.fire(format!(
                    "{name}: {saturated} of {} units ({percent:.1} %) saturated (outside ({lo:.4e}, {hi:.4e})) for more than {} % of samples",
                    activity.len(),
                    100.0 - self.params.threshold_inactivity
                ));
                result.evidence.push(
                    Evidence::new(name, step, "saturated_units_percent", percent)
                        .limit(self.params.threshold_layer),
                );
            }
        }
        Ok(result)
    }
}
