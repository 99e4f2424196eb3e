//! The body of each pushed `runs` event, as types (beside [`crate::views`]; in the API's schema,
//! [`crate::api_schema`]): the run list, and per run what is new since the previous push to the
//! same page.

use schemars::JsonSchema;
use serde::Serialize;

use crate::views::{RuleView, RunState};

/// One pushed update.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Push {
    /// Every run's live state, as `GET /api/runs` gives it.
    pub runs: Vec<RunState>,
    /// Per run, what is new since this page's previous push.
    pub deltas: Vec<RunDelta>,
    /// The server's clock when this was made, seconds since the epoch.
    pub server_time: f64,
    /// The longest time between two pushes while the stream is up, seconds (a push is sent
    /// after this long even when nothing changed).
    pub heartbeat_s: f64,
}

/// What is new in one run since the previous push to this page.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct RunDelta {
    /// The run's index.
    pub id: usize,
    /// The page must fetch the run's panels again instead of patching them: it connected (or
    /// reconnected) just now, the run's view was reset, or more is new than one push carries.
    /// The lists below are then empty.
    pub refetch: bool,
    /// Why, when `refetch` is set.
    pub refetch_reason: Option<&'static str>,
    /// Step spans read since, per mode, node and worker, in arrival order.
    pub new_steps: Vec<StepDelta>,
    /// System samples of the timelines read since, one entry per series.
    pub new_samples: Vec<SampleDelta>,
    /// The rules whose verdict (any part of its view) changed, whole.
    pub changed_rules: Vec<RuleView>,
}

/// New step spans of one mode, node and worker, as columns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StepDelta {
    /// `TRAIN`, `EVAL`, …
    pub mode: &'static str,
    /// The node.
    pub node: String,
    /// The worker, when the trace says.
    pub worker: Option<u32>,
    /// Global steps, in arrival order.
    pub step: Vec<u64>,
    /// Starts, seconds since the epoch.
    pub start: Vec<f64>,
    /// Durations, seconds.
    pub duration: Vec<f64>,
}

/// New samples of one system timeline.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SampleDelta {
    /// The node.
    pub node: String,
    /// `cpu`, `gpu`, `memory`, `i/o`, `network`, …
    #[serde(rename = "type")]
    pub r#type: String,
    /// The metric or device.
    pub name: String,
    /// The quantity (CPU and GPU).
    pub dimension: String,
    /// The values' unit.
    pub unit: &'static str,
    /// Times, seconds since the epoch, in arrival order.
    pub t: Vec<f64>,
    /// Values (`null` where not finite).
    pub v: Vec<Option<f64>>,
}
