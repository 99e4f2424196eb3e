//! Collections: named groups of tensors (weights, gradients, losses, custom ones by regex), each
//! with its own save schedule and reductions.

use std::collections::BTreeSet;
use std::fmt;

use crate::error::{Error, Result};
use crate::pyregex::PyRegex;
use crate::reduction::ReductionConfig;
use crate::save_config::SaveConfig;

/// The built-in collections every hook has.
pub const BUILTIN_COLLECTIONS: [&str; 8] = [
    "weights",
    "biases",
    "gradients",
    "losses",
    "inputs",
    "outputs",
    "optimizer_variables",
    "metrics",
];

/// Collections whose tensors are scalars: no reductions, TensorBoard scalars instead of histograms.
pub const SCALAR_COLLECTIONS: [&str; 2] = ["losses", "metrics"];

/// Name prefix of gradient tensors, as smdebug's hooks write them (`gradient/fc1.weight`).
pub const GRADIENT_PREFIX: &str = "gradient/";

/// Suffix of a registered layer's input tensor (`fc1` records `fc1.input`, in `inputs`): what
/// rules such as CheckInputImages and the saturation rules read, as Python smdebug's
/// `fc1_input_0`.
pub const INPUT_SUFFIX: &str = ".input";

/// Suffix of a loss's predictions (`loss` records `loss.predictions`, in `predictions`): the
/// scores or classes handed to the loss, as Python smdebug's `CrossEntropyLoss_input_0`.
pub const PREDICTIONS_SUFFIX: &str = ".predictions";

/// Suffix of a loss's labels (`loss` records `loss.labels`, in `labels`), as Python smdebug's
/// `CrossEntropyLoss_input_1`. ClassImbalance (`.*labels`, `.*predictions`) and Confusion (the
/// `labels` and `predictions` collections) find both with their default parameters.
pub const LABELS_SUFFIX: &str = ".labels";

/// The collection a model parameter belongs to by its name, for framework adapters: `biases`
/// when its last dotted segment is `bias` (or ends in `_bias`), `weights` otherwise (weights,
/// embeddings, norm scales).
///
/// ```
/// use smdebug_core::collection::parameter_collection;
/// assert_eq!(parameter_collection("encoder.fc1.bias"), "biases");
/// assert_eq!(parameter_collection("fc1.weight"), "weights");
/// ```
pub fn parameter_collection(name: &str) -> &'static str {
    let last = name.rsplit('.').next().unwrap_or(name);
    if last == "bias" || last.ends_with("_bias") {
        "biases"
    } else {
        "weights"
    }
}

/// A named group of tensors. A tensor belongs to a collection when it was saved into it by name,
/// or when its name matches one of the collection's `include_regex` patterns (Python `re`
/// syntax, searched anywhere in the name as `re.search` does; see [`PyRegex`]).
#[derive(Clone, Debug)]
pub struct Collection {
    name: String,
    /// Every pattern as given or read, the unusable ones included (they are written back).
    include_regex: Vec<String>,
    regexes: Vec<PyRegex>,
    unusable: Vec<UnusablePattern>,
    tensor_names: BTreeSet<String>,
    /// What to save; `None` means the hook's default (raw tensors unless configured otherwise).
    pub reduction_config: Option<ReductionConfig>,
    /// When to save; `None` means the hook's default schedule.
    pub save_config: Option<SaveConfig>,
    /// Write TensorBoard histograms of this collection's tensors (when TensorBoard output is on).
    pub save_histogram: bool,
}

