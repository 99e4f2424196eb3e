//! Rules about tree models, on the tensors Python smdebug's XGBoost hook writes:
//! FeatureImportanceOverweight (`feature_importance/<type>/<feature>`), TreeDepth
//! (`trees/Node`, the node ids of the tree built at that step).

use serde::{Deserialize, Serialize};
use smdebug_io::trial::Trial;

use crate::error::{Error, Result};
use crate::params::lenient;
use crate::rule::{Evidence, Rule, RuleResult};
use crate::select::{TensorSelection, scalar_at, value_at};

use super::to_json;

/// Parameters of [`FeatureImportanceOverweight`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FeatureImportanceOverweightParams {
    /// Fires when the `nfeatures` largest importances hold more than this share. Default `0.8`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold: f64,
    /// How many of the largest importances to add up. Default 3.
    #[serde(deserialize_with = "lenient::u64")]
    pub nfeatures: u64,
    /// One scalar tensor per feature. Default `.*feature_importance/weight` (matches
    /// `feature_importance/weight/f0`, …).
    #[serde(deserialize_with = "lenient::regexes")]
    pub tensor_regex: Vec<String>,
}

impl Default for FeatureImportanceOverweightParams {
    fn default() -> Self {
        FeatureImportanceOverweightParams {
            threshold: 0.8,
            nfeatures: 3,
            tensor_regex: vec![".*feature_importance/weight".into()],
        }
    }
}

/// **FeatureImportanceOverweight** — at each step, adds up the `nfeatures` largest feature
/// importances and fires when they hold more than `threshold` of the total (a model with no more
/// than `nfeatures` features is not judged).
///
/// When it fires: the model leans on a few features: check them for target leakage, add
/// regularisation (lower `max_depth`, subsample columns), or engineer better features.
pub struct FeatureImportanceOverweight {
    params: FeatureImportanceOverweightParams,
    selection: TensorSelection,
}

impl FeatureImportanceOverweight {
    pub const NAME: &'static str = "FeatureImportanceOverweight";

    pub fn new(params: FeatureImportanceOverweightParams) -> Result<Self> {
        if params.nfeatures == 0 {
            return Err(Error::BadParameter {
                rule: Self::NAME.into(),
                param: "nfeatures".into(),
                reason: "must be at least 1".into(),
            });
        }
        Ok(FeatureImportanceOverweight {
            selection: TensorSelection::new(Self::NAME, &[], &params.tensor_regex)?,
            params,
        })
    }
}

impl Rule for FeatureImportanceOverweight {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn parameters(&self) -> serde_json::Value {
        to_json(&self.params)
    }

    fn required_tensors(&self, trial: &Trial, _step: u64) -> Result<Vec<String>> {
        if self.selection.is_empty() {
            return Ok(Vec::new());
        }
        self.selection.names(Self::NAME, trial)
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        let mut importances = Vec::new();
        for name in self.required_tensors(trial, step)? {
            if let Some(v) = scalar_at(Self::NAME, trial, &name, step, None)? {
                importances.push((name, v));
            }
        }
        result.datapoints = importances.len();
        let n = self.params.nfeatures as usize;
        if importances.len() <= n {
            return Ok(result);
        }
        importances.sort_by(|a, b| b.1.total_cmp(&a.1));
        let total: f64 = importances.iter().map(|(_, v)| v).sum();
        let top: f64 = importances.iter().take(n).map(|(_, v)| v).sum();
        let share = top / total;
        if share > self.params.threshold {
            let names: Vec<&str> = importances
                .iter()
                .take(n)
                .map(|(n, _)| n.as_str())
                .collect();
            result.fire(format!(
                "the {n} most important features ({}) hold {:.1} % of the importance (limit {:.1} %)",
                names.join(", "),
                share * 100.0,
                self.params.threshold * 100.0
            ));
            result.evidence.push(
                Evidence::new(&names.join(", "), step, "top_importance_share", share)
                    .limit(self.params.threshold),
            );
        }
        Ok(result)
    }
}

/// Parameters of [`TreeDepth`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TreeDepthParams {
    /// The expected depth. Default `4`.
    #[serde(deserialize_with = "lenient::f64")]
    pub depth: f64,
}

impl Default for TreeDepthParams {
    fn default() -> Self {
        TreeDepthParams { depth: 4.0 }
    }
}

/// **TreeDepth** — at each step, the depth of the tree built there, computed as SageMaker did
/// from the largest node id: `floor(log2(max id + 1))` over the `trees/Node` tensor; fires when
/// it differs from `depth`.
///
/// When it fires: trees grow shallower than `max_depth` when further splits do not reduce the
/// loss (lower `max_depth`, or `min_child_weight`/`gamma` are too strict) and deeper than
/// expected when the configuration is not the one you meant.
pub struct TreeDepth {
    params: TreeDepthParams,
    selection: TensorSelection,
}

impl TreeDepth {
    pub const NAME: &'static str = "TreeDepth";

    pub fn new(params: TreeDepthParams) -> Result<Self> {
        Ok(TreeDepth {
            selection: TensorSelection::new(Self::NAME, &[], &["(^|/)trees/Node$".into()])?,
            params,
        })
    }
}

impl Rule for TreeDepth {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn parameters(&self) -> serde_json::Value {
        to_json(&self.params)
    }

    fn required_tensors(&self, trial: &Trial, _step: u64) -> Result<Vec<String>> {
        self.selection.names(Self::NAME, trial)
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        for name in self.required_tensors(trial, step)? {
            let Some(nodes) = value_at(Self::NAME, trial, &name, step)? else {
                continue;
            };
            let Some(max_id) = nodes
                .iter()
                .copied()
                .filter(|x| !x.is_nan())
                .reduce(f64::max)
            else {
                continue;
            };
            result.datapoints += 1;
            let depth = (max_id.max(0.0) + 1.0).log2().floor();
            if depth != self.params.depth.floor() {
                result.fire(format!(
                    "{name}: tree depth {depth} (largest node id {max_id}) differs from {}",
                    self.params.depth
                ));
                result
                    .evidence
                    .push(Evidence::new(&name, step, "tree_depth", depth).limit(self.params.depth));
            }
        }
        Ok(result)
    }
}
