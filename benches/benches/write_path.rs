//! The write path for large tensors, beside its two physical limits on this machine: CRC-32C
//! over the bytes, and copying them (the writer's copy into the page cache is at least one copy).
//!
//! `cargo bench -p smdebug-benches --bench write_path`

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use smdebug_core::{Hook, Mode, SaveConfig, Tensor, TensorView};
use smdebug_io::format::record::PayloadChecksum;
use smdebug_io::format::tensor::EventStamp;
use smdebug_io::writer::Writer;
use smdebug_io::{OverflowPolicy, open_storage};

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
            black_box(smdebug_io::format::frame_tensor(
                "w",
                black_box(&tensor),
                stamp,
                PayloadChecksum::Crc32c,
            ))
        })
    });

    // End to end: the hook copies the tensor, the writer thread encodes, checksums and writes the
    // step's event and index files to local disk (page cache). Block policy, so every byte counts.
    let dir = tempfile::tempdir().unwrap();
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
    g.bench_function("hook+writer to local disk", |b| {
        b.iter(|| {
            hook.save_tensor("w", &view, &["weights"]);
            hook.step();
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
