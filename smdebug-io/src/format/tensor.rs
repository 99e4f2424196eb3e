//! Tensor events: one `Event{summary{value[{tag, metadata, tensor}]}}` per saved tensor, as
//! smdebug writes them, and their decoding back to a [`Tensor`].
//!
//! Encoding never copies the tensor's bytes into a protobuf message: [`encode_tensor_event`]
//! builds the serialized event up to the start of `tensor_content`, and the tensor's bytes are
//! the rest of the payload. The record's CRC is computed over the two slices.

use half::{bf16, f16};
use prost::Message;
use smallvec::SmallVec;
use smdebug_core::{DType, Mode, Tensor};

use super::proto::{
    Event, PluginData, SummaryMetadata, TensorProto, TensorShapeProto, summary, tensor_shape_proto,
};
use super::wire::{Fields, Wire};

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

/// A serialized tensor event, split where the tensor's bytes start: the payload is
/// `prefix ++ data`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedTensorEvent<'a> {
    /// The serialized event up to the tensor's bytes.
    pub prefix: Vec<u8>,
    /// The tensor's bytes, borrowed.
    pub data: &'a [u8],
}

impl EncodedTensorEvent<'_> {
    /// Payload length (`prefix.len() + data.len()`).
    pub fn len(&self) -> usize {
        self.prefix.len() + self.data.len()
    }

    /// Whether the payload is empty (never, for an encoded event).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The payload in one buffer (copies the data; for tests and small tensors).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        v.extend_from_slice(&self.prefix);
        v.extend_from_slice(self.data);
        v
    }
}

fn varint_len(v: u64) -> usize {
    prost::encoding::encoded_len_varint(v)
}

fn put_key_len(out: &mut Vec<u8>, field: u32, len: u64) {
    prost::encoding::encode_key(field, prost::encoding::WireType::LengthDelimited, out);
    prost::encoding::encode_varint(len, out);
}

/// The summary metadata smdebug attaches to a tensor: mode step and mode, as text.
pub fn mode_metadata(mode: Mode, mode_step: u64) -> SummaryMetadata {
    SummaryMetadata {
        plugin_data: vec![
            PluginData {
                plugin_name: MODE_STEP_PLUGIN.to_string(),
                content: mode_step.to_string().into_bytes(),
            },
            PluginData {
                plugin_name: MODE_PLUGIN.to_string(),
                content: mode.value().to_string().into_bytes(),
            },
        ],
        ..Default::default()
    }
}

/// The shape as smdebug writes it: each dim named `<tag>_<size>`.
fn shape_proto(name: &str, shape: &[usize]) -> TensorShapeProto {
    TensorShapeProto {
        dim: shape
            .iter()
            .map(|&d| tensor_shape_proto::Dim {
                size: d as i64,
                name: format!("{name}_{d}"),
            })
            .collect(),
        unknown_rank: false,
    }
}

/// Serializes the event of tensor `name` (dtype, shape, little-endian bytes `data`) at `stamp`.
///
/// The payload is `prefix ++ data`; it decodes with [`decode_tensor_event`] and with Python
/// smdebug's and TensorFlow's `Event` parsers (the tensor field comes last in the value, which
/// protobuf allows).
pub fn encode_tensor_event<'a>(
    name: &str,
    dtype: DType,
    shape: &[usize],
    data: &'a [u8],
    stamp: EventStamp,
) -> EncodedTensorEvent<'a> {
    let n = data.len() as u64;
    let tensor_head = TensorProto {
        dtype: dtype.tf_datatype(),
        tensor_shape: Some(shape_proto(name, shape)),
        ..Default::default()
    }
    .encode_to_vec();
    let content_len = if n > 0 {
        1 + varint_len(n) as u64 + n
    } else {
        0
    };
    let tensor_len = tensor_head.len() as u64 + content_len;

    let value_head = summary::Value {
        tag: name.to_string(),
        metadata: Some(mode_metadata(stamp.mode, stamp.mode_step)),
        ..Default::default()
    }
    .encode_to_vec();
    let value_len = value_head.len() as u64 + 1 + varint_len(tensor_len) as u64 + tensor_len;
    let summary_len = 1 + varint_len(value_len) as u64 + value_len;

    let event_head = Event {
        wall_time: stamp.wall_time,
        step: stamp.step as i64,
        what: None,
    }
    .encode_to_vec();

    let mut prefix =
        Vec::with_capacity(event_head.len() + value_head.len() + tensor_head.len() + 40);
    prefix.extend_from_slice(&event_head);
    put_key_len(&mut prefix, 5, summary_len); // Event.summary
    put_key_len(&mut prefix, 1, value_len); // Summary.value
    prefix.extend_from_slice(&value_head);
    put_key_len(&mut prefix, 8, tensor_len); // Value.tensor
    prefix.extend_from_slice(&tensor_head);
    if n > 0 {
        put_key_len(&mut prefix, 4, n); // TensorProto.tensor_content
    }
    EncodedTensorEvent { prefix, data }
}

