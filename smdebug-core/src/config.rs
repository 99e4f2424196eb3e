//! Hook configuration: typed, with documented defaults, and readable from smdebug's JSON shape.
//!
//! smdebug's hook config (`debughookconfig.json`, which SageMaker writes from a training job's
//! `DebugHookConfig`) looks like this; every value may be a string:
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
//! # What is read, as Python smdebug 1.0.34's `json_config.py` reads it
//!
//! Keys are case-sensitive, as in smdebug. Top level: `LocalPath` (where the run goes),
//! `HookParameters`, `CollectionConfigurations`; `S3OutputPath` and `S3Path` are SageMaker's
//! (it uploads `LocalPath` there). Any other key is listed by
//! [`HookConfig::with_smdebug_json_checked`] as unknown, with the known key it most resembles
//! ([`crate::config_keys`]); the session warns of each. A `null` section is an absent one.
//!
//! `HookParameters`:
//! - the schedule: `save_interval`, `save_steps` (`"1,2,3"`), `start_step`, `end_step`, each also
//!   per mode (`train.`, `eval.`, `predict.`, `global.`): see [`SaveConfig::from_flat_params`];
//! - `reductions` (`"mean,abs_l2_norm"`), with `save_raw_tensor` and `save_shape`;
//! - `include_regex` (comma-separated Python `re` patterns, added to the `default` collection);
//! - `save_all`, `include_workers` (`one` or `all`), `export_tensorboard`, `tensorboard_dir`.
//!
//! `CollectionConfigurations`: a list of `{"CollectionName", "CollectionParameters"}`. A
//! collection's parameters are its schedule (starting, per mode and per field, from the hook's:
//! an unprefixed `save_interval` replaces the hook's `eval.save_interval` too), `reductions`,
//! `save_raw_tensor`, `save_shape`, `include_regex` and `save_histogram`. Listing collections
//! also chooses them: as in smdebug, only the collections listed are saved, besides `losses`
//! and `metrics` (the scalar collections every smdebug hook includes), `default` when
//! `HookParameters.include_regex` is given and `all` with `save_all`
//! ([`HookConfig::include_collections`]).
//!
//! # A file over the code's settings
//!
//! [`HookConfig::with_smdebug_json`] lays a file over a configuration built in code: what the
//! file states replaces what the code set, field by field (one schedule field, one flag, one
//! collection's reductions), and what it does not state stays as the code set it. A
//! collection's schedule keys start from that collection's schedule in code, if it has one
//! (smdebug, having no code, starts from the hook's). [`HookConfig::from_smdebug_json`] lays
//! the file over [`HookConfig::default`].
//!
//! # Where this differs from smdebug, and why
//!
//! - Every bad value is an error here, at start, naming the section, the key and the value.
//!   smdebug refuses some at start too (an unknown reduction, an entry without
//!   `CollectionName`), and others later or never: a regex that does not compile fails at the
//!   first tensor it is matched against, a section of the wrong type or a non-string
//!   `include_regex` with a Python exception, and an `include_workers` other than `one`/`all`
//!   is taken as `one`.
//! - `save_interval: 0` means "only `save_steps`" (smdebug divides by it at the first step).
//! - Booleans may be strings (`"true"`, `"False"`), as SageMaker writes every value; smdebug's
//!   `save_raw_tensor` and `save_shape` only take JSON booleans.
//! - `save_raw_tensor` and `save_shape` are read without `reductions` too; smdebug reads them
//!   only beside `reductions` (though its own test of `{"save_shape": true}` expects shapes).
//! - On SageMaker, smdebug takes TensorBoard's folder from another file
//!   (`tensorboardoutputconfig.json`), which is not read here; `export_tensorboard` and
//!   `tensorboard_dir` are read from `HookParameters` everywhere.
//! - Lists may be JSON arrays as well as comma-separated strings.
//! - Without `CollectionConfigurations`, every collection the loop saves into is saved (this
//!   crate's default, [`HookConfig::include_collections`] `None`); a smdebug hook without it
//!   saves only its framework's default collections (`losses` for PyTorch).
//! - `include_workers` defaults to `all` here (every worker saves: this crate's default);
//!   smdebug's default is `one`.
//!
//! # What rules ask for
//!
//! Rules ask for what they need as [`CaptureRequest`]s (SageMaker's `collections_to_save`), which
//! [`HookConfig::apply`] adds to the configuration without taking anything away from it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::collection::{BUILTIN_COLLECTIONS, Collection, SCALAR_COLLECTIONS};
use crate::config_keys::{KeySet, UnappliedKey, json_kind, unapplied_keys};
use crate::error::{Error, Result};
use crate::lenient::{Flexible, StrList};
use crate::mode::Mode;
use crate::pyregex::PyRegex;
use crate::reduction::ReductionConfig;
use crate::save_config::SaveConfig;

