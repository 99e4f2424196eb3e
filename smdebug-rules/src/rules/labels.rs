//! Rules about labels and predictions: ClassImbalance, Confusion.

use std::collections::{BTreeMap, VecDeque};

use ndarray::ArrayD;
use serde::{Deserialize, Serialize};
use smdebug_read::trial::Trial;

use crate::error::{Error, Result};
use crate::params::{Check, lenient};
use crate::rule::{Evidence, LookBack, Needs, RuleResult, TensorRule};
use crate::select::{TensorSelection, value_at};

/// Class indices from a labels or predictions tensor: the values themselves, or the argmax of
/// each row when `argmax` (a `[samples, classes]` tensor of scores).
fn classes(v: &ArrayD<f64>, argmax: bool) -> Vec<i64> {
    if argmax && v.ndim() >= 2 {
        let rows = v.shape()[0];
        let width = v.len() / rows.max(1);
        let flat: Vec<f64> = v.iter().copied().collect();
        flat.chunks(width.max(1))
            .map(|row| {
                row.iter()
                    .enumerate()
                    .fold((0usize, f64::NEG_INFINITY), |best, (i, &x)| {
                        if x > best.1 { (i, x) } else { best }
                    })
                    .0 as i64
            })
            .collect()
    } else {
        v.iter().map(|x| x.round() as i64).collect()
    }
}

/// The first tensor (in name order) of a selection that has a value at `step`.
fn first_value(
    rule: &str,
    trial: &Trial,
    names: &[String],
    step: u64,
) -> Result<Option<(String, ArrayD<f64>)>> {
    for n in names {
        if let Some(v) = value_at(rule, trial, n, step)? {
            return Ok(Some((n.clone(), v)));
        }
    }
    Ok(None)
}

/// How many standard errors a share must lie beyond its threshold before a class is called
/// confused or mispredicted, by default. A classifier's share of correct predictions in one
/// class is a count out of a few dozen: at 32 held-out images a batch, about three a class,
/// one mistake puts a 95 %-precise class at 67 %. At three standard errors (as the loss rules
/// weigh their windows) a class judged on 50 predictions fires only when fewer than about 80 %
/// are right, and a class of an untrained model (0 of 10 right) still shows at once.
const NOISE_SES: f64 = 3.0;

/// The latest `capacity` (label, prediction) pairs: what a rule judges the model by now, not
/// by its first evaluations.
struct Recent {
    capacity: usize,
    pairs: VecDeque<(i64, i64)>,
}

impl Recent {
    fn new(capacity: u64) -> Self {
        Recent {
            capacity: usize::try_from(capacity).unwrap_or(usize::MAX).max(1),
            pairs: VecDeque::new(),
        }
    }

    fn extend(&mut self, labels: &[i64], preds: &[i64]) {
        for pair in labels.iter().copied().zip(preds.iter().copied()) {
            if self.pairs.len() == self.capacity {
                self.pairs.pop_front();
            }
            self.pairs.push_back(pair);
        }
    }
}

/// The Wilson score interval of a share of `hits` out of `n` at `ses` standard errors: the
/// shares the true one could be, given a sample this small. `ses = 0` gives the share itself.
fn share_bounds(hits: u64, n: u64, ses: f64) -> (f64, f64) {
    let n = n.max(1) as f64;
    let p = hits as f64 / n;
    let z2 = ses * ses;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = ses * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// Parameters of [`ClassImbalance`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClassImbalanceParams {
    /// Fires when the largest class has more than this many times the samples of the smallest.
    /// Default `10`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold_imbalance: f64,
    /// Fires when a class's share of mispredicted samples, among the latest `samples`, exceeds
    /// this beyond noise (see `noise_ses`). Default `0.7`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold_misprediction: f64,
    /// Labels to accumulate before judging, and how many of the latest labelled predictions
    /// the misprediction shares are taken over. Default 500.
    #[serde(deserialize_with = "lenient::u64")]
    pub samples: u64,
    /// How many standard errors a class's misprediction share must lie above
    /// `threshold_misprediction` (its Wilson score bound) before the class is called
    /// mispredicted. Default `3`; `0` judges the share as it is.
    #[serde(deserialize_with = "lenient::f64")]
    pub noise_ses: f64,
    /// Predictions are `[samples, classes]` scores; take each row's argmax. Default `false`.
    /// Predictions of shape `[labels, classes]` (a loss's logits, as `loss.predictions` holds
    /// them) are taken as scores whatever this says; Python smdebug asks for `argmax=True`.
    #[serde(deserialize_with = "lenient::bool")]
    pub argmax: bool,
    /// Default `.*labels`.
    #[serde(deserialize_with = "lenient::string")]
    pub labels_regex: String,
    /// Default `.*predictions`.
    #[serde(deserialize_with = "lenient::string")]
    pub predictions_regex: String,
}

