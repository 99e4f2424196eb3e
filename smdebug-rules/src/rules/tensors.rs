//! Rules about any tensor's values: ExplodingTensor, AllZero, TensorVariance, UnchangedTensor,
//! SimilarAcrossRuns.

use std::collections::{HashMap, VecDeque};

use ndarray::ArrayD;
use serde::{Deserialize, Serialize};
use smdebug_core::{Reduction, ReductionOp};
use smdebug_read::trial::Trial;

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::rule::{Evidence, Needs, RuleResult, TensorRule};
use crate::select::{
    SelectionParams, TensorSelection, allclose, reduction_at, value_at, values_of_step,
};

/// Parameters of [`ExplodingTensor`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExplodingTensorParams {
    /// The tensors to check (`collection_names`, `tensor_regex`); with neither, every tensor.
    #[serde(flatten)]
    pub selection: SelectionParams,
    /// Only NaN counts as exploding, not ±Inf. Default `false`.
    #[serde(deserialize_with = "lenient::bool")]
    pub only_nan: bool,
}

/// **ExplodingTensor** — fires when a selected tensor holds NaN (or ±Inf unless `only_nan`).
/// With neither `collection_names` nor `tensor_regex`, every tensor of the run is checked.
///
/// When it fires: the learning rate is probably too high, or a division/log/exp overflows;
/// lower the learning rate, clip gradients, check the loss for `log(0)`, use mixed-precision
/// loss scaling correctly.
pub struct ExplodingTensor {
    params: ExplodingTensorParams,
    selection: TensorSelection,
}

impl ExplodingTensor {
    /// The rule's name.
    pub const NAME: &'static str = "ExplodingTensor";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: ExplodingTensorParams) -> Result<Self> {
        Ok(ExplodingTensor {
            selection: params.selection.selection(Self::NAME, &[])?,
            params,
        })
    }
}

impl TensorRule for ExplodingTensor {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        Needs::of(Self::NAME, &self.selection, Self::NAME).step_by_step()
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        let mut bad = Vec::new();
        let names = self.selection.names(Self::NAME, trial)?;
        let values = values_of_step(Self::NAME, trial, &names, step, None);
        for (name, value) in names.iter().zip(values) {
            let (nans, infs) = match value? {
                Some(v) => (
                    v.iter().filter(|x| x.is_nan()).count() as f64,
                    v.iter().filter(|x| x.is_infinite()).count() as f64,
                ),
                None => {
                    // A run that saved only reductions can still tell NaN/Inf counts.
                    let nan = reduction_at(
                        Self::NAME,
                        trial,
                        name,
                        step,
                        Reduction::new(ReductionOp::NanCount),
                    )?;
                    let inf = reduction_at(
                        Self::NAME,
                        trial,
                        name,
                        step,
                        Reduction::new(ReductionOp::InfCount),
                    )?;
                    match (nan, inf) {
                        (None, None) => continue,
                        (n, i) => (n.unwrap_or(0.0), i.unwrap_or(0.0)),
                    }
                }
            };
            result.datapoints += 1;
            let infs = if self.params.only_nan { 0.0 } else { infs };
            if nans > 0.0 || infs > 0.0 {
                if nans > 0.0 {
                    result.add_evidence(Evidence::new(name, step, "nan_count", nans));
                }
                if infs > 0.0 {
                    result.add_evidence(Evidence::new(name, step, "inf_count", infs));
                }
                bad.push(format!("{name} ({nans} NaN, {infs} Inf)"));
            }
        }
        if !bad.is_empty() {
            result.fire(format!("non-finite values in {}", bad.join(", ")));
        }
        Ok(result)
    }
}

/// Parameters of [`AllZero`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AllZeroParams {
    /// The tensors to check (`collection_names`, `tensor_regex`); with neither, the `weights`,
    /// `gradients` and `outputs` collections.
    #[serde(flatten)]
    pub selection: SelectionParams,
    /// Fires when at least this percentage of a tensor's values are zero. Default `100`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold: f64,
}