/// [`encode_tensor_event`] for an owned tensor.
pub fn encode_tensor<'a>(
    name: &str,
    tensor: &'a Tensor,
    stamp: EventStamp,
) -> EncodedTensorEvent<'a> {
    encode_tensor_event(name, tensor.dtype(), tensor.shape(), tensor.bytes(), stamp)
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

pub use super::budget::{Budget, Conversion};

/// Why a record's payload is not the tensor a reader asked for. Callers add the file and the
/// offset ([`DecodeError::at`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Not a tensor event as smdebug or TensorFlow write them; the reason.
    Malformed(String),
    /// The tensor's shape and dtype claim more bytes than the budget.
    TooLarge {
        /// The record's tag (tensor name).
        tag: String,
        /// What claims the size: the dtype and shape, or the record's length.
        detail: String,
        /// The size it claims, in bytes.
        claimed: u128,
        /// The reader's limit, in bytes.
        limit: u64,
    },
    /// No tensor value under the asked tag; the tags the summary holds.
    OtherTag {
        /// The tag asked for.
        wanted: String,
        /// The tags the record holds.
        found: Vec<String>,
    },
    /// Several tensor values where one was expected (the same tag twice, or several tags when
    /// none was asked for).
    Ambiguous {
        /// The tags the record holds.
        tags: Vec<String>,
    },
    /// A well-formed string tensor where numbers were asked for (XGBoost's hook writes its
    /// `trees/*` text columns as strings): `format::strings` decodes it.
    Strings {
        /// The record's tag (tensor name).
        tag: String,
    },
}

impl From<String> for DecodeError {
    fn from(reason: String) -> Self {
        DecodeError::Malformed(reason)
    }
}

impl From<&str> for DecodeError {
    fn from(reason: &str) -> Self {
        DecodeError::Malformed(reason.to_string())
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Malformed(reason) => f.write_str(reason),
            DecodeError::TooLarge {
                tag,
                detail,
                claimed,
                limit,
            } => write!(
                f,
                "tensor `{tag}` ({detail}) claims {claimed} bytes, more than the limit of {limit}"
            ),
            DecodeError::OtherTag { wanted, found } => write!(
                f,
                "no tensor tagged `{wanted}`; the record holds {}",
                tag_list(found)
            ),
            DecodeError::Ambiguous { tags } => {
                write!(f, "several tensor values: {}", tag_list(tags))
            }
            DecodeError::Strings { tag } => {
                write!(f, "tensor `{tag}` holds strings, not numbers")
            }
        }
    }
}

fn tag_list(tags: &[String]) -> String {
    if tags.is_empty() {
        return "no tensor value".to_string();
    }
    tags.iter()
        .map(|t| format!("`{t}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl DecodeError {
    /// The crate error for this payload, the record at byte `offset` of `path`.
    pub fn at(self, path: &str, offset: u64) -> crate::error::Error {
        use crate::error::Error;
        let path = path.to_string();
        match self {
            DecodeError::TooLarge {
                tag,
                detail,
                claimed,
                limit,
            } => Error::TensorTooLarge {
                path,
                offset,
                tensor: tag,
                detail,
                claimed,
                limit,
            },
            DecodeError::OtherTag { wanted, found } => Error::WrongTensor {
                path,
                offset,
                expected: format!("`{wanted}`"),
                found: tag_list(&found),
            },
            DecodeError::Strings { tag } => Error::StringTensor {
                path,
                offset,
                tensor: tag,
            },
            other => Error::CorruptRecord {
                path,
                offset,
                reason: other.to_string(),
            },
        }
    }
}

/// Parses a record payload as an `Event`.
pub fn decode_event(payload: &[u8]) -> Result<Event, String> {
    Event::decode(payload).map_err(|e| format!("not an Event protobuf: {e}"))
}

/// Parses a record payload as a tensor event holding one tensor value (smdebug writes one per
/// record); a summary with several tensor values is [`DecodeError::Ambiguous`]. No tensor larger
/// than the budget allows (its decoded value and the reader's conversion) is decoded.
pub fn decode_tensor_event(
    payload: &[u8],
    budget: impl Into<Budget>,
) -> Result<TensorEvent, DecodeError> {
    decode_selected(payload, None, budget.into())
}

/// Parses a record payload as the tensor event tagged `tag`: the one tensor value of the
/// summary whose tag is `tag`. Other values of the summary are ignored (TensorFlow's writers may
/// batch several tags into one event); none with that tag is [`DecodeError::OtherTag`], two are
/// [`DecodeError::Ambiguous`]. No tensor whose read costs more than the budget is decoded.
pub fn decode_tagged_tensor_event(
    payload: &[u8],
    tag: &str,
    budget: impl Into<Budget>,
) -> Result<TensorEvent, DecodeError> {
    decode_selected(payload, Some(tag), budget.into())
}

fn decode_selected(
    payload: &[u8],
    tag: Option<&str>,
    budget: Budget,
) -> Result<TensorEvent, DecodeError> {
    decode_selected_ref(payload, tag, budget)?.into_owned()
}

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

/// [`decode_tagged_tensor_event`] without copying the values: the tensor value tagged `tag`
/// (the only tensor value when `tag` is `None`), with the same checks.
pub fn decode_tensor_event_ref<'a>(
    payload: &'a [u8],
    tag: Option<&str>,
    budget: impl Into<Budget>,
) -> Result<TensorEventRef<'a>, DecodeError> {
    decode_selected_ref(payload, tag, budget.into())
}