impl Default for ClassImbalanceParams {
    fn default() -> Self {
        ClassImbalanceParams {
            threshold_imbalance: 10.0,
            threshold_misprediction: 0.7,
            samples: 500,
            noise_ses: NOISE_SES,
            argmax: false,
            labels_regex: ".*labels".into(),
            predictions_regex: ".*predictions".into(),
        }
    }
}

/// **ClassImbalance** — accumulates labels (and predictions) over the steps where both are
/// saved; once `samples` labels are in, fires when the most frequent class (over every label
/// seen) has more than `threshold_imbalance` times the samples of the least frequent one, or
/// when some class's share of mispredictions among the latest `samples` labels exceeds
/// `threshold_misprediction` beyond noise: its Wilson score interval at `noise_ses` standard
/// errors lies wholly above the threshold.
///
/// Where it differs from smdebug 1.0.34's: the misprediction shares are those of the latest
/// `samples` predictions, not of every prediction since the first step (so an untrained
/// model's first evaluation does not weigh on the model of an hour later), and a class seen a
/// few times is not called mispredicted on chance (`noise_ses = 0` judges the bare share).
///
/// When it fires: rebalance the data (over/under-sampling), weight the loss per class, or
/// collect more examples of the rare classes.
pub struct ClassImbalance {
    params: ClassImbalanceParams,
    labels: TensorSelection,
    predictions: TensorSelection,
    /// class -> samples, over every label seen
    counts: BTreeMap<i64, u64>,
    total: u64,
    /// The latest `samples` (label, prediction) pairs.
    recent: Recent,
}

impl ClassImbalance {
    /// The rule's name.
    pub const NAME: &'static str = "ClassImbalance";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: ClassImbalanceParams) -> Result<Self> {
        let check = Check::new(Self::NAME);
        check.finite("threshold_imbalance", params.threshold_imbalance)?;
        check.finite("threshold_misprediction", params.threshold_misprediction)?;
        check.non_negative("noise_ses", params.noise_ses, "a number")?;
        check.at_least("samples", params.samples, 1)?;
        Ok(ClassImbalance {
            recent: Recent::new(params.samples),
            labels: TensorSelection::new(
                Self::NAME,
                &[],
                std::slice::from_ref(&params.labels_regex),
            )?,
            predictions: TensorSelection::new(
                Self::NAME,
                &[],
                std::slice::from_ref(&params.predictions_regex),
            )?,
            params,
            counts: BTreeMap::new(),
            total: 0,
        })
    }
}

