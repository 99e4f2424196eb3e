//! Encoding a tensor event without copying the tensor's bytes into a protobuf message.

use prost::Message;
use smdebug_core::{DType, Mode, Tensor};

use crate::proto::{
    Event, PluginData, SummaryMetadata, TensorProto, TensorShapeProto, summary, tensor_shape_proto,
};

use super::event::{EventStamp, MODE_PLUGIN, MODE_STEP_PLUGIN};
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
pub fn shape_proto(name: &str, shape: &[usize]) -> TensorShapeProto {
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
/// The payload is `prefix ++ data`; it decodes with [`decode_tensor_event`](super::decode_tensor_event) and with Python
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
