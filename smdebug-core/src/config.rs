//! Hook configuration: typed, with documented defaults, and readable from smdebug's JSON shape.
//!
//! smdebug's hook config (`debughookconfig.json`) looks like this; every value may be a string:
//!
//! ```json
//! {
//!   "LocalPath": "/tmp/run",
//!   "HookParameters": {"save_interval": "10", "eval.save_interval": "1", "reductions": "mean",
//!                      "include_regex": "relu.*", "export_tensorboard": "true"},
//!   "CollectionConfigurations": [
//!     {"CollectionName": "weights", "CollectionParameters": {"save_interval": "100"}},
//!     {"CollectionName": "attention", "CollectionParameters": {"include_regex": "attn\\.(q|k)"}}
//!   ]
//! }
//! ```

use serde::Deserialize;

use crate::collection::{BUILTIN_COLLECTIONS, Collection};
use crate::error::{Error, Result};
use crate::lenient::{Flexible, StrList};
use crate::reduction::ReductionConfig;
use crate::save_config::SaveConfig;

/// Everything a hook needs to decide what to save. Build it in code with [`HookConfig::default`]
/// and the setters of [`crate::hook::HookBuilder`], or read smdebug's JSON with
/// [`HookConfig::from_smdebug_json`].
#[derive(Clone, Debug)]
pub struct HookConfig {
    /// Where the run goes (`LocalPath`): a directory or an object-store URL. Used by smdebug-io.
    /// Default: none (the caller chooses).
    pub out_dir: Option<String>,
    /// Schedule for collections without their own. Default: every 500th step in every mode.
    pub save_config: SaveConfig,
    /// What to save for collections without their own reduction config. Default: raw tensors.
    pub reduction_config: ReductionConfig,
    /// The collections, built-ins first. Default: the eight built-ins, empty.
    pub collections: Vec<Collection>,
    /// Save every tensor the loop offers, in the `all` collection. Default: false.
    pub save_all: bool,
    /// Also write TensorBoard scalars (losses, metrics) and histograms. Default: false.
    pub export_tensorboard: bool,
    /// Where TensorBoard files go; default `<run>/tensorboard`.
    pub tensorboard_dir: Option<String>,
}

impl Default for HookConfig {
    fn default() -> Self {
        HookConfig {
            out_dir: None,
            save_config: SaveConfig::default(),
            reduction_config: ReductionConfig::default(),
            collections: BUILTIN_COLLECTIONS
                .iter()
                .map(|n| Collection::new(*n))
                .collect(),
            save_all: false,
            export_tensorboard: false,
            tensorboard_dir: None,
        }
    }
}

impl HookConfig {
    /// The collection called `name`, created (with defaults) if it does not exist yet.
    pub fn collection_mut(&mut self, name: &str) -> &mut Collection {
        let idx = match self.collections.iter().position(|c| c.name() == name) {
            Some(i) => i,
            None => {
                self.collections.push(Collection::new(name));
                self.collections.len() - 1
            }
        };
        &mut self.collections[idx]
    }

    /// Reads smdebug's hook-config JSON. Unknown top-level keys are ignored (SageMaker put other
    /// things there); a bad value, an unknown reduction or a regex that does not compile is an
    /// error naming the key.
    pub fn from_smdebug_json(text: &str) -> Result<HookConfig> {
        #[derive(Deserialize)]
        struct Raw {
            #[serde(rename = "LocalPath")]
            local_path: Option<String>,
            #[serde(rename = "HookParameters", default)]
            hook_parameters: Option<serde_json::Map<String, serde_json::Value>>,
            #[serde(rename = "CollectionConfigurations", default)]
            collection_configurations: Option<Vec<RawCollection>>,
        }
        #[derive(Deserialize)]
        struct RawCollection {
            #[serde(rename = "CollectionName")]
            name: String,
            #[serde(rename = "CollectionParameters", default)]
            parameters: Option<serde_json::Map<String, serde_json::Value>>,
        }

        let raw: Raw = serde_json::from_str(text)?;
        let mut cfg = HookConfig {
            out_dir: raw.local_path,
            ..HookConfig::default()
        };
        let params = raw.hook_parameters.unwrap_or_default();
        cfg.save_config = SaveConfig::from_flat_params(&params, &SaveConfig::default())?;
        if let Some(r) = parse_reductions(&params, "HookParameters")? {
            cfg.reduction_config = r;
        }
        cfg.save_all = flag(&params, "save_all", "HookParameters")?.unwrap_or(false);
        cfg.export_tensorboard =
            flag(&params, "export_tensorboard", "HookParameters")?.unwrap_or(false);
        cfg.tensorboard_dir = params
            .get("tensorboard_dir")
            .and_then(|v| v.as_str())
            .map(str::to_string);
        if let Some(v) = params.get("include_regex") {
            let patterns: StrList = serde_json::from_value(v.clone())
                .map_err(|e| Error::Config(format!("HookParameters.include_regex: {e}")))?;
            let default = cfg.collection_mut("default");
            for p in &patterns.0 {
                default.include(p)?;
            }
        }

        for rc in raw.collection_configurations.unwrap_or_default() {
            let p = rc.parameters.unwrap_or_default();
            let context = format!("collection `{}`", rc.name);
            let base = cfg.save_config.clone();
            let has_schedule = p.keys().any(|k| {
                let bare = k.rsplit('.').next().unwrap_or(k);
                ["save_interval", "save_steps", "start_step", "end_step"].contains(&bare)
            });
            let save = if has_schedule {
                Some(
                    SaveConfig::from_flat_params(&p, &base)
                        .map_err(|e| Error::Config(format!("{context}: {e}")))?,
                )
            } else {
                None
            };
            let reductions = parse_reductions(&p, &context)?;
            let histogram = flag(&p, "save_histogram", &context)?;
            let c = cfg.collection_mut(&rc.name);
            if let Some(v) = p.get("include_regex") {
                let patterns: StrList = serde_json::from_value(v.clone())
                    .map_err(|e| Error::Config(format!("{context}.include_regex: {e}")))?;
                for pat in &patterns.0 {
                    c.include(pat)?;
                }
            }
            if save.is_some() {
                c.save_config = save;
            }
            if reductions.is_some() {
                c.reduction_config = reductions;
            }
            if let Some(h) = histogram {
                c.save_histogram = h;
            }
        }
        Ok(cfg)
    }
}

