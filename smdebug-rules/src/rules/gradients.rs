//! Rules about gradients and weight updates: VanishingGradient, WeightUpdateRatio,
//! PoorWeightInitialization.

use std::collections::HashMap;

use ndarray::ArrayD;
use serde::{Deserialize, Serialize};
use smdebug_analysis::stats::percentile;
use smdebug_core::{CaptureRequest, Mode, Reduction, ReductionOp, SaveConfig, SaveConfigMode};
use smdebug_read::trial::Trial;

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::rule::{Evidence, LookBack, Needs, RuleResult, TensorRule};
use crate::select::request;
use crate::select::{TensorSelection, mode_at};

/// Parameters of [`VanishingGradient`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VanishingGradientParams {
    /// Fires when a gradient's mean absolute value is below this. Default `1e-7`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold: f64,
}

impl Default for VanishingGradientParams {
    fn default() -> Self {
        VanishingGradientParams { threshold: 1e-7 }
    }
}

/// **VanishingGradient** — fires when `mean(|g|) < threshold` for a gradient tensor.
///
/// Reads every tensor of the `gradients` collection and every tensor whose name starts with
/// `gradient/` (our adapters' `gradient/fc1.weight`, Python smdebug's PyTorch
/// `gradient/Net_fc1.weight`), using the saved `abs_mean` reduction when the run has it.
///
/// When it fires: early layers learn nothing. Use ReLU-family activations instead of
/// sigmoid/tanh in deep stacks, a scale-preserving initialisation (He/Xavier), normalisation
/// layers or residual connections, or a shallower network.
pub struct VanishingGradient {
    params: VanishingGradientParams,
    gradients: TensorSelection,
}

impl VanishingGradient {
    /// The rule's name.
    pub const NAME: &'static str = "VanishingGradient";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: VanishingGradientParams) -> Result<Self> {
        Check::new(Self::NAME).finite("threshold", params.threshold)?;
        Ok(VanishingGradient {
            gradients: TensorSelection::gradients(Self::NAME)?,
            params,
        })
    }
}

impl TensorRule for VanishingGradient {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        // The `gradients` collection holds `^gradient/` names by itself.
        Needs::of(Self::NAME, &self.gradients, "gradients").step_by_step()
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        let mut vanishing = Vec::new();
        let abs_mean = Reduction::abs(ReductionOp::Mean);
        for reading in self
            .gradients
            .reductions_at(Self::NAME, trial, step, abs_mean)?
        {
            let (name, abs_mean) = reading?;
            result.datapoints += 1;
            if abs_mean < self.params.threshold {
                result.add_evidence(
                    Evidence::new(&name, step, "abs_mean", abs_mean).limit(self.params.threshold),
                );
                vanishing.push(format!("{name} ({abs_mean:.3e})"));
            }
        }
        if !vanishing.is_empty() {
            result.fire(format!(
                "mean |gradient| below {:e} for {}",
                self.params.threshold,
                vanishing.join(", ")
            ));
        }
        Ok(result)
    }
}

/// Parameters of [`WeightUpdateRatio`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WeightUpdateRatioParams {
    /// Compare weights with those at least this many steps earlier; `None` (default): with the
    /// previous saved step.
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub num_steps: Option<u64>,
    /// Fires when `‖Δw‖/‖w‖` is above this. Default `10.0`.
    #[serde(deserialize_with = "lenient::f64")]
    pub large_threshold: f64,
    /// Fires when `‖Δw‖/‖w‖` is below this. Default `1e-8`.
    #[serde(deserialize_with = "lenient::f64")]
    pub small_threshold: f64,
    /// Added to `‖w‖` so that all-zero weights do not divide by zero. Default `1e-9`.
    #[serde(deserialize_with = "lenient::f64")]
    pub epsilon: f64,
}

impl Default for WeightUpdateRatioParams {
    fn default() -> Self {
        WeightUpdateRatioParams {
            num_steps: None,
            large_threshold: 10.0,
            small_threshold: 1e-8,
            epsilon: 1e-9,
        }
    }
}

/// **WeightUpdateRatio** — fires when the update of a weight tensor between two saved steps,
/// relative to the weights, `‖w_s − w_r‖₂ / (‖w_r‖₂ + epsilon)`, is above `large_threshold` or
/// below `small_threshold`. `w_r` is the previous saved value, or with `num_steps` the last
/// compared value at least `num_steps` steps earlier.
///
/// Reads the `weights` collection and tensors whose names end in `weight` (`fc1.weight`,
/// `Net_fc1.weight`). Save weights every `num_steps` steps in TRAIN mode. Only training steps
/// are compared (TRAIN, or GLOBAL in a run without modes): weights do not change in EVAL and
/// PREDICT steps, and the PyTorch hook saves them there too, so comparing across them would
/// report an update ratio of 0.
///
/// When it fires: large ratios mean the learning rate is too high (or gradients explode; clip
/// them); tiny ratios mean the weights barely move (learning rate too small, frozen layer,
/// vanishing gradients).
pub struct WeightUpdateRatio {
    params: WeightUpdateRatioParams,
    weights: TensorSelection,
    reference: HashMap<String, (u64, ArrayD<f64>)>,
}

