//! Training modes. A step counter runs per mode beside the global step.

use serde::{Deserialize, Serialize};

/// The phase a step belongs to. The numbers are smdebug's `ModeKeys` values, which are stored in
/// every event record, so they must not change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum Mode {
    /// Training steps (`TRAIN`).
    Train = 1,
    /// Evaluation steps (`EVAL`).
    Eval = 2,
    /// Prediction steps (`PREDICT`).
    Predict = 3,
    /// Steps outside any mode (`GLOBAL`), smdebug's default.
    Global = 4,
}

impl Mode {
    /// All modes in smdebug's order.
    pub const ALL: [Mode; 4] = [Mode::Train, Mode::Eval, Mode::Predict, Mode::Global];

    /// smdebug's numeric mode value.
    pub const fn value(self) -> i32 {
        self as i32
    }

    /// The upper-case name smdebug writes into index files (`TRAIN`).
    pub const fn name(self) -> &'static str {
        match self {
            Mode::Train => "TRAIN",
            Mode::Eval => "EVAL",
            Mode::Predict => "PREDICT",
            Mode::Global => "GLOBAL",
        }
    }

    /// The mode for smdebug's numeric value.
    pub fn from_value(value: i32) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.value() == value)
    }

    /// Parses `TRAIN`, `train`, `ModeKeys.TRAIN` and the like.
    pub fn from_name(name: &str) -> Option<Mode> {
        let bare = name.rsplit('.').next().unwrap_or(name);
        Mode::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(bare))
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::from_name(s).ok_or_else(|| {
            format!("unknown mode `{s}`: expected one of TRAIN, EVAL, PREDICT, GLOBAL")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_smdebug_spellings() {
        assert_eq!(Mode::from_name("ModeKeys.EVAL"), Some(Mode::Eval));
        assert_eq!("train".parse::<Mode>(), Ok(Mode::Train));
        assert_eq!(Mode::from_value(4), Some(Mode::Global));
        assert!("training".parse::<Mode>().is_err());
    }
}
