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
//!
//! Rules ask for what they need as [`CaptureRequest`]s (SageMaker's `collections_to_save`), which
//! [`HookConfig::apply`] adds to the configuration without taking anything away from it.

use serde::{Deserialize, Serialize};

use crate::collection::{BUILTIN_COLLECTIONS, Collection};
use crate::error::{Error, Result};
use crate::lenient::{Flexible, StrList};
use crate::pyregex::PyRegex;
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

/// What a rule asks the hook to save: the collection `collection` (a built-in one by name, or a
/// custom one whose tensors `include_regex` selects) at least at the steps of `save_config`
/// (mode steps, per mode). SageMaker's rules say the same in their `collections_to_save`.
///
/// ```
/// use smdebug_core::{CaptureRequest, HookConfig, Mode, SaveConfig};
///
/// let mut config = HookConfig::default();
/// config.save_config = SaveConfig::every(100);
/// config.apply(&CaptureRequest::new("relu_output", SaveConfig::every(30), "DeadRelu")
///     .with_regex(r"relu\d*\.output"))?;
/// let relu = config.collections.iter().find(|c| c.name() == "relu_output").unwrap();
/// assert!(relu.matches("relu1.output"));
/// let schedule = relu.save_config.as_ref().unwrap();
/// assert!(schedule.should_save(Mode::Train, 30) && schedule.should_save(Mode::Train, 100));
/// # Ok::<(), smdebug_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaptureRequest {
    /// The collection to save (`gradients`, or a name of the rule's own such as `relu_output`).
    pub collection: String,
    /// Patterns (Python `re` syntax, searched in the tensor name) that put tensors into the
    /// collection, besides the names saved into it. Empty for a built-in collection.
    #[serde(default)]
    pub include_regex: Vec<String>,
    /// The steps the collection must at least be saved at.
    pub save_config: SaveConfig,
    /// Who asks (a rule's name), for messages.
    pub requested_by: String,
}

impl CaptureRequest {
    /// `collection` at the steps of `save_config`, asked by `requested_by`.
    pub fn new(
        collection: impl Into<String>,
        save_config: SaveConfig,
        requested_by: impl Into<String>,
    ) -> Self {
        CaptureRequest {
            collection: collection.into(),
            include_regex: Vec::new(),
            save_config,
            requested_by: requested_by.into(),
        }
    }

    /// Adds a pattern that puts tensors into the collection.
    pub fn with_regex(mut self, pattern: impl Into<String>) -> Self {
        self.include_regex.push(pattern.into());
        self
    }
}

impl HookConfig {
    /// Adds what `request` asks for, keeping what is configured: the collection is created if
    /// it does not exist, gains the request's patterns it lacks, and from then on saves at the
    /// steps of its schedule in force (its own, else the hook's default [`save_config`]) and
    /// at the requested steps: the union of both ([`SaveConfig::union`]). Its reductions,
    /// histograms and other patterns stay as they are.
    ///
    /// The collection's schedule is fixed here from the default in force: apply requests
    /// after the rest of the configuration (the [`HookBuilder`](crate::HookBuilder) applies its
    /// [`capture`](crate::HookBuilder::capture) requests last). A pattern that does not compile
    /// or a bad schedule is an error naming the collection and who asked, and changes nothing.
    ///
    /// [`save_config`]: Self::save_config
    pub fn apply(&mut self, request: &CaptureRequest) -> Result<()> {
        let context = || {
            format!(
                "collection `{}` requested by {}",
                request.collection, request.requested_by
            )
        };
        if request.collection.trim().is_empty() {
            return Err(Error::Config(format!(
                "a capture request by {} names no collection",
                request.requested_by
            )));
        }
        request
            .save_config
            .validate()
            .map_err(|e| Error::Config(format!("{}: {e}", context())))?;
        for pattern in &request.include_regex {
            PyRegex::new(pattern).map_err(|source| Error::BadRegex {
                pattern: pattern.clone(),
                context: context(),
                source,
            })?;
        }
        let default = self.save_config.clone();
        let collection = self.collection_mut(&request.collection);
        for pattern in &request.include_regex {
            if !collection.include_regex().contains(pattern) {
                collection.include(pattern)?;
            }
        }
        let in_force = collection.save_config.take().unwrap_or(default);
        collection.save_config = Some(in_force.union(&request.save_config));
        Ok(())
    }

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
    use crate::save_config::SaveConfigMode;

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

