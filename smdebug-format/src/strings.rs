//! String tensors (`DT_STRING`), read and written.
//!
//! Python smdebug 1.0.34 writes a numpy `str` array as a `TensorProto` whose `dtype` is left
//! unset (0) with one `string_val` per element (`core/tfevent/util.py`), and its reader takes
//! exactly that (`dtype == 0 and string_val`). TensorFlow and TensorBoard write `dtype`
//! `DT_STRING` (7), which smdebug's reader refuses, and TensorBoard's `make_ndarray` refuses
//! `dtype` 0. So:
//!
//! - the reader takes both;
//! - [`encode_string_event`] writes smdebug's form (event files, which smdebug reads);
//! - [`text_summary_event`] writes TensorBoard's text plugin form (`DT_STRING`, plugin `text`)
//!   for TensorBoard's files.

use prost::Message;
use smdebug_core::strings::STRING_ELEMENT_OVERHEAD;
use smdebug_core::{Mode, StringTensor};

use super::proto::{
    Event, PluginData, Summary, SummaryMetadata, TensorProto, TensorShapeProto, event, summary,
    tensor_shape_proto,
};
use super::tensor::{
    DT_STRING, DecodeError, EventStamp, ProtoHeader, in_event, is_string_dtype, mode_metadata,
    parse_shape, select_value, shape_proto, typed_field,
};
use super::wire::Fields;

/// The plugin TensorBoard shows string tensors with.
pub const TEXT_PLUGIN: &str = "text";

/// One string tensor read back from an event, its strings borrowed from the payload.
#[derive(Clone, Debug, PartialEq)]
pub struct StringEventRef<'a> {
    /// The tensor name (the summary value's tag).
    pub name: &'a str,
    /// The global step.
    pub step: u64,
    /// The event's wall time, seconds since the Unix epoch.
    pub wall_time: f64,
    /// The mode (GLOBAL when the event carries none).
    pub mode: Mode,
    /// The step within the mode.
    pub mode_step: u64,
    /// The dimensions, outermost first (empty for a scalar).
    pub shape: Vec<usize>,
    /// The elements, row-major.
    pub values: Vec<&'a [u8]>,
}

impl StringEventRef<'_> {
    /// The strings as an owned tensor.
    pub fn to_tensor(&self) -> StringTensor {
        StringTensor::new(
            self.shape.clone(),
            self.values.iter().map(|v| v.to_vec()).collect(),
        )
        .expect("the element count was checked against the shape when decoded")
    }
}

/// Parses a record payload as the string tensor tagged `tag` (the only tensor value when
/// `None`), with the checks of [`super::tensor::decode_tagged_tensor_event`]: a value that
/// holds numbers is [`DecodeError::Malformed`]; one whose strings and their per-element
/// overhead ([`STRING_ELEMENT_OVERHEAD`]) come to more than `max_tensor_bytes` is
/// [`DecodeError::TooLarge`]; the element count must be the shape's.
pub fn decode_string_event_ref<'a>(
    payload: &'a [u8],
    tag: Option<&str>,
    max_tensor_bytes: u64,
) -> Result<StringEventRef<'a>, DecodeError> {
    let value = select_value(payload, tag)?;
    let (shape, values) =
        string_tensor_ref(value.tensor, value.tag, max_tensor_bytes).map_err(in_event)?;
    Ok(StringEventRef {
        name: value.tag,
        step: value.step,
        wall_time: value.wall_time,
        mode: value.mode,
        mode_step: value.mode_step,
        shape,
        values,
    })
}