impl Collection {
    /// An empty collection with the hook's defaults.
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        let mut c = Collection {
            name,
            include_regex: Vec::new(),
            regexes: Vec::new(),
            unusable: Vec::new(),
            tensor_names: BTreeSet::new(),
            reduction_config: None,
            save_config: None,
            save_histogram: true,
        };
        if c.name == "gradients" {
            c.include(&format!("^{GRADIENT_PREFIX}"))
                .expect("built-in pattern compiles");
        }
        c
    }

    /// The collection's name (`weights`, `gradients`, a custom name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Adds a regex (Python `re` syntax); fails with the pattern and the collection named when
    /// it does not compile.
    pub fn include(&mut self, pattern: &str) -> Result<&mut Self> {
        let regex = PyRegex::new(pattern).map_err(|source| Error::BadRegex {
            pattern: pattern.to_string(),
            context: format!("collection `{}`", self.name),
            source,
        })?;
        self.include_regex.push(pattern.to_string());
        self.regexes.push(regex);
        Ok(self)
    }

    /// Builder form of [`include`](Self::include).
    pub fn with_regex(mut self, pattern: &str) -> Result<Self> {
        self.include(pattern)?;
        Ok(self)
    }

    /// Builder: saves reductions as configured.
    pub fn with_reductions(mut self, config: ReductionConfig) -> Self {
        self.reduction_config = Some(config);
        self
    }

    /// Builder: this collection's own schedule.
    pub fn with_save_config(mut self, config: SaveConfig) -> Self {
        self.save_config = Some(config);
        self
    }

    /// The collection's include patterns, as given (Python `re` syntax).
    pub fn include_regex(&self) -> &[String] {
        &self.include_regex
    }

    /// Patterns read from a run's collections file that do not compile: they select nothing, and
    /// the collection keeps the tensor names its file lists.
    pub fn unusable_patterns(&self) -> &[UnusablePattern] {
        &self.unusable
    }

    /// Names saved into this collection explicitly (or seen matching its regexes).
    pub fn tensor_names(&self) -> &BTreeSet<String> {
        &self.tensor_names
    }

    /// Records that `tensor` belongs here; returns true when it was new.
    pub fn add_tensor_name(&mut self, tensor: &str) -> bool {
        if self.tensor_names.contains(tensor) {
            return false;
        }
        self.tensor_names.insert(tensor.to_string())
    }

    /// Whether a tensor of this name belongs here.
    pub fn matches(&self, tensor: &str) -> bool {
        self.tensor_names.contains(tensor) || self.regexes.iter().any(|r| r.is_match(tensor))
    }

    /// Whether this is one of the scalar collections (losses, metrics).
    pub fn is_scalar(&self) -> bool {
        SCALAR_COLLECTIONS.contains(&self.name.as_str())
    }

    /// smdebug's JSON form of a collection, as the collections file stores it.
    pub fn to_smdebug_json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "include_regex": self.include_regex,
            "tensor_names": self.tensor_names,
            "reduction_config": self.reduction_config.as_ref().map(|r| r.to_smdebug_json()),
            "save_config": self.save_config.as_ref().map(|s| s.to_smdebug_json()),
            "save_histogram": self.save_histogram,
        })
    }

    /// Reads smdebug's JSON form (as written by Python smdebug or by us). A pattern that does
    /// not compile does not fail the read: it is kept in [`include_regex`](Self::include_regex),
    /// selects nothing, and is listed by [`unusable_patterns`](Self::unusable_patterns).
    pub fn from_smdebug_json(value: &serde_json::Value) -> Result<Collection> {
        let obj = value
            .as_object()
            .ok_or_else(|| Error::Config("a collection must be a JSON object".into()))?;
        let name = obj
            .get("name")
            .and_then(|v| v.as_str())
            .ok_or_else(|| Error::Config("collection without a name".into()))?;
        let mut c = Collection::new(name);
        c.include_regex.clear();
        c.regexes.clear();
        if let Some(patterns) = obj.get("include_regex").and_then(|v| v.as_array()) {
            for p in patterns.iter().filter_map(|p| p.as_str()) {
                match PyRegex::new(p) {
                    Ok(regex) => c.regexes.push(regex),
                    Err(e) => c.unusable.push(UnusablePattern {
                        collection: name.to_string(),
                        pattern: p.to_string(),
                        reason: e.to_string(),
                    }),
                }
                c.include_regex.push(p.to_string());
            }
        }
        if let Some(names) = obj.get("tensor_names").and_then(|v| v.as_array()) {
            c.tensor_names = names
                .iter()
                .filter_map(|n| n.as_str().map(str::to_string))
                .collect();
        }
        if let Some(r) = obj.get("reduction_config").filter(|v| !v.is_null()) {
            c.reduction_config = Some(serde_json::from_value(r.clone())?);
        }
        if let Some(s) = obj.get("save_config").filter(|v| !v.is_null()) {
            c.save_config = Some(serde_json::from_value(s.clone())?);
        }
        c.save_histogram = obj
            .get("save_histogram")
            .and_then(|v| v.as_bool())
            .unwrap_or(true);
        Ok(c)
    }
}

/// A pattern in a run's collections file that no engine accepts. Reading goes on without it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnusablePattern {
    /// The collection whose pattern it is.
    pub collection: String,
    /// The pattern as the file has it.
    pub pattern: String,
    /// Why it does not compile.
    pub reason: String,
}

impl fmt::Display for UnusablePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "collection `{}`: regex `{}` is ignored ({}); the collection keeps the tensor names its file lists",
            self.collection, self.pattern, self.reason
        )
    }
}

/// The content of a run's collections file (`collections/000000000/<worker>_collections.json`):
/// smdebug's `CollectionManager` JSON, `{"collections": {name: collection}, "_meta": {"num_workers": n}}`.
#[derive(Clone, Debug, Default)]
pub struct CollectionsFile {
    /// Every collection of the file.
    pub collections: Vec<Collection>,
    /// The number of workers the run was written by (`_meta.num_workers`).
    pub num_workers: usize,
}

impl CollectionsFile {
    /// The collection called `name`, if the file has one.
    pub fn collection(&self, name: &str) -> Option<&Collection> {
        self.collections.iter().find(|c| c.name() == name)
    }