/// The schedule keys of smdebug's flat parameters (also after a mode prefix).
const SCHEDULE_KEYS: [&str; 4] = ["save_interval", "save_steps", "start_step", "end_step"];

/// Everything a hook needs to decide what to save. Build it in code with [`HookConfig::default`]
/// and the setters of [`crate::hook::HookBuilder`], or read smdebug's JSON with
/// [`HookConfig::from_smdebug_json`] (or over a configuration from code with
/// [`HookConfig::with_smdebug_json`]).
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
    /// The collections saved, when not all of them are (smdebug's `include_collections`, which
    /// a hook-config file's `CollectionConfigurations` sets). `None`: every collection.
    /// `Some(names)`: these, plus `losses` and `metrics`, plus `all` with
    /// [`save_all`](Self::save_all); see [`HookConfig::includes`]. Default: `None`.
    pub include_collections: Option<Vec<String>>,
    /// Save every tensor the loop offers, in the `all` collection. Default: false.
    pub save_all: bool,
    /// Every worker saves (smdebug's `include_workers: "all"`); when false, only worker 0 saves
    /// and its collections file says one worker (`"one"`). Default: true.
    pub save_all_workers: bool,
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
            include_collections: None,
            save_all: false,
            save_all_workers: true,
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
/// // A collection the rule brings is saved on the rule's steps, not the hook's default.
/// let schedule = relu.save_config.as_ref().unwrap();
/// assert!(schedule.should_save(Mode::Train, 30) && !schedule.should_save(Mode::Train, 100));
///
/// // One that was there keeps its schedule and gains the rule's steps.
/// config.apply(&CaptureRequest::new("gradients", SaveConfig::every(30), "VanishingGradient"))?;
/// let gradients = config.collections.iter().find(|c| c.name() == "gradients").unwrap();
/// let schedule = gradients.save_config.as_ref().unwrap();
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
    /// Adds what `request` asks for, keeping what is configured. A collection that does not
    /// exist yet is created and saved on the requested steps. One that exists gains the
    /// request's patterns it lacks, and from then on saves at the steps of its schedule in force
    /// (its own, else the hook's default [`save_config`]) and at the requested steps: the union
    /// of both ([`SaveConfig::union`]). Its reductions, histograms and other patterns stay as
    /// they are.
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
        let existed = self
            .collections
            .iter()
            .any(|c| c.name() == request.collection);
        let collection = self.collection_mut(&request.collection);
        for pattern in &request.include_regex {
            if !collection.include_regex().contains(pattern) {
                collection.include(pattern)?;
            }
        }
        // A collection the rule brings is saved on the rule's steps; one that was there keeps
        // its schedule (its own, or the hook's default) and gains the rule's steps.
        collection.save_config = Some(match (existed, collection.save_config.take()) {
            (false, _) => request.save_config.clone(),
            (true, own) => own.unwrap_or(default).union(&request.save_config),
        });
        // A configuration file that lists its collections saves only those: a rule's is added.
        self.include_collection(&request.collection);
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

    /// Whether the collection `name` is saved at all (its schedule decides when): always when
    /// [`include_collections`](Self::include_collections) is `None`; otherwise when it is
    /// listed, is `losses` or `metrics`, or is `all` with [`save_all`](Self::save_all).
    pub fn includes(&self, name: &str) -> bool {
        match &self.include_collections {
            None => true,
            Some(list) => {
                list.iter().any(|n| n == name)
                    || SCALAR_COLLECTIONS.contains(&name)
                    || (self.save_all && name == "all")
            }
        }
    }

    /// Makes sure the collection `name` is saved: adds it to
    /// [`include_collections`](Self::include_collections) when that lists collections (with
    /// `None`, every collection already is). For a rule that needs a collection the file did
    /// not list, as SageMaker adds a rule's collections to the hook's configuration.
    pub fn include_collection(&mut self, name: &str) {
        if let Some(list) = &mut self.include_collections
            && !list.iter().any(|n| n == name)
        {
            list.push(name.to_string());
        }
    }

    /// Reads smdebug's hook-config JSON over [`HookConfig::default`]. Keys it does not read
    /// are left aside ([`with_smdebug_json_checked`](Self::with_smdebug_json_checked) lists
    /// them); a bad value, an unknown reduction or a regex that
    /// does not compile is an error naming the key. See the [module docs](self).
    pub fn from_smdebug_json(text: &str) -> Result<HookConfig> {
        HookConfig::default().with_smdebug_json(text)
    }

    /// This configuration with smdebug's hook-config JSON laid over it: what the file states
    /// replaces what `self` has, what it does not state stays (see the [module docs](self)).
    /// Errors name the section and key (`HookParameters: `save_interval`: ...`,
    /// ``CollectionConfigurations[1] `weights`: ...``) and the value.
    ///
    /// ```
    /// use smdebug_core::{HookConfig, Mode, SaveConfig};
    ///
    /// let code = HookConfig {
    ///     save_config: SaveConfig::every(50),
    ///     export_tensorboard: true,
    ///     ..HookConfig::default()
    /// };
    /// let file = r#"{"HookParameters": {"eval.save_interval": "5"},
    ///                "CollectionConfigurations": [{"CollectionName": "gradients"}]}"#;
    /// let cfg = code.with_smdebug_json(file)?;
    /// assert!(cfg.save_config.should_save(Mode::Train, 100));   // the code's schedule
    /// assert!(cfg.save_config.should_save(Mode::Eval, 5));      // the file's, for EVAL
    /// assert!(cfg.export_tensorboard);                          // not stated: the code's
    /// assert!(cfg.includes("gradients") && cfg.includes("losses") && !cfg.includes("weights"));
    /// # Ok::<(), smdebug_core::Error>(())
    /// ```
    pub fn with_smdebug_json(self, text: &str) -> Result<HookConfig> {
        self.with_smdebug_json_checked(text)
            .map(|(config, _)| config)
    }

    /// [`with_smdebug_json`](Self::with_smdebug_json), and the keys of the file it did not
    /// apply: unknown ones, each with the known key it most resembles (`LocalPth`: did you
    /// mean `LocalPath`?), section by section (the top level, `HookParameters`, each
    /// collection), each section's in the order of their names. (`S3OutputPath` and `S3Path` are SageMaker's
    /// own: it uploads `LocalPath` there; they are not reported.)
    ///
    /// ```
    /// use smdebug_core::HookConfig;
    ///
    /// let file = r#"{"LocalPth": "/tmp/run", "S3OutputPath": "s3://b/x", "Hook": {},
    ///                "HookParameters": {"train.save_intervl": "5"},
    ///                "CollectionConfigurations": [{"CollectionName": "weights",
    ///                    "CollectionParameters": {"save_histogrm": "true"}}]}"#;
    /// let (_, unapplied) = HookConfig::default().with_smdebug_json_checked(file)?;
    /// let text: Vec<String> = unapplied.iter().map(|k| k.to_string()).collect();
    /// assert_eq!(text, [
    ///     "`Hook`: unknown key, ignored",
    ///     "`LocalPth`: unknown key, did you mean `LocalPath`?",
    ///     "`HookParameters.train.save_intervl`: unknown key, did you mean `train.save_interval`?",
    ///     "`CollectionConfigurations[0].CollectionParameters.save_histogrm`: unknown key, \
    ///      did you mean `save_histogram`?",
    /// ]);
    /// # Ok::<(), smdebug_core::Error>(())
    /// ```
    pub fn with_smdebug_json_checked(
        mut self,
        text: &str,
    ) -> Result<(HookConfig, Vec<UnappliedKey>)> {
        let root: Value = serde_json::from_str(text)?;
        let root = root.as_object().ok_or_else(|| {
            Error::Config(format!(
                "the hook configuration must be a JSON object, not {}",
                json_kind(&root)
            ))
        })?;
        let mut unapplied = unapplied_keys(root.keys().map(String::as_str), "", &top_keys());
        if let Some(v) = stated(root, "LocalPath") {
            self.out_dir = Some(string(v, "LocalPath")?);
        }
        let params = match stated(root, "HookParameters") {
            Some(v) => object(v, "HookParameters")?.clone(),
            None => Map::new(),
        };
        self.apply_hook_parameters(&params)
            .map_err(|e| in_context("HookParameters", e))?;
        unapplied.extend(unapplied_keys(
            params.keys().map(String::as_str),
            "HookParameters",
            &hook_parameter_keys(),
        ));

        if let Some(list) = stated(root, "CollectionConfigurations") {
            let list = list.as_array().ok_or_else(|| {
                Error::Config(format!(
                    "CollectionConfigurations: expected a list, found {}",
                    json_kind(list)
                ))
            })?;
            let mut included: Vec<String> = Vec::with_capacity(list.len() + 1);
            for (i, entry) in list.iter().enumerate() {
                let name = self
                    .apply_collection(entry)
                    .map_err(|e| in_context(&format!("CollectionConfigurations[{i}]"), e))?;
                unapplied.extend(collection_unapplied(entry, i));
                if !included.contains(&name) {
                    included.push(name);
                }
            }
            // smdebug's hook adds `default` to the included collections when HookParameters
            // has `include_regex`.
            if params.contains_key("include_regex") && !included.iter().any(|n| n == "default") {
                included.push("default".to_string());
            }
            self.include_collections = Some(included);
        } else if params.contains_key("include_regex") {
            self.include_collection("default");
        }
        Ok((self, unapplied))
    }

    fn apply_hook_parameters(&mut self, params: &Map<String, Value>) -> Result<()> {
        self.save_config = SaveConfig::from_flat_params(params, &self.save_config)?;
        if let Some(r) = parse_reductions(params, &self.reduction_config)? {
            self.reduction_config = r;
        }
        if let Some(on) = flag(params, "save_all")? {
            self.save_all = on;
        }
        if let Some(v) = params.get("include_workers") {
            let text = string(v, "include_workers")?;
            self.save_all_workers = match text.trim().to_ascii_lowercase().as_str() {
                "all" => true,
                "one" => false,
                _ => {
                    return Err(Error::Config(format!(
                        "`include_workers`: `{text}` is neither `one` nor `all`"
                    )));
                }
            };
        }
        if let Some(on) = flag(params, "export_tensorboard")? {
            self.export_tensorboard = on;
        }
        if let Some(v) = params.get("tensorboard_dir").filter(|v| !v.is_null()) {
            self.tensorboard_dir = Some(string(v, "tensorboard_dir")?);
        }
        if let Some(v) = params.get("include_regex") {
            let patterns = str_list(v, "include_regex")?;
            let default = self.collection_mut("default");
            for p in &patterns {
                default
                    .include(p)
                    .map_err(|e| in_context("`include_regex`", e))?;
            }
        }
        Ok(())
    }

    /// Applies one `CollectionConfigurations` entry; returns the collection's name.
    fn apply_collection(&mut self, entry: &Value) -> Result<String> {
        let entry = object(entry, "the entry")?;
        let name = match entry.get("CollectionName") {
            Some(v) => string(v, "CollectionName")?,
            None => {
                return Err(Error::Config(
                    "`CollectionName` is missing (every entry names its collection)".into(),
                ));
            }
        };
        let context = format!("`{name}`");
        let p = match stated(entry, "CollectionParameters") {
            Some(v) => object(v, "CollectionParameters")
                .map_err(|e| in_context(&context, e))?
                .clone(),
            None => Map::new(),
        };
        let has_schedule = p.keys().any(|k| {
            let bare = k.rsplit('.').next().unwrap_or(k);
            SCHEDULE_KEYS.contains(&bare)
        });
        let own_schedule = self
            .collections
            .iter()
            .find(|c| c.name() == name)
            .and_then(|c| c.save_config.clone());
        let own_reductions = self
            .collections
            .iter()
            .find(|c| c.name() == name)
            .and_then(|c| c.reduction_config.clone());
        let save = if has_schedule {
            // The collection's schedule from code, else the hook's (smdebug: the hook's).
            let base = own_schedule.unwrap_or_else(|| self.save_config.clone());
            Some(SaveConfig::from_flat_params(&p, &base).map_err(|e| in_context(&context, e))?)
        } else {
            None
        };
        let base_reductions = own_reductions.unwrap_or_else(|| self.reduction_config.clone());
        let reductions =
            parse_reductions(&p, &base_reductions).map_err(|e| in_context(&context, e))?;
        let histogram = flag(&p, "save_histogram").map_err(|e| in_context(&context, e))?;
        let patterns = match p.get("include_regex") {
            Some(v) => str_list(v, "include_regex").map_err(|e| in_context(&context, e))?,
            None => Vec::new(),
        };
        let c = self.collection_mut(&name);
        for pat in &patterns {
            c.include(pat)
                .map_err(|e| in_context(&format!("{context}: `include_regex`"), e))?;
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
        Ok(name)
    }
}

