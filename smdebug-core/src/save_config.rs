//! When to save: per-mode schedules over the mode step (smdebug's `SaveConfig`).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::lenient::{Flexible, StepList};
use crate::mode::Mode;

/// smdebug's default interval: every 500th step of each mode.
pub const DEFAULT_SAVE_INTERVAL: u64 = 500;

/// The schedule of one mode. A step is saved when it is listed in `save_steps`, or when it lies in
/// `[start_step, end_step)` and is a multiple of `save_interval`. Steps are mode steps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SaveConfigMode {
    /// Save every n-th step. 0 means "never by interval" (only `save_steps`).
    pub save_interval: u64,
    /// Steps saved regardless of the interval.
    pub save_steps: Vec<u64>,
    /// First step the interval applies to (inclusive). Default 0.
    pub start_step: u64,
    /// Step the interval stops at (exclusive). Default: never.
    pub end_step: Option<u64>,
}

impl Default for SaveConfigMode {
    fn default() -> Self {
        SaveConfigMode {
            save_interval: DEFAULT_SAVE_INTERVAL,
            save_steps: Vec::new(),
            start_step: 0,
            end_step: None,
        }
    }
}

impl SaveConfigMode {
    /// Every `interval`-th step.
    pub fn every(interval: u64) -> Self {
        SaveConfigMode {
            save_interval: interval,
            ..Default::default()
        }
    }

    /// Exactly these steps.
    pub fn steps(steps: impl IntoIterator<Item = u64>) -> Self {
        SaveConfigMode {
            save_interval: 0,
            save_steps: steps.into_iter().collect(),
            ..Default::default()
        }
    }

    /// A schedule that never saves.
    pub fn never() -> Self {
        SaveConfigMode::steps([])
    }

    /// Whether `mode_step` is due.
    pub fn should_save(&self, mode_step: u64) -> bool {
        if self.save_steps.contains(&mode_step) {
            return true;
        }
        self.save_interval > 0
            && mode_step >= self.start_step
            && self.end_step.is_none_or(|end| mode_step < end)
            && mode_step % self.save_interval == 0
    }

    fn validate(&self) -> Result<()> {
        if let Some(end) = self.end_step
            && end < self.start_step
        {
            return Err(Error::Config(format!(
                "end_step {end} is before start_step {}",
                self.start_step
            )));
        }
        Ok(())
    }
}

/// Per-mode schedules. A mode without its own schedule uses the default one.
#[derive(Clone, Debug, Default)]
pub struct SaveConfig {
    /// Used for every mode that has no entry in `modes`.
    pub default: SaveConfigMode,
    /// Overrides per mode, indexed by `Mode as usize - 1`.
    modes: [Option<SaveConfigMode>; 4],
}

impl SaveConfig {
    /// The same schedule for every mode.
    pub fn new(default: SaveConfigMode) -> Self {
        SaveConfig {
            default,
            modes: Default::default(),
        }
    }

    /// Every `interval`-th step in every mode.
    pub fn every(interval: u64) -> Self {
        SaveConfig::new(SaveConfigMode::every(interval))
    }

    /// Sets the schedule of one mode.
    pub fn with_mode(mut self, mode: Mode, config: SaveConfigMode) -> Self {
        self.modes[mode as usize - 1] = Some(config);
        self
    }

    /// The schedule in force for `mode`.
    pub fn for_mode(&self, mode: Mode) -> &SaveConfigMode {
        self.modes[mode as usize - 1]
            .as_ref()
            .unwrap_or(&self.default)
    }

    /// Whether `mode_step` of `mode` is due.
    pub fn should_save(&self, mode: Mode, mode_step: u64) -> bool {
        self.for_mode(mode).should_save(mode_step)
    }

    /// Checks every schedule (e.g. `end_step` not before `start_step`).
    pub fn validate(&self) -> Result<()> {
        self.default.validate()?;
        self.modes.iter().flatten().try_for_each(|m| m.validate())
    }

    /// Parses smdebug's flat keys: `save_interval`, `save_steps` ("1,2,3"), `start_step`, `end_step`,
    /// and the same prefixed with a mode (`train.save_interval`, `eval.save_steps`). Unknown keys are
    /// ignored (they belong to other parts of the config); bad values are errors.
    ///
    /// The result starts from `base`: for each mode and each field, the base's schedule for that
    /// mode, replaced by an unprefixed key, replaced by that mode's key (the order of smdebug's
    /// `parse_save_config_modes_dict`, whose base is the hook's schedule when it reads a
    /// collection's parameters).
    pub fn from_flat_params(
        params: &serde_json::Map<String, serde_json::Value>,
        base: &SaveConfig,
    ) -> Result<SaveConfig> {
        let mut out = base.clone();
        apply_flat(&mut out.default, params, "")?;
        for mode in Mode::ALL {
            let prefix = format!("{}.", mode.name().to_ascii_lowercase());
            let own = base.modes[mode as usize - 1].is_some();
            if own || params.keys().any(|k| k.starts_with(&prefix)) {
                // As smdebug's `parse_save_config_modes_dict`: per field, the base's schedule for
                // this mode, overridden by the unprefixed keys, overridden by this mode's keys.
                // So an unprefixed `save_interval` also replaces a base's `eval.save_interval`.
                let mut cfg = base.for_mode(mode).clone();
                apply_flat(&mut cfg, params, "")?;
                apply_flat(&mut cfg, params, &prefix)?;
                out = out.with_mode(mode, cfg);
            }
        }
        out.validate()?;
        Ok(out)
    }

    /// smdebug's JSON form: `{"TRAIN": {...}, "EVAL": {...}, "PREDICT": {...}, "GLOBAL": {...}}`.
    pub fn to_smdebug_json(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        for mode in Mode::ALL {
            map.insert(
                mode.name().to_string(),
                serde_json::to_value(self.for_mode(mode)).expect("plain struct"),
            );
        }
        serde_json::Value::Object(map)
    }
}

