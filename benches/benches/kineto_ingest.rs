//! Kineto (PyTorch profiler) trace ingestion throughput over the largest shared real trace:
//! end to end from the `.json.gz` file, and from the decompressed JSON already in memory
//! (parsing and aggregation alone).

#![forbid(unsafe_code)]

use std::hint::black_box;
use std::io::Read;
use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use smdebug_read::kineto::{summarize_reader, summarize_trace};

fn largest_trace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../smdebug-read/tests/data/pytorch-profiler-traces/trace_filter__sampled_rank-0.json.gz",
    )
}

fn bench(c: &mut Criterion) {
    let path = largest_trace();
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).expect("shared trace present"))
        .read_to_end(&mut json)
        .expect("shared trace decompresses");

    let mut g = c.benchmark_group("kineto_ingest");
    g.throughput(Throughput::Bytes(json.len() as u64));
    g.bench_function("gz_file_rank0", |b| {
        b.iter(|| black_box(summarize_trace(&path).expect("trace summarizes")))
    });
    g.bench_function("json_in_memory_rank0", |b| {
        b.iter(|| black_box(summarize_reader(&json[..], "rank-0.json").expect("trace summarizes")))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
