//! Crafted runs for tests (feature `testing`): hostile records that tests in several crates
//! (the reader's, the CLI's, the Python package's through the CLI's) read.

use std::path::Path;

use prost::Message;
use smdebug_core::{DType, Mode};

use crate::format::layout;
use crate::format::proto::{
    Event, Summary, TensorProto, TensorShapeProto, event, summary, tensor_shape_proto,
};
use crate::format::record::{PayloadChecksum, encode_record};
use crate::format::tensor::mode_metadata;

/// Writes `<dir>/run`, a one-step run (TRAIN, worker_0) whose only record is `name`: `dtype`,
/// shape `dims`, and one typed fill value (TensorFlow's typed fields: `bool_val`, `half_val` 1.0,
/// `int_val` 7), which readers repeat over the shape. Returns the run's path and the record's
/// length (under 100 bytes, whatever the shape).
pub fn fill_record_run(dir: &Path, name: &str, dtype: DType, dims: &[i64]) -> (String, usize) {
    let mut proto = TensorProto {
        dtype: dtype.tf_datatype(),
        tensor_shape: Some(TensorShapeProto {
            dim: dims
                .iter()
                .map(|&size| tensor_shape_proto::Dim {
                    size,
                    name: String::new(),
                })
                .collect(),
            unknown_rank: false,
        }),
        ..Default::default()
    };
    match dtype {
        DType::Bool => proto.bool_val = vec![true],
        DType::F16 => proto.half_val = vec![0x3c00], // 1.0
        _ => proto.int_val = vec![7],
    }
    let payload = Event {
        wall_time: 1.0,
        step: 0,
        what: Some(event::What::Summary(Summary {
            value: vec![summary::Value {
                tag: name.to_string(),
                metadata: Some(mode_metadata(Mode::Train, 0)),
                value: Some(summary::value::Value::Tensor(proto)),
                ..Default::default()
            }],
        })),
    }
    .encode_to_vec();
    let record = encode_record(&payload, PayloadChecksum::Crc32c);
    let run = dir.join("run");
    let event_file = layout::event_file(0, "worker_0");
    let path = run.join(&event_file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &record).unwrap();
    let index = run.join(layout::index_file(0, "worker_0"));
    std::fs::create_dir_all(index.parent().unwrap()).unwrap();
    let json = serde_json::json!({"meta": {"mode": "TRAIN", "mode_step": 0, "event_file_name": event_file},
            "tensor_payload": [{"tensorname": name, "start_idx": 0, "length": record.len()}],
            "shape_payload": []});
    std::fs::write(index, serde_json::to_vec(&json).unwrap()).unwrap();
    (run.to_str().unwrap().to_string(), record.len())
}
