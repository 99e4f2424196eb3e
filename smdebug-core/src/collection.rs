//! Collections: named groups of tensors (weights, gradients, losses, custom ones by regex), each
//! with its own save schedule and reductions.

use std::collections::BTreeSet;

use regex::RegexSet;

use crate::error::{Error, Result};
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
/// or when its name matches one of the collection's `include_regex` patterns (searched anywhere in
/// the name, as Python's `re.search` does).
#[derive(Clone, Debug)]
pub struct Collection {
    name: String,
    include_regex: Vec<String>,
    regex: Option<RegexSet>,
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
            regex: None,
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

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Adds a regex; fails with the pattern and the collection named when it does not compile.
    pub fn include(&mut self, pattern: &str) -> Result<&mut Self> {
        let mut patterns = self.include_regex.clone();
        patterns.push(pattern.to_string());
        let set = RegexSet::new(&patterns).map_err(|source| Error::BadRegex {
            pattern: pattern.to_string(),
            context: format!("collection `{}`", self.name),
            source,
        })?;
        self.include_regex = patterns;
        self.regex = Some(set);
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

    pub fn include_regex(&self) -> &[String] {
        &self.include_regex
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
        self.tensor_names.contains(tensor)
            || self.regex.as_ref().is_some_and(|r| r.is_match(tensor))
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

    /// Reads smdebug's JSON form (as written by Python smdebug or by us).
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
        c.regex = None;
        if let Some(patterns) = obj.get("include_regex").and_then(|v| v.as_array()) {
            for p in patterns.iter().filter_map(|p| p.as_str()) {
                c.include(p)?;
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

/// The content of a run's collections file (`collections/000000000/<worker>_collections.json`):
/// smdebug's `CollectionManager` JSON, `{"collections": {name: collection}, "_meta": {"num_workers": n}}`.
#[derive(Clone, Debug, Default)]
pub struct CollectionsFile {
    pub collections: Vec<Collection>,
    pub num_workers: usize,
}

impl CollectionsFile {
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
        let w2 = back
            .collections
            .iter()
            .find(|c| c.name() == "weights")
            .unwrap();
        assert!(w2.matches("fc1.weight"));
        assert_eq!(w2.reduction_config, file.collections[0].reduction_config);
        assert_eq!(w2.save_config, file.collections[0].save_config);
        assert!(back.collections.iter().any(|c| c.matches("layer.relu_out")));
    }
}
