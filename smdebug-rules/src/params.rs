//! Typed rule parameters from code, JSON or the command line.
//!
//! Every built-in rule has a parameter struct with `Default` (SageMaker's defaults) and serde
//! support. SageMaker passed every rule parameter as a string (`"threshold": "0.0000001"`), so
//! the deserializers here accept a value either typed (`1e-7`, `true`, `["a", "b"]`) or as a
//! string (`"1e-7"`, `"True"`, `"a,b"`, `"None"`). The command-line form
//! `NAME:param=value,param=value` becomes such a string map.

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use smdebug_core::Mode;

use crate::error::{Error, Result};

/// A rule as a user names it: the rule's name, its parameters and the actions to take when it
/// fires. The JSON form is `{"name": "VanishingGradient", "parameters": {"threshold": 1e-6},
/// "actions": [{"type": "stop_training"}]}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// The built-in rule's name (`VanishingGradient`; SageMaker's snake_case config names such
    /// as `vanishing_gradient` are accepted too).
    pub name: String,
    /// Parameter overrides; the rest keep their defaults.
    #[serde(default)]
    pub parameters: Map<String, Value>,
    /// What to do when the rule fires.
    #[serde(default)]
    pub actions: Vec<crate::actions::ActionConfig>,
}

impl RuleSpec {
    /// A spec with default parameters and no actions.
    pub fn new(name: impl Into<String>) -> Self {
        RuleSpec {
            name: name.into(),
            ..Default::default()
        }
    }

    /// Sets one parameter.
    pub fn param(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.parameters.insert(key.to_string(), value.into());
        self
    }

    /// Adds an action.
    pub fn action(mut self, action: crate::actions::ActionConfig) -> Self {
        self.actions.push(action);
        self
    }

    /// Parses the command-line form `NAME` or `NAME:param=value,param=value`.
    ///
    /// A comma-separated piece without `=` continues the previous value, so list and regex
    /// values may contain commas: `AllZero:collection_names=weights,biases,threshold=90`.
    ///
    /// ```
    /// use smdebug_rules::RuleSpec;
    /// let spec = RuleSpec::parse("AllZero:collection_names=weights,biases,threshold=90").unwrap();
    /// assert_eq!(spec.name, "AllZero");
    /// assert_eq!(spec.parameters["collection_names"], "weights,biases");
    /// assert_eq!(spec.parameters["threshold"], "90");
    /// ```
    pub fn parse(text: &str) -> Result<RuleSpec> {
        let bad = |reason: &str| Error::BadSpec {
            spec: text.to_string(),
            reason: reason.to_string(),
        };
        let (name, rest) = match text.split_once(':') {
            Some((n, r)) => (n.trim(), Some(r)),
            None => (text.trim(), None),
        };
        if name.is_empty() {
            return Err(bad("the rule name is empty"));
        }
        let mut parameters = Map::new();
        let mut last_key: Option<String> = None;
        if let Some(rest) = rest.filter(|r| !r.trim().is_empty()) {
            for piece in rest.split(',') {
                match piece.split_once('=') {
                    Some((k, v)) => {
                        let k = k.trim();
                        if k.is_empty() {
                            return Err(bad(&format!("`{piece}` has no parameter name")));
                        }
                        if parameters.contains_key(k) {
                            return Err(bad(&format!("parameter `{k}` is given twice")));
                        }
                        parameters.insert(k.to_string(), Value::String(v.trim().to_string()));
                        last_key = Some(k.to_string());
                    }
                    None => {
                        let Some(k) = &last_key else {
                            return Err(bad(&format!("`{piece}` is not of the form param=value")));
                        };
                        if let Some(Value::String(v)) = parameters.get_mut(k) {
                            v.push(',');
                            v.push_str(piece.trim());
                        }
                    }
                }
            }
        }
        Ok(RuleSpec {
            name: name.to_string(),
            parameters,
            actions: Vec::new(),
        })
    }
}

