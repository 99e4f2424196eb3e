//! Rules about the input data: CheckInputImages, NLPSequenceRatio.

use std::collections::BTreeMap;

use ndarray::Axis;
use serde::{Deserialize, Serialize};
use smdebug_read::trial::Trial;

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::rule::{Evidence, Needs, RuleResult, TensorRule};
use crate::select::TensorSelection;

/// Parameters of [`CheckInputImages`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CheckInputImagesParams {
    /// Fires when a channel's mean differs from 0 by more than this. Default `0.2`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold_mean: f64,
    /// Samples (images) to accumulate before judging. Default 500.
    #[serde(deserialize_with = "lenient::u64")]
    pub threshold_samples: u64,
    /// The input tensor. Default matches our adapters' first-layer input `fc1.input` /
    /// `conv1.input`, Python smdebug's `conv1_input_0`, and SageMaker's MXNet
    /// `hybridsequential0_input_0`.
    #[serde(deserialize_with = "lenient::string")]
    pub regex: String,
    /// Axis of the colour channel in `[batch, channel, height, width]`. Default 1. Inputs of
    /// rank 2 or less have one channel.
    #[serde(deserialize_with = "lenient::u64")]
    pub channel: u64,
}

impl Default for CheckInputImagesParams {
    fn default() -> Self {
        CheckInputImagesParams {
            threshold_mean: 0.2,
            threshold_samples: 500,
            regex: r"(^|[/_.])(fc1|conv1)[._]input(_0)?$|hybridsequential0_input_0".into(),
            channel: 1,
        }
    }
}

/// **CheckInputImages** — accumulates the per-channel mean of the input tensor over steps;
/// once `threshold_samples` samples are in, fires when a channel's mean is further than
/// `threshold_mean` from 0 (inputs not normalised to zero mean).
///
/// When it fires: subtract the data set's per-channel mean and divide by its standard
/// deviation before feeding the model.
pub struct CheckInputImages {
    params: CheckInputImagesParams,
    selection: TensorSelection,
    /// per tensor: per channel (sum, count), and samples seen.
    sums: BTreeMap<String, (Vec<(f64, u64)>, u64)>,
}

impl CheckInputImages {
    /// The rule's name.
    pub const NAME: &'static str = "CheckInputImages";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: CheckInputImagesParams) -> Result<Self> {
        Check::new(Self::NAME).finite("threshold_mean", params.threshold_mean)?;
        Ok(CheckInputImages {
            selection: TensorSelection::new(Self::NAME, &[], std::slice::from_ref(&params.regex))?,
            params,
            sums: BTreeMap::new(),
        })
    }
}

impl TensorRule for CheckInputImages {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        Needs::of(Self::NAME, &self.selection, "input_image")
            .requiring(format!(
                "input images of {} samples in all",
                self.params.threshold_samples
            ))
            .step_by_step()
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        for reading in self.selection.nonempty_at(Self::NAME, trial, step)? {
            let (name, v) = reading?;
            let samples = if v.ndim() >= 2 {
                v.shape()[0] as u64
            } else {
                1
            };
            let per_channel: Vec<(f64, u64)> = if v.ndim() > 2 {
                let axis = self.params.channel as usize;
                if axis >= v.ndim() {
                    return Err(Check::new(Self::NAME).error(
                        "channel",
                        format!("axis {axis} of {name} with shape {:?}", v.shape()),
                    ));
                }
                v.axis_iter(Axis(axis))
                    .map(|c| (c.sum(), c.len() as u64))
                    .collect()
            } else {
                vec![(v.sum(), v.len() as u64)]
            };
            let entry = self
                .sums
                .entry(name.clone())
                .or_insert_with(|| (vec![(0.0, 0); per_channel.len()], 0));
            if entry.0.len() != per_channel.len() {
                continue; // the channel count changed: not the same input
            }
            for (acc, (s, n)) in entry.0.iter_mut().zip(per_channel) {
                acc.0 += s;
                acc.1 += n;
            }
            entry.1 += samples;
            if entry.1 < self.params.threshold_samples {
                // Summed, and judged once `threshold_samples` samples have been seen.
                result.unjudged += 1;
                continue;
            }
            result.datapoints += 1;
            for (ch, (s, n)) in entry.0.iter().enumerate() {
                let mean = s / *n as f64;
                if mean.abs() > self.params.threshold_mean || mean.is_nan() {
                    result.fire(format!(
                        "{name}: channel {ch} mean {mean:.4} over {} samples is further than {} from 0",
                        entry.1, self.params.threshold_mean
                    ));
                    result.evidence.push(
                        Evidence::new(&format!("{name} (channel {ch})"), step, "mean", mean)
                            .limit(self.params.threshold_mean),
                    );
                }
            }
        }
        Ok(result)
    }
}