impl TensorRule for ClassImbalance {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        let both = Needs::of(Self::NAME, &self.labels, "labels");
        let predictions = Needs::of(Self::NAME, &self.predictions, "predictions");
        Needs {
            reads: [both.reads, predictions.reads].concat(),
            capture: [both.capture, predictions.capture].concat(),
            requires: Some(format!(
                "labels and predictions saved at the same steps, {} labels in all",
                self.params.samples
            )),
            look_back: LookBack::Steps(0),
        }
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        let label_names = self.labels.names(Self::NAME, trial)?;
        let pred_names = self.predictions.names(Self::NAME, trial)?;
        let Some((ln, labels)) = first_value(Self::NAME, trial, &label_names, step)? else {
            return Ok(result);
        };
        let Some((pn, preds)) = first_value(Self::NAME, trial, &pred_names, step)? else {
            return Ok(result);
        };
        let labels = classes(&labels, false);
        // One row of class scores per label (a loss's logits) is read as scores.
        let scores = preds.ndim() == 2 && preds.shape()[1] > 1 && preds.shape()[0] == labels.len();
        let preds = classes(&preds, self.params.argmax || scores);
        if labels.len() != preds.len() {
            return Err(Error::Rule {
                rule: Self::NAME.into(),
                step,
                source: format!(
                    "{pn} has {} predictions for {} labels in {ln}{}",
                    preds.len(),
                    labels.len(),
                    if self.params.argmax {
                        ""
                    } else {
                        " (set argmax=true for class scores)"
                    }
                )
                .into(),
            });
        }
        for l in &labels {
            *self.counts.entry(*l).or_default() += 1;
        }
        self.recent.extend(&labels, &preds);
        self.total += labels.len() as u64;
        if self.total < self.params.samples || self.counts.is_empty() {
            // Counted, and judged once `samples` labels have been seen.
            result.unjudged = labels.len();
            return Ok(result);
        }
        result.datapoints = labels.len();
        let (max_c, max_n) = self
            .counts
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(c, n)| (*c, *n))
            .unwrap_or_default();
        let (min_c, min_n) = self
            .counts
            .iter()
            .min_by_key(|(_, n)| **n)
            .map(|(c, n)| (*c, *n))
            .unwrap_or_default();
        let ratio = max_n as f64 / min_n.max(1) as f64;
        if ratio > self.params.threshold_imbalance {
            result.fire(format!(
                "class {max_c} has {max_n} samples, class {min_c} only {min_n} (ratio {ratio:.1} > {})",
                self.params.threshold_imbalance
            ));
            result.evidence.push(
                Evidence::new(&ln, step, "class_count_ratio", ratio)
                    .limit(self.params.threshold_imbalance),
            );
        }
        // class -> (samples, mispredicted) among the latest `samples` labels
        let mut recent: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
        for (l, p) in &self.recent.pairs {
            let c = recent.entry(*l).or_default();
            c.0 += 1;
            c.1 += u64::from(l != p);
        }
        let window = self.recent.pairs.len();
        for (c, (n, wrong)) in recent {
            let share = wrong as f64 / n as f64;
            let (low, _) = share_bounds(wrong, n, self.params.noise_ses);
            if low > self.params.threshold_misprediction {
                result.fire(format!(
                    "class {c}: {wrong} of its {n} samples among the latest {window} mispredicted, {:.1} % (at least {:.1} % at {} standard errors, over {} %)",
                    share * 100.0,
                    low * 100.0,
                    self.params.noise_ses,
                    self.params.threshold_misprediction * 100.0
                ));
                result.evidence.push(
                    Evidence::new(
                        &format!("{pn} (class {c})"),
                        step,
                        "misprediction_share",
                        share,
                    )
                    .limit(self.params.threshold_misprediction),
                );
            }
        }
        Ok(result)
    }
}

/// Parameters of [`Confusion`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConfusionParams {
    /// Number of classes. Default: none (largest class index seen + 1).
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub category_no: Option<u64>,
    /// Name of the labels tensor. Default `labels`.
    #[serde(deserialize_with = "lenient::string")]
    pub labels: String,
    /// Name of the predictions tensor. Default `predictions`.
    #[serde(deserialize_with = "lenient::string")]
    pub predictions: String,
    /// Collection searched when no tensor is named `labels`. Default `labels`.
    #[serde(deserialize_with = "lenient::string")]
    pub labels_collection: String,
    /// Collection searched when no tensor is named `predictions`. Default `predictions`.
    #[serde(deserialize_with = "lenient::string")]
    pub predictions_collection: String,
    /// Smallest allowed share of a predicted class that is correct. Default `0.9`.
    #[serde(deserialize_with = "lenient::f64")]
    pub min_diag: f64,
    /// Largest allowed share of a predicted class that belongs to one other class. Default `0.1`.
    #[serde(deserialize_with = "lenient::f64")]
    pub max_off_diag: f64,
    /// How many of the latest (label, prediction) pairs the matrix is built from. Default 500.
    #[serde(deserialize_with = "lenient::u64")]
    pub samples: u64,
    /// How many standard errors a share must lie beyond `min_diag` or `max_off_diag` (its
    /// Wilson score bound) before it fires. Default `3`; `0` judges the shares as they are, as
    /// smdebug does.
    #[serde(deserialize_with = "lenient::f64")]
    pub noise_ses: f64,
}