impl WeightUpdateRatio {
    /// The rule's name.
    pub const NAME: &'static str = "WeightUpdateRatio";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: WeightUpdateRatioParams) -> Result<Self> {
        let check = Check::new(Self::NAME);
        check.finite("large_threshold", params.large_threshold)?;
        check.finite("small_threshold", params.small_threshold)?;
        check.finite("epsilon", params.epsilon)?;
        Ok(WeightUpdateRatio {
            weights: TensorSelection::new(
                Self::NAME,
                &["weights".into()],
                &[r"(^|[/._])weights?$".into()],
            )?,
            params,
            reference: HashMap::new(),
        })
    }
}

impl TensorRule for WeightUpdateRatio {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        // The `weights` collection by name: adapters save parameters into it. Its regex finds
        // weights in runs without that collection; as a pattern of the hook's it would also
        // take `gradient/fc1.weight` into `weights`.
        let steps = match self.params.num_steps {
            Some(n) => format!("two saved TRAIN (or GLOBAL) steps at least {n} apart"),
            None => "two saved TRAIN (or GLOBAL) steps".into(),
        };
        Needs::default()
            .reading(&self.weights)
            .capturing(request("weights", Self::NAME))
            .requiring(format!("each weight at {steps}"))
            // The reference value it compares with is its own.
            .step_by_step()
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        if matches!(
            mode_at(Self::NAME, trial, step)?,
            Some(Mode::Eval | Mode::Predict)
        ) {
            return Ok(RuleResult::outside(step));
        }
        let p = &self.params;
        for reading in self.weights.values_at(Self::NAME, trial, step)? {
            let (name, w) = reading?;
            // `gradient/fc1.weight` ends in `weight` too, but it is not a weight.
            if name.starts_with("gradient") {
                continue;
            }
            // A first value, one too close to its reference, or one of a new shape is read
            // without being judged: it waits for the next saved step.
            let Some((ref_step, reference)) = self.reference.get(&name) else {
                result.unjudged += 1;
                self.reference.insert(name, (step, w));
                continue;
            };
            if *ref_step >= step || p.num_steps.is_some_and(|n| step - ref_step < n) {
                result.unjudged += 1;
                continue;
            }
            if reference.shape() != w.shape() {
                result.unjudged += 1;
                self.reference.insert(name, (step, w));
                continue;
            }
            let delta = w
                .iter()
                .zip(reference.iter())
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                .sqrt();
            let norm = reference.iter().map(|x| x * x).sum::<f64>().sqrt();
            let ratio = delta / (norm + p.epsilon);
            result.datapoints += 1;
            let (too, limit) = if ratio > p.large_threshold || ratio.is_nan() {
                (Some("large"), p.large_threshold)
            } else if ratio < p.small_threshold {
                (Some("small"), p.small_threshold)
            } else {
                (None, 0.0)
            };
            if let Some(too) = too {
                result.fire(format!(
                    "{name}: update ratio {ratio:.3e} between steps {ref_step} and {step} is too {too}"
                ));
                result.add_evidence(Evidence::new(&name, step, "update_ratio", ratio).limit(limit));
            }
            self.reference.insert(name, (step, w));
        }
        Ok(result)
    }
}

/// Parameters of [`PoorWeightInitialization`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PoorWeightInitializationParams {
    /// Activation inputs (pre-activations) of the layers. Default matches `relu1.input`,
    /// `relu1_input_0`, `ReLU_input_0`, and the same for tanh and sigmoid.
    #[serde(deserialize_with = "lenient::regexes")]
    pub activation_inputs_regex: Vec<String>,
    /// Fires when the largest over the smallest activation-input variance across layers exceeds
    /// this. Default `10.0`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold: f64,
    /// Fires when a gradient tensor's 95th minus 5th percentile is below this. Default `0.001`.
    #[serde(deserialize_with = "lenient::f64")]
    pub distribution_range: f64,
    /// Fires when the loss has not gone below its first value after this many steps. Default 5.
    #[serde(deserialize_with = "lenient::u64")]
    pub patience: u64,
    /// Only the first `steps` global steps are analysed. Default 10.
    #[serde(deserialize_with = "lenient::u64")]
    pub steps: u64,
}

impl Default for PoorWeightInitializationParams {
    fn default() -> Self {
        PoorWeightInitializationParams {
            activation_inputs_regex: vec![r"(?i)(relu|tanh|sigmoid)[^/]*[._]input".into()],
            threshold: 10.0,
            distribution_range: 0.001,
            patience: 5,
            steps: 10,
        }
    }
}

/// **PoorWeightInitialization** — checks the first `steps` steps for signs of a bad
/// initialisation and fires when any holds:
///
/// - the variance of activation inputs differs across layers by more than `threshold`×
///   (max/min), i.e. the signal grows or shrinks through the network;
/// - a gradient tensor's values are squeezed together: 95th − 5th percentile <
///   `distribution_range`;
/// - the loss (losses collection) is not below its first value after `patience` steps.
///
/// When it fires: use an initialisation matched to the activation (He for ReLU, Xavier/Glorot
/// for tanh/sigmoid), check that weights are not all equal or tiny, consider normalisation.
pub struct PoorWeightInitialization {
    params: PoorWeightInitializationParams,
    activations: TensorSelection,
    gradients: TensorSelection,
    losses: TensorSelection,
    first_loss: HashMap<String, (u64, f64)>,
}