/// One `Summary.Value`, read in place: its tag and, when it holds a tensor, the tensor's bytes.
struct ValueRef<'a> {
    bytes: &'a [u8],
    tag: &'a str,
    tensor: Option<&'a [u8]>,
}

fn parse_value(bytes: &[u8]) -> Result<ValueRef<'_>, String> {
    let mut value = ValueRef {
        bytes,
        tag: "",
        tensor: None,
    };
    // Which member of the `value` oneof came last: a later member replaces an earlier one.
    let mut last = 0;
    for field in Fields::new(bytes) {
        let (number, v) = field?;
        match number {
            1 => value.tag = v.text("Summary.Value.tag")?,
            7 => _ = v.text("Summary.Value.node_name")?,
            9 => _ = v.bytes("Summary.Value.metadata")?,
            2 => {
                v.fixed32("Summary.Value.simple_value")?;
                value.tensor = None;
            }
            5 => {
                v.bytes("Summary.Value.histo")?;
                value.tensor = None;
            }
            8 => {
                let t = v.bytes("Summary.Value.tensor")?;
                // Protobuf would merge the two messages; no writer sends a tensor in pieces.
                if last == 8 {
                    return Err(format!(
                        "summary value `{}` holds its tensor twice",
                        value.tag
                    ));
                }
                value.tensor = Some(t);
            }
            _ => continue,
        }
        if matches!(number, 2 | 5 | 8) {
            last = number;
        }
    }
    Ok(value)
}

/// Calls `each` with the `(plugin_name, content)` pairs of a value's metadata, in order (no
/// vector per value: there is one per record read).
fn for_each_plugin<'a>(
    value: &ValueRef<'a>,
    mut each: impl FnMut(&'a str, &'a [u8]),
) -> Result<(), String> {
    for field in Fields::new(value.bytes) {
        let (number, v) = field?;
        if number != 9 {
            continue;
        }
        for field in Fields::new(v.bytes("Summary.Value.metadata")?) {
            let (number, v) = field?;
            match number {
                1 => {
                    let (mut name, mut content): (&str, &[u8]) = ("", &[]);
                    for field in Fields::new(v.bytes("SummaryMetadata.plugin_data")?) {
                        let (number, v) = field?;
                        match number {
                            1 => name = v.text("PluginData.plugin_name")?,
                            2 => content = v.bytes("PluginData.content")?,
                            _ => {}
                        }
                    }
                    each(name, content);
                }
                2 => _ = v.text("SummaryMetadata.display_name")?,
                3 => _ = v.text("SummaryMetadata.summary_description")?,
                4 => _ = v.varint("SummaryMetadata.data_class")?,
                _ => {}
            }
        }
    }
    Ok(())
}