impl Default for AllZeroParams {
    fn default() -> Self {
        AllZeroParams {
            selection: SelectionParams::default(),
            threshold: 100.0,
        }
    }
}

/// **AllZero** — fires when at least `threshold` % of a selected tensor's values are zero.
/// SageMaker required a selection; the default here is the `weights`, `gradients` and
/// `outputs` collections (biases start at zero and metrics such as an accuracy of 0 are zero
/// legitimately). Pass `tensor_regex=.*` for every tensor.
///
/// When it fires: a layer outputs nothing (dead ReLUs, zero initialisation, a masked input),
/// or a gradient is disconnected from the loss (a detached tensor, a frozen layer).
pub struct AllZero {
    params: AllZeroParams,
    selection: TensorSelection,
}

impl AllZero {
    /// The rule's name.
    pub const NAME: &'static str = "AllZero";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: AllZeroParams) -> Result<Self> {
        Check::new(Self::NAME).percent("threshold", params.threshold)?;
        Ok(AllZero {
            selection: params
                .selection
                .selection(Self::NAME, &["weights", "gradients", "outputs"])?,
            params,
        })
    }
}

impl TensorRule for AllZero {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        Needs::of(Self::NAME, &self.selection, Self::NAME).step_by_step()
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        let mut zero = Vec::new();
        let zero_fraction = Reduction::new(ReductionOp::ZeroFraction);
        for reading in self
            .selection
            .reductions_at(Self::NAME, trial, step, zero_fraction)?
        {
            let (name, share) = reading?;
            if share.is_nan() {
                continue; // an empty tensor
            }
            result.datapoints += 1;
            let percent = share * 100.0;
            if percent >= self.params.threshold {
                result.add_evidence(
                    Evidence::new(&name, step, "zero_percent", percent)
                        .limit(self.params.threshold),
                );
                zero.push(format!("{name} ({percent:.1} % zeros)"));
            }
        }
        if !zero.is_empty() {
            result.fire(format!(
                "at least {} % zeros in {}",
                self.params.threshold,
                zero.join(", ")
            ));
        }
        Ok(result)
    }
}

/// Parameters of [`TensorVariance`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TensorVarianceParams {
    /// The tensors to check (`collection_names`, `tensor_regex`); with neither, every tensor.
    #[serde(flatten)]
    pub selection: SelectionParams,
    /// Fires when a tensor's variance is above this. Default: none.
    #[serde(deserialize_with = "lenient::opt_f64")]
    pub max_threshold: Option<f64>,
    /// Fires when a tensor's variance is below this. Default: none.
    #[serde(deserialize_with = "lenient::opt_f64")]
    pub min_threshold: Option<f64>,
}

/// **TensorVariance** — fires when a selected tensor's (population) variance is above
/// `max_threshold` or below `min_threshold`; at least one of them must be set. Tensors of one
/// element are skipped (their variance is always 0).
///
/// When it fires: very high variance precedes exploding values and saturation (lower the
/// learning rate, normalise); very low variance means a layer has collapsed to a constant
/// (dead units, vanishing gradients, over-regularisation).
pub struct TensorVariance {
    params: TensorVarianceParams,
    selection: TensorSelection,
}

impl TensorVariance {
    /// The rule's name.
    pub const NAME: &'static str = "TensorVariance";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: TensorVarianceParams) -> Result<Self> {
        let check = Check::new(Self::NAME);
        check.finite_opt("max_threshold", params.max_threshold)?;
        check.finite_opt("min_threshold", params.min_threshold)?;
        check.that(
            params.max_threshold.is_some() || params.min_threshold.is_some(),
            "max_threshold",
            || "set max_threshold and/or min_threshold".into(),
        )?;
        Ok(TensorVariance {
            selection: params.selection.selection(Self::NAME, &[])?,
            params,
        })
    }
}

