//! Decoding record payloads into tensor events: the whole event, or a borrowed view of one
//! selected value, and the mode plugins.

use prost::Message;
use smallvec::SmallVec;
use smdebug_core::{DType, Mode};

use crate::proto::{Event, SummaryMetadata, TensorProto};
use crate::wire::{Fields, Wire};

use super::error::DecodeError;
use super::event::{TensorEvent, TensorEventRef, apply_plugin};
use super::from_proto::{check_content_len, checked_layout, named, typed_values};
use crate::budget::Budget;

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
pub struct Selected<'a> {
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
pub fn select_value<'a>(payload: &'a [u8], tag: Option<&str>) -> Result<Selected<'a>, DecodeError> {
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
pub fn in_event(e: DecodeError) -> DecodeError {
    match e {
        DecodeError::Malformed(m) if m.starts_with("bad protobuf: ") => {
            DecodeError::Malformed(format!("not an Event protobuf: {m}"))
        }
        other => other,
    }
}

thread_local! {
    /// The value metadata the one-pass reader last found valid on this thread.
    static SEEN: std::cell::RefCell<super::one_pass::SeenMetadata> = Default::default();
}

fn decode_selected_ref<'a>(
    payload: &'a [u8],
    tag: Option<&str>,
    budget: Budget,
) -> Result<TensorEventRef<'a>, DecodeError> {
    // The layout every writer uses, in one pass; any other record (and every error) from the
    // general decoder below.
    if let Some(tag) = tag
        && let Some(event) =
            SEEN.with_borrow_mut(|seen| super::one_pass::read(payload, tag, budget, seen))
    {
        return Ok(event);
    }
    general_ref(payload, tag, budget)
}

/// [`decode_selected_ref`] by the general decoder alone: any layout, every error.
pub(super) fn general_ref<'a>(
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
pub(super) fn tensor_ref<'a>(
    bytes: &'a [u8],
    tag: &str,
    budget: Budget,
) -> Result<TensorLayout<'a>, DecodeError> {
    let bad = |e: String| DecodeError::Malformed(format!("bad protobuf: {e}"));
    let mut header = ProtoHeader::default();
    let mut content = &[][..];
    let mut has_strings = false;
    for field in Fields::new(bytes) {
        let (number, v) = field.map_err(bad)?;
        if header.take(number, v, tag)? {
            continue;
        }
        match number {
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
    let (dims, unknown_rank) = parse_shape(header.shape.unwrap_or_default())?;
    let (dtype, shape, n) =
        checked_layout(header.dtype, has_strings, unknown_rank, &dims, tag, budget)?;
    let data = if !content.is_empty() || n == 0 {
        std::borrow::Cow::Borrowed(content)
    } else {
        let proto = TensorProto::decode(bytes).map_err(|e| bad(e.to_string()))?;
        std::borrow::Cow::Owned(typed_values(dtype, &proto, n).map_err(|r| named(tag, r))?)
    };
    check_content_len(tag, data.len(), n, dtype, &shape)?;
    Ok((dtype, shape, data))
}

/// The fields of a `TensorProto` every decoder reads alike: the dtype and the serialized shape
/// (given once: protobuf would merge two shapes, and no writer sends a shape in pieces).
#[derive(Default)]
pub struct ProtoHeader<'a> {
    /// The `DataType` number.
    pub dtype: i32,
    /// The serialized `TensorShapeProto`, when one was given.
    pub shape: Option<&'a [u8]>,
}

impl<'a> ProtoHeader<'a> {
    /// Takes field `number` of tensor `tag` when it is the dtype or the shape, and says whether
    /// it was.
    pub fn take(&mut self, number: u32, value: Wire<'a>, tag: &str) -> Result<bool, DecodeError> {
        let bad = |e: String| DecodeError::Malformed(format!("bad protobuf: {e}"));
        match number {
            1 => self.dtype = value.varint("TensorProto.dtype").map_err(bad)? as i32,
            2 => {
                let s = value.bytes("TensorProto.tensor_shape").map_err(bad)?;
                if self.shape.replace(s).is_some() {
                    return Err(format!("tensor `{tag}`: its shape is given twice").into());
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Checks the wire type of a `TensorProto` field a decoder does not read itself: a typed value
/// field (`float_val`, `int_val`, …) packed (length-delimited) or one element of its own wire
/// type, the others their own, as protobuf's parsers (prost's `TensorProto`, which
/// TensorFlow-written values go through) require. Field numbers that are not `TensorProto`'s
/// are skipped.
pub fn typed_field(number: u32, value: Wire<'_>) -> Result<(), String> {
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
pub fn parse_shape(bytes: &[u8]) -> Result<(SmallVec<[i64; 8]>, bool), DecodeError> {
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