impl Default for ConfusionParams {
    fn default() -> Self {
        ConfusionParams {
            category_no: None,
            labels: "labels".into(),
            predictions: "predictions".into(),
            labels_collection: "labels".into(),
            predictions_collection: "predictions".into(),
            min_diag: 0.9,
            max_off_diag: 0.1,
            samples: 500,
            noise_ses: NOISE_SES,
        }
    }
}

/// **Confusion** — at each step where labels and predictions are saved, builds the confusion
/// matrix `C[label][prediction]` of the latest `samples` pairs and fires when, beyond noise (the
/// share's Wilson score interval at `noise_ses` standard errors lies wholly on the wrong side
/// of the threshold):
/// - a predicted class `i` (column) is right less often than `min_diag`: `C[i][i] / Σ_j C[j][i]`;
/// - a labelled class `i` (row) is predicted right less often than `min_diag`:
///   `C[i][i] / Σ_j C[i][j]`;
/// - a predicted class holds more than `max_off_diag` of one other class: `C[j][i] / Σ_j
///   C[j][i]`, j ≠ i.
///
/// Predictions of shape `[samples, classes]` are reduced with argmax.
///
/// Where it differs from smdebug 1.0.34's: smdebug judges each step's pairs alone by their bare
/// shares, so on batches of a few dozen one mistake in a class of three predictions reads 67 %
/// correct and fires; here the matrix spans the latest `samples` pairs (a verdict from the
/// first step on) and a share fires only when those pairs are enough to tell it from chance.
/// `samples` = the batch size and `noise_ses = 0` judge as smdebug does. A job that saves the
/// same validation set at every step (XGBoost's hook does) has its samples counted once a step,
/// which makes the noise band narrower than it is. The row check is ours: a model that never
/// predicts a rare class has no column for it, and only its row shows the class is lost.
///
/// When it fires: the classifier confuses the classes named in the message: look at their
/// examples, features and label quality; rebalance or weight classes.
pub struct Confusion {
    params: ConfusionParams,
    /// The labels tensor by name, and the labels collection.
    labels: TensorSelection,
    /// The predictions tensor by name, and the predictions collection.
    predictions: TensorSelection,
    /// The latest `samples` (label, prediction) pairs.
    recent: Recent,
}

