//! Throughput of the write path for large tensors (encode, CRC-32C over the tensor in place,
//! one atomic write per step). Ignored by default: it measures the machine as much as the code.
//!
//!     cargo test --release -p smdebug-io --test writer_throughput -- --ignored --nocapture
//!
//! It writes to a memory-backed folder (`/dev/shm` where there is one, so that the numbers are
//! the writer's and not a noisy disk's) and compares with plain `std::fs::write` of the same
//! bytes there. In a release build the writer must reach 1 GB/s end to end.

use std::time::{Duration, Instant};

use smdebug_core::{Mode, Record, Sink, StepKey, Tensor, TensorRecord};
use smdebug_io::format::record::{MaskedCrc, PayloadChecksum};
use smdebug_io::format::tensor::{EventStamp, encode_tensor};
use smdebug_io::storage::open_storage;
use smdebug_io::writer::Writer;

const TENSOR_BYTES: usize = 128 << 20;
const STEPS: u64 = 8;

fn big_tensor(seed: f32) -> Tensor {
    let values: Vec<f32> = (0..TENSOR_BYTES / 4).map(|i| i as f32 * seed).collect();
    Tensor::from_vec(&values, vec![TENSOR_BYTES / 4 / 1024, 1024]).unwrap()
}

fn gbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

#[test]
#[ignore = "throughput measurement; run with --release -- --ignored"]
fn large_tensors_are_written_at_disk_speed() {
    let t = big_tensor(0.5);
    let stamp = EventStamp {
        wall_time: 0.0,
        step: 0,
        mode: Mode::Train,
        mode_step: 0,
    };

    let started = Instant::now();
    let enc = encode_tensor("big", &t, stamp);
    let crc = PayloadChecksum::Crc32c.footer([enc.prefix.as_slice(), enc.data]);
    let encode = started.elapsed();
    assert_ne!(crc, MaskedCrc(0).to_le_bytes());
    eprintln!(
        "encode + CRC-32C of {} MiB: {:.2} GB/s",
        TENSOR_BYTES >> 20,
        gbps(TENSOR_BYTES as u64, encode)
    );

    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .unwrap();
    // The disk's own rate for the same volume, in the same sizes.
    let started = Instant::now();
    for s in 0..STEPS {
        let p = dir.path().join(format!("plain{s}"));
        std::fs::write(&p, t.bytes()).unwrap();
    }
    let plain = started.elapsed();
    let plain_rate = gbps(STEPS * TENSOR_BYTES as u64, plain);
    eprintln!("plain std::fs::write: {plain_rate:.2} GB/s");
    for s in 0..STEPS {
        std::fs::remove_file(dir.path().join(format!("plain{s}"))).unwrap();
    }

    let store = open_storage(dir.path().join("run").to_str().unwrap()).unwrap();
    let mut writer = Writer::builder(store)
        .max_queued_bytes(usize::MAX)
        .build()
        .unwrap();
    let status = writer.status();
    let tensors: Vec<Tensor> = (0..STEPS).map(|s| big_tensor(s as f32)).collect();
    let started = Instant::now();
    for (step, tensor) in (0..STEPS).zip(tensors) {
        writer.send(Record::Tensor(TensorRecord {
            name: "big".into(),
            key: StepKey {
                step,
                mode: Mode::Train,
                mode_step: step,
            },
            tensor,
            to_events: true,
            tb_histogram: false,
            tb_scalar: false,
        }));
        writer.send(Record::EndStep { step });
    }
    let sending = started.elapsed();
    writer.flush(Duration::from_secs(300)).unwrap();
    let total = started.elapsed();
    let bytes = status.bytes_written();
    assert_eq!(status.steps_written(), STEPS);
    eprintln!(
        "writer to local disk: {} MiB in {:?} = {:.2} GB/s (training thread busy {:?})",
        bytes >> 20,
        total,
        gbps(bytes, total),
        sending
    );
    if !cfg!(debug_assertions) {
        let rate = gbps(bytes, total);
        assert!(
            rate >= 1.0,
            "{rate:.2} GB/s (plain writes: {plain_rate:.2} GB/s)"
        );
    }
}
