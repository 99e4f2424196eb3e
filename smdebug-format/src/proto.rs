//! The protobuf messages of smdebug's event files, as prost structs (no build script).
//!
//! Field numbers follow smdebug's `event.proto`, `summary.proto`, `tensor.proto` and
//! `tensor_shape.proto`, which are TensorFlow's. Fields that smdebug and TensorFlow never use in
//! these files (images, audio, session logs, resource handles, …) are left out; prost skips them
//! when decoding.

use prost::Message;

/// `Event`: one record of an event file.
#[derive(Clone, PartialEq, Message)]
pub struct Event {
    /// Seconds since the epoch.
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    /// The global step.
    #[prost(int64, tag = "2")]
    pub step: i64,
    /// The record's content.
    #[prost(oneof = "event::What", tags = "3, 4, 5")]
    pub what: Option<event::What>,
}

/// Nested types of [`Event`].
pub mod event {
    /// What an event holds.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum What {
        /// `"brain.Event:2"` in the first record of a TensorBoard file.
        #[prost(string, tag = "3")]
        FileVersion(String),
        /// A serialized `GraphDef`.
        #[prost(bytes, tag = "4")]
        GraphDef(Vec<u8>),
        /// Tensors, scalars or histograms.
        #[prost(message, tag = "5")]
        Summary(super::Summary),
    }
}

/// `Summary`: a list of tagged values.
#[derive(Clone, PartialEq, Message)]
pub struct Summary {
    /// The values, one per tag.
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<summary::Value>,
}

/// Nested types of [`Summary`].
pub mod summary {
    /// `Summary.Value`: one tagged value.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Value {
        /// The tensor name (smdebug) or the TensorBoard tag.
        #[prost(string, tag = "1")]
        pub tag: String,
        /// Unused by smdebug (TensorFlow's graph node name).
        #[prost(string, tag = "7")]
        pub node_name: String,
        /// Plugin data: smdebug's mode and mode step, TensorBoard's plugin.
        #[prost(message, optional, tag = "9")]
        pub metadata: Option<super::SummaryMetadata>,
        /// The payload.
        #[prost(oneof = "value::Value", tags = "2, 5, 8")]
        pub value: Option<value::Value>,
    }

    /// Nested types of [`Value`].
    pub mod value {
        /// The payload of a [`Value`](super::Value).
        #[derive(Clone, PartialEq, prost::Oneof)]
        pub enum Value {
            /// A TensorBoard scalar.
            #[prost(float, tag = "2")]
            SimpleValue(f32),
            /// A TensorBoard histogram.
            #[prost(message, tag = "5")]
            Histo(super::super::HistogramProto),
            /// A tensor (what smdebug saves).
            #[prost(message, tag = "8")]
            Tensor(super::super::TensorProto),
        }
    }
}

/// `SummaryMetadata`. smdebug declares `plugin_data` repeated (mode and mode step);
/// TensorBoard declares it singular. One element encodes the same either way.
#[derive(Clone, PartialEq, Message)]
pub struct SummaryMetadata {
    /// smdebug: one entry per plugin (`mode`, `mode_step`).
    #[prost(message, repeated, tag = "1")]
    pub plugin_data: Vec<PluginData>,
    /// TensorBoard's display name.
    #[prost(string, tag = "2")]
    pub display_name: String,
    /// TensorBoard's description.
    #[prost(string, tag = "3")]
    pub summary_description: String,
    /// TensorBoard's `DataClass` value.
    #[prost(int32, tag = "4")]
    pub data_class: i32,
}

/// `SummaryMetadata.PluginData`. smdebug's content is text (`"3"`); TensorBoard's is bytes
/// (often a serialized proto), so it is kept as bytes here.
#[derive(Clone, PartialEq, Message)]
pub struct PluginData {
    /// The plugin (`mode`, `mode_step`, `scalars`, …).
    #[prost(string, tag = "1")]
    pub plugin_name: String,
    /// The plugin's content.
    #[prost(bytes = "vec", tag = "2")]
    pub content: Vec<u8>,
}

