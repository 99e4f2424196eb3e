//! Tensor events: one `Event{summary{value[{tag, metadata, tensor}]}}` per saved tensor, as
//! smdebug writes them, and their decoding back to a [`Tensor`](smdebug_core::Tensor).
//!
//! Encoding never copies the tensor's bytes into a protobuf message: [`encode_tensor_event`]
//! builds the serialized event up to the start of `tensor_content`, and the tensor's bytes are
//! the rest of the payload. The record's CRC is computed over the two slices.
//!
//! `event.rs` the plugin names, dtypes and event types; `encode.rs` encoding; `error.rs`
//! [`DecodeError`]; `decode.rs` payloads into events, owned or borrowed; `from_proto.rs` a
//! `TensorProto`'s values into a [`Tensor`](smdebug_core::Tensor); `one_pass.rs` the layout every
//! writer uses, read in one pass before the general decoder is asked.

pub(super) mod decode;
mod encode;
mod error;
mod event;
mod from_proto;
pub(crate) mod one_pass;

pub use crate::budget::{Budget, Conversion};
pub use decode::{ProtoHeader, in_event, parse_shape, select_value, typed_field};
pub use decode::{
    decode_event, decode_tagged_tensor_event, decode_tensor_event, decode_tensor_event_ref, mode_of,
};
pub use encode::shape_proto;
pub use encode::{EncodedTensorEvent, encode_tensor, encode_tensor_event, mode_metadata};
pub use error::DecodeError;
pub use event::{
    DEFAULT_MAX_TENSOR_BYTES, DT_STRING, EventStamp, MODE_PLUGIN, MODE_STEP_PLUGIN, TensorEvent,
    TensorEventRef, is_string_dtype,
};
pub use from_proto::tensor_from_proto;

#[cfg(test)]
mod tests;