/// The top level of a hook-config file.
fn top_keys() -> KeySet {
    // `S3OutputPath`, `S3Path`: where SageMaker itself uploads `LocalPath`, not the job's
    // business (smdebug does not read them either); no warning.
    KeySet::new(&[
        "LocalPath",
        "HookParameters",
        "CollectionConfigurations",
        "S3OutputPath",
        "S3Path",
    ])
}

/// The schedule keys, bare and after each mode's prefix (`train.save_interval`).
fn schedule_keys() -> impl Iterator<Item = String> {
    let prefixed = Mode::ALL.into_iter().flat_map(|mode| {
        let prefix = mode.name().to_ascii_lowercase();
        SCHEDULE_KEYS.iter().map(move |k| format!("{prefix}.{k}"))
    });
    SCHEDULE_KEYS
        .iter()
        .map(|k| (*k).to_owned())
        .chain(prefixed)
}

/// `HookParameters`.
fn hook_parameter_keys() -> KeySet {
    KeySet::new(&[
        "reductions",
        "save_raw_tensor",
        "save_shape",
        "include_regex",
        "save_all",
        "include_workers",
        "export_tensorboard",
        "tensorboard_dir",
    ])
    .and(schedule_keys())
}

/// A `CollectionConfigurations` entry's keys not applied, and its `CollectionParameters`'.
fn collection_unapplied(entry: &Value, i: usize) -> Vec<UnappliedKey> {
    let Some(entry) = entry.as_object() else {
        return Vec::new();
    };
    let context = format!("CollectionConfigurations[{i}]");
    let mut found = unapplied_keys(
        entry.keys().map(String::as_str),
        &context,
        &KeySet::new(&["CollectionName", "CollectionParameters"]),
    );
    if let Some(params) = stated(entry, "CollectionParameters").and_then(Value::as_object) {
        let set = KeySet::new(&[
            "reductions",
            "save_raw_tensor",
            "save_shape",
            "include_regex",
            "save_histogram",
        ])
        .and(schedule_keys());
        found.extend(unapplied_keys(
            params.keys().map(String::as_str),
            &format!("{context}.CollectionParameters"),
            &set,
        ));
    }
    found
}

