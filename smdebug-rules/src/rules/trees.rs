//! Rules about tree models, on the tensors Python smdebug's XGBoost hook writes:
//! FeatureImportanceOverweight (`feature_importance/<type>/<feature>`, or the split features of
//! the trees, `trees/Feature`), TreeDepth (the tree built at that step: its string columns
//! `trees/ID`, `trees/Feature`, `trees/Yes`, `trees/No`, or its numeric `trees/Node` and
//! `trees/Split`).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use smdebug_read::trial::Trial;

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::rule::{Evidence, Needs, RuleResult, TensorRule};
use crate::select::request;
use crate::select::{TensorSelection, strings_at, value_at};

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
/// A run without importances at a step but with the trees' split features (`trees/Feature`, a
/// string column of the XGBoost hook's `trees` collection) is judged on the `weight` importance
/// those give: how many splits of the trees seen so far (this step's and the earlier steps')
/// use each feature. That is XGBoost's `weight` importance when every tree was saved, and an
/// estimate from the saved trees otherwise.
///
/// When it fires: the model leans on a few features: check them for target leakage, add
/// regularisation (lower `max_depth`, subsample columns), or engineer better features.
pub struct FeatureImportanceOverweight {
    params: FeatureImportanceOverweightParams,
    selection: TensorSelection,
    /// The split features of the trees (`trees/Feature`).
    trees: TensorSelection,
    /// Splits per feature over the trees of the steps up to `counted_through`.
    splits: BTreeMap<String, u64>,
    /// The last step whose trees were counted (the runner hands steps in order, each once).
    counted_through: Option<u64>,
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
            trees: TensorSelection::only(Self::NAME, &[], &["(^|/)trees/Feature$".into()])?,
            params,
            splits: BTreeMap::new(),
            counted_through: None,
        })
    }

    /// The `weight` importance of every feature from the split features of the trees saved up
    /// to `step` (each step's trees counted once); empty when no tree was saved.
    fn split_counts(&mut self, trial: &Trial, step: u64) -> Result<Vec<(String, f64)>> {
        if self.counted_through.is_none_or(|c| step > c) {
            self.counted_through = Some(step);
            for name in self.trees.names(Self::NAME, trial)?.iter() {
                for feature in strings_at(Self::NAME, trial, name, step)?.unwrap_or_default() {
                    if feature != "Leaf" {
                        *self.splits.entry(feature).or_insert(0) += 1;
                    }
                }
            }
        }
        Ok(self
            .splits
            .iter()
            .map(|(f, n)| (format!("splits on {f}"), *n as f64))
            .collect())
    }
}