/// The summary values of an event that count: those of the summaries after the last other
/// member of the `what` oneof (consecutive summaries merge, so all of their values count).
fn summary_values<'a>(
    payload: &'a [u8],
    from: usize,
) -> impl Iterator<Item = Result<ValueRef<'a>, String>> {
    Fields::new(&payload[from..])
        .filter_map(|field| match field {
            Ok((5, v)) => Some(v.bytes("Event.summary")),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        })
        .flat_map(|summary| {
            let (fields, err) = match summary {
                Ok(bytes) => (Some(Fields::new(bytes)), None),
                Err(e) => (None, Some(Err(e))),
            };
            err.into_iter().chain(
                fields
                    .into_iter()
                    .flatten()
                    .filter_map(|field| match field {
                        Ok((1, v)) => Some(v.bytes("Summary.value").and_then(parse_value)),
                        Ok(_) => None,
                        Err(e) => Some(Err(e)),
                    }),
            )
        })
}

/// The tensor value a reader asked for in a record payload, with the event's step and wall time
/// and the value's mode and mode step: what every tensor decoder reads first.
pub(super) struct Selected<'a> {
    pub tag: &'a str,
    pub step: u64,
    pub wall_time: f64,
    pub mode: Mode,
    pub mode_step: u64,
    /// The serialized `TensorProto`.
    pub tensor: &'a [u8],
}

/// Finds the one tensor value tagged `tag` (the only tensor value when `None`) in a record
/// payload, checking the event around it (see [`decode_tagged_tensor_event`]).
pub(super) fn select_value<'a>(
    payload: &'a [u8],
    tag: Option<&str>,
) -> Result<Selected<'a>, DecodeError> {
    let not_event = |e: String| DecodeError::Malformed(format!("not an Event protobuf: {e}"));
    let (mut wall_time, mut step) = (0.0, 0i64);
    // The `what` oneof: the member that came last, and where its run of summaries starts.
    let (mut what, mut summaries_from) = (0, 0);
    let mut fields = Fields::new(payload);
    loop {
        let at = payload.len() - fields.rest();
        let Some(field) = fields.next() else { break };
        let (number, v) = field.map_err(not_event)?;
        match number {
            1 => wall_time = f64::from_le_bytes(v.fixed64("Event.wall_time").map_err(not_event)?),
            2 => step = v.varint("Event.step").map_err(not_event)? as i64,
            3 => {
                v.text("Event.file_version").map_err(not_event)?;
            }
            4 => {
                v.bytes("Event.graph_def").map_err(not_event)?;
            }
            5 => {
                v.bytes("Event.summary").map_err(not_event)?;
                if what != 5 {
                    summaries_from = at;
                }
            }
            _ => continue,
        }
        if matches!(number, 3..=5) {
            what = number;
        }
    }
    if step < 0 {
        return Err(format!("negative step {step}").into());
    }
    let step = step as u64;
    if what != 5 {
        return Err("the event holds no summary".into());
    }
    let selected = |v: &ValueRef<'_>| v.tensor.is_some() && tag.is_none_or(|t| v.tag == t);
    let mut found = None;
    let mut count = 0usize;
    for value in summary_values(payload, summaries_from) {
        let value = value.map_err(not_event)?;
        if selected(&value) {
            count += 1;
            found.get_or_insert(value);
        }
    }
    // The names in errors; only computed for one.
    let tags = |keep: &dyn Fn(&ValueRef<'_>) -> bool| -> Vec<String> {
        summary_values(payload, summaries_from)
            .flatten()
            .filter(|v| keep(v))
            .map(|v| v.tag.to_string())
            .collect()
    };
    let value = match (found, count) {
        (Some(value), 1) => value,
        (None, _) => {
            return Err(match tag {
                Some(wanted) => DecodeError::OtherTag {
                    wanted: wanted.to_string(),
                    found: tags(&|_| true),
                },
                None => "the summary holds no tensor value".into(),
            });
        }
        (Some(_), _) => {
            return Err(DecodeError::Ambiguous {
                tags: tags(&selected),
            });
        }
    };
    // The whole metadata is read before a plugin's content counts: a malformed field anywhere
    // in it is the error, else the first plugin content that is not a mode or a step.
    let (mut mode, mut mode_step, mut bad_plugin) = (Mode::Global, step, None);
    for_each_plugin(&value, |name, content| {
        if bad_plugin.is_none()
            && let Err(e) = apply_plugin(name, content, &mut mode, &mut mode_step)
        {
            bad_plugin = Some(e);
        }
    })
    .map_err(not_event)?;
    if let Some(e) = bad_plugin {
        return Err(e.into());
    }
    let tensor = value.tensor.expect("selected values hold a tensor");
    Ok(Selected {
        tag: value.tag,
        step,
        wall_time,
        mode,
        mode_step,
        tensor,
    })
}

/// Maps a `TensorProto` decoder's protobuf error to the event's ("not an Event protobuf").
pub(super) fn in_event(e: DecodeError) -> DecodeError {
    match e {
        DecodeError::Malformed(m) if m.starts_with("bad protobuf: ") => {
            DecodeError::Malformed(format!("not an Event protobuf: {m}"))
        }
        other => other,
    }
}