impl PartialEq for SaveConfig {
    /// Two configs are equal when they save the same steps in every mode.
    fn eq(&self, other: &Self) -> bool {
        Mode::ALL
            .into_iter()
            .all(|m| self.for_mode(m) == other.for_mode(m))
    }
}

impl Eq for SaveConfig {}

fn apply_flat(
    cfg: &mut SaveConfigMode,
    params: &serde_json::Map<String, serde_json::Value>,
    prefix: &str,
) -> Result<()> {
    let get = |key: &str| params.get(&format!("{prefix}{key}"));
    let parse_u64 = |key: &str, v: &serde_json::Value| -> Result<u64> {
        serde_json::from_value::<Flexible<u64>>(v.clone())
            .map(|f| f.0)
            .map_err(|e| Error::Config(format!("`{prefix}{key}`: {e}")))
    };
    if let Some(v) = get("save_interval") {
        cfg.save_interval = parse_u64("save_interval", v)?;
    }
    if let Some(v) = get("start_step") {
        cfg.start_step = parse_u64("start_step", v)?;
    }
    if let Some(v) = get("end_step") {
        cfg.end_step = if v.is_null() {
            None
        } else {
            Some(parse_u64("end_step", v)?)
        };
    }
    if let Some(v) = get("save_steps") {
        cfg.save_steps = serde_json::from_value::<StepList>(v.clone())
            .map_err(|e| Error::Config(format!("`{prefix}save_steps`: {e}")))?
            .0;
    }
    Ok(())
}

impl Serialize for SaveConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.to_smdebug_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for SaveConfig {
    /// Accepts smdebug's per-mode object (`{"TRAIN": {...}, ...}`, `null` for "default") or flat keys.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let value = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let per_mode = value
            .keys()
            .any(|k| Mode::from_name(k).is_some() && !k.contains('.'));
        let result = if per_mode {
            let mut out = SaveConfig::default();
            for (k, v) in &value {
                let mode = Mode::from_name(k)
                    .ok_or_else(|| Error::Config(format!("unknown mode `{k}` in save_config")))
                    .map_err(serde::de::Error::custom)?;
                if let serde_json::Value::Object(params) = v {
                    let mut cfg = SaveConfigMode::default();
                    apply_flat(&mut cfg, params, "").map_err(serde::de::Error::custom)?;
                    out = out.with_mode(mode, cfg);
                }
            }
            out.validate().map(|_| out)
        } else {
            SaveConfig::from_flat_params(&value, &SaveConfig::default())
        };
        result.map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn interval_range_and_explicit_steps() {
        let c = SaveConfigMode {
            save_interval: 10,
            save_steps: vec![3],
            start_step: 20,
            end_step: Some(50),
        };
        let due: Vec<u64> = (0..70).filter(|s| c.should_save(*s)).collect();
        assert_eq!(due, vec![3, 20, 30, 40]);
        assert!(!SaveConfigMode::never().should_save(0));
    }

    #[test]
    fn per_mode_flat_keys_like_smdebug() {
        let params =
            json!({"save_interval": "10", "train.save_steps": "0", "eval.save_interval": 5});
        let c = SaveConfig::from_flat_params(params.as_object().unwrap(), &SaveConfig::default())
            .unwrap();
        assert!(c.should_save(Mode::Train, 0));
        assert!(!c.should_save(Mode::Train, 5));
        assert!(
            c.should_save(Mode::Train, 10),
            "like smdebug, a mode's keys start from the unprefixed values"
        );
        assert!(c.should_save(Mode::Eval, 5));
        assert!(c.should_save(Mode::Predict, 10));
        assert!(!c.should_save(Mode::Predict, 5));
    }

    #[test]
    fn unprefixed_keys_replace_a_base_mode_schedule_field_by_field() {
        // The hook says eval every step; a collection says every 100th step: smdebug gives the
        // collection every 100th step in EVAL too, and keeps the hook's EVAL start step.
        let hook = SaveConfig::every(10).with_mode(
            Mode::Eval,
            SaveConfigMode {
                save_interval: 1,
                start_step: 3,
                ..Default::default()
            },
        );
        let params = json!({"save_interval": 100, "train.end_step": 250});
        let c = SaveConfig::from_flat_params(params.as_object().unwrap(), &hook).unwrap();
        let eval: Vec<u64> = (0..400).filter(|s| c.should_save(Mode::Eval, *s)).collect();
        assert_eq!(eval, [100, 200, 300]);
        let train: Vec<u64> = (0..400)
            .filter(|s| c.should_save(Mode::Train, *s))
            .collect();
        assert_eq!(train, [0, 100, 200]);
        assert!(c.should_save(Mode::Predict, 300));
    }

    #[test]
    fn bad_values_are_errors() {
        let bad = json!({"save_interval": "often"});
        let err = SaveConfig::from_flat_params(bad.as_object().unwrap(), &SaveConfig::default())
            .unwrap_err();
        assert!(err.to_string().contains("save_interval"), "{err}");
        let backwards = json!({"start_step": 10, "end_step": 5});
        assert!(
            SaveConfig::from_flat_params(backwards.as_object().unwrap(), &SaveConfig::default())
                .is_err()
        );
    }

    #[test]
    fn smdebug_json_round_trip() {
        let c = SaveConfig::every(7).with_mode(Mode::Eval, SaveConfigMode::steps([1, 2]));
        let back: SaveConfig = serde_json::from_value(c.to_smdebug_json()).unwrap();
        for mode in Mode::ALL {
            assert_eq!(back.for_mode(mode), c.for_mode(mode));
        }
    }
}
