//! The write path for large tensors, beside its physical limits on this machine: CRC-32C over
//! the bytes, copying them, and a plain `std::fs::write` of the same bytes to the same folder.
//! Files go to a memory-backed folder (`/dev/shm`) where there is one, so the numbers are the
//! writer's and not a noisy disk's.
//!
//! `cargo bench -p smdebug-benches --bench write_path`

#![forbid(unsafe_code)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use smdebug_core::{Hook, Mode, SaveConfig, Tensor, TensorView};
use smdebug_format::record::PayloadChecksum;
use smdebug_format::tensor::EventStamp;
use smdebug_io::OverflowPolicy;
use smdebug_io::writer::Writer;
use smdebug_storage::open_storage;

const MIB: usize = 1 << 20;
const TENSOR_BYTES: usize = 32 * MIB;

fn bench(c: &mut Criterion) {
    let values: Vec<f32> = (0..TENSOR_BYTES / 4).map(|i| i as f32 * 0.5).collect();
    let tensor = Tensor::from_vec(&values, vec![values.len()]).unwrap();
    let bytes = tensor.bytes().to_vec();

    let mut g = c.benchmark_group("write_path_32MiB");
    g.throughput(Throughput::Bytes(TENSOR_BYTES as u64));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));

    g.bench_function("limit: crc32c", |b| {
        b.iter(|| black_box(crc32c::crc32c(black_box(&bytes))))
    });
    g.bench_function("limit: memcpy", |b| {
        let mut dst = vec![0u8; TENSOR_BYTES];
        b.iter(|| {
            dst.copy_from_slice(black_box(&bytes));
            black_box(&dst);
        })
    });
    let stamp = EventStamp {
        wall_time: 0.0,
        step: 1,
        mode: Mode::Train,
        mode_step: 1,
    };
    g.bench_function("encode+frame+crc (in memory)", |b| {
        b.iter(|| {
            black_box(smdebug_format::frame_tensor(
                "w",
                black_box(&tensor),
                stamp,
                PayloadChecksum::Crc32c,
            ))
        })
    });

    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let plain = dir.path().join("plain.bin");
    g.bench_function("limit: std::fs::write", |b| {
        b.iter(|| std::fs::write(&plain, black_box(&bytes)).unwrap())
    });
    std::fs::remove_file(&plain).ok();

    // End to end: the hook copies the tensor, the writer thread encodes, checksums and writes the
    // step's event and index files. Block policy, so every byte counts.
    let writer = Writer::builder(open_storage(dir.path().to_str().unwrap()).unwrap())
        .overflow(OverflowPolicy::Block)
        .queue_capacity(2)
        .tensorboard(false)
        .build()
        .unwrap();
    let status = writer.status();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(writer)
        .unwrap();
    let view = TensorView::from_slice(&values, &[values.len()]).unwrap();
    let mut sent = 0u64;
    g.bench_function("hook+writer to local disk", |b| {
        // Timed until the writer has written every step of the batch; the files are then
        // deleted (untimed) so a memory-backed folder does not fill up.
        b.iter_custom(|iters| {
            let start = std::time::Instant::now();
            for _ in 0..iters {
                hook.save_tensor("w", &view, &["weights"]);
                hook.step();
            }
            sent += iters;
            while status.steps_written() < sent && status.error().is_none() {
                std::thread::sleep(Duration::from_micros(200));
            }
            let elapsed = start.elapsed();
            for sub in ["events", "index"] {
                std::fs::remove_dir_all(dir.path().join(sub)).ok();
            }
            elapsed
        })
    });
    g.finish();
    hook.close();
    drop(hook);
    assert_eq!(status.dropped(), 0);
    assert!(status.error().is_none(), "{:?}", status.error());
}

criterion_group!(benches, bench);
criterion_main!(benches);