    /// The file's JSON, as smdebug's `CollectionManager` writes it.
    pub fn to_json(&self) -> serde_json::Value {
        let collections: serde_json::Map<String, serde_json::Value> = self
            .collections
            .iter()
            .map(|c| (c.name().to_string(), c.to_smdebug_json()))
            .collect();
        serde_json::json!({
            "collections": collections,
            "_meta": {"num_workers": self.num_workers},
        })
    }

    /// Reads a collections file's JSON; collections with patterns no engine accepts keep their
    /// names (see [`UnusablePattern`]).
    pub fn from_json(value: &serde_json::Value) -> Result<CollectionsFile> {
        let collections = value
            .get("collections")
            .and_then(|c| c.as_object())
            .ok_or_else(|| Error::Config("collections file has no `collections` object".into()))?
            .values()
            .map(Collection::from_smdebug_json)
            .collect::<Result<Vec<_>>>()?;
        let num_workers = value
            .get("_meta")
            .and_then(|m| m.get("num_workers"))
            .and_then(|n| {
                n.as_u64()
                    .or_else(|| n.as_str().and_then(|s| s.parse().ok()))
            })
            .unwrap_or(1) as usize;
        Ok(CollectionsFile {
            collections,
            num_workers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduction::Reduction;

    #[test]
    fn parameters_are_sorted_into_weights_and_biases_by_name() {
        assert_eq!(parameter_collection("fc1.weight"), "weights");
        assert_eq!(parameter_collection("encoder.layer0.attn.bias"), "biases");
        assert_eq!(parameter_collection("lstm.hh_bias"), "biases");
        assert_eq!(parameter_collection("emb.embeddings"), "weights");
        assert_eq!(parameter_collection("bias_scale.weight"), "weights");
    }

    #[test]
    fn regex_membership_searches_anywhere_in_the_name() {
        let c = Collection::new("attention")
            .with_regex(r"layers\.0\.attn\.(q|k)_proj")
            .unwrap();
        assert!(c.matches("model.layers.0.attn.q_proj.output"));
        assert!(!c.matches("model.layers.1.attn.q_proj.output"));
        assert!(Collection::new("gradients").matches("gradient/fc1.weight"));
    }

    #[test]
    fn bad_regex_names_pattern_and_collection() {
        let err = Collection::new("relu").with_regex("relu(").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("relu(") && msg.contains("collection `relu`"),
            "{msg}"
        );
    }

    #[test]
    fn python_hook_patterns_select_what_python_selects() {
        // PyTorch's and XGBoost's default collections, as their hooks write them.
        let biases = Collection::new("biases")
            .with_regex("^(?!gradient).*bias")
            .unwrap();
        assert!(biases.matches("fc1.bias") && !biases.matches("gradient/fc1.bias"));
        let losses = Collection::new("losses")
            .with_regex("^[a-zA-z]+-.+(?<!(auc|map))$")
            .unwrap();
        assert!(losses.matches("train-rmse") && !losses.matches("train-auc"));
    }

    #[test]
    fn unusable_pattern_in_a_file_keeps_the_collection_and_its_names() {
        let json = serde_json::json!({"collections": {"odd": {
            "name": "odd", "include_regex": ["(?a)relu", "^conv"], "tensor_names": ["fc1.weight"],
            "reduction_config": null, "save_config": null, "save_histogram": true}},
            "_meta": {"num_workers": 1}});
        let file = CollectionsFile::from_json(&json).unwrap();
        let odd = &file.collections[0];
        assert!(odd.matches("fc1.weight") && odd.matches("conv1.weight"));
        assert!(!odd.matches("relu1"));
        assert_eq!(odd.include_regex(), ["(?a)relu", "^conv"]);
        assert_eq!(odd.unusable_patterns().len(), 1);
        let warning = odd.unusable_patterns()[0].to_string();
        assert!(
            warning.contains("collection `odd`") && warning.contains("`(?a)relu`"),
            "{warning}"
        );
        assert_eq!(
            odd.to_smdebug_json()["include_regex"],
            serde_json::json!(["(?a)relu", "^conv"])
        );
        // A user's own pattern is still refused.
        assert!(Collection::new("odd").with_regex("(?a)relu").is_err());
    }

    #[test]
    fn collections_file_round_trips() {
        let mut w = Collection::new("weights")
            .with_reductions(ReductionConfig::reductions_only([Reduction::new(
                crate::reduction::ReductionOp::Mean,
            )]))
            .with_save_config(SaveConfig::every(5));
        w.add_tensor_name("fc1.weight");
        let file = CollectionsFile {
            collections: vec![w, Collection::new("custom").with_regex("relu").unwrap()],
            num_workers: 2,
        };
        let back = CollectionsFile::from_json(&file.to_json()).unwrap();
        assert_eq!(back.num_workers, 2);
        let w2 = back.collection("weights").unwrap();
        assert!(back.collection("missing").is_none());
        assert!(w2.matches("fc1.weight"));
        assert_eq!(w2.reduction_config, file.collections[0].reduction_config);
        assert_eq!(w2.save_config, file.collections[0].save_config);
        assert!(back.collections.iter().any(|c| c.matches("layer.relu_out")));
    }
}
