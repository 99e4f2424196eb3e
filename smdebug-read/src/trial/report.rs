//! What a trial reports as JSON: a run's summary (`smdebug info`) and saved values in the
//! interop checkers' `expected.json` shape (`smdebug value`).

use std::collections::BTreeMap;

use serde::Serialize;
use smdebug_core::Mode;

/// One saved value of a tensor, in the JSON shape of the interop checkers' `expected.json`
/// (`smdebug value` prints it).
#[derive(Clone, Debug, Serialize)]
pub struct TensorRecordJson {
    /// The tensor's name.
    pub name: String,
    /// The global step.
    pub step: u64,
    /// The step's mode.
    pub mode: Mode,
    /// The step within the mode.
    pub mode_step: u64,
    /// The worker that saved it (`worker_0`).
    pub worker: String,
    /// numpy's dtype name (`float32`), or `string` for a string tensor.
    pub dtype: String,
    /// The dimensions.
    pub shape: Vec<usize>,
    /// Row-major values: numbers (NaN and ±Inf as the strings "nan", "inf", "-inf"), or the
    /// strings of a string tensor (bytes that are not UTF-8 replaced by U+FFFD).
    pub values: Vec<JsonElement>,
}

/// One element of a value in JSON: a number, or a string tensor's element.
#[derive(Clone, Debug, PartialEq)]
pub enum JsonElement {
    /// A number (see [`JsonNumber`]).
    Number(f64),
    /// A string tensor's element.
    Text(String),
}

impl Serialize for JsonElement {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            JsonElement::Number(v) => JsonNumber(*v).serialize(s),
            JsonElement::Text(t) => s.serialize_str(t),
        }
    }
}

/// A number that JSON can carry, with NaN/Inf as strings.
#[derive(Clone, Copy, Debug)]
pub struct JsonNumber(pub f64);

impl Serialize for JsonNumber {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let v = self.0;
        if v.is_nan() {
            s.serialize_str("nan")
        } else if v.is_infinite() {
            s.serialize_str(if v > 0.0 { "inf" } else { "-inf" })
        } else if v.fract() == 0.0 && v.abs() < 9.0e15 && !(v == 0.0 && v.is_sign_negative()) {
            // Whole numbers as integers, but not −0.0: an integer has no sign of zero.
            s.serialize_i64(v as i64)
        } else {
            s.serialize_f64(v)
        }
    }
}

/// A run summary, as `smdebug info` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct TrialInfo {
    /// The run's location.
    pub location: String,
    /// The run's workers as Python smdebug names them: those its collections files are named
    /// after (see [`Trial::workers`](crate::trial::Trial::workers)).
    pub workers: Vec<String>,
    /// The workers that wrote steps (see [`Trial::step_workers`](crate::trial::Trial::step_workers)).
    pub step_workers: Vec<String>,
    /// How many workers the collections file declares: a step is complete once that many
    /// wrote it.
    pub num_workers: usize,
    /// The modes present.
    pub modes: Vec<Mode>,
    /// Number of global steps, complete or not.
    pub num_steps: usize,
    /// The last complete step (see [`Trial::last_complete_step`](crate::trial::Trial::last_complete_step)).
    pub last_complete_step: Option<u64>,
    /// Number of steps per mode, complete or not.
    pub steps_per_mode: BTreeMap<String, usize>,
    /// The collection names.
    pub collections: Vec<String>,
    /// Number of tensor names (reductions folded into their tensor).
    pub num_tensors: usize,
    /// Whether the end marker (`training_job_end.ts`) exists.
    pub complete: bool,
    /// Why the run ended: `completed`, `stopped: <message>`, or null (still running, or a
    /// Python smdebug run whose marker says nothing).
    pub end_reason: Option<smdebug_core::EndReason>,
    /// What the reader had to ignore, e.g. a regex in a collections file that does not compile
    /// (see [`Trial::warnings`](crate::trial::Trial::warnings)). Left out of the JSON when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}
