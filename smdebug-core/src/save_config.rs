//! When to save: per-mode schedules over the mode step (smdebug's `SaveConfig`), and unions of
//! them ([`SaveConfig::union`]: a user's schedule and the steps a rule asks for).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::lenient::Flexible;
use crate::mode::Mode;
pub use crate::step_set::StepSet;

/// smdebug's default interval: every 500th step of each mode.
pub const DEFAULT_SAVE_INTERVAL: u64 = 500;

/// The schedule of one mode. A step is saved when it is listed in `save_steps`, or when it lies in
/// `[start_step, end_step)` and is a multiple of `save_interval`. Steps are mode steps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SaveConfigMode {
    /// Save every n-th step. 0 means "never by interval" (only `save_steps`).
    pub save_interval: u64,
    /// Steps saved regardless of the interval (held compactly, shared by copies).
    pub save_steps: StepSet,
    /// First step the interval applies to (inclusive). Default 0.
    pub start_step: u64,
    /// Step the interval stops at (exclusive). Default: never.
    pub end_step: Option<u64>,
}

impl Default for SaveConfigMode {
    fn default() -> Self {
        SaveConfigMode {
            save_interval: DEFAULT_SAVE_INTERVAL,
            save_steps: StepSet::new(),
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
        if self.save_steps.contains(mode_step) {
            return true;
        }
        self.save_interval > 0
            && mode_step >= self.start_step
            && self.end_step.is_none_or(|end| mode_step < end)
            && mode_step.is_multiple_of(self.save_interval)
    }

    /// Whether every step `other` saves is saved here too. Exact when `other` lists its steps
    /// or when its interval steps are a bounded set of at most [`COVERS_ENUMERATION_LIMIT`]
    /// steps; otherwise it answers yes only when this interval divides `other`'s and this range
    /// holds `other`'s (a `false` can then be conservative: a union keeps a schedule it did not
    /// need, which saves nothing twice).
    pub fn covers(&self, other: &SaveConfigMode) -> bool {
        if !other.save_steps.iter().all(|s| self.should_save(s)) {
            return false;
        }
        if other.save_interval == 0 {
            return true;
        }
        let interval = other.save_interval;
        // The first step `other` saves by its interval; none when it lies past u64 or its end.
        let Some(first) = other
            .start_step
            .div_ceil(interval)
            .checked_mul(interval)
            .filter(|f| other.end_step.is_none_or(|end| *f < end))
        else {
            return true;
        };
        if let Some(end) = other.end_step
            && (end - first).div_ceil(interval) <= COVERS_ENUMERATION_LIMIT
        {
            return (first..end)
                .step_by(usize::try_from(interval).unwrap_or(usize::MAX))
                .all(|s| self.should_save(s));
        }
        self.save_interval > 0
            && interval.is_multiple_of(self.save_interval)
            && first >= self.start_step
            && match (self.end_step, other.end_step) {
                (None, _) => true,
                (Some(mine), Some(theirs)) => theirs <= mine,
                (Some(_), None) => false,
            }
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

/// [`SaveConfigMode::covers`] checks a bounded schedule of at most this many steps one by one.
pub const COVERS_ENUMERATION_LIMIT: u64 = 4096;

/// Per-mode schedules. A mode without its own schedule uses the default one.
///
/// A config can also be a union ([`union`](Self::union)): a mode then saves at the steps of its
/// schedule and at those of further schedules, as when a rule asks for a collection at its own
/// steps and the user's schedule for it differs.
#[derive(Clone, Debug, Default)]
pub struct SaveConfig {
    /// Used for every mode that has no entry in `modes`.
    pub default: SaveConfigMode,
    /// Overrides per mode, indexed by `Mode as usize - 1`.
    modes: [Option<SaveConfigMode>; 4],
    /// Further schedules per mode (same index) whose steps are saved too.
    also: [Vec<SaveConfigMode>; 4],
}

impl SaveConfig {
    /// The same schedule for every mode.
    pub fn new(default: SaveConfigMode) -> Self {
        SaveConfig {
            default,
            modes: Default::default(),
            also: Default::default(),
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

    /// The schedule set for `mode` (its own, else the default). A union saves at the steps of
    /// the further schedules too: see [`schedules`](Self::schedules).
    pub fn for_mode(&self, mode: Mode) -> &SaveConfigMode {
        self.modes[mode as usize - 1]
            .as_ref()
            .unwrap_or(&self.default)
    }

    /// Every schedule `mode` saves by: [`for_mode`](Self::for_mode)'s, then those a
    /// [`union`](Self::union) added.
    pub fn schedules(&self, mode: Mode) -> impl Iterator<Item = &SaveConfigMode> {
        std::iter::once(self.for_mode(mode)).chain(self.also[mode as usize - 1].iter())
    }

    /// Whether `mode_step` of `mode` is due (by any of its schedules).
    pub fn should_save(&self, mode: Mode, mode_step: u64) -> bool {
        self.schedules(mode).any(|s| s.should_save(mode_step))
    }

    /// The config that saves, in every mode, at the steps of `self` and at those of `other`.
    /// `self`'s schedules stay as they are; `other`'s that `self` already covers
    /// ([`SaveConfigMode::covers`]) are left out.
    ///
    /// ```
    /// use smdebug_core::{Mode, SaveConfig, SaveConfigMode};
    ///
    /// let user = SaveConfig::every(100).with_mode(Mode::Eval, SaveConfigMode::never());
    /// let both = user.union(&SaveConfig::every(30));
    /// let due: Vec<u64> = (0..=200).filter(|s| both.should_save(Mode::Train, *s)).collect();
    /// assert_eq!(due, [0, 30, 60, 90, 100, 120, 150, 180, 200]);
    /// assert!(both.should_save(Mode::Eval, 60) && !both.should_save(Mode::Eval, 100));
    /// let every_100 = SaveConfig::every(100);
    /// assert_eq!(every_100.union(&SaveConfig::every(200)), every_100, "every 100 covers every 200");
    /// ```
    pub fn union(&self, other: &SaveConfig) -> SaveConfig {
        let mut out = self.clone();
        for mode in Mode::ALL {
            for schedule in other.schedules(mode) {
                if out.schedules(mode).any(|have| have.covers(schedule)) {
                    continue;
                }
                let extra = &mut out.also[mode as usize - 1];
                extra.retain(|e| !schedule.covers(e));
                extra.push(schedule.clone());
            }
        }
        out
    }

    /// Checks every schedule (e.g. `end_step` not before `start_step`).
    pub fn validate(&self) -> Result<()> {
        self.default.validate()?;
        self.modes
            .iter()
            .flatten()
            .chain(self.also.iter().flatten())
            .try_for_each(|m| m.validate())
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
    /// A union's further schedules of a mode go in that mode's object as `"also": [{...}]`, a
    /// key Python smdebug's reader ignores (it reads each mode's own four keys).
    pub fn to_smdebug_json(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        for mode in Mode::ALL {
            let mut entry = serde_json::to_value(self.for_mode(mode)).expect("plain struct");
            let also = &self.also[mode as usize - 1];
            if let (false, serde_json::Value::Object(fields)) = (also.is_empty(), &mut entry) {
                fields.insert(
                    ALSO_KEY.into(),
                    serde_json::to_value(also).expect("plain structs"),
                );
            }
            map.insert(mode.name().to_string(), entry);
        }
        serde_json::Value::Object(map)
    }
}

/// The key of a union's further schedules in a mode's JSON object.
const ALSO_KEY: &str = "also";

impl PartialEq for SaveConfig {
    /// Two configs are equal when every mode has the same schedules.
    fn eq(&self, other: &Self) -> bool {
        Mode::ALL.into_iter().all(|m| {
            self.for_mode(m) == other.for_mode(m)
                && self.also[m as usize - 1] == other.also[m as usize - 1]
        })
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
        // Read from the value in place, a step at a time: a list of millions is not copied.
        cfg.save_steps = StepSet::deserialize(v)
            .map_err(|e| Error::Config(format!("`{prefix}save_steps`: {e}")))?;
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
                    out.also[mode as usize - 1] = read_also(params, k)?;
                }
            }
            out.validate().map(|_| out)
        } else {
            SaveConfig::from_flat_params(&value, &SaveConfig::default())
        };
        result.map_err(serde::de::Error::custom)
    }
}

/// A mode object's further schedules (`"also"`), none when absent.
fn read_also<E: serde::de::Error>(
    params: &serde_json::Map<String, serde_json::Value>,
    mode: &str,
) -> std::result::Result<Vec<SaveConfigMode>, E> {
    let Some(list) = params.get(ALSO_KEY) else {
        return Ok(Vec::new());
    };
    let entries = list
        .as_array()
        .ok_or_else(|| E::custom(format!("save_config.{mode}.{ALSO_KEY} must be a list")))?;
    entries
        .iter()
        .map(|entry| {
            let fields = entry.as_object().ok_or_else(|| {
                E::custom(format!(
                    "save_config.{mode}.{ALSO_KEY} holds a non-object: {entry}"
                ))
            })?;
            let mut cfg = SaveConfigMode::default();
            apply_flat(&mut cfg, fields, "")
                .map_err(|e| E::custom(format!("save_config.{mode}.{ALSO_KEY}: {e}")))?;
            Ok(cfg)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn interval_range_and_explicit_steps() {
        let c = SaveConfigMode {
            save_interval: 10,
            save_steps: StepSet::from([3]),
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

    /// A schedule of steps below 300: an interval (often none), listed steps, a range.
    fn schedule() -> impl Strategy<Value = SaveConfigMode> {
        (
            prop_oneof![Just(0u64), 1u64..40],
            proptest::collection::vec(0u64..300, 0..4),
            0u64..120,
            proptest::option::of(0u64..300),
        )
            .prop_map(
                |(save_interval, save_steps, start_step, span)| SaveConfigMode {
                    save_interval,
                    save_steps: save_steps.into(),
                    start_step,
                    end_step: span.map(|s| start_step + s),
                },
            )
    }

    /// A config with a default schedule and, for some modes, their own.
    fn config() -> impl Strategy<Value = SaveConfig> {
        (
            schedule(),
            proptest::collection::vec(proptest::option::of(schedule()), 4),
        )
            .prop_map(|(default, modes)| {
                let mut c = SaveConfig::new(default);
                for (mode, own) in Mode::ALL.into_iter().zip(modes) {
                    if let Some(own) = own {
                        c = c.with_mode(mode, own);
                    }
                }
                c
            })
    }

    proptest! {
        #[test]
        fn a_union_saves_exactly_the_steps_of_either_config(a in config(), b in config(), c in config()) {
            let ab = a.union(&b);
            let abc = ab.union(&c);
            for mode in Mode::ALL {
                for step in 0..400 {
                    let either = a.should_save(mode, step) || b.should_save(mode, step);
                    prop_assert_eq!(ab.should_save(mode, step), either, "{:?} step {}", mode, step);
                    prop_assert_eq!(
                        abc.should_save(mode, step),
                        either || c.should_save(mode, step),
                        "{:?} step {}", mode, step
                    );
                }
                // The left side's own schedule stays as it was.
                prop_assert_eq!(ab.for_mode(mode), a.for_mode(mode));
            }
            let back: SaveConfig = serde_json::from_value(abc.to_smdebug_json()).unwrap();
            prop_assert_eq!(back, abc);
        }

        #[test]
        fn covers_never_claims_a_step_it_does_not_save(a in schedule(), b in schedule()) {
            if a.covers(&b) {
                for step in 0..1000 {
                    prop_assert!(!b.should_save(step) || a.should_save(step), "step {}", step);
                }
            }
        }
    }

    #[test]
    fn covers_is_exact_for_the_usual_schedules() {
        let every = SaveConfigMode::every;
        assert!(every(10).covers(&every(20)));
        assert!(!every(20).covers(&every(10)));
        assert!(!every(3).covers(&every(5)));
        assert!(every(1).covers(&SaveConfigMode::steps([7, 9])));
        assert!(SaveConfigMode::never().covers(&SaveConfigMode::never()));
        let first_ten = SaveConfigMode {
            save_interval: 1,
            end_step: Some(10),
            ..Default::default()
        };
        assert!(SaveConfigMode::steps(0..10).covers(&first_ten));
        assert!(!SaveConfigMode::steps(0..9).covers(&first_ten));
        let later = SaveConfigMode {
            start_step: 100,
            ..every(10)
        };
        assert!(every(10).covers(&later) && !later.covers(&every(10)));
    }

    #[test]
    fn a_union_written_for_python_keeps_each_modes_own_four_keys() {
        let c = SaveConfig::every(100).union(&SaveConfig::every(30));
        let json = c.to_smdebug_json();
        assert_eq!(json["TRAIN"]["save_interval"], 100);
        assert_eq!(json["TRAIN"]["also"][0]["save_interval"], 30);
        let bad = json!({"TRAIN": {"save_interval": 5, "also": [3]}});
        let err = serde_json::from_value::<SaveConfig>(bad).unwrap_err();
        assert!(err.to_string().contains("also"), "{err}");
    }
}