impl TensorRule for TensorVariance {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        Needs::of(Self::NAME, &self.selection, Self::NAME)
            .requiring("tensors of at least two values (or their saved variance)")
            .step_by_step()
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        for name in self.selection.names(Self::NAME, trial)?.iter() {
            let variance = match value_at(Self::NAME, trial, name, step)? {
                Some(v) if v.len() < 2 => continue,
                Some(v) => crate::select::reduce(&v, Reduction::new(ReductionOp::Variance)),
                None => match reduction_at(
                    Self::NAME,
                    trial,
                    name,
                    step,
                    Reduction::new(ReductionOp::Variance),
                )? {
                    Some(v) => v,
                    None => continue,
                },
            };
            result.datapoints += 1;
            let high = self
                .params
                .max_threshold
                .filter(|m| variance > *m || variance.is_nan());
            let low = self.params.min_threshold.filter(|m| variance < *m);
            if let Some(limit) = high.or(low) {
                let dir = if high.is_some() { "above" } else { "below" };
                result.fire(format!("{name}: variance {variance:.3e} {dir} {limit}"));
                result.add_evidence(Evidence::new(name, step, "variance", variance).limit(limit));
            }
        }
        Ok(result)
    }
}

/// Parameters of [`UnchangedTensor`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UnchangedTensorParams {
    /// The tensors to check (`collection_names`, `tensor_regex`); with neither, the `weights`
    /// and `biases` collections.
    #[serde(flatten)]
    pub selection: SelectionParams,
    /// Fires when the last `num_steps` saved values are all close. Default 3.
    #[serde(deserialize_with = "lenient::u64")]
    pub num_steps: u64,
    /// Relative tolerance of `allclose`. Default `1e-5`.
    #[serde(deserialize_with = "lenient::f64")]
    pub rtol: f64,
    /// Absolute tolerance of `allclose`. Default `1e-8`.
    #[serde(deserialize_with = "lenient::f64")]
    pub atol: f64,
    /// NaNs compare equal. Default `false`.
    #[serde(deserialize_with = "lenient::bool")]
    pub equal_nan: bool,
}

impl Default for UnchangedTensorParams {
    fn default() -> Self {
        UnchangedTensorParams {
            selection: SelectionParams::default(),
            num_steps: 3,
            rtol: 1e-5,
            atol: 1e-8,
            equal_nan: false,
        }
    }
}

/// **UnchangedTensor** — fires when a selected tensor's last `num_steps` saved values (not
/// necessarily consecutive steps) are all equal within numpy's `allclose(rtol, atol,
/// equal_nan)`. SageMaker checked every tensor when no selection was given; accuracy and other
/// metrics legitimately repeat, so the default here is the `weights` and `biases` collections.
///
/// When it fires: the parameters do not train: a zero learning rate, a frozen or detached
/// layer, an optimizer that was not given these parameters, or gradients that are zero.
pub struct UnchangedTensor {
    params: UnchangedTensorParams,
    selection: TensorSelection,
    history: HashMap<String, VecDeque<(u64, ArrayD<f64>)>>,
}

impl UnchangedTensor {
    /// The rule's name.
    pub const NAME: &'static str = "UnchangedTensor";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: UnchangedTensorParams) -> Result<Self> {
        let check = Check::new(Self::NAME);
        check.at_least("num_steps", params.num_steps, 2)?;
        check.finite("rtol", params.rtol)?;
        check.finite("atol", params.atol)?;
        Ok(UnchangedTensor {
            selection: params
                .selection
                .selection(Self::NAME, &["weights", "biases"])?,
            params,
            history: HashMap::new(),
        })
    }
}

