//! The boundary between the hook (training thread) and whatever stores the data.
//!
//! The hook produces [`Record`]s; a [`Sink`] takes them without blocking. smdebug-io's background
//! writer is the sink that matters; tests use [`MemorySink`].

use crate::mode::Mode;
use crate::strings::StringTensor;
use crate::tensor::Tensor;

/// Where a step's record sits: global step, mode and the step counted within that mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StepKey {
    /// The global step.
    pub step: u64,
    /// The mode the step belongs to.
    pub mode: Mode,
    /// The step counted within that mode.
    pub mode_step: u64,
}

/// One tensor (or reduction) the hook decided to save at a step.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorRecord {
    /// Tensor name as readers see it (`fc1.weight`, `smdebug/reductions/mean/fc1.weight`).
    pub name: String,
    /// The step it belongs to.
    pub key: StepKey,
    /// The value (owned bytes, dtype and shape).
    pub tensor: Tensor,
    /// Write it into the run's event/index files (false for TensorBoard-only summaries).
    pub to_events: bool,
    /// Also write a TensorBoard histogram of it.
    pub tb_histogram: bool,
    /// Also write it as a TensorBoard scalar (only one-element tensors).
    pub tb_scalar: bool,
}

/// A string tensor the hook decided to save at a step.
#[derive(Clone, Debug, PartialEq)]
pub struct StringRecord {
    /// Tensor name as readers see it.
    pub name: String,
    /// The step it belongs to.
    pub key: StepKey,
    /// The strings.
    pub value: StringTensor,
    /// Also write it as a TensorBoard text summary.
    pub tb_text: bool,
}

/// Why a run ended, written into the end-of-run marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// The training loop finished normally.
    Completed,
    /// A rule or a person asked the job to stop.
    Stopped(StopCause),
}

impl std::fmt::Display for EndReason {
    /// `completed`, or `stopped: <reason>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndReason::Completed => f.write_str("completed"),
            EndReason::Stopped(cause) => write!(f, "stopped: {}", cause.reason),
        }
    }
}

impl std::str::FromStr for EndReason {
    type Err = String;

    /// The [`Display`](std::fmt::Display) form back: `completed`, `stopped: <reason>` (the
    /// rule and step are not in it: a stop read back this way has none).
    fn from_str(s: &str) -> Result<EndReason, String> {
        if s == "completed" {
            return Ok(EndReason::Completed);
        }
        match s.strip_prefix("stopped") {
            Some(rest) => Ok(EndReason::Stopped(StopCause::from(
                rest.strip_prefix(':').unwrap_or(rest).trim_start(),
            ))),
            None => Err(format!(
                "`{s}` is not a reason a run ends for (`completed`, `stopped: …`)"
            )),
        }
    }
}

/// Written as its [`Display`](std::fmt::Display) form (`"stopped: …"`), the string summaries
/// have always held.
impl serde::Serialize for EndReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for EndReason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<EndReason, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Why a job was asked to stop: the reason people read, and, when a rule asked, which rule and
/// at which step it fired. Carried from the stop request through the [`StopSignal`] into the
/// run's end marker, so that readers name the rule without parsing the reason.
///
/// [`StopSignal`]: crate::StopSignal
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StopCause {
    /// Why, in words (`ExplodingTensor fired at step 3 of /runs/a: …`).
    pub reason: String,
    /// The rule that asked, if a rule did.
    pub rule: Option<String>,
    /// The step it fired at, if a rule said.
    pub step: Option<u64>,
}

impl StopCause {
    /// A rule's request: its reason, the rule and the step it fired at.
    pub fn by_rule(reason: impl Into<String>, rule: impl Into<String>, step: u64) -> StopCause {
        StopCause {
            reason: reason.into(),
            rule: Some(rule.into()),
            step: Some(step),
        }
    }
}

impl From<String> for StopCause {
    /// A request with a reason only (a person's, a command's).
    fn from(reason: String) -> StopCause {
        StopCause {
            reason,
            rule: None,
            step: None,
        }
    }
}

impl From<&str> for StopCause {
    fn from(reason: &str) -> StopCause {
        StopCause::from(reason.to_string())
    }
}

impl std::fmt::Display for StopCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// What the hook hands to a sink.
#[derive(Clone, Debug, PartialEq)]
pub enum Record {
    /// A tensor due at a step.
    Tensor(TensorRecord),
    /// A string tensor due at a step.
    Strings(StringRecord),
    /// Every tensor of global step `step` has been handed over; the sink may publish the step.
    EndStep {
        /// The global step that ended.
        step: u64,
    },
    /// The collections file content (smdebug's CollectionManager JSON), sent when it changes.
    Collections(serde_json::Value),
    /// The run is over: flush, publish and write the end marker.
    Close(EndReason),
}

/// A consumer of hook output. `send` must not block on I/O: a sink that cannot keep up drops
/// (and counts) or applies the back-pressure policy it was built with.
pub trait Sink: Send {
    /// Takes one record; must return without waiting on I/O.
    fn send(&mut self, record: Record);
}

/// A sink that keeps every record in memory, for tests and for inspecting what a hook emits.
#[derive(Debug, Default, Clone)]
pub struct MemorySink {
    /// Every record received, in order.
    pub records: std::sync::Arc<std::sync::Mutex<Vec<Record>>>,
}

impl MemorySink {
    /// The tensor records received so far.
    pub fn tensors(&self) -> Vec<TensorRecord> {
        self.records
            .lock()
            .map(|r| {
                r.iter()
                    .filter_map(|rec| match rec {
                        Record::Tensor(t) => Some(t.clone()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The steps ended so far (`Record::EndStep`), in order.
    pub fn ended_steps(&self) -> Vec<u64> {
        self.records
            .lock()
            .map(|r| {
                r.iter()
                    .filter_map(|rec| match rec {
                        Record::EndStep { step } => Some(*step),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// How many times the run was closed (`Record::Close`); a well-behaved hook closes once.
    pub fn closes(&self) -> usize {
        self.records
            .lock()
            .map(|r| {
                r.iter()
                    .filter(|rec| matches!(rec, Record::Close(_)))
                    .count()
            })
            .unwrap_or_default()
    }
}

impl Sink for MemorySink {
    fn send(&mut self, record: Record) {
        if let Ok(mut r) = self.records.lock() {
            r.push(record);
        }
    }
}