/// Builds a rule's typed parameters from a JSON map: unknown keys and ill-typed values are
/// reported with the rule's and the parameter's names.
pub fn parse_params<P>(rule: &str, given: &Map<String, Value>) -> Result<P>
where
    P: DeserializeOwned + Serialize + Default,
{
    let expected = param_names(&P::default());
    for key in given.keys() {
        if !expected.iter().any(|e| e == key) {
            return Err(Error::UnknownParameter {
                rule: rule.to_string(),
                param: key.clone(),
                expected,
            });
        }
    }
    match serde_json::from_value::<P>(Value::Object(given.clone())) {
        Ok(p) => Ok(p),
        Err(whole) => {
            // serde's message does not name the field; find the one that fails on its own.
            for (key, value) in given {
                let mut one = Map::new();
                one.insert(key.clone(), value.clone());
                if let Err(e) = serde_json::from_value::<P>(Value::Object(one)) {
                    return Err(Error::BadParameter {
                        rule: rule.to_string(),
                        param: key.clone(),
                        reason: format!("{e} (got {value})"),
                    });
                }
            }
            Err(Error::BadParameter {
                rule: rule.to_string(),
                param: "(all)".into(),
                reason: whole.to_string(),
            })
        }
    }
}

/// The parameter names of a parameter struct (its serialized keys).
pub fn param_names<P: Serialize>(params: &P) -> Vec<String> {
    match to_json(params) {
        Value::Object(m) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// A parameter struct as JSON, as [`TensorRule::parameters`](crate::TensorRule::parameters) reports it.
pub fn to_json<P: Serialize>(params: &P) -> Value {
    serde_json::to_value(params).unwrap_or(Value::Null)
}

/// The checks a rule's constructor runs on its parameters. Every failure is an
/// [`Error::BadParameter`] naming the rule and the parameter.
///
/// Parameters parsed from JSON or the command line are finite already ([`lenient`]); these
/// checks also hold for parameters built in code, where NaN or an infinity would make every
/// comparison false (or true): a rule given one could never fire, or would fire at every step.
///
/// ```
/// use smdebug_rules::params::Check;
/// let check = Check::new("MyRule");
/// assert!(check.percent("threshold", 50.0).is_ok());
/// let err = check.percent("threshold", f64::NAN).unwrap_err();
/// assert_eq!(err.to_string(), "rule MyRule: parameter `threshold`: must be a finite number, got NaN");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Check<'a> {
    rule: &'a str,
}

impl<'a> Check<'a> {
    /// The checks of the rule named `rule`.
    pub fn new(rule: &'a str) -> Self {
        Check { rule }
    }

    /// The error for `param`, with `reason`.
    pub fn error(&self, param: &str, reason: impl Into<String>) -> Error {
        Error::BadParameter {
            rule: self.rule.to_string(),
            param: param.to_string(),
            reason: reason.into(),
        }
    }

    /// Fails with `reason` unless `ok`.
    pub fn that(&self, ok: bool, param: &str, reason: impl FnOnce() -> String) -> Result<()> {
        if ok {
            Ok(())
        } else {
            Err(self.error(param, reason()))
        }
    }

    /// A finite number (not NaN, not ±infinity).
    pub fn finite(&self, param: &str, value: f64) -> Result<()> {
        self.that(value.is_finite(), param, || {
            format!("must be a finite number, got {value}")
        })
    }

    /// A finite number when there is one.
    pub fn finite_opt(&self, param: &str, value: Option<f64>) -> Result<()> {
        value.map_or(Ok(()), |v| self.finite(param, v))
    }

    /// A finite number in `low..=high`; `what` names the kind of value in the message
    /// ("a percentage", "a share").
    pub fn within(&self, param: &str, value: f64, low: f64, high: f64, what: &str) -> Result<()> {
        self.finite(param, value)?;
        self.that((low..=high).contains(&value), param, || {
            format!("must be {what} between {low} and {high}, got {value}")
        })
    }

    /// A percentage, `0..=100`.
    pub fn percent(&self, param: &str, value: f64) -> Result<()> {
        self.within(param, value, 0.0, 100.0, "a percentage")
    }

    /// A share, `0..=1`.
    pub fn share(&self, param: &str, value: f64) -> Result<()> {
        self.within(param, value, 0.0, 1.0, "a share")
    }

    /// A finite number of at least 0; `what` names it in the message ("a number", "a
    /// percentage").
    pub fn non_negative(&self, param: &str, value: f64, what: &str) -> Result<()> {
        self.finite(param, value)?;
        self.that(value >= 0.0, param, || {
            format!("must be {what} of at least 0, got {value}")
        })
    }

    /// A finite number above 0; `what` names it in the message ("a number of seconds").
    pub fn positive(&self, param: &str, value: f64, what: &str) -> Result<()> {
        self.finite(param, value)?;
        self.that(value > 0.0, param, || {
            format!("must be a positive {what}, got {value}")
        })
    }

    /// A count of at least `min`.
    pub fn at_least(&self, param: &str, value: u64, min: u64) -> Result<()> {
        self.that(value >= min, param, || {
            format!("must be at least {min}, got {value}")
        })
    }

    /// A mode name (`TRAIN`, `EVAL`, `PREDICT` or `GLOBAL`, any case); `None` when not given.
    pub fn mode(&self, param: &str, value: Option<&str>) -> Result<Option<Mode>> {
        value
            .map(|m| {
                Mode::from_name(&m.trim().to_ascii_uppercase()).ok_or_else(|| {
                    self.error(
                        param,
                        format!("expected TRAIN, EVAL, PREDICT or GLOBAL, got `{m}`"),
                    )
                })
            })
            .transpose()
    }
}

/// Deserializers that accept typed JSON values or SageMaker-style strings.
pub mod lenient {
    use super::*;

    fn is_none_word(s: &str) -> bool {
        let s = s.trim();
        s.is_empty() || s.eq_ignore_ascii_case("none") || s.eq_ignore_ascii_case("null")
    }

    /// A finite number. Every number parameter is a threshold, a tolerance, a share or a
    /// count, and against NaN or an infinity a comparison is always false (or always true):
    /// a rule given one could never fire, or would fire at every step.
    fn number<E: serde::de::Error>(v: &Value) -> Result<f64, E> {
        let x = match v {
            Value::Number(n) => n
                .as_f64()
                .ok_or_else(|| E::custom(format!("`{n}` is not a number")))?,
            Value::String(s) => s
                .trim()
                .parse::<f64>()
                .map_err(|_| E::custom(format!("expected a number, got `{s}`")))?,
            other => return Err(E::custom(format!("expected a number, got {other}"))),
        };
        if !x.is_finite() {
            return Err(E::custom(format!(
                "expected a finite number, got {x} (compared against it, the rule could never \
                 fire or would always fire)"
            )));
        }
        Ok(x)
    }

    fn integer<E: serde::de::Error>(v: &Value) -> Result<u64, E> {
        let x = number::<E>(v)?;
        if x < 0.0 || x.fract() != 0.0 || !x.is_finite() {
            return Err(E::custom(format!(
                "expected a non-negative integer, got {x}"
            )));
        }
        Ok(x as u64)
    }

    /// `1.5` or `"1.5"`.
    pub fn f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        number(&Value::deserialize(d)?)
    }

    /// `null`, `"None"`, `1.5` or `"1.5"`.
    pub fn opt_f64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(None),
            Value::String(s) if is_none_word(&s) => Ok(None),
            v => number(&v).map(Some),
        }
    }

    /// `3` or `"3"` (non-negative).
    pub fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        integer(&Value::deserialize(d)?)
    }

    /// `null`, `"None"`, `3` or `"3"`.
    pub fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(None),
            Value::String(s) if is_none_word(&s) => Ok(None),
            v => integer(&v).map(Some),
        }
    }

    /// `true` or `"true"`/`"True"`/`"1"` (and the false forms).
    pub fn bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        match Value::deserialize(d)? {
            Value::Bool(b) => Ok(b),
            Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => Ok(true),
                "false" | "0" | "no" => Ok(false),
                _ => Err(D::Error::custom(format!(
                    "expected true or false, got `{s}`"
                ))),
            },
            other => Err(D::Error::custom(format!(
                "expected true or false, got {other}"
            ))),
        }
    }

    /// `["a", "b"]`, `"a,b"`, `"a"`, or `null`/`"None"` for an empty list.
    pub fn list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(Vec::new()),
            Value::String(s) if is_none_word(&s) => Ok(Vec::new()),
            Value::String(s) => Ok(s
                .split(',')
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect()),
            Value::Array(items) => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    other => Err(D::Error::custom(format!(
                        "expected a list of strings, got element {other}"
                    ))),
                })
                .collect(),
            other => Err(D::Error::custom(format!(
                "expected a string or a list of strings, got {other}"
            ))),
        }
    }

    /// Like [`list`], but a string is one regex (regexes may contain commas); a JSON list gives
    /// several.
    pub fn regexes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(Vec::new()),
            Value::String(s) if is_none_word(&s) => Ok(Vec::new()),
            Value::String(s) => Ok(vec![s]),
            Value::Array(items) => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    other => Err(D::Error::custom(format!(
                        "expected a list of regexes, got element {other}"
                    ))),
                })
                .collect(),
            other => Err(D::Error::custom(format!(
                "expected a regex or a list of regexes, got {other}"
            ))),
        }
    }

    /// A string; `null`/`"None"` give `None`.
    pub fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(None),
            Value::String(s) if is_none_word(&s) => Ok(None),
            Value::String(s) => Ok(Some(s)),
            other => Err(D::Error::custom(format!("expected a string, got {other}"))),
        }
    }

    /// A string.
    pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) => Ok(s),
            Value::Number(n) => Ok(n.to_string()),
            other => Err(D::Error::custom(format!("expected a string, got {other}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    struct P {
        #[serde(deserialize_with = "lenient::f64")]
        threshold: f64,
        #[serde(deserialize_with = "lenient::bool")]
        only_nan: bool,
        #[serde(deserialize_with = "lenient::list")]
        collection_names: Vec<String>,
        #[serde(deserialize_with = "lenient::opt_u64")]
        num_steps: Option<u64>,
    }

    #[test]
    fn strings_and_typed_values_give_the_same_parameters() {
        let from_cli = RuleSpec::parse(
            "X:threshold=0.5,only_nan=True,collection_names=weights,biases,num_steps=None",
        )
        .unwrap();
        let typed: Map<String, Value> = serde_json::from_str(
            r#"{"threshold": 0.5, "only_nan": true, "collection_names": ["weights", "biases"], "num_steps": null}"#,
        )
        .unwrap();
        let a: P = parse_params("X", &from_cli.parameters).unwrap();
        let b: P = parse_params("X", &typed).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.collection_names, vec!["weights", "biases"]);
    }

    #[test]
    fn unknown_and_ill_typed_parameters_name_the_parameter() {
        let spec = RuleSpec::parse("X:treshold=1").unwrap();
        let err = parse_params::<P>("X", &spec.parameters).unwrap_err();
        assert!(
            matches!(&err, Error::UnknownParameter { param, .. } if param == "treshold"),
            "{err}"
        );
        assert!(err.to_string().contains("threshold"), "{err}");
        let spec = RuleSpec::parse("X:only_nan=maybe,threshold=2").unwrap();
        let err = parse_params::<P>("X", &spec.parameters).unwrap_err();
        assert!(
            matches!(&err, Error::BadParameter { param, .. } if param == "only_nan"),
            "{err}"
        );
        let spec = RuleSpec::parse("X:num_steps=-3").unwrap();
        let err = parse_params::<P>("X", &spec.parameters).unwrap_err();
        assert!(err.to_string().contains("num_steps"), "{err}");
    }

    #[test]
    fn nan_and_infinite_numbers_are_rejected_naming_rule_and_parameter() {
        for value in ["NaN", "nan", "inf", "-inf", "infinity", "1e400"] {
            let spec = RuleSpec::parse(&format!("X:threshold={value}")).unwrap();
            let err = parse_params::<P>("X", &spec.parameters).unwrap_err();
            assert!(
                matches!(&err, Error::BadParameter { rule, param, .. } if rule == "X" && param == "threshold"),
                "{value}: {err}"
            );
            assert!(err.to_string().contains("finite"), "{value}: {err}");
            let spec = RuleSpec::parse(&format!("X:num_steps={value}")).unwrap();
            assert!(parse_params::<P>("X", &spec.parameters).is_err(), "{value}");
        }
    }

    #[test]
    fn malformed_specs_are_rejected() {
        assert!(RuleSpec::parse("").is_err());
        assert!(RuleSpec::parse(":a=1").is_err());
        assert!(RuleSpec::parse("X:novalue").is_err());
        assert!(RuleSpec::parse("X:a=1,a=2").is_err());
        assert!(RuleSpec::parse("X:=1").is_err());
        assert_eq!(RuleSpec::parse("X:").unwrap().parameters.len(), 0);
    }
}