fn decode_selected_ref<'a>(
    payload: &'a [u8],
    tag: Option<&str>,
    budget: Budget,
) -> Result<TensorEventRef<'a>, DecodeError> {
    let value = select_value(payload, tag)?;
    let (dtype, shape, data) = tensor_ref(value.tensor, value.tag, budget).map_err(in_event)?;
    Ok(TensorEventRef {
        name: value.tag,
        step: value.step,
        wall_time: value.wall_time,
        mode: value.mode,
        mode_step: value.mode_step,
        dtype,
        shape,
        data,
    })
}

/// A tensor's dtype, shape and values (little-endian, row-major).
type TensorLayout<'a> = (DType, Vec<usize>, std::borrow::Cow<'a, [u8]>);

/// A `TensorProto` read in place: dtype, shape and the values, borrowed from `bytes` when they
/// are raw `tensor_content`; TensorFlow's typed value fields (rare: small tensors written by
/// TensorFlow itself) are decoded through the prost message.
fn tensor_ref<'a>(
    bytes: &'a [u8],
    tag: &str,
    budget: Budget,
) -> Result<TensorLayout<'a>, DecodeError> {
    let bad = |e: String| DecodeError::Malformed(format!("bad protobuf: {e}"));
    let (mut dtype, mut shape, mut content) = (0i32, None, &[][..]);
    let mut has_strings = false;
    for field in Fields::new(bytes) {
        let (number, v) = field.map_err(bad)?;
        match number {
            1 => dtype = v.varint("TensorProto.dtype").map_err(bad)? as i32,
            2 => {
                let s = v.bytes("TensorProto.tensor_shape").map_err(bad)?;
                // Protobuf would merge the two shapes; no writer sends a shape in pieces.
                if shape.replace(s).is_some() {
                    return Err(format!("tensor `{tag}`: its shape is given twice").into());
                }
            }
            3 => {
                v.varint("TensorProto.version_number").map_err(bad)?;
            }
            4 => content = v.bytes("TensorProto.tensor_content").map_err(bad)?,
            8 => {
                v.bytes("TensorProto.string_val").map_err(bad)?;
                has_strings = true;
            }
            n => typed_field(n, v).map_err(bad)?,
        }
    }
    let (dims, unknown_rank) = parse_shape(shape.unwrap_or_default())?;
    let (dtype, shape, n) = checked_layout(dtype, has_strings, unknown_rank, &dims, tag, budget)?;
    let data = if !content.is_empty() || n == 0 {
        std::borrow::Cow::Borrowed(content)
    } else {
        let proto = TensorProto::decode(bytes).map_err(|e| bad(e.to_string()))?;
        std::borrow::Cow::Owned(typed_values(dtype, &proto, n).map_err(|r| named(tag, r))?)
    };
    check_content_len(tag, data.len(), n, dtype, &shape)?;
    Ok((dtype, shape, data))
}

/// Checks the wire type of a `TensorProto` field a decoder does not read itself: a typed value
/// field (`float_val`, `int_val`, …) packed (length-delimited) or one element of its own wire
/// type, the others their own, as protobuf's parsers (prost's `TensorProto`, which
/// TensorFlow-written values go through) require. Field numbers that are not `TensorProto`'s
/// are skipped.
pub(super) fn typed_field(number: u32, value: Wire<'_>) -> Result<(), String> {
    let own = |name: &str, ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(format!(
                "field `TensorProto.{name}` has a wire type that is not its own"
            ))
        }
    };
    match number {
        1 => return own("dtype", matches!(value, Wire::Varint(_))),
        3 => return own("version_number", matches!(value, Wire::Varint(_))),
        2 | 4 | 8 => return own("a length-delimited field", matches!(value, Wire::Bytes(_))),
        _ => {}
    }
    let (name, scalar): (&str, fn(&Wire<'_>) -> bool) = match number {
        5 => ("float_val", |w| matches!(w, Wire::Fixed32(_))),
        6 => ("double_val", |w| matches!(w, Wire::Fixed64(_))),
        7 => ("int_val", |w| matches!(w, Wire::Varint(_))),
        10 => ("int64_val", |w| matches!(w, Wire::Varint(_))),
        11 => ("bool_val", |w| matches!(w, Wire::Varint(_))),
        13 => ("half_val", |w| matches!(w, Wire::Varint(_))),
        16 => ("uint32_val", |w| matches!(w, Wire::Varint(_))),
        17 => ("uint64_val", |w| matches!(w, Wire::Varint(_))),
        _ => return Ok(()),
    };
    if matches!(value, Wire::Bytes(_)) || scalar(&value) {
        Ok(())
    } else {
        Err(format!(
            "field `TensorProto.{name}` has a wire type that is not its own"
        ))
    }
}

