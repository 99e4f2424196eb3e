//! One measurement behind a rule's verdict ([`Evidence`]), as results, statuses and stop
//! requests carry it.

use serde::{Deserialize, Deserializer, Serialize};
use smdebug_core::Mode;

use crate::window::StepRef;

/// One measurement behind a rule's verdict: which tensor, at which step, what was measured, the
/// value and the limit it was compared with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The tensor measured (or a description such as `loss (TRAIN)` for derived quantities).
    pub tensor: String,
    /// The step of the measurement: a global step for a debugging rule; for a profiler rule a
    /// step of `mode`'s own numbering (step spans number each mode's steps from 0).
    pub step: u64,
    /// For a profiler rule, the mode whose step `step` is (`TRAIN`, `EVAL`, ...); `None` for a
    /// global step, and in summaries written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// What was measured (`abs_mean`, `nan_count`, `dead_units_percent`, …).
    pub measure: String,
    /// The measured value. NaN and ±Inf are written as the strings `"NaN"`, `"Infinity"`,
    /// `"-Infinity"` (JSON has no such numbers) and read back as such; `null`, which older
    /// summaries wrote for any of them, reads back as NaN.
    #[serde(
        serialize_with = "non_finite_as_string",
        deserialize_with = "non_finite_from_string"
    )]
    pub value: f64,
    /// The limit the value was compared with, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
}

fn non_finite_as_string<S: serde::Serializer>(
    v: &f64,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match *v {
        x if x.is_finite() => s.serialize_f64(x),
        x if x.is_nan() => s.serialize_str("NaN"),
        x if x > 0.0 => s.serialize_str("Infinity"),
        _ => s.serialize_str("-Infinity"),
    }
}

fn non_finite_from_string<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Value {
        Number(f64),
        Text(String),
        Null,
    }
    match Value::deserialize(d)? {
        Value::Number(x) => Ok(x),
        Value::Null => Ok(f64::NAN),
        Value::Text(t) => match t.as_str() {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            other => Err(serde::de::Error::custom(format!(
                "an evidence value must be a number, null, \"NaN\", \"Infinity\" or \"-Infinity\", not {other:?}"
            ))),
        },
    }
}

impl Evidence {
    /// `measure` of `tensor` at `step` was `value`.
    pub fn new(tensor: &str, step: u64, measure: &str, value: f64) -> Self {
        Evidence {
            tensor: tensor.to_string(),
            step,
            mode: None,
            measure: measure.to_string(),
            value,
            limit: None,
        }
    }

    /// `measure` of `tensor` at `at` (a global step or a step of a mode) was `value`.
    pub fn at(tensor: &str, at: StepRef, measure: &str, value: f64) -> Self {
        Evidence {
            mode: at.mode,
            ..Evidence::new(tensor, at.step, measure, value)
        }
    }

    /// The step of the measurement, with its mode when it has one (`TRAIN step 9`).
    pub fn step_ref(&self) -> StepRef {
        StepRef {
            step: self.step,
            mode: self.mode,
        }
    }

    /// Records the limit the value was compared with.
    pub fn limit(mut self, limit: f64) -> Self {
        self.limit = Some(limit);
        self
    }
}

#[cfg(test)]
mod evidence_json {
    use super::Evidence;

    #[test]
    fn non_finite_evidence_values_are_written_as_strings_and_read_back() {
        for (value, text) in [
            (f64::NAN, "\"NaN\""),
            (f64::INFINITY, "\"Infinity\""),
            (f64::NEG_INFINITY, "\"-Infinity\""),
            (2.5, "2.5"),
        ] {
            let e = Evidence::new("loss", 3, "mean", value);
            let json = serde_json::to_string(&e).unwrap();
            assert!(json.contains(&format!("\"value\":{text}")), "{json}");
            let back: Evidence = serde_json::from_str(&json).unwrap();
            assert_eq!(back.value.to_bits(), value.to_bits(), "{json}");
        }
        // What older summaries wrote for any non-finite value.
        let old: Evidence =
            serde_json::from_str(r#"{"tensor":"t","step":1,"measure":"m","value":null}"#).unwrap();
        assert!(old.value.is_nan());
        let bad = serde_json::from_str::<Evidence>(
            r#"{"tensor":"t","step":1,"measure":"m","value":"lots"}"#,
        );
        assert!(bad.unwrap_err().to_string().contains("\"lots\""));
    }

    /// A profiler rule's evidence names the mode of its step (written only when there is one);
    /// a debugging rule's is a global step, and older summaries read without a mode.
    #[test]
    fn evidence_at_a_step_of_a_mode_keeps_the_mode() {
        use crate::window::StepRef;
        use smdebug_core::Mode;
        let e = Evidence::at(
            "vm workers",
            StepRef::of_mode(9, Mode::Train),
            "workers",
            1.0,
        );
        assert_eq!(e.step_ref().to_string(), "TRAIN step 9");
        let json = serde_json::to_string(&e).unwrap();
        assert!(json.contains(r#""mode":"TRAIN""#), "{json}");
        assert_eq!(serde_json::from_str::<Evidence>(&json).unwrap(), e);
        let global = Evidence::new("loss", 31, "nan_count", 1.0);
        assert_eq!(global.step_ref().to_string(), "step 31");
        assert!(!serde_json::to_string(&global).unwrap().contains("mode"));
        let old: Evidence =
            serde_json::from_str(r#"{"tensor":"t","step":1,"measure":"m","value":2}"#).unwrap();
        assert_eq!(old.mode, None);
    }
}
