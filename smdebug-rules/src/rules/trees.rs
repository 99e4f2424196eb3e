//! Rules about tree models, on the tensors Python smdebug's XGBoost hook writes:
//! FeatureImportanceOverweight (`feature_importance/<type>/<feature>`), TreeDepth
//! (`trees/Node` and `trees/Split`, columns of the tree built at that step).

use serde::{Deserialize, Serialize};
use smdebug_io::trial::Trial;

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::rule::{Evidence, Needs, RuleResult, TensorRule};
use crate::select::request;
use crate::select::{TensorSelection, value_at};

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
    /// The rule's name.
    pub const NAME: &'static str = "FeatureImportanceOverweight";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: FeatureImportanceOverweightParams) -> Result<Self> {
        let check = Check::new(Self::NAME);
        check.at_least("nfeatures", params.nfeatures, 1)?;
        check.finite("threshold", params.threshold)?;
        Ok(FeatureImportanceOverweight {
            selection: TensorSelection::only(Self::NAME, &[], &params.tensor_regex)?,
            params,
        })
    }
}

impl TensorRule for FeatureImportanceOverweight {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        Needs::of(Self::NAME, &self.selection, "feature_importance").requiring(format!(
            "importances of more than {} features",
            self.params.nfeatures
        ))
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        let mut importances = self
            .selection
            .scalars_at(Self::NAME, trial, step)?
            .collect::<Result<Vec<_>>>()?;
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

/// The depth of one XGBoost tree from its node ids (ascending, as the hook writes them) and
/// their split values (NaN for a leaf): the root is node 0, and each split node's children are
/// the next two ids not yet given, taken in id order. `None` when the columns do not fit that
/// numbering (different lengths, an id no split created).
fn depth_from_splits(nodes: &[f64], splits: &[f64]) -> Option<u32> {
    if nodes.len() != splits.len() || nodes.first() != Some(&0.0) {
        return None;
    }
    let mut depth_of: std::collections::HashMap<u64, u32> = [(0, 0)].into();
    let mut next_id = 1u64;
    let mut deepest = 0;
    for (&id, &split) in nodes.iter().zip(splits) {
        let depth = *depth_of.get(&(id as u64))?;
        deepest = deepest.max(depth);
        if !split.is_nan() {
            depth_of.insert(next_id, depth + 1);
            depth_of.insert(next_id + 1, depth + 1);
            next_id += 2;
        }
    }
    Some(deepest)
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

/// **TreeDepth** — at each step, the depth of the tree built there; fires when it differs from
/// `depth`.
///
/// Python smdebug's XGBoost hook writes the tree as columns (`trees/Node`, `trees/Split`, ...,
/// sorted by node id). XGBoost numbers nodes as it grows them: a split node's two children take
/// the next two free ids, level by level, so ids are not heap positions (a depth-4 tree of 13
/// nodes has ids 0–12). With `trees/Split` (NaN for leaves) next to `trees/Node`, the depth is
/// rebuilt from that numbering; without it (a run holding only node ids) it is SageMaker's
/// estimate from the largest id, `floor(log2(max id + 1))`, exact for full trees only. A
/// categorical split also has a NaN `Split` and is taken for a leaf.
///
/// When it fires: trees grow shallower than `max_depth` when further splits do not reduce the
/// loss (lower `max_depth`, or `min_child_weight`/`gamma` are too strict) and deeper than
/// expected when the configuration is not the one you meant.
pub struct TreeDepth {
    params: TreeDepthParams,
    selection: TensorSelection,
}

impl TreeDepth {
    /// The rule's name.
    pub const NAME: &'static str = "TreeDepth";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: TreeDepthParams) -> Result<Self> {
        Check::new(Self::NAME).finite("depth", params.depth)?;
        Ok(TreeDepth {
            selection: TensorSelection::new(Self::NAME, &[], &["(^|/)trees/Node$".into()])?,
            params,
        })
    }
}

impl TensorRule for TreeDepth {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        // The whole tree (`trees/Split` beside `trees/Node`), which XGBoost's hook saves as the
        // collection `trees`.
        Needs::default()
            .reading(&self.selection)
            .capturing(request("trees", Self::NAME).with_regex("(^|/)trees/"))
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        for reading in self.selection.values_at(Self::NAME, trial, step)? {
            let (name, nodes) = reading?;
            let Some(max_id) = nodes
                .iter()
                .copied()
                .filter(|x| !x.is_nan())
                .reduce(f64::max)
            else {
                continue;
            };
            result.datapoints += 1;
            let split_name = format!("{}Split", name.trim_end_matches("Node"));
            let from_splits = value_at(Self::NAME, trial, &split_name, step)?.and_then(|splits| {
                depth_from_splits(
                    &nodes.iter().copied().collect::<Vec<_>>(),
                    &splits.iter().copied().collect::<Vec<_>>(),
                )
            });
            let (depth, how) = match from_splits {
                Some(d) => (d as f64, format!("rebuilt from {name} and {split_name}")),
                None => (
                    (max_id.max(0.0) + 1.0).log2().floor(),
                    format!("estimated from the largest node id {max_id}"),
                ),
            };
            if depth != self.params.depth.floor() {
                result.fire(format!(
                    "{name}: tree depth {depth} ({how}) differs from {}",
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

#[cfg(test)]
mod tests {
    use super::depth_from_splits;

    const LEAF: f64 = f64::NAN;

    #[test]
    fn depth_follows_xgboost_node_numbering() {
        // 0 splits into 1, 2; 1 is a leaf; 2 splits into 3, 4; 4 splits into 5, 6.
        let nodes = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let splits = [0.5, LEAF, 1.5, LEAF, -0.2, LEAF, LEAF];
        assert_eq!(depth_from_splits(&nodes, &splits), Some(3));
        // The largest id alone says floor(log2(7)) = 2.
        assert_eq!(depth_from_splits(&[0.0], &[LEAF]), Some(0));
    }

    #[test]
    fn columns_that_do_not_fit_the_numbering_give_none() {
        assert_eq!(depth_from_splits(&[0.0, 1.0], &[0.5]), None);
        // node 3 exists but no split created it
        assert_eq!(
            depth_from_splits(&[0.0, 1.0, 2.0, 3.0], &[0.5, LEAF, LEAF, LEAF]),
            None
        );
        assert_eq!(depth_from_splits(&[], &[]), None);
    }
}
