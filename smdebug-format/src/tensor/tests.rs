//! Tests of tensor events: encoding, decoding, typed values.

use super::decode::*;
use super::encode::*;
use super::event::*;
use super::from_proto::*;
use crate::proto::{Event, Summary, event};
use crate::proto::{TensorProto, summary};
use prost::Message;
use smdebug_core::{DType, Mode, Tensor};

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
    let (dtype, shape, data) = tensor_ref(&packed, "t", DEFAULT_MAX_TENSOR_BYTES.into()).unwrap();
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