impl Confusion {
    /// The rule's name.
    pub const NAME: &'static str = "Confusion";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: ConfusionParams) -> Result<Self> {
        let check = Check::new(Self::NAME);
        check.share("min_diag", params.min_diag)?;
        check.share("max_off_diag", params.max_off_diag)?;
        check.non_negative("noise_ses", params.noise_ses, "a number")?;
        check.at_least("samples", params.samples, 1)?;
        if let Some(n) = params.category_no {
            check.at_least("category_no", n, 2)?;
        }
        let by_name_or_collection = |name: &str, collection: &str| {
            Ok::<_, crate::Error>(
                TensorSelection::only(Self::NAME, &[collection.to_string()], &[])?
                    .with_names(&[name]),
            )
        };
        Ok(Confusion {
            labels: by_name_or_collection(&params.labels, &params.labels_collection)?,
            predictions: by_name_or_collection(
                &params.predictions,
                &params.predictions_collection,
            )?,
            recent: Recent::new(params.samples),
            params,
        })
    }

    fn find(&self, trial: &Trial, name: &str, collection: &str) -> Result<Vec<String>> {
        let sel = TensorSelection::new(Self::NAME, &[collection.to_string()], &[])?;
        let mut names = sel.names(Self::NAME, trial)?.to_vec();
        let all = trial
            .tensor_names()
            .map_err(|e| crate::select::read_error(Self::NAME, 0, e))?;
        if all.iter().any(|n| n == name) {
            names.insert(0, name.to_string());
        }
        Ok(names)
    }

    /// The number of classes: `category_no`, or one more than the highest class seen in this
    /// step's pairs and the kept ones; an error when a label or prediction is outside them.
    fn classes_of(&self, labels: &[i64], preds: &[i64], step: u64) -> Result<usize> {
        let seen = labels.iter().chain(preds).copied().max().unwrap_or(0);
        let k = match self.params.category_no {
            Some(n) => n as usize,
            None => {
                let before = self.recent.pairs.iter().map(|(l, p)| *l.max(p)).max();
                seen.max(before.unwrap_or(0)).max(0) as usize + 1
            }
        };
        if let Some((l, p)) = labels
            .iter()
            .zip(preds)
            .find(|(l, p)| **l < 0 || **p < 0 || **l as usize >= k || **p as usize >= k)
        {
            return Err(Error::Rule {
                rule: Self::NAME.into(),
                step,
                source: format!(
                    "class index (label {l}, prediction {p}) outside 0..{k} (category_no)"
                )
                .into(),
            });
        }
        Ok(k)
    }

    /// Fires on the confusion matrix of the kept pairs (`k` classes): a diagonal share under
    /// `min_diag` (per predicted and per labelled class) or an off-diagonal share over
    /// `max_off_diag`, each at `noise_ses` standard errors.
    fn judge(&self, result: &mut RuleResult, k: usize, pname: &str, step: u64) {
        let mut c = vec![vec![0u64; k]; k];
        for (l, p) in &self.recent.pairs {
            c[*l as usize][*p as usize] += 1;
        }
        let window = self.recent.pairs.len();
        let ses = self.params.noise_ses;
        let min_diag = self.params.min_diag;
        let diagonal = |result: &mut RuleResult, i: usize, of: u64, which: &str, what: &str| {
            let right = c[i][i];
            let (_, high) = share_bounds(right, of, ses);
            if of > 0 && high < min_diag {
                let share = right as f64 / of as f64;
                result.fire(format!(
                    "{which} class {i}: {right} of {of} {what} among the latest {window}, {:.1} % (at most {:.1} % at {ses} standard errors, under min_diag {min_diag})",
                    share * 100.0,
                    high * 100.0,
                ));
                result.evidence.push(
                    Evidence::new(
                        &format!("{pname} ({which} class {i})"),
                        step,
                        "diagonal_share",
                        share,
                    )
                    .limit(min_diag),
                );
            }
        };
        for i in 0..k {
            let col: u64 = (0..k).map(|j| c[j][i]).sum();
            let row: u64 = c[i].iter().sum();
            diagonal(result, i, col, "predicted", "right");
            diagonal(result, i, row, "labelled", "predicted as such");
            for (j, counts) in c.iter().enumerate() {
                let (low, _) = share_bounds(counts[i], col, ses);
                if j != i && col > 0 && low > self.params.max_off_diag {
                    let off = counts[i] as f64 / col as f64;
                    result.fire(format!(
                        "predicted class {i}: {} of {col} among the latest {window} are class {j}, {:.1} % (at least {:.1} % at {ses} standard errors, over max_off_diag {})",
                        counts[i],
                        off * 100.0,
                        low * 100.0,
                        self.params.max_off_diag
                    ));
                    result.evidence.push(
                        Evidence::new(
                            &format!("{pname} (class {j} as {i})"),
                            step,
                            "off_diagonal_share",
                            off,
                        )
                        .limit(self.params.max_off_diag),
                    );
                }
            }
        }
    }
}

impl TensorRule for Confusion {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        let mut needs = Needs::default()
            .requiring("labels and predictions saved at the same steps")
            .step_by_step();
        for (selection, collection) in [
            (&self.labels, &self.params.labels_collection),
            (&self.predictions, &self.params.predictions_collection),
        ] {
            needs.reads.push(selection.clone());
            needs
                .capture
                .extend(selection.capture(Self::NAME, collection));
        }
        needs
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        let ln = self.find(trial, &self.params.labels, &self.params.labels_collection)?;
        let pn = self.find(
            trial,
            &self.params.predictions,
            &self.params.predictions_collection,
        )?;
        let Some((lname, labels)) = first_value(Self::NAME, trial, &ln, step)? else {
            return Ok(result);
        };
        let Some((pname, preds)) = first_value(Self::NAME, trial, &pn, step)? else {
            return Ok(result);
        };
        let labels = classes(&labels, false);
        let preds = classes(&preds, true);
        if labels.len() != preds.len() {
            return Err(Error::Rule {
                rule: Self::NAME.into(),
                step,
                source: format!(
                    "{pname} has {} predictions for {} labels in {lname}",
                    preds.len(),
                    labels.len()
                )
                .into(),
            });
        }
        let k = self.classes_of(&labels, &preds, step)?;
        self.recent.extend(&labels, &preds);
        result.datapoints = labels.len();
        self.judge(&mut result, k, &pname, step);
        Ok(result)
    }
}
