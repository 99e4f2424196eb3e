//! What capture adds to a real training step: the digits MLP (forward, loss, backward, SGD) with
//! no hook, with weights, gradients and loss recorded at every step, and at every 100th step.
//! Two model sizes: the demo's 64-32-10 (batch 32, a ~0.1 ms step) and a wider 64-256-256-10
//! (batch 128).
//!
//! `cargo bench -p smdebug-benches --bench hook_overhead`

#![forbid(unsafe_code)]

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use smdebug_core::{Collection, Hook, Mode, SaveConfig, SaveConfigMode};
use smdebug_examples::digits::{self, Digits};
use smdebug_examples::mlp::{Activation, Mlp, Rng};
use smdebug_examples::{TensorNames, record_train_step};
use smdebug_io::OverflowPolicy;
use smdebug_io::writer::Writer;
use smdebug_storage::open_storage;

fn hook(dir: &std::path::Path, every: u64) -> (Hook, smdebug_io::WriterStatus) {
    let writer = Writer::builder(open_storage(dir.to_str().unwrap()).unwrap())
        .queue_capacity(1 << 16)
        .overflow(OverflowPolicy::Drop)
        .tensorboard(false)
        .build()
        .unwrap();
    let status = writer.status();
    let never = SaveConfig::new(SaveConfigMode::never());
    let h = Hook::builder()
        .save_config(SaveConfig::every(every))
        .collection(Collection::new("outputs").with_save_config(never.clone()))
        .collection(Collection::new("inputs").with_save_config(never.clone()))
        .collection(Collection::new("metrics").with_save_config(never))
        .build(writer)
        .unwrap();
    (h, status)
}

fn bench(c: &mut Criterion) {
    let data = Digits::load(&digits::default_path()).unwrap();
    for (label, widths, batch) in [
        ("mlp_64-32-10_batch32", vec![64, 32, 10], 32usize),
        ("mlp_64-256-256-10_batch128", vec![64, 256, 256, 10], 128),
    ] {
        let mut g = c.benchmark_group(format!("train_step_{label}"));
        g.sample_size(30);
        g.measurement_time(Duration::from_secs(6));
        let mut rng = Rng::new(3);
        let order = rng.permutation(data.len());
        let batches: Vec<_> = order.chunks(batch).map(|b| data.batch(b)).collect();

        for variant in ["no hook", "hook every step", "hook every 100th step"] {
            let mut model = Mlp::new(&widths, Activation::Relu, 1.0, 0.0, &mut Rng::new(1));
            let names = TensorNames::for_model(&model);
            let dir = tempfile::tempdir().unwrap();
            let mut capture = match variant {
                "no hook" => None,
                "hook every step" => Some(hook(dir.path(), 1)),
                _ => Some(hook(dir.path(), 100)),
            };
            if let Some((h, _)) = capture.as_mut() {
                h.set_mode(Mode::Train);
            }
            let mut i = 0usize;
            g.bench_function(BenchmarkId::from_parameter(variant), |b| {
                b.iter(|| {
                    let (x, y) = &batches[i % batches.len()];
                    i += 1;
                    let fwd = model.forward(x);
                    let (loss, acc) = Mlp::loss_and_accuracy(&fwd, y);
                    let grads = model.backward(&fwd, y);
                    if let Some((h, _)) = capture.as_mut() {
                        record_train_step(h, &names, &model, &fwd, &grads, loss, acc);
                        h.step();
                    }
                    model.sgd(&grads, 0.01);
                })
            });
            if let Some((mut h, status)) = capture {
                h.close();
                drop(h);
                eprintln!(
                    "{label} / {variant}: {} records written, {} dropped",
                    status.records_written(),
                    status.dropped()
                );
            }
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
