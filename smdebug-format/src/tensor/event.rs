//! What a tensor event holds: the plugin names and dtypes smdebug writes, the stamp of an
//! event and a tensor read back.

use smdebug_core::{Mode, Tensor};

/// Plugin name of the mode step in a tensor's summary metadata (smdebug's `MODE_STEP_PLUGIN_NAME`).
pub const MODE_STEP_PLUGIN: &str = "mode_step";
/// Plugin name of the mode (smdebug's `MODE_PLUGIN_NAME`); the content is the mode's number.
pub const MODE_PLUGIN: &str = "mode";

/// TensorFlow's `DT_STRING`.
pub const DT_STRING: i32 = 7;

/// Whether a `TensorProto` of `dtype`, with or without `string_val` entries, holds strings:
/// `DT_STRING`, or Python smdebug's unset dtype with strings (see the `strings` module).
pub fn is_string_dtype(dtype: i32, has_strings: bool) -> bool {
    dtype == DT_STRING || (dtype == 0 && has_strings)
}

/// Where and when a tensor event belongs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EventStamp {
    /// Seconds since the epoch.
    pub wall_time: f64,
    /// The global step.
    pub step: u64,
    /// The mode.
    pub mode: Mode,
    /// The step within the mode.
    pub mode_step: u64,
}

/// One tensor read back from an event.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorEvent {
    /// The tensor name (the summary value's tag).
    pub name: String,
    /// The global step.
    pub step: u64,
    /// Seconds since the epoch.
    pub wall_time: f64,
    /// The mode (GLOBAL when the event carries none, as smdebug reads it).
    pub mode: Mode,
    /// The step within the mode (the global step when the event carries none).
    pub mode_step: u64,
    /// The value.
    pub tensor: Tensor,
}

/// The largest tensor a reader decodes unless told otherwise: 1 GiB of values in the tensor's
/// own dtype (2^28 float32 values). A record may claim any shape in a few bytes (TensorFlow's
/// typed value fields repeat their last value to fill the shape), so the claim is checked
/// against this budget before anything is allocated.
pub const DEFAULT_MAX_TENSOR_BYTES: u64 = 1 << 30;