/// A serialized `TensorShapeProto`: its dimensions as read (the first eight on the stack: the
/// shape a reader returns is the one allocation a value's header costs for the usual ranks) and
/// whether its rank is unknown.
pub(super) fn parse_shape(bytes: &[u8]) -> Result<(SmallVec<[i64; 8]>, bool), DecodeError> {
    let bad = |e: String| DecodeError::Malformed(format!("bad protobuf: {e}"));
    let (mut dims, mut unknown_rank) = (SmallVec::<[i64; 8]>::new(), false);
    for field in Fields::new(bytes) {
        let (number, v) = field.map_err(bad)?;
        match number {
            2 => {
                let mut size = 0i64;
                for field in Fields::new(v.bytes("TensorShapeProto.dim").map_err(bad)?) {
                    let (number, v) = field.map_err(bad)?;
                    match number {
                        1 => size = v.varint("Dim.size").map_err(bad)? as i64,
                        2 => {
                            v.text("Dim.name").map_err(bad)?;
                        }
                        _ => {}
                    }
                }
                dims.push(size);
            }
            3 => unknown_rank = v.varint("TensorShapeProto.unknown_rank").map_err(bad)? != 0,
            _ => {}
        }
    }
    Ok((dims, unknown_rank))
}

/// A tensor's content must be exactly its `n` elements of `dtype`.
fn check_content_len(
    tag: &str,
    len: usize,
    n: usize,
    dtype: DType,
    shape: &[usize],
) -> Result<(), DecodeError> {
    if len == n * dtype.size() {
        return Ok(());
    }
    let expected = n * dtype.size();
    Err(named(
        tag,
        format!("{len} content bytes for shape {shape:?} of {dtype} (expected {expected})"),
    ))
}

fn named(tag: &str, reason: String) -> DecodeError {
    if tag.is_empty() {
        reason.into()
    } else {
        format!("tensor `{tag}`: {reason}").into()
    }
}

/// Mode and mode step from smdebug's plugin data; GLOBAL and the global step when absent.
pub fn mode_of(metadata: Option<&SummaryMetadata>, step: u64) -> Result<(Mode, u64), String> {
    mode_of_plugins(
        metadata
            .map(|m| m.plugin_data.as_slice())
            .unwrap_or_default()
            .iter()
            .map(|p| (p.plugin_name.as_str(), p.content.as_slice())),
        step,
    )
}

/// [`mode_of`] over `(plugin_name, content)` pairs.
fn mode_of_plugins<'a>(
    plugins: impl Iterator<Item = (&'a str, &'a [u8])>,
    step: u64,
) -> Result<(Mode, u64), String> {
    let mut mode = Mode::Global;
    let mut mode_step = step;
    for (name, content) in plugins {
        apply_plugin(name, content, &mut mode, &mut mode_step)?;
    }
    Ok((mode, mode_step))
}