impl TensorRule for FeatureImportanceOverweight {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        Needs::of(Self::NAME, &self.selection, "feature_importance")
            .requiring(format!(
                "importances of more than {} features",
                self.params.nfeatures
            ))
            // The split counts of earlier steps are its own.
            .step_by_step()
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        let mut importances = self
            .selection
            .scalars_at(Self::NAME, trial, step)?
            .collect::<Result<Vec<_>>>()?;
        if importances.is_empty() {
            importances = self.split_counts(trial, step)?;
        }
        let n = self.params.nfeatures as usize;
        if importances.len() <= n {
            // The `nfeatures` largest are all of them: nothing to weigh them against.
            result.unjudged = importances.len();
            return Ok(result);
        }
        result.datapoints = importances.len();
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

/// The depth of one XGBoost tree from its string columns: `ID` (`<tree>-<node>`), `Feature`
/// (`Leaf` for a leaf), `Yes` and `No` (a split's children's IDs). The root is the one row no
/// split names as a child. `None` when the columns do not make one tree (different lengths, an
/// ID twice, a child that is not a row, a row no path reaches, a node reached twice).
fn depth_from_ids(
    ids: &[String],
    features: &[String],
    yes: &[String],
    no: &[String],
) -> Option<u32> {
    let n = ids.len();
    if n == 0 || features.len() != n || yes.len() != n || no.len() != n {
        return None;
    }
    let mut row: HashMap<&str, usize> = HashMap::with_capacity(n);
    for (i, id) in ids.iter().enumerate() {
        if row.insert(id.as_str(), i).is_some() {
            return None;
        }
    }
    let mut children: Vec<Option<[usize; 2]>> = Vec::with_capacity(n);
    let mut is_child = vec![false; n];
    for i in 0..n {
        if features[i] == "Leaf" {
            children.push(None);
            continue;
        }
        let (y, c) = (*row.get(yes[i].as_str())?, *row.get(no[i].as_str())?);
        is_child[y] = true;
        is_child[c] = true;
        children.push(Some([y, c]));
    }
    let mut roots = (0..n).filter(|i| !is_child[*i]);
    let (root, None) = (roots.next()?, roots.next()) else {
        return None;
    };
    let mut depth_of: Vec<Option<u32>> = vec![None; n];
    depth_of[root] = Some(0);
    let mut queue = std::collections::VecDeque::from([root]);
    let mut deepest = 0;
    while let Some(i) = queue.pop_front() {
        let depth = depth_of[i]?;
        deepest = deepest.max(depth);
        for c in children[i].into_iter().flatten() {
            if depth_of[c].replace(depth + 1).is_some() {
                return None;
            }
            queue.push_back(c);
        }
    }
    depth_of.iter().all(Option::is_some).then_some(deepest)
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
/// sorted by node id). With its string columns (`trees/ID`, `trees/Feature`, `trees/Yes`,
/// `trees/No`) the tree is walked from its root through each split's children: the depth is
/// exact, categorical splits included. Without them, from the numbers: XGBoost numbers nodes as
/// it grows them, a split node's two children taking the next two free ids, level by level, so
/// ids are not heap positions (a depth-4 tree of 13 nodes has ids 0–12). With `trees/Split`
/// (NaN for leaves) next to `trees/Node`, the depth is rebuilt from that numbering (a
/// categorical split, whose `Split` is NaN too, is taken for a leaf); without it (a run holding
/// only node ids) it is SageMaker's estimate from the largest id, `floor(log2(max id + 1))`,
/// exact for full trees only.
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
            .step_by_step()
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
            let prefix = name.trim_end_matches("Node");
            let column = |c: &str| strings_at(Self::NAME, trial, &format!("{prefix}{c}"), step);
            let from_ids = match (
                column("ID")?,
                column("Feature")?,
                column("Yes")?,
                column("No")?,
            ) {
                (Some(ids), Some(features), Some(yes), Some(no)) => {
                    depth_from_ids(&ids, &features, &yes, &no)
                }
                _ => None,
            };
            let split_name = format!("{prefix}Split");
            let from_splits = || -> Result<Option<u32>> {
                Ok(
                    value_at(Self::NAME, trial, &split_name, step)?.and_then(|splits| {
                        depth_from_splits(
                            &nodes.iter().copied().collect::<Vec<_>>(),
                            &splits.iter().copied().collect::<Vec<_>>(),
                        )
                    }),
                )
            };
            let (depth, how) = match (from_ids, from_ids.map_or_else(from_splits, |_| Ok(None))?) {
                (Some(d), _) => (
                    d as f64,
                    format!("walked from the root through {prefix}ID, {prefix}Yes and {prefix}No"),
                ),
                (None, Some(d)) => (d as f64, format!("rebuilt from {name} and {split_name}")),
                (None, None) => (
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
    use super::{depth_from_ids, depth_from_splits};

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// XGBoost's string columns: 0-0 splits into 0-1 and 0-2; 0-2 into 0-3 and 0-4; 0-4 is a
    /// categorical split (Split NaN, which the numbers take for a leaf) into 0-5 and 0-6.
    #[test]
    fn depth_walks_the_children_the_string_columns_name() {
        let ids = strings(&["0-0", "0-1", "0-2", "0-3", "0-4", "0-5", "0-6"]);
        let features = strings(&["f0", "Leaf", "f2", "Leaf", "f1", "Leaf", "Leaf"]);
        let yes = strings(&["0-1", "", "0-3", "", "0-5", "", ""]);
        let no = strings(&["0-2", "", "0-4", "", "0-6", "", ""]);
        assert_eq!(depth_from_ids(&ids, &features, &yes, &no), Some(3));
        // Rows in another order: the root is the row no split names.
        let order = [3, 6, 0, 2, 5, 1, 4];
        let pick = |v: &[String]| order.iter().map(|i| v[*i].clone()).collect::<Vec<_>>();
        assert_eq!(
            depth_from_ids(&pick(&ids), &pick(&features), &pick(&yes), &pick(&no)),
            Some(3)
        );
        // A single leaf is a tree of depth 0.
        assert_eq!(
            depth_from_ids(
                &strings(&["0-0"]),
                &strings(&["Leaf"]),
                &strings(&[""]),
                &strings(&[""])
            ),
            Some(0)
        );
    }

    #[test]
    fn string_columns_that_make_no_tree_give_none() {
        let ids = strings(&["0-0", "0-1", "0-2"]);
        let leafs = strings(&["f0", "Leaf", "Leaf"]);
        // A child that is not a row.
        assert_eq!(
            depth_from_ids(
                &ids,
                &leafs,
                &strings(&["0-1", "", ""]),
                &strings(&["0-9", "", ""])
            ),
            None
        );
        // A node named by two splits (no single root, or a node reached twice).
        assert_eq!(
            depth_from_ids(
                &ids,
                &strings(&["f0", "f1", "Leaf"]),
                &strings(&["0-1", "0-2", ""]),
                &strings(&["0-2", "0-2", ""]),
            ),
            None
        );
        // A cycle: no root.
        assert_eq!(
            depth_from_ids(
                &strings(&["0-0", "0-1"]),
                &strings(&["f0", "f1"]),
                &strings(&["0-1", "0-0"]),
                &strings(&["0-1", "0-0"]),
            ),
            None
        );
        // Columns of different lengths, and an ID twice.
        assert_eq!(depth_from_ids(&ids, &leafs[..2], &ids, &ids), None);
        assert_eq!(
            depth_from_ids(
                &strings(&["a", "a"]),
                &strings(&["Leaf", "Leaf"]),
                &ids[..2],
                &ids[..2]
            ),
            None
        );
    }

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
