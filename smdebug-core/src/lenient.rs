//! Serde helpers for smdebug's string-typed JSON configs (hook config, collection parameters,
//! reduction configs): values that may come natively or as strings. Shared by `config`,
//! `save_config` and `reduction`, which is why they live in a module of their own.

use serde::{Deserialize, Deserializer};

/// A value given natively or as a string (`10` or `"10"`, `true` or `"true"`), as smdebug's
/// string-typed configs do.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Flexible<T>(pub T);

impl<'de, T> Deserialize<'de> for Flexible<T>
where
    T: Deserialize<'de> + std::str::FromStr,
    T::Err: std::fmt::Display,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either<T> {
            Native(T),
            Text(String),
        }
        match Either::<T>::deserialize(d)? {
            Either::Native(v) => Ok(Flexible(v)),
            Either::Text(s) => {
                let t = s.trim();
                // Python writes booleans as "True"/"False".
                let lowered = t.to_ascii_lowercase();
                let candidate = if lowered == "true" || lowered == "false" {
                    lowered.as_str()
                } else {
                    t
                };
                candidate
                    .parse()
                    .map(Flexible)
                    .map_err(|e| serde::de::Error::custom(format!("`{s}`: {e}")))
            }
        }
    }
}

/// A list given as an array of strings or as one comma-separated string.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct StrList(pub Vec<String>);

impl<'de> Deserialize<'de> for StrList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            List(Vec<String>),
            Text(String),
        }
        Ok(StrList(match Either::deserialize(d)? {
            Either::List(v) => v,
            Either::Text(s) => s
                .split(',')
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect(),
        }))
    }
}
