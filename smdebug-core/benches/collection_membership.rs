//! The hook's per-tensor cost with regex collections, and what a regex costs the first time a
//! name is seen (after that the hook answers from its per-name membership cache).
//!
//! `cargo bench -p smdebug-core --bench collection_membership`
//!
//! Plain patterns (no look-around) run on both the `regex`-only engine this crate used before
//! the Python dialect and on [`PyRegex`], so one bench file measures both; the look-around
//! patterns of Python smdebug's PyTorch hook only compile on the latter.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use smdebug_core::{Collection, Hook, Mode, Record, SaveConfig, Sink, TensorView};

struct Discard;

impl Sink for Discard {
    fn send(&mut self, record: Record) {
        drop(record);
    }
}

/// 24 tensor names of a six-layer model: weights, biases, their gradients.
fn names() -> Vec<String> {
    let mut out = Vec::new();
    for layer in 0..6 {
        for kind in ["weight", "bias"] {
            out.push(format!("encoder.layers.{layer}.fc.{kind}"));
            out.push(format!("gradient/encoder.layers.{layer}.fc.{kind}"));
        }
    }
    out
}

const PLAIN: [(&str, &str); 3] = [
    ("weights", r"\.weight$"),
    ("biases", r"\.bias$"),
    ("losses", "[Ll]oss_output"),
];

/// Python smdebug's PyTorch hook defaults (`smdebug/pytorch/collection.py`).
const PYTORCH: [(&str, &str); 3] = [
    ("weights", "^(?!gradient).*weight"),
    ("biases", "^(?!gradient).*bias"),
    ("losses", "[Ll]oss_(?!input).*output"),
];

fn collections(patterns: &[(&str, &str)]) -> Vec<Collection> {
    patterns
        .iter()
        .map(|(name, p)| Collection::new(*name).with_regex(p).expect("compiles"))
        .collect()
}

fn bench(c: &mut Criterion) {
    let names = names();
    let values = [0.5f32; 16];
    let view = TensorView::from_slice(&values, &[4, 4]).unwrap();

    let mut g = c.benchmark_group("hook_save_tensor");
    g.throughput(Throughput::Elements(names.len() as u64));
    for (label, patterns) in [
        ("plain regex", &PLAIN[..]),
        ("pytorch look-around", &PYTORCH[..]),
    ] {
        // Built inside the closure, so filtering on `plain` runs on code without look-around.
        g.bench_function(label, |b| {
            let mut builder = Hook::builder().save_config(SaveConfig::every(1));
            for coll in collections(patterns) {
                builder = builder.collection(coll);
            }
            let mut hook = builder.build(Discard).unwrap();
            hook.set_mode(Mode::Train);
            b.iter(|| {
                for n in &names {
                    black_box(hook.save_tensor(n, &view, &[]));
                }
                hook.step();
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("first_sight_membership");
    g.throughput(Throughput::Elements(names.len() as u64));
    for (label, patterns) in [
        ("plain regex", &PLAIN[..]),
        ("pytorch look-around", &PYTORCH[..]),
    ] {
        g.bench_function(label, |b| {
            let colls = collections(patterns);
            b.iter(|| {
                for n in &names {
                    for coll in &colls {
                        black_box(coll.matches(n));
                    }
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
