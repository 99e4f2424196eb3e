//! Shared set-up for the benchmarks and the side-by-side comparison commands.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use smdebug_core::{Hook, Mode, SaveConfig, TensorView};
use smdebug_format::record::PayloadChecksum;
use smdebug_io::OverflowPolicy;
use smdebug_io::writer::Writer;
use smdebug_storage::open_storage;

/// The tensors of the comparison run: seven per step, like a small model's weights, biases,
/// gradients and loss.
pub const BENCH_TENSORS: [(&str, usize, &str); 7] = [
    ("fc1.weight", 64, "weights"),
    ("fc1.bias", 8, "biases"),
    ("fc2.weight", 32, "weights"),
    ("fc2.bias", 4, "biases"),
    ("gradient/fc1.weight", 64, "gradients"),
    ("gradient/fc2.weight", 32, "gradients"),
    ("loss", 1, "losses"),
];

/// Writes a run of `steps` TRAIN steps with the seven tensors above, readable by Python smdebug
/// (legacy payload checksum), and returns the number of records written.
pub fn write_bench_run(location: &str, steps: u64) -> u64 {
    let writer = Writer::builder(open_storage(location).expect("storage opens"))
        .checksum(PayloadChecksum::SmdebugLegacy)
        .overflow(OverflowPolicy::Block)
        .tensorboard(false)
        .build()
        .expect("writer starts");
    let status = writer.status();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(writer)
        .expect("hook builds");
    hook.set_mode(Mode::Train);
    for step in 0..steps {
        for (name, len, coll) in BENCH_TENSORS {
            let v: Vec<f32> = (0..len).map(|i| (step as f32) * 0.001 + i as f32).collect();
            hook.save_tensor(
                name,
                &TensorView::from_slice(&v, &[len]).expect("shape"),
                &[coll],
            );
        }
        hook.step();
    }
    hook.close();
    drop(hook);
    assert!(status.error().is_none(), "{:?}", status.error());
    status.records_written()
}