/// `map[key]` unless absent or `null` (smdebug treats `null` sections as absent).
fn stated<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).filter(|v| !v.is_null())
}

fn object<'a>(v: &'a Value, key: &str) -> Result<&'a Map<String, Value>> {
    v.as_object().ok_or_else(|| {
        Error::Config(format!(
            "`{key}`: expected an object, found {} `{v}`",
            json_kind(v)
        ))
    })
}

fn string(v: &Value, key: &str) -> Result<String> {
    v.as_str().map(str::to_string).ok_or_else(|| {
        Error::Config(format!(
            "`{key}`: expected a string, found {} `{v}`",
            json_kind(v)
        ))
    })
}

fn str_list(v: &Value, key: &str) -> Result<Vec<String>> {
    serde_json::from_value::<StrList>(v.clone())
        .map(|l| l.0)
        .map_err(|_| {
            Error::Config(format!(
                "`{key}`: expected a comma-separated string or a list of strings, found {} `{v}`",
                json_kind(v)
            ))
        })
}

/// Puts `context` (a section, an entry) in front of what an error says.
fn in_context(context: &str, e: Error) -> Error {
    match e {
        Error::Config(m) => Error::Config(format!("{context}: {m}")),
        Error::Json(e) => Error::Config(format!("{context}: {e}")),
        Error::BadRegex {
            pattern,
            context: inner,
            source,
        } => Error::BadRegex {
            pattern,
            context: format!("{context}: {inner}"),
            source,
        },
        other => other,
    }
}