fn flag(
    params: &serde_json::Map<String, serde_json::Value>,
    key: &str,
    context: &str,
) -> Result<Option<bool>> {
    params
        .get(key)
        .map(|v| {
            serde_json::from_value::<Flexible<bool>>(v.clone())
                .map(|f| f.0)
                .map_err(|e| Error::Config(format!("{context}.{key}: {e}")))
        })
        .transpose()
}

fn parse_reductions(
    params: &serde_json::Map<String, serde_json::Value>,
    context: &str,
) -> Result<Option<ReductionConfig>> {
    if !params.contains_key("reductions") && !params.contains_key("save_raw_tensor") {
        return Ok(None);
    }
    let list = match params.get("reductions") {
        Some(v) => serde_json::from_value::<StrList>(v.clone())
            .map_err(|e| Error::Config(format!("{context}.reductions: {e}")))?
            .0
            .iter()
            .map(|s| s.parse())
            .collect::<Result<Vec<_>>>()
            .map_err(|e| Error::Config(format!("{context}.reductions: {e}")))?,
        None => Vec::new(),
    };
    let raw = flag(params, "save_raw_tensor", context)?.unwrap_or(list.is_empty());
    let save_shape = flag(params, "save_shape", context)?.unwrap_or(false);
    Ok(Some(ReductionConfig {
        save_raw_tensor: raw,
        reductions: list,
        save_shape,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::Mode;

    const SAMPLE: &str = r#"{
        "LocalPath": "/tmp/run",
        "HookParameters": {"save_interval": "10", "eval.save_interval": "1",
                           "include_regex": "relu_output", "export_tensorboard": "True"},
        "CollectionConfigurations": [
            {"CollectionName": "weights", "CollectionParameters": {"save_interval": "100", "reductions": "mean,abs_l2_norm"}},
            {"CollectionName": "attention", "CollectionParameters": {"include_regex": "attn\\.(q|k)_proj", "save_histogram": "false"}}
        ]
    }"#;

    #[test]
    fn reads_smdebug_hook_config() {
        let cfg = HookConfig::from_smdebug_json(SAMPLE).unwrap();
        assert_eq!(cfg.out_dir.as_deref(), Some("/tmp/run"));
        assert!(cfg.export_tensorboard);
        assert!(cfg.save_config.should_save(Mode::Train, 20));
        assert!(cfg.save_config.should_save(Mode::Eval, 3));
        let w = cfg
            .collections
            .iter()
            .find(|c| c.name() == "weights")
            .unwrap();
        let ws = w.save_config.as_ref().unwrap();
        assert!(ws.should_save(Mode::Train, 100) && !ws.should_save(Mode::Train, 10));
        assert!(
            ws.should_save(Mode::Eval, 3),
            "a collection schedule starts from the hook's per-mode schedule"
        );
        let r = w.reduction_config.as_ref().unwrap();
        assert!(!r.save_raw_tensor && r.reductions.len() == 2);
        let a = cfg
            .collections
            .iter()
            .find(|c| c.name() == "attention")
            .unwrap();
        assert!(a.matches("layer0.attn.k_proj") && !a.save_histogram);
        let d = cfg
            .collections
            .iter()
            .find(|c| c.name() == "default")
            .unwrap();
        assert!(d.matches("block3.relu_output_0"));
    }

    #[test]
    fn bad_configs_are_clear_errors() {
        let cases = [
            (
                r#"{"HookParameters": {"save_interval": "often"}}"#,
                "save_interval",
            ),
            (r#"{"HookParameters": {"reductions": "median"}}"#, "median"),
            (
                r#"{"CollectionConfigurations": [{"CollectionName": "x", "CollectionParameters": {"include_regex": "a("}}]}"#,
                "a(",
            ),
            (r#"{"HookParameters": {"save_all": "maybe"}}"#, "save_all"),
            (r#"{"HookParameters": "#, "JSON"),
        ];
        for (text, needle) in cases {
            let err = HookConfig::from_smdebug_json(text).unwrap_err().to_string();
            assert!(err.contains(needle), "`{text}` gave `{err}`");
        }
    }
}