/// Takes one plugin's content into the mode or the mode step (other plugins are not ours).
pub(super) fn apply_plugin(
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

/// `n` elements from typed values, little-endian, filled the way TensorFlow does: a shorter list
/// repeats its last value, an empty list means zeros. Written straight into the value's bytes:
/// nothing wider than the stored dtype is allocated (a `uint8` value stored in `int_val` is
/// never held as 4-byte integers).
fn fill_le<T: Copy + Default, const W: usize>(
    vals: &[T],
    n: usize,
    to: impl Fn(T) -> [u8; W],
) -> Result<Vec<u8>, String> {
    if vals.len() > n {
        return Err(format!("{} values for {n} elements", vals.len()));
    }
    let mut out = Vec::with_capacity(n * W);
    for &v in vals {
        out.extend_from_slice(&to(v));
    }
    let last = to(vals.last().copied().unwrap_or_default());
    if W == 1 {
        out.resize(n, last[0]);
    } else {
        for _ in vals.len()..n {
            out.extend_from_slice(&last);
        }
    }
    Ok(out)
}

/// Converts a `TensorProto` (raw `tensor_content` or TensorFlow's typed value fields) into a
/// [`Tensor`], refusing a shape whose read costs more than `budget` (checked before anything
/// is allocated).
pub fn tensor_from_proto(
    proto: TensorProto,
    budget: impl Into<Budget>,
) -> Result<Tensor, DecodeError> {
    tensor_from_proto_tagged(proto, "", budget.into())
}

fn tensor_from_proto_tagged(
    mut proto: TensorProto,
    tag: &str,
    budget: Budget,
) -> Result<Tensor, DecodeError> {
    let shape_proto = proto.tensor_shape.take().unwrap_or_default();
    let dims: Vec<i64> = shape_proto.dim.iter().map(|d| d.size).collect();
    let (dtype, shape, n) = checked_layout(
        proto.dtype,
        !proto.string_val.is_empty(),
        shape_proto.unknown_rank,
        &dims,
        tag,
        budget,
    )?;
    let data = if !proto.tensor_content.is_empty() || n == 0 {
        std::mem::take(&mut proto.tensor_content)
    } else {
        typed_values(dtype, &proto, n).map_err(|r| named(tag, r))?
    };
    check_content_len(tag, data.len(), n, dtype, &shape)?;
    Tensor::from_bytes(dtype, shape, data).map_err(|e| named(tag, e.to_string()))
}

/// The dtype, shape and element count a tensor's header claims, checked: a numeric dtype
/// (strings are [`DecodeError::Strings`]), a known rank, non-negative dimensions,
/// and no more than the budget: the decoded value and what the reader makes of it (checked
/// before anything is allocated).
fn checked_layout(
    tf_dtype: i32,
    has_strings: bool,
    unknown_rank: bool,
    dims: &[i64],
    tag: &str,
    budget: Budget,
) -> Result<(DType, Vec<usize>, usize), DecodeError> {
    let dtype = DType::from_tf_datatype(tf_dtype).ok_or_else(|| {
        if is_string_dtype(tf_dtype, has_strings) {
            DecodeError::Strings {
                tag: tag.to_string(),
            }
        } else {
            named(tag, format!("unsupported TensorFlow dtype {tf_dtype}"))
        }
    })?;
    if unknown_rank {
        return Err(named(tag, "the tensor's rank is unknown".to_string()));
    }
    if let Some(d) = dims.iter().find(|&&d| d < 0) {
        return Err(named(tag, format!("bad dimension {d}")));
    }
    // Non-negative from here: each dimension is its own u64.
    let stored = claimed_bytes(dims, dtype);
    let claimed = budget.cost(dtype, stored / dtype.size() as u128);
    // No allocation can exceed isize::MAX bytes, whatever the budget says.
    if stored > isize::MAX as u128 || claimed > u128::from(budget.limit) {
        return Err(DecodeError::TooLarge {
            tag: tag.to_string(),
            detail: budget.detail(dtype, dims),
            claimed,
            limit: budget.limit,
        });
    }
    // An empty tensor claims no bytes, but ndarray still needs the product of its non-zero
    // dimensions to fit in isize.
    let extent = dims
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1u128, |acc, &d| acc.checked_mul(d as u128));
    if extent.is_none_or(|e| e > isize::MAX as u128) {
        return Err(named(
            tag,
            format!("shape {dims:?} has more elements than memory can address"),
        ));
    }
    let shape = dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| named(tag, format!("bad dimension {d}"))))
        .collect::<Result<Vec<usize>, DecodeError>>()?;
    // `stored` fits in isize, and so does the element count.
    let n = (stored / dtype.size() as u128) as usize;
    Ok((dtype, shape, n))
}

/// Bytes a tensor of `dims` and `dtype` takes, saturating at `u128::MAX` (which no budget
/// allows). A zero dimension makes it empty whatever the others say.
fn claimed_bytes(dims: &[i64], dtype: DType) -> u128 {
    if dims.contains(&0) {
        return 0;
    }
    dims.iter()
        .try_fold(dtype.size() as u128, |acc, &d| {
            acc.checked_mul(u128::try_from(d).ok()?)
        })
        .unwrap_or(u128::MAX)
}