/// A serialized `TensorProto` of strings: its shape and elements.
fn string_tensor_ref<'a>(
    bytes: &'a [u8],
    tag: &str,
    max_tensor_bytes: u64,
) -> Result<(Vec<usize>, Vec<&'a [u8]>), DecodeError> {
    let bad = |e: String| DecodeError::Malformed(format!("bad protobuf: {e}"));
    let named = |reason: String| DecodeError::Malformed(format!("tensor `{tag}`: {reason}"));
    let mut header = ProtoHeader::default();
    let (mut count, mut held) = (0u64, 0u64);
    // First pass: count and size the strings, allocating nothing.
    for field in Fields::new(bytes) {
        let (number, v) = field.map_err(bad)?;
        if header.take(number, v, tag)? {
            continue;
        }
        match number {
            8 => {
                let s = v.bytes("TensorProto.string_val").map_err(bad)?;
                count += 1;
                held = held.saturating_add(s.len() as u64 + STRING_ELEMENT_OVERHEAD);
            }
            n => typed_field(n, v).map_err(bad)?,
        }
    }
    let dtype = header.dtype;
    if !is_string_dtype(dtype, count > 0) {
        return Err(named(format!(
            "TensorFlow dtype {dtype} is not a string dtype"
        )));
    }
    let (dims, unknown_rank) = parse_shape(header.shape.unwrap_or_default())?;
    if unknown_rank {
        return Err(named("the tensor's rank is unknown".to_string()));
    }
    let mut elements = 1u64;
    let mut out_shape = Vec::with_capacity(dims.len());
    for &d in &dims {
        let d = u64::try_from(d).map_err(|_| named(format!("bad dimension {d}")))?;
        elements = elements.saturating_mul(d);
        out_shape.push(usize::try_from(d).map_err(|_| named(format!("bad dimension {d}")))?);
    }
    if elements != count {
        return Err(named(format!(
            "{count} strings for shape {dims:?} ({elements} elements)"
        )));
    }
    if held > max_tensor_bytes {
        return Err(DecodeError::TooLarge {
            tag: tag.to_string(),
            detail: format!("{count} strings"),
            claimed: u128::from(held),
            limit: max_tensor_bytes,
        });
    }
    let mut values = Vec::with_capacity(count as usize);
    for field in Fields::new(bytes) {
        let (number, v) = field.map_err(bad)?;
        if number == 8 {
            values.push(v.bytes("TensorProto.string_val").map_err(bad)?);
        }
    }
    Ok((out_shape, values))
}

/// The serialized event of string tensor `name` at `stamp`, as Python smdebug's `FileWriter`
/// writes one (dtype unset, one `string_val` per element, the mode in the metadata): Python
/// smdebug's reader and ours read it.
pub fn encode_string_event(name: &str, strings: &StringTensor, stamp: EventStamp) -> Vec<u8> {
    let tensor = TensorProto {
        tensor_shape: Some(shape_proto(name, strings.shape())),
        string_val: strings.values().to_vec(),
        ..Default::default()
    };
    Event {
        wall_time: stamp.wall_time,
        step: stamp.step as i64,
        what: Some(event::What::Summary(Summary {
            value: vec![summary::Value {
                tag: name.to_string(),
                metadata: Some(mode_metadata(stamp.mode, stamp.mode_step)),
                value: Some(summary::value::Value::Tensor(tensor)),
                ..Default::default()
            }],
        })),
    }
    .encode_to_vec()
}

