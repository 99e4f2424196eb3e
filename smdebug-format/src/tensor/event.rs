//! What a tensor event holds: the plugin names and dtypes smdebug writes, the stamp of an
//! event, a tensor read back (owned or borrowed) and the mode plugins' contents.

use smdebug_core::{DType, Mode, Tensor};

use super::error::DecodeError;

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

/// One tensor read back from an event without copying its values: `data` is a slice of the
/// payload when the event stores the values as raw bytes (`tensor_content`, what smdebug
/// writes), and converted from TensorFlow's typed value fields otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorEventRef<'a> {
    /// The tensor name (the summary value's tag).
    pub name: &'a str,
    /// The global step.
    pub step: u64,
    /// The event's wall time, seconds since the Unix epoch.
    pub wall_time: f64,
    /// The mode (GLOBAL when the event carries none, as smdebug reads it).
    pub mode: Mode,
    /// The step within the mode (the global step when the event carries none).
    pub mode_step: u64,
    /// The element type the values were saved in.
    pub dtype: DType,
    /// The dimensions, outermost first (empty for a scalar).
    pub shape: Vec<usize>,
    /// The values: little-endian, row-major, exactly as many bytes as dtype and shape need.
    pub data: std::borrow::Cow<'a, [u8]>,
}

impl TensorEventRef<'_> {
    /// The event with the values copied into a [`Tensor`] of its own.
    pub fn into_owned(self) -> Result<TensorEvent, DecodeError> {
        let tensor = Tensor::from_bytes(self.dtype, self.shape, self.data.into_owned())
            .map_err(|e| format!("tensor `{}`: {e}", self.name))?;
        Ok(TensorEvent {
            name: self.name.to_string(),
            step: self.step,
            wall_time: self.wall_time,
            mode: self.mode,
            mode_step: self.mode_step,
            tensor,
        })
    }
}

/// Takes one plugin's content into the mode or the mode step (other plugins are not ours).
pub fn apply_plugin(
    name: &str,
    content: &[u8],
    mode: &mut Mode,
    mode_step: &mut u64,
) -> Result<(), String> {
    if name != MODE_STEP_PLUGIN && name != MODE_PLUGIN {
        return Ok(());
    }
    let text = String::from_utf8_lossy(content);
    let text = text.trim();
    if name == MODE_STEP_PLUGIN {
        *mode_step = text
            .parse()
            .map_err(|_| format!("bad mode_step `{text}`"))?;
    } else {
        *mode = text
            .parse::<i32>()
            .ok()
            .and_then(Mode::from_value)
            .or_else(|| Mode::from_name(text))
            .ok_or_else(|| format!("bad mode `{text}`"))?;
    }
    Ok(())
}