fn typed_values(dtype: DType, p: &TensorProto, n: usize) -> Result<Vec<u8>, String> {
    match dtype {
        DType::F32 => fill_le(&p.float_val, n, f32::to_le_bytes),
        DType::F64 => fill_le(&p.double_val, n, f64::to_le_bytes),
        DType::F16 => fill_le(&p.half_val, n, |v| f16::from_bits(v as u16).to_le_bytes()),
        DType::BF16 => fill_le(&p.half_val, n, |v| bf16::from_bits(v as u16).to_le_bytes()),
        DType::I32 => fill_le(&p.int_val, n, i32::to_le_bytes),
        DType::I16 => fill_le(&p.int_val, n, |v| (v as i16).to_le_bytes()),
        DType::I8 => fill_le(&p.int_val, n, |v| (v as i8).to_le_bytes()),
        DType::U16 => fill_le(&p.int_val, n, |v| (v as u16).to_le_bytes()),
        DType::U8 => fill_le(&p.int_val, n, |v| (v as u8).to_le_bytes()),
        DType::I64 => fill_le(&p.int64_val, n, i64::to_le_bytes),
        DType::U32 => fill_le(&p.uint32_val, n, u32::to_le_bytes),
        DType::U64 => fill_le(&p.uint64_val, n, u64::to_le_bytes),
        DType::Bool => fill_le(&p.bool_val, n, |v| [u8::from(v)]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::proto::{Summary, event};

    #[test]
    fn encoded_event_decodes_with_prost_like_a_normal_message() {
        let t = Tensor::from_vec(&[1.5f32, -2.0, 3.25], vec![3]).unwrap();
        let stamp = EventStamp {
            wall_time: 1.5e9,
            step: 7,
            mode: Mode::Eval,
            mode_step: 2,
        };
        let enc = encode_tensor("fc.w", &t, stamp);
        let payload = enc.to_vec();
        let ev = decode_tensor_event(&payload, DEFAULT_MAX_TENSOR_BYTES).unwrap();
        assert_eq!(ev.name, "fc.w");
        assert_eq!((ev.step, ev.mode, ev.mode_step), (7, Mode::Eval, 2));
        assert_eq!(ev.tensor, t);
        // Same message as prost would build it (field order aside).
        let built = Event {
            wall_time: 1.5e9,
            step: 7,
            what: Some(event::What::Summary(Summary {
                value: vec![summary::Value {
                    tag: "fc.w".into(),
                    metadata: Some(mode_metadata(Mode::Eval, 2)),
                    value: Some(summary::value::Value::Tensor(TensorProto {
                        dtype: 1,
                        tensor_shape: Some(shape_proto("fc.w", &[3])),
                        tensor_content: t.bytes().to_vec(),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
            })),
        };
        assert_eq!(Event::decode(payload.as_slice()).unwrap(), built);
        assert_eq!(built.encoded_len(), payload.len());
    }

    /// A typed value field with a wire type that is not its own (a fuzzed record: `float_val`
    /// as a varint beside raw content) is refused, as prost's `TensorProto` refuses it; the
    /// record's content is not taken as its value.
    #[test]
    fn a_typed_value_field_of_the_wrong_wire_type_is_refused_as_prost_refuses_it() {
        let mut tensor = Vec::new();
        // dtype DT_INT8 (6), float_val (5) as a varint, tensor_content (4) = one byte.
        tensor.extend_from_slice(&[0x08, 0x06, 0x28, 0x00, 0x22, 0x01, 0x7d]);
        let err = tensor_ref(&tensor, "t", DEFAULT_MAX_TENSOR_BYTES.into()).unwrap_err();
        assert!(err.to_string().contains("TensorProto.float_val"), "{err}");
        assert!(TensorProto::decode(tensor.as_slice()).is_err());
        // string_val as a varint, in a float32 record: refused the same way.
        let strings = [0x08, 0x01, 0x40, 0x00];
        let err = tensor_ref(&strings, "t", DEFAULT_MAX_TENSOR_BYTES.into()).unwrap_err();
        assert!(err.to_string().contains("string_val"), "{err}");
        assert!(TensorProto::decode(&strings[..]).is_err());
        // Packed, it is a field like any other (its values are ignored beside raw content).
        let packed = [0x08, 0x06, 0x2a, 0x04, 0, 0, 0x80, 0x3f, 0x22, 0x01, 0x7d];
        let (dtype, shape, data) =
            tensor_ref(&packed, "t", DEFAULT_MAX_TENSOR_BYTES.into()).unwrap();
        assert_eq!((dtype, shape, &data[..]), (DType::I8, vec![], &[0x7d][..]));
        assert!(TensorProto::decode(&packed[..]).is_ok());
    }

    #[test]
    fn typed_values_fill_like_tensorflow() {
        let p = TensorProto {
            dtype: DType::F32.tf_datatype(),
            tensor_shape: Some(shape_proto("x", &[2, 2])),
            float_val: vec![1.0, 2.0],
            ..Default::default()
        };
        let t = tensor_from_proto(p, DEFAULT_MAX_TENSOR_BYTES).unwrap();
        assert_eq!(t.to_f64_vec(), vec![1.0, 2.0, 2.0, 2.0]);
    }
}