fn flag(params: &Map<String, Value>, key: &str) -> Result<Option<bool>> {
    params
        .get(key)
        .filter(|v| !v.is_null())
        .map(|v| {
            serde_json::from_value::<Flexible<bool>>(v.clone())
                .map(|f| f.0)
                .map_err(|e| Error::Config(format!("`{key}`: {e}")))
        })
        .transpose()
}

/// The reduction config the keys state, over `base`; `None` when they state none of
/// `reductions`, `save_raw_tensor` and `save_shape`.
fn parse_reductions(
    params: &Map<String, Value>,
    base: &ReductionConfig,
) -> Result<Option<ReductionConfig>> {
    if !["reductions", "save_raw_tensor", "save_shape"]
        .iter()
        .any(|k| params.contains_key(*k))
    {
        return Ok(None);
    }
    let list = match params.get("reductions") {
        Some(v) => str_list(v, "reductions")?
            .iter()
            .map(|s| s.parse())
            .collect::<Result<Vec<_>>>()
            .map_err(|e| in_context("`reductions`", e))?,
        None => base.reductions.clone(),
    };
    // As smdebug: stating reductions without `save_raw_tensor` saves only the reductions.
    let raw_default = if params.contains_key("reductions") {
        list.is_empty()
    } else {
        base.save_raw_tensor
    };
    let raw = flag(params, "save_raw_tensor")?.unwrap_or(raw_default);
    let save_shape = flag(params, "save_shape")?.unwrap_or(base.save_shape);
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
            !ws.should_save(Mode::Eval, 3) && ws.should_save(Mode::Eval, 200),
            "as smdebug: the collection's unprefixed interval replaces the hook's eval interval"
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
            (
                r#"{"HookParameters": {"include_workers": "some"}}"#,
                "HookParameters: `include_workers`: `some`",
            ),
            (
                r#"{"HookParameters": ["save_interval"]}"#,
                "`HookParameters`: expected an object, found a list",
            ),
            (
                r#"{"CollectionConfigurations": {"CollectionName": "x"}}"#,
                "CollectionConfigurations: expected a list",
            ),
            (
                r#"{"CollectionConfigurations": [{"CollectionParameters": {}}]}"#,
                "CollectionConfigurations[0]: `CollectionName` is missing",
            ),
            (
                r#"{"CollectionConfigurations": [{"CollectionName": "w"},
                    {"CollectionName": "g", "CollectionParameters": {"train.end_step": "x1"}}]}"#,
                "CollectionConfigurations[1]: `g`: `train.end_step`: `x1`",
            ),
            (
                r#"{"HookParameters": {"include_regex": "ok,(bad"}}"#,
                "bad regex `(bad` in HookParameters: `include_regex`: collection `default`",
            ),
            (
                r#"{"HookParameters": {"tensorboard_dir": 3}}"#,
                "`tensorboard_dir`: expected a string, found a number `3`",
            ),
            (r#"{"LocalPath": ["/a"]}"#, "`LocalPath`: expected a string"),
            ("[1, 2]", "must be a JSON object, not a list"),
        ];
        for (text, needle) in cases {
            let err = HookConfig::from_smdebug_json(text).unwrap_err().to_string();
            assert!(err.contains(needle), "`{text}` gave `{err}`");
        }
    }
    #[test]
    fn listed_collections_are_the_ones_saved_besides_losses_and_metrics() {
        let cfg = HookConfig::from_smdebug_json(
            r#"{"HookParameters": {"include_regex": "relu", "save_all": "true"},
                "CollectionConfigurations": [{"CollectionName": "gradients"},
                                             {"CollectionName": "custom"}]}"#,
        )
        .unwrap();
        let included: Vec<&str> = ["gradients", "custom", "losses", "metrics", "default", "all"]
            .into_iter()
            .filter(|n| cfg.includes(n))
            .collect();
        assert_eq!(included.len(), 6, "{included:?}");
        assert!(!cfg.includes("weights") && !cfg.includes("biases"));

        // No list: every collection, as this crate saves by default.
        let all = HookConfig::from_smdebug_json(r#"{"HookParameters": {}}"#).unwrap();
        assert!(all.include_collections.is_none() && all.includes("weights"));
        // An empty list: the scalar collections only.
        let none = HookConfig::from_smdebug_json(r#"{"CollectionConfigurations": []}"#).unwrap();
        assert!(none.includes("losses") && !none.includes("gradients"));
        let mut with_rule = none.clone();
        with_rule.include_collection("gradients");
        assert!(with_rule.includes("gradients"));
        // A rule's capture request includes its collection in a file's list too.
        let mut requested = none.clone();
        requested
            .apply(&CaptureRequest::new(
                "relu_output",
                SaveConfig::every(500),
                "DeadRelu",
            ))
            .unwrap();
        assert!(requested.includes("relu_output"));
    }
    #[test]
    fn include_workers_chooses_who_saves() {
        let one =
            HookConfig::from_smdebug_json(r#"{"HookParameters": {"include_workers": "one"}}"#)
                .unwrap();
        assert!(!one.save_all_workers);
        let all =
            HookConfig::from_smdebug_json(r#"{"HookParameters": {"include_workers": "all"}}"#)
                .unwrap();
        assert!(all.save_all_workers);
        assert!(HookConfig::default().save_all_workers);
    }
    #[test]
    fn a_file_overrides_only_what_it_states() {
        let mut code = HookConfig {
            out_dir: Some("runs/code".into()),
            save_config: SaveConfig::every(7),
            export_tensorboard: true,
            reduction_config: ReductionConfig {
                save_shape: true,
                ..ReductionConfig::default()
            },
            ..HookConfig::default()
        };
        code.collections.push(
            Collection::new("attention")
                .with_regex("attn")
                .unwrap()
                .with_save_config(SaveConfig::every(3)),
        );
        let cfg = code
            .with_smdebug_json(
                r#"{"HookParameters": {"start_step": "14", "reductions": "mean"},
                    "CollectionConfigurations": [
                      {"CollectionName": "attention", "CollectionParameters": {"end_step": 10}}]}"#,
            )
            .unwrap();
        assert_eq!(cfg.out_dir.as_deref(), Some("runs/code"));
        assert!(cfg.export_tensorboard);
        let hook_steps: Vec<u64> = (0..30)
            .filter(|s| cfg.save_config.should_save(Mode::Train, *s))
            .collect();
        assert_eq!(
            hook_steps,
            [14, 21, 28],
            "the code's interval from the file's start step"
        );
        assert!(cfg.reduction_config.save_shape && !cfg.reduction_config.save_raw_tensor);
        let attention = cfg
            .collections
            .iter()
            .find(|c| c.name() == "attention")
            .unwrap();
        let steps: Vec<u64> = (0..20)
            .filter(|s| {
                attention
                    .save_config
                    .as_ref()
                    .unwrap()
                    .should_save(Mode::Train, *s)
            })
            .collect();
        assert_eq!(
            steps,
            [0, 3, 6, 9],
            "the collection's own schedule, ended by the file"
        );
        assert!(attention.matches("layer.attn.q"));
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
    fn a_collection_a_rule_brings_is_saved_on_the_rules_steps_only() {
        let mut cfg = HookConfig {
            save_config: SaveConfig::every(1),
            ..HookConfig::default()
        };
        cfg.apply(
            &CaptureRequest::new("relu_output", SaveConfig::every(500), "DeadRelu")
                .with_regex("relu"),
        )
        .unwrap();
        assert_eq!(
            due(schedule_of(&cfg, "relu_output"), Mode::Train),
            [0, 500, 1000],
            "not the hook's every step"
        );
        assert_eq!(
            due(schedule_of(&cfg, "relu_output"), Mode::Eval),
            [0, 500, 1000]
        );
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
        let eval = |c: &Collection| -> Vec<u64> {
            let s = c.save_config.as_ref().unwrap();
            (0..1000)
                .filter(|n| s.should_save(Mode::Eval, *n))
                .collect()
        };
        assert_eq!(eval(w), eval(&before), "the user's EVAL schedule stays");
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