    fn schedule_of<'a>(cfg: &'a HookConfig, name: &str) -> &'a SaveConfig {
        cfg.collections
            .iter()
            .find(|c| c.name() == name)
            .and_then(|c| c.save_config.as_ref())
            .unwrap_or(&cfg.save_config)
    }

    fn due(schedule: &SaveConfig, mode: Mode) -> Vec<u64> {
        (0..=1000)
            .filter(|s| schedule.should_save(mode, *s))
            .collect()
    }

    /// Each row: the user's schedule for `gradients` (none: the hook's default every 100),
    /// the rule's, and the TRAIN steps saved after applying the request.
    #[test]
    fn applying_a_request_saves_at_the_union_of_the_users_and_the_rules_steps() {
        let every = |n| SaveConfig::every(n);
        let never = SaveConfig::new(SaveConfigMode::never());
        let first_three = SaveConfig::new(SaveConfigMode::steps([0, 1, 2]));
        let multiples = |n: u64| (0..=1000).filter(move |s| s % n == 0);
        let table: Vec<(Option<SaveConfig>, SaveConfig, Vec<u64>)> = vec![
            (None, every(500), multiples(100).collect()),
            (None, every(30), {
                let mut v: Vec<u64> = multiples(100).chain(multiples(30)).collect();
                v.sort_unstable();
                v.dedup();
                v
            }),
            (Some(never.clone()), every(500), vec![0, 500, 1000]),
            (Some(every(250)), first_three.clone(), {
                let mut v: Vec<u64> = multiples(250).chain([1, 2]).collect();
                v.sort_unstable();
                v
            }),
            (Some(never), first_three, vec![0, 1, 2]),
        ];
        for (user, rule, want) in table {
            let mut cfg = HookConfig {
                save_config: SaveConfig::every(100),
                ..HookConfig::default()
            };
            if let Some(user) = &user {
                cfg.collection_mut("gradients").save_config = Some(user.clone());
            }
            cfg.apply(&CaptureRequest::new(
                "gradients",
                rule.clone(),
                "VanishingGradient",
            ))
            .unwrap();
            let got = schedule_of(&cfg, "gradients");
            assert_eq!(due(got, Mode::Train), want, "user {user:?}, rule {rule:?}");
            // Other collections keep the hook's default.
            assert_eq!(
                due(schedule_of(&cfg, "weights"), Mode::Train),
                multiples(100).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn a_request_keeps_the_users_modes_reductions_and_patterns() {
        let mut cfg = HookConfig::from_smdebug_json(SAMPLE).unwrap();
        let before = cfg
            .collections
            .iter()
            .find(|c| c.name() == "weights")
            .unwrap()
            .clone();
        cfg.apply(&CaptureRequest::new(
            "weights",
            SaveConfig::new(SaveConfigMode::never())
                .with_mode(Mode::Train, SaveConfigMode::every(30)),
            "WeightUpdateRatio",
        ))
        .unwrap();
        cfg.apply(
            &CaptureRequest::new("attention", SaveConfig::every(7), "Mine").with_regex("attn\\.v"),
        )
        .unwrap();
        let w = cfg
            .collections
            .iter()
            .find(|c| c.name() == "weights")
            .unwrap();
        assert_eq!(w.reduction_config, before.reduction_config);
        let s = w.save_config.as_ref().unwrap();
        assert!(s.should_save(Mode::Train, 100) && s.should_save(Mode::Train, 30));
        assert!(
            s.should_save(Mode::Eval, 3),
            "the user's EVAL schedule (every step) stays"
        );
        let a = cfg
            .collections
            .iter()
            .find(|c| c.name() == "attention")
            .unwrap();
        assert!(a.matches("layer0.attn.k_proj") && a.matches("layer0.attn.v"));
        assert!(!a.save_histogram, "the user's histogram switch stays");
        // The same request twice adds nothing.
        let once = cfg.clone();
        cfg.apply(
            &CaptureRequest::new("attention", SaveConfig::every(7), "Mine").with_regex("attn\\.v"),
        )
        .unwrap();
        let twice = |c: &HookConfig| {
            let a = c
                .collections
                .iter()
                .find(|c| c.name() == "attention")
                .unwrap();
            (a.include_regex().to_vec(), a.save_config.clone())
        };
        assert_eq!(twice(&cfg), twice(&once));
    }

    #[test]
    fn a_bad_request_is_an_error_naming_who_asked_and_changes_nothing() {
        let mut cfg = HookConfig::default();
        let err = cfg
            .apply(
                &CaptureRequest::new("relu_output", SaveConfig::every(5), "DeadRelu")
                    .with_regex("relu")
                    .with_regex("relu("),
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("relu(") && err.contains("DeadRelu") && err.contains("relu_output"),
            "{err}"
        );
        assert!(cfg.collections.iter().all(|c| c.name() != "relu_output"));
        let backwards = SaveConfig::new(SaveConfigMode {
            start_step: 10,
            end_step: Some(5),
            ..Default::default()
        });
        let err = cfg
            .apply(&CaptureRequest::new(
                "losses",
                backwards,
                "LossNotDecreasing",
            ))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("LossNotDecreasing") && err.contains("end_step"),
            "{err}"
        );
        assert!(
            cfg.apply(&CaptureRequest::new(" ", SaveConfig::every(5), "X"))
                .is_err()
        );
    }
}