/// `HistogramProto`: TensorBoard's legacy histogram.
#[derive(Clone, PartialEq, Message)]
pub struct HistogramProto {
    /// Smallest value.
    #[prost(double, tag = "1")]
    pub min: f64,
    /// Largest value.
    #[prost(double, tag = "2")]
    pub max: f64,
    /// Number of values.
    #[prost(double, tag = "3")]
    pub num: f64,
    /// Sum of the values.
    #[prost(double, tag = "4")]
    pub sum: f64,
    /// Sum of the squares of the values.
    #[prost(double, tag = "5")]
    pub sum_squares: f64,
    /// Right edges of the buckets; bucket `i` holds values in `[bucket_limit[i-1], bucket_limit[i])`.
    #[prost(double, repeated, packed = "true", tag = "6")]
    pub bucket_limit: Vec<f64>,
    /// Count per bucket.
    #[prost(double, repeated, packed = "true", tag = "7")]
    pub bucket: Vec<f64>,
}

/// `TensorProto`. smdebug writes `dtype`, `tensor_shape` and `tensor_content` (little-endian
/// row-major bytes); TensorFlow may put small tensors in the typed `*_val` fields instead.
#[derive(Clone, PartialEq, Message)]
pub struct TensorProto {
    /// TensorFlow's `DataType` value ([`smdebug_core::DType::tf_datatype`]).
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    /// The shape.
    #[prost(message, optional, tag = "2")]
    pub tensor_shape: Option<TensorShapeProto>,
    /// TensorFlow's version number (0).
    #[prost(int32, tag = "3")]
    pub version_number: i32,
    /// The values as little-endian row-major bytes.
    #[prost(bytes = "vec", tag = "4")]
    pub tensor_content: Vec<u8>,
    /// f16 and bf16 bit patterns, one per int32.
    #[prost(int32, repeated, packed = "true", tag = "13")]
    pub half_val: Vec<i32>,
    /// float32 values.
    #[prost(float, repeated, packed = "true", tag = "5")]
    pub float_val: Vec<f32>,
    /// float64 values.
    #[prost(double, repeated, packed = "true", tag = "6")]
    pub double_val: Vec<f64>,
    /// int32, int16, int8, uint16, uint8.
    #[prost(int32, repeated, packed = "true", tag = "7")]
    pub int_val: Vec<i32>,
    /// String values (XGBoost's `trees/*` columns), one per element; `format::strings` decodes
    /// them in place.
    #[prost(bytes = "vec", repeated, tag = "8")]
    pub string_val: Vec<Vec<u8>>,
    /// int64 values.
    #[prost(int64, repeated, packed = "true", tag = "10")]
    pub int64_val: Vec<i64>,
    /// bool values.
    #[prost(bool, repeated, packed = "true", tag = "11")]
    pub bool_val: Vec<bool>,
    /// uint32 values.
    #[prost(uint32, repeated, packed = "true", tag = "16")]
    pub uint32_val: Vec<u32>,
    /// uint64 values.
    #[prost(uint64, repeated, packed = "true", tag = "17")]
    pub uint64_val: Vec<u64>,
}

/// `TensorShapeProto`.
#[derive(Clone, PartialEq, Message)]
pub struct TensorShapeProto {
    /// The dimensions, outermost first.
    #[prost(message, repeated, tag = "2")]
    pub dim: Vec<tensor_shape_proto::Dim>,
    /// The rank is unknown (never in smdebug's files).
    #[prost(bool, tag = "3")]
    pub unknown_rank: bool,
}

/// Nested types of [`TensorShapeProto`].
pub mod tensor_shape_proto {
    /// One dimension.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Dim {
        /// The dimension's size.
        #[prost(int64, tag = "1")]
        pub size: i64,
        /// An optional name (smdebug's hooks write `<tensor>_<size>`).
        #[prost(string, tag = "2")]
        pub name: String,
    }
}