impl PoorWeightInitialization {
    /// The rule's name.
    pub const NAME: &'static str = "PoorWeightInitialization";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: PoorWeightInitializationParams) -> Result<Self> {
        let check = Check::new(Self::NAME);
        check.finite("threshold", params.threshold)?;
        check.finite("distribution_range", params.distribution_range)?;
        Ok(PoorWeightInitialization {
            activations: TensorSelection::only(Self::NAME, &[], &params.activation_inputs_regex)?,
            gradients: TensorSelection::gradients(Self::NAME)?,
            losses: TensorSelection::losses(Self::NAME, &[], &[], true)?,
            params,
            first_loss: HashMap::new(),
        })
    }
}

impl TensorRule for PoorWeightInitialization {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        // Only the first `steps` steps are analysed: it asks for each of them, where the
        // rules' interval would give it step 0 alone.
        let first_steps = SaveConfig::new(SaveConfigMode {
            save_interval: 1,
            end_step: Some(self.params.steps),
            ..SaveConfigMode::default()
        });
        let at_first_steps = |mut r: CaptureRequest| {
            r.save_config = first_steps.clone();
            r
        };
        let mut capture = self.activations.capture(Self::NAME, "relu_input");
        capture.push(request("gradients", Self::NAME));
        capture.push(request("losses", Self::NAME));
        Needs {
            reads: vec![
                self.activations.clone(),
                self.gradients.clone(),
                self.losses.clone(),
            ],
            capture: capture.into_iter().map(at_first_steps).collect(),
            requires: Some(format!(
                "tensors saved at the first {} global steps",
                self.params.steps
            )),
            // The first loss it compares with is its own.
            look_back: LookBack::Steps(0),
        }
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        if step >= self.params.steps {
            return Ok(RuleResult::outside(step));
        }
        let mut result = RuleResult::new(step);
        let p = &self.params;

        // Variance of activation inputs across layers.
        let variance = Reduction::new(ReductionOp::Variance);
        let variances = self
            .activations
            .reductions_at(Self::NAME, trial, step, variance)?
            .collect::<Result<Vec<_>>>()?;
        if variances.len() == 1 {
            // One layer: no ratio across layers to judge.
            result.unjudged += 1;
        } else if variances.len() >= 2 {
            result.datapoints += variances.len();
            let (min_n, min_v) = variances
                .iter()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .cloned()
                .unwrap_or_default();
            let (max_n, max_v) = variances
                .iter()
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .cloned()
                .unwrap_or_default();
            let ratio = max_v / min_v;
            if ratio > p.threshold || ratio.is_nan() {
                result.fire(format!(
                    "activation-input variance ranges from {min_v:.3e} ({min_n}) to {max_v:.3e} ({max_n}): ratio {ratio:.3e} > {}",
                    p.threshold
                ));
                result.evidence.push(
                    Evidence::new(&format!("{max_n} / {min_n}"), step, "variance_ratio", ratio)
                        .limit(p.threshold),
                );
            }
        }

        // Spread of each gradient's distribution.
        let mut narrow = Vec::new();
        for reading in self.gradients.values_at(Self::NAME, trial, step)? {
            let (name, g) = reading?;
            if g.len() < 2 {
                continue;
            }
            let mut sorted: Vec<f64> = g.iter().copied().filter(|x| !x.is_nan()).collect();
            sorted.sort_by(f64::total_cmp);
            let spread = percentile(&sorted, 95.0) - percentile(&sorted, 5.0);
            result.datapoints += 1;
            if spread < p.distribution_range {
                result.add_evidence(
                    Evidence::new(&name, step, "p95_minus_p5", spread).limit(p.distribution_range),
                );
                narrow.push(format!("{name} ({spread:.3e})"));
            }
        }
        if !narrow.is_empty() {
            result.fire(format!(
                "gradient distribution narrower than {} (p95 - p5) for {}",
                p.distribution_range,
                narrow.join(", ")
            ));
        }

        // Early loss decrease.
        for reading in self.losses.scalars_at(Self::NAME, trial, step)? {
            let (name, loss) = reading?;
            let &mut (first_step, first) =
                self.first_loss.entry(name.clone()).or_insert((step, loss));
            if step < first_step + p.patience {
                // Compared with the first value once `patience` steps have passed.
                result.unjudged += 1;
                continue;
            }
            result.datapoints += 1;
            if loss >= first || loss.is_nan() {
                result.fire(format!(
                    "{name} did not decrease in {} steps ({first} at step {first_step}, {loss} at step {step})",
                    step - first_step
                ));
                result
                    .evidence
                    .push(Evidence::new(&name, step, "loss", loss).limit(first));
            }
        }
        Ok(result)
    }
}