impl TensorRule for UnchangedTensor {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        Needs::of(Self::NAME, &self.selection, Self::NAME)
            .requiring(format!(
                "each tensor at {} saved steps",
                self.params.num_steps
            ))
            // The values it compares with are its own.
            .step_by_step()
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        let p = &self.params;
        for reading in self.selection.values_at(Self::NAME, trial, step)? {
            let (name, v) = reading?;
            let hist = self.history.entry(name.clone()).or_default();
            if hist.back().is_some_and(|(s, _)| *s >= step) {
                continue;
            }
            hist.push_back((step, v));
            while hist.len() > p.num_steps as usize {
                hist.pop_front();
            }
            if hist.len() < p.num_steps as usize {
                // Kept, and judged once `num_steps` saved steps are there.
                result.unjudged += 1;
                continue;
            }
            result.datapoints += 1;
            let unchanged = hist
                .iter()
                .zip(hist.iter().skip(1))
                .all(|((_, a), (_, b))| allclose(b, a, p.rtol, p.atol, p.equal_nan));
            if unchanged {
                let first = hist.front().map(|(s, _)| *s).unwrap_or(step);
                result.fire(format!(
                    "{name} unchanged over {} saved steps ({first}..={step})",
                    p.num_steps
                ));
                result.add_evidence(Evidence::new(
                    &name,
                    step,
                    "unchanged_since_step",
                    first as f64,
                ));
            }
        }
        Ok(result)
    }
}

/// Parameters of [`SimilarAcrossRuns`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimilarAcrossRunsParams {
    /// The other run's location (path or URL). Required.
    #[serde(deserialize_with = "lenient::string")]
    pub other_trials: String,
    /// The tensors to compare (`collection_names`, `tensor_regex`); with neither, every tensor.
    #[serde(flatten)]
    pub selection: SelectionParams,
}

/// **SimilarAcrossRuns** — fires when a selected tensor differs (numpy `allclose` with its
/// default tolerances, NaN equal to NaN) between this run and `other_trials` at the same
/// global step. Tensors or steps the other run does not have are skipped.
///
/// When it fires: the runs are not reproducible (seeds, data order, non-deterministic
/// kernels) or a change between them altered training from that step on.
pub struct SimilarAcrossRuns {
    params: SimilarAcrossRunsParams,
    selection: TensorSelection,
    other: Trial,
}

impl SimilarAcrossRuns {
    /// The rule's name.
    pub const NAME: &'static str = "SimilarAcrossRuns";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: SimilarAcrossRunsParams) -> Result<Self> {
        Check::new(Self::NAME).that(
            !params.other_trials.trim().is_empty(),
            "other_trials",
            || "the other run's location is required".into(),
        )?;
        let other = Trial::open(&params.other_trials).map_err(|e| crate::Error::OpenRun {
            location: params.other_trials.clone(),
            source: Box::new(e),
        })?;
        Ok(SimilarAcrossRuns {
            selection: params.selection.selection(Self::NAME, &[])?,
            params,
            other,
        })
    }
}

impl TensorRule for SimilarAcrossRuns {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        Needs::of(Self::NAME, &self.selection, Self::NAME)
            .requiring(format!(
                "tensors that {} saved at the same steps",
                self.params.other_trials
            ))
            .step_by_step()
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        for reading in self.selection.values_at(Self::NAME, trial, step)? {
            let (name, mine) = reading?;
            let Some(theirs) = value_at(Self::NAME, &self.other, &name, step)? else {
                continue;
            };
            result.datapoints += 1;
            if !allclose(&mine, &theirs, 1e-5, 1e-8, true) {
                let max_diff = if mine.shape() == theirs.shape() {
                    mine.iter()
                        .zip(theirs.iter())
                        .map(|(a, b)| (a - b).abs())
                        .fold(0.0, f64::max)
                } else {
                    f64::INFINITY
                };
                result.fire(format!(
                    "{name} differs from {} (max |difference| {max_diff:.3e})",
                    self.params.other_trials
                ));
                result.add_evidence(Evidence::new(&name, step, "max_abs_difference", max_diff));
            }
        }
        // It reads the other run step by step too: the index of the steps it is past goes.
        self.other.release_steps_before(step);
        Ok(result)
    }
}