/// Parameters of [`NLPSequenceRatio`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NLPSequenceRatioParams {
    /// Token-id input tensors. Default matches `embedding.input`, `embedding0_input_0`,
    /// `Embedding_input_0`.
    #[serde(deserialize_with = "lenient::regexes")]
    pub tensor_regex: Vec<String>,
    /// Token ids to count, comma-separated. Default `"0"` (padding).
    #[serde(deserialize_with = "lenient::string")]
    pub token_values: String,
    /// Largest allowed percentage of each token, comma-separated, one per token. Default `"50"`.
    #[serde(deserialize_with = "lenient::string")]
    pub token_thresholds_percent: String,
}

impl Default for NLPSequenceRatioParams {
    fn default() -> Self {
        NLPSequenceRatioParams {
            tensor_regex: vec![r"(?i)embedding[^/]*[._]input".into()],
            token_values: "0".into(),
            token_thresholds_percent: "50".into(),
        }
    }
}

/// **NLPSequenceRatio** — at each step, for each token-id input tensor, the percentage of
/// positions holding each of `token_values`; fires when one exceeds its threshold in
/// `token_thresholds_percent` (too much padding, too many unknown tokens).
///
/// When it fires: bucket sequences by length (less padding), or extend the vocabulary
/// (fewer unknown tokens).
pub struct NLPSequenceRatio {
    params: NLPSequenceRatioParams,
    selection: TensorSelection,
    tokens: Vec<(f64, f64)>,
}

impl NLPSequenceRatio {
    /// The rule's name.
    pub const NAME: &'static str = "NLPSequenceRatio";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: NLPSequenceRatioParams) -> Result<Self> {
        let check = Check::new(Self::NAME);
        let parse = |param: &str, s: &str| -> Result<Vec<f64>> {
            s.split(',')
                .map(|p| {
                    let x = p.trim().parse::<f64>().map_err(|_| {
                        check.error(
                            param,
                            format!("`{p}` is not a number (expected e.g. \"0,3\")"),
                        )
                    })?;
                    check.finite(param, x)?;
                    Ok(x)
                })
                .collect()
        };
        let values = parse("token_values", &params.token_values)?;
        let limits = parse("token_thresholds_percent", &params.token_thresholds_percent)?;
        check.that(
            values.len() == limits.len(),
            "token_thresholds_percent",
            || {
                format!(
                    "{} thresholds for {} token values",
                    limits.len(),
                    values.len()
                )
            },
        )?;
        Ok(NLPSequenceRatio {
            selection: TensorSelection::only(Self::NAME, &[], &params.tensor_regex)?,
            tokens: values.into_iter().zip(limits).collect(),
            params,
        })
    }
}

impl TensorRule for NLPSequenceRatio {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        Needs::of(Self::NAME, &self.selection, "input_sequence").step_by_step()
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        for reading in self.selection.nonempty_at(Self::NAME, trial, step)? {
            let (name, v) = reading?;
            result.datapoints += 1;
            for (token, limit) in &self.tokens {
                let share =
                    v.iter().filter(|x| *x == token).count() as f64 * 100.0 / v.len() as f64;
                if share > *limit {
                    result.fire(format!(
                        "{name}: token {token} fills {share:.1} % of the positions (limit {limit} %)"
                    ));
                    result.evidence.push(
                        Evidence::new(
                            &format!("{name} (token {token})"),
                            step,
                            "token_percent",
                            share,
                        )
                        .limit(*limit),
                    );
                }
            }
        }
        Ok(result)
    }
}
