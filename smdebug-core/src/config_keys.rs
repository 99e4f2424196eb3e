//! Keys of SageMaker's configuration files that were not applied, so that none is dropped in
//! silence: a key SageMaker defines that this crate does not act on ("ignored: not
//! supported"), and a key nobody defines, usually a misspelling ("unknown key, did you mean
//! `LocalPath`?"). The hook-config reader ([`HookConfig`](crate::HookConfig)) and
//! smdebug-profiler's profiler-config reader both list them with [`unapplied_keys`]; the
//! session prints them on stderr when it starts and lists them in its summary.
//!
//! ```
//! use smdebug_core::config_keys::{KeySet, unapplied_keys};
//!
//! let keys = KeySet::new(&["LocalPath", "RotateMaxFileSizeInBytes"])
//!     .not_supported(&["HorovodProfilingConfig"]);
//! let found = unapplied_keys(["LocalPth", "HorovodProfilingConfig", "LocalPath"], "", &keys);
//! assert_eq!(found[0].to_string(), "`LocalPth`: unknown key, did you mean `LocalPath`?");
//! assert_eq!(found[1].to_string(), "`HorovodProfilingConfig`: ignored: not supported here");
//! assert_eq!(found.len(), 2);
//! ```

use std::fmt;

/// A key of a configuration file that was not applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnappliedKey {
    /// Where it is: its section and name as written (`HookParameters.save_intervl`,
    /// `CollectionConfigurations[0].CollectionParameters.save_intervl`).
    pub key: String,
    /// Why it was not applied.
    pub why: Unapplied,
}

/// Why a key was not applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unapplied {
    /// SageMaker (or Python smdebug) defines it, and this crate does not act on it.
    NotSupported,
    /// No one defines it; `did_you_mean` is the known key closest to it, when one is close.
    Unknown {
        /// The known key it most resembles.
        did_you_mean: Option<String>,
    },
}

impl fmt::Display for UnappliedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.why {
            Unapplied::NotSupported => write!(f, "`{}`: ignored: not supported here", self.key),
            Unapplied::Unknown {
                did_you_mean: Some(k),
            } => write!(f, "`{}`: unknown key, did you mean `{k}`?", self.key),
            Unapplied::Unknown { did_you_mean: None } => {
                write!(f, "`{}`: unknown key, ignored", self.key)
            }
        }
    }
}

/// The keys one object of a configuration file may hold.
#[derive(Clone, Debug, Default)]
pub struct KeySet {
    known: Vec<String>,
    not_supported: Vec<String>,
    ignore_case: bool,
}

impl KeySet {
    /// The keys that are read.
    pub fn new(known: &[&str]) -> KeySet {
        KeySet {
            known: known.iter().map(|k| (*k).to_owned()).collect(),
            ..KeySet::default()
        }
    }

    /// Adds keys that are read.
    pub fn and(mut self, known: impl IntoIterator<Item = String>) -> KeySet {
        self.known.extend(known);
        self
    }

    /// The keys defined elsewhere (SageMaker, Python smdebug) that are not acted on here.
    pub fn not_supported(mut self, keys: &[&str]) -> KeySet {
        self.not_supported = keys.iter().map(|k| (*k).to_owned()).collect();
        self
    }

    /// Keys match whatever their case (the profiler configuration's, as smdebug lowercases
    /// it).
    pub fn ignoring_case(mut self) -> KeySet {
        self.ignore_case = true;
        self
    }

    fn is(&self, list: &[String], key: &str) -> bool {
        list.iter().any(|k| {
            if self.ignore_case {
                k.eq_ignore_ascii_case(key)
            } else {
                k == key
            }
        })
    }

    /// The known (or not supported) key closest to `key`, when it is close enough to be what
    /// was meant: its letters, case aside, at most a third different.
    fn closest(&self, key: &str) -> Option<String> {
        let lower = key.to_ascii_lowercase();
        self.known
            .iter()
            .chain(&self.not_supported)
            .map(|k| {
                let score = strsim::normalized_damerau_levenshtein(&lower, &k.to_ascii_lowercase());
                (score, k)
            })
            .filter(|(score, _)| *score >= 2.0 / 3.0)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, k)| k.clone())
    }
}

/// The keys among `keys` (one object's, in `context`: `""` at the top level, else the path of
/// the object) that `set` does not read, each with why, in the order given.
pub fn unapplied_keys<'k>(
    keys: impl IntoIterator<Item = &'k str>,
    context: &str,
    set: &KeySet,
) -> Vec<UnappliedKey> {
    keys.into_iter()
        .filter(|k| !set.is(&set.known, k))
        .map(|k| UnappliedKey {
            key: if context.is_empty() {
                k.to_owned()
            } else {
                format!("{context}.{k}")
            },
            why: if set.is(&set.not_supported, k) {
                Unapplied::NotSupported
            } else {
                Unapplied::Unknown {
                    did_you_mean: set.closest(k),
                }
            },
        })
        .collect()
}

/// What a configuration file's JSON value is, for error messages about it: `a number`,
/// `a list`, `null`. The hook-config reader and smdebug-profiler's profiler-config reader both
/// say it when a key holds the wrong kind of value.
///
/// ```
/// use smdebug_core::config_keys::json_kind;
///
/// assert_eq!(json_kind(&serde_json::json!([1, 2])), "a list");
/// assert_eq!(json_kind(&serde_json::json!("10")), "a string");
/// ```
pub fn json_kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelling_is_told_from_a_key_not_supported_and_from_gibberish() {
        let set =
            KeySet::new(&["save_interval", "save_steps", "reductions"]).not_supported(&["dry_run"]);
        let found = unapplied_keys(
            ["save_intervl", "dry_run", "xyz", "reductions", "Reductions"],
            "HookParameters",
            &set,
        );
        let text: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "`HookParameters.save_intervl`: unknown key, did you mean `save_interval`?",
                "`HookParameters.dry_run`: ignored: not supported here",
                "`HookParameters.xyz`: unknown key, ignored",
                // Case counts unless the set ignores it.
                "`HookParameters.Reductions`: unknown key, did you mean `reductions`?",
            ]
        );
        let any_case = KeySet::new(&["LocalPath"]).ignoring_case();
        assert!(unapplied_keys(["localpath", "LOCALPATH"], "", &any_case).is_empty());
    }
}