/// A TensorBoard text summary of `strings` under `tag` (already cleaned for TensorBoard):
/// `DT_STRING` with the `text` plugin's metadata, which TensorBoard's text dashboard shows.
pub fn text_summary_event(tag: &str, strings: &StringTensor, step: u64, wall_time: f64) -> Event {
    let tensor = TensorProto {
        dtype: DT_STRING,
        tensor_shape: Some(TensorShapeProto {
            dim: strings
                .shape()
                .iter()
                .map(|&d| tensor_shape_proto::Dim {
                    size: d as i64,
                    name: String::new(),
                })
                .collect(),
            unknown_rank: false,
        }),
        string_val: strings.values().to_vec(),
        ..Default::default()
    };
    Event {
        wall_time,
        step: step as i64,
        what: Some(event::What::Summary(Summary {
            value: vec![summary::Value {
                tag: tag.to_string(),
                metadata: Some(SummaryMetadata {
                    plugin_data: vec![PluginData {
                        plugin_name: TEXT_PLUGIN.to_string(),
                        content: Vec::new(),
                    }],
                    ..Default::default()
                }),
                value: Some(summary::value::Value::Tensor(tensor)),
                ..Default::default()
            }],
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{DEFAULT_MAX_TENSOR_BYTES, decode_tensor_event_ref};

    fn stamp() -> EventStamp {
        EventStamp {
            wall_time: 1.7e9,
            step: 4,
            mode: Mode::Eval,
            mode_step: 1,
        }
    }

    #[test]
    fn strings_written_as_smdebug_writes_them_read_back() {
        let t = StringTensor::from_strs(&["f0", "", "Leaf", "é"]);
        let payload = encode_string_event("trees/Feature", &t, stamp());
        let ev = decode_string_event_ref(&payload, Some("trees/Feature"), DEFAULT_MAX_TENSOR_BYTES)
            .unwrap();
        assert_eq!((ev.step, ev.mode, ev.mode_step), (4, Mode::Eval, 1));
        assert_eq!(ev.to_tensor(), t);
        // The dtype is left unset, as smdebug's writer leaves it.
        let Some(event::What::Summary(s)) = Event::decode(payload.as_slice()).unwrap().what else {
            panic!("no summary")
        };
        let Some(summary::value::Value::Tensor(proto)) = &s.value[0].value else {
            panic!("no tensor")
        };
        assert_eq!(proto.dtype, 0);
        // Read as numbers, it is a string tensor, not corruption.
        let err =
            decode_tensor_event_ref(&payload, Some("trees/Feature"), DEFAULT_MAX_TENSOR_BYTES)
                .unwrap_err();
        assert_eq!(
            err,
            DecodeError::Strings {
                tag: "trees/Feature".into()
            }
        );
    }

    #[test]
    fn tensorflows_dt_string_reads_too_and_counts_must_fit_the_shape() {
        let event = |dtype: i32, dims: &[usize], values: &[&[u8]]| {
            Event {
                wall_time: 0.0,
                step: 0,
                what: Some(event::What::Summary(Summary {
                    value: vec![summary::Value {
                        tag: "t".into(),
                        value: Some(summary::value::Value::Tensor(TensorProto {
                            dtype,
                            tensor_shape: Some(shape_proto("t", dims)),
                            string_val: values.iter().map(|v| v.to_vec()).collect(),
                            ..Default::default()
                        })),
                        ..Default::default()
                    }],
                })),
            }
            .encode_to_vec()
        };
        fn read(p: &[u8], budget: u64) -> Result<StringEventRef<'_>, DecodeError> {
            decode_string_event_ref(p, None, budget)
        }
        let ok = event(DT_STRING, &[2, 1], &[b"a", b"\xff"]);
        let ev = read(&ok, DEFAULT_MAX_TENSOR_BYTES).unwrap();
        assert_eq!(
            (ev.shape, ev.values),
            (vec![2, 1], vec![&b"a"[..], &b"\xff"[..]])
        );
        // A 0-d string and an empty one.
        assert_eq!(
            read(&event(DT_STRING, &[], &[b"x"]), 1 << 20)
                .unwrap()
                .values
                .len(),
            1
        );
        assert!(
            read(&event(DT_STRING, &[0], &[]), 1 << 20)
                .unwrap()
                .values
                .is_empty()
        );
        // Counts that do not fit the shape, numbers, a budget too small.
        let err = read(&event(DT_STRING, &[3], &[b"a"]), 1 << 20).unwrap_err();
        assert!(err.to_string().contains("1 strings for shape [3]"), "{err}");
        let err = read(&event(1, &[1], &[]), 1 << 20).unwrap_err();
        assert!(err.to_string().contains("not a string dtype"), "{err}");
        let big = event(DT_STRING, &[2], &[&[b'x'; 100], &[b'y'; 100]]);
        let err = read(&big, 100).unwrap_err();
        assert!(matches!(err, DecodeError::TooLarge { .. }), "{err}");
        assert!(read(&big, 200 + 2 * STRING_ELEMENT_OVERHEAD).is_ok());
    }

    #[test]
    fn a_text_summary_is_dt_string_under_the_text_plugin() {
        let t = StringTensor::from_strs(&["a", "b"]);
        let ev = text_summary_event("notes", &t, 3, 1.0);
        let payload = ev.encode_to_vec();
        let read =
            decode_string_event_ref(&payload, Some("notes"), DEFAULT_MAX_TENSOR_BYTES).unwrap();
        assert_eq!(read.to_tensor(), t);
        let Some(event::What::Summary(s)) = ev.what else {
            panic!()
        };
        let meta = s.value[0].metadata.as_ref().unwrap();
        assert_eq!(meta.plugin_data[0].plugin_name, TEXT_PLUGIN);
    }
}
